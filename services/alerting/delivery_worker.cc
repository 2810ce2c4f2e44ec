#include "services/alerting/delivery_worker.h"

#include <optional>
#include <random>

#include "absl/strings/str_cat.h"

namespace goodput::alerting {
namespace {

std::string ErrorText(const absl::Status& s) {
  return absl::StrCat(absl::StatusCodeToString(s.code()), ": ", s.message());
}

}  // namespace

DeliveryWorker::DeliveryWorker(DeliveryStore* store, std::vector<std::unique_ptr<Target>> targets,
                               RateLimiter* limiter, DeliveryOptions options,
                               platform::Logger logger)
    : store_(store),
      targets_(std::move(targets)),
      limiter_(limiter),
      options_(std::move(options)),
      logger_(std::move(logger)) {
  if (!options_.uniform01) {
    auto engine = std::make_shared<std::mt19937_64>(std::random_device{}());
    options_.uniform01 = [engine] {
      return std::uniform_real_distribution<double>(0.0, 1.0)(*engine);
    };
  }
}

DeliveryWorker::~DeliveryWorker() { Stop(); }

std::vector<std::string> DeliveryWorker::target_names() const {
  std::vector<std::string> names;
  for (const auto& t : targets_) names.push_back(t->name());
  return names;
}

Target* DeliveryWorker::Find(const std::string& name) const {
  for (const auto& t : targets_) {
    if (t->name() == name) return t.get();
  }
  return nullptr;
}

void DeliveryWorker::Start() {
  for (const auto& t : targets_) {
    Target* target = t.get();
    threads_.emplace_back([this, target] { Run(target); });
  }
}

void DeliveryWorker::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void DeliveryWorker::Wake() {
  absl::MutexLock lock(&mu_);
  ++wake_generation_;
}

bool DeliveryWorker::WokenOrStopped(WaitState* state) {
  state->worker->mu_.AssertHeld();
  return state->worker->stop_ || state->worker->wake_generation_ != state->generation;
}

void DeliveryWorker::Report(const std::string& target, const char* outcome) {
  if (options_.on_outcome) options_.on_outcome(target, outcome);
}

bool DeliveryWorker::Stopping() {
  absl::MutexLock lock(&mu_);
  return stop_;
}

absl::StatusOr<StepResult> DeliveryWorker::StepOnce(const std::string& target) {
  Target* t = Find(target);
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("no target named ", target));
  return Step(t);
}

void DeliveryWorker::Run(Target* target) {
  platform::Logger log = logger_.With({{"target", target->name()}});
  while (true) {
    int64_t generation = 0;
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      generation = wake_generation_;
    }
    absl::StatusOr<StepResult> result = Step(target);
    bool busy = false;
    if (!result.ok()) {
      log.Warn("delivery step failed; retrying at the next poll",
               {{"error", std::string(result.status().message())}});
    } else {
      busy =
          result->delivered + result->retrying + result->failed + result->resent + result->skipped >
          0;
    }
    if (busy) continue;  // there may be more due rows
    absl::MutexLock lock(&mu_);
    WaitState state{this, generation};
    mu_.AwaitWithTimeout(absl::Condition(&DeliveryWorker::WokenOrStopped, &state),
                         options_.poll_interval);
  }
}

absl::StatusOr<StepResult> DeliveryWorker::Step(Target* target) {
  StepResult result;
  const std::string& name = target->name();
  absl::Time now = options_.clock();
  absl::StatusOr<std::vector<ClaimedRow>> rows =
      store_->ClaimDue(name, now, now + options_.claim_lease, options_.batch_size);
  if (!rows.ok()) return rows.status();
  for (size_t i = 0; i < rows->size(); ++i) {
    const ClaimedRow& row = (*rows)[i];
    now = options_.clock();
    std::optional<absl::Duration> wait;
    if (Stopping()) {
      wait = absl::ZeroDuration();
    } else if (limiter_ != nullptr) {
      wait = limiter_->Take(name, now);
    }
    if (wait.has_value()) {
      // Over the limit (or shutting down): this row and the rest of the batch wait; nothing
      // is counted as an attempt and nothing is lost.
      for (size_t j = i; j < rows->size(); ++j) {
        if (absl::Status s = store_->Postpone((*rows)[j].id, now + *wait); !s.ok()) return s;
        ++result.postponed;
        Report(name, "postponed");
      }
      break;
    }
    // What the row is for: decoded before the attempt, so that a row of another cluster is
    // skipped without counting one.
    std::optional<Notification> notification;
    std::optional<DigestPayload> digest;
    std::optional<AdminCommentPayload> admin_comment;
    absl::Status decoded;
    std::string row_cluster, row_job;
    if (row.kind == "digest") {
      absl::StatusOr<DigestPayload> d = DigestPayloadFromJson(row.payload);
      if (d.ok()) digest = *std::move(d);
      decoded = d.status();
    } else if (row.kind == "admin_comment") {
      absl::StatusOr<AdminCommentPayload> a = AdminCommentPayloadFromJson(row.payload);
      if (a.ok()) {
        admin_comment = *std::move(a);
        row_cluster = admin_comment->cluster;
        row_job = admin_comment->job_id;
      }
      decoded = a.status();
    } else {
      absl::StatusOr<Notification> n = NotificationFromJson(row.payload);
      if (n.ok()) {
        notification = *std::move(n);
        row_cluster = notification->cluster;
        row_job = notification->job_id;
      }
      decoded = n.status();
    }
    if (decoded.ok() && !target->cluster().empty() && !digest.has_value() &&
        row_cluster != target->cluster()) {
      const std::string reason = absl::StrCat(
          "skipped: job ", row_cluster, "/", row_job, " is not on cluster ", target->cluster(),
          " that target ", name, " (", target->kind(), ") serves; nothing was sent");
      if (absl::Status s = store_->MarkSkipped(row.id, reason); !s.ok()) return s;
      ++result.skipped;
      Report(name, "skipped");
      logger_.Warn("delivery row skipped: job of another cluster",
                   {{"target", name}, {"key", row.idempotency_key}, {"reason", reason}});
      continue;
    }
    absl::StatusOr<int> attempt = store_->BeginAttempt(row.id, now);
    if (!attempt.ok()) return attempt.status();
    if (!decoded.ok()) {
      if (absl::Status s = store_->MarkFailed(row.id, *attempt, ErrorText(decoded)); !s.ok()) {
        return s;
      }
      ++result.failed;
      Report(name, "failed");
      continue;
    }
    absl::Status sent;
    if (digest.has_value()) {
      sent = target->SendDigest(DigestSendRequest{.digest = &digest->digest,
                                                  .to = digest->to,
                                                  .idempotency_key = row.idempotency_key,
                                                  .attempt = *attempt,
                                                  .now = now});
    } else if (admin_comment.has_value()) {
      sent =
          target->SendAdminComment(AdminCommentSendRequest{.payload = &*admin_comment,
                                                           .idempotency_key = row.idempotency_key,
                                                           .attempt = *attempt,
                                                           .now = now});
    } else {
      sent = target->Send(SendRequest{.notification = &*notification,
                                      .idempotency_key = row.idempotency_key,
                                      .attempt = *attempt,
                                      .now = now});
    }
    now = options_.clock();
    absl::Status marked;
    if (sent.ok()) {
      std::optional<absl::Time> resend_at;
      if (row.state == "firing" && target->resend_interval()) {
        resend_at = now + *target->resend_interval();
      }
      marked = store_->MarkDelivered(row.id, *attempt, now, resend_at);
      ++result.delivered;
      Report(name, "delivered");
    } else if (IsPermanentError(sent)) {
      marked = store_->MarkFailed(row.id, *attempt, ErrorText(sent));
      ++result.failed;
      Report(name, "failed");
    } else if (ShouldGiveUp(options_.retry, *attempt, row.created, now)) {
      marked = store_->MarkFailed(
          row.id, *attempt,
          absl::StrCat(ErrorText(sent), " (gave up after ", *attempt, " attempts over ",
                       absl::FormatDuration(absl::Seconds(absl::ToInt64Seconds(now - row.created))),
                       ")"));
      ++result.failed;
      Report(name, "failed");
    } else {
      double u = 0;
      {
        absl::MutexLock lock(&rng_mu_);
        u = options_.uniform01();
      }
      marked = store_->MarkRetry(row.id, *attempt, ErrorText(sent),
                                 now + BackoffDelay(options_.retry, *attempt, u));
      ++result.retrying;
      Report(name, "retry");
    }
    if (!sent.ok()) {
      logger_.Warn("delivery attempt failed", {{"target", name},
                                               {"key", row.idempotency_key},
                                               {"attempt", *attempt},
                                               {"error", ErrorText(sent)}});
    }
    if (!marked.ok()) return marked;
  }

  const std::optional<absl::Duration> interval = target->resend_interval();
  if (!interval.has_value() || Stopping()) return result;
  now = options_.clock();
  absl::StatusOr<std::vector<ClaimedRow>> resends =
      store_->ClaimResends(name, now, now + options_.claim_lease, options_.batch_size);
  if (!resends.ok()) return resends.status();
  for (const ClaimedRow& row : *resends) {
    if (row.resolved_sibling) {
      if (absl::Status s = store_->StopResend(row.id); !s.ok()) return s;
      continue;
    }
    now = options_.clock();
    std::optional<absl::Duration> wait =
        limiter_ != nullptr ? limiter_->Take(name, now) : std::nullopt;
    if (wait.has_value()) {
      if (absl::Status s = store_->PostponeResend(row.id, now + *wait); !s.ok()) return s;
      ++result.postponed;
      Report(name, "postponed");
      continue;
    }
    absl::StatusOr<Notification> n = NotificationFromJson(row.payload);
    if (!n.ok()) {
      if (absl::Status s = store_->StopResend(row.id); !s.ok()) return s;
      continue;
    }
    absl::StatusOr<int> attempt = store_->BeginAttempt(row.id, now);
    if (!attempt.ok()) return attempt.status();
    const absl::Status sent = target->Send(SendRequest{.notification = &*n,
                                                       .idempotency_key = row.idempotency_key,
                                                       .attempt = *attempt,
                                                       .resend = true,
                                                       .now = now});
    now = options_.clock();
    absl::Status marked;
    if (sent.ok()) {
      marked = store_->MarkResent(row.id, *attempt, now + *interval);
      ++result.resent;
      Report(name, "resent");
    } else {
      // Retried sooner than the interval, so the peer does not let the alert lapse.
      marked = store_->MarkResendFailed(row.id, *attempt, ErrorText(sent),
                                        now + std::min(*interval, options_.retry.initial_backoff));
      Report(name, "resend_failed");
      logger_.Warn("re-send failed",
                   {{"target", name}, {"key", row.idempotency_key}, {"error", ErrorText(sent)}});
    }
    if (!marked.ok()) return marked;
  }
  return result;
}

}  // namespace goodput::alerting
