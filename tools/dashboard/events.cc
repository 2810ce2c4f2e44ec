#include "tools/dashboard/events.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace goodput::dashboard {
namespace {

// A stream failure worth retrying (the service restarts, a deadline); anything else (the
// RPC not built, a bad request, permission) is reported once and not retried.
bool Passing(const grpc::Status& status) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::ABORTED:
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNKNOWN:
      return true;
    default:
      return false;
  }
}

Json StatusEvent(const char* source, const grpc::Status& status) {
  Json out = UnavailableSection(status);
  out["source"] = source;
  return out;
}

}  // namespace

EventSession::EventSession(Gateway* gateway, EventFilter filter, EventOptions options)
    : gateway_(gateway), filter_(std::move(filter)), options_(options) {}

EventSession::~EventSession() { Stop(); }

void EventSession::Start() {
  absl::MutexLock join_lock(&join_mu_);
  if (!fleet_page()) threads_.emplace_back([this] { FollowJobOfu(); });
  threads_.emplace_back([this] { FollowAlerts(); });
}

bool EventSession::stopped() {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

void EventSession::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    for (grpc::ClientContext* ctx : streams_) ctx->TryCancel();
  }
  // Shutdown and the HTTP handler may both stop a session: one joins, the other waits.
  absl::MutexLock join_lock(&join_mu_);
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

void EventSession::Push(std::string message) {
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  // A browser that cannot keep up loses the oldest updates: each page re-reads its JSON on
  // any event, so the newest ones matter.
  if (queue_.size() >= options_.max_queued) queue_.pop_front();
  queue_.push_back(std::move(message));
}

bool EventSession::Next(std::string* message, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopped_ || !queue_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (stopped_ || queue_.empty()) return false;
  *message = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

bool EventSession::Pause(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  auto stopped = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopped_; };
  mu_.AwaitWithTimeout(absl::Condition(&stopped), d);
  return !stopped_;
}

void EventSession::FollowJobOfu() {
  while (true) {
    std::unique_ptr<grpc::ClientContext> ctx = gateway_->StreamContext();
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      streams_.insert(ctx.get());
    }
    v1::StreamJobOfuRequest request;
    request.mutable_job()->set_cluster(filter_.cluster);
    request.mutable_job()->set_job_id(filter_.job_id);
    auto reader = gateway_->ofu().StreamJobOfu(ctx.get(), request);
    v1::StreamJobOfuResponse response;
    while (reader->Read(&response)) {
      Push(SseMessage("ofu", OfuPointJson(response.window())));
    }
    grpc::Status status = reader->Finish();
    {
      absl::MutexLock lock(&mu_);
      streams_.erase(ctx.get());
      if (stopped_) return;
    }
    // OK: the job ended and its last window is final; nothing more will come.
    if (status.ok()) return;
    Push(SseMessage("status", StatusEvent("ofu", status)));
    if (!Passing(status) || !Pause(options_.retry)) return;
  }
}

void EventSession::FollowAlerts() {
  while (true) {
    std::unique_ptr<grpc::ClientContext> ctx = gateway_->StreamContext();
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      streams_.insert(ctx.get());
    }
    v1::SubscribeAlertsRequest request;
    request.set_cluster(filter_.cluster);
    if (!filter_.job_id.empty()) {
      request.mutable_job()->set_cluster(filter_.cluster);
      request.mutable_job()->set_job_id(filter_.job_id);
    }
    auto reader = gateway_->alerts().SubscribeAlerts(ctx.get(), request);
    v1::SubscribeAlertsResponse response;
    while (reader->Read(&response)) {
      Push(SseMessage(
          "alert",
          Json{{"change", EnumShortName(v1::AlertChange_Name(response.change()), "ALERT_CHANGE_")},
               {"alert", AlertJson(response.alert())}}));
    }
    grpc::Status status = reader->Finish();
    {
      absl::MutexLock lock(&mu_);
      streams_.erase(ctx.get());
      if (stopped_) return;
    }
    Push(SseMessage("status", StatusEvent("alerts", status)));
    if (!(status.ok() || Passing(status)) || !Pause(options_.retry)) return;
  }
}

absl::StatusOr<std::shared_ptr<EventSession>> EventHub::Open(EventFilter filter,
                                                             const std::string& client) {
  auto session = std::make_shared<EventSession>(gateway_, std::move(filter), options_);
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the dashboard is shutting down");
    size_t& of_client = per_client_[client];
    if (of_client >= limits_.max_sessions_per_client) {
      return absl::ResourceExhaustedError(absl::StrCat(
          client, " has ", of_client, " live streams open, the most one client may have (",
          "--max-streams-per-client); close a page or retry later"));
    }
    if (sessions_.size() >= limits_.max_sessions) {
      if (of_client == 0) per_client_.erase(client);
      return absl::UnavailableError(absl::StrCat(sessions_.size(),
                                                 " live streams are open, the most the "
                                                 "dashboard serves (--max-streams); retry later"));
    }
    ++of_client;
    sessions_.emplace(session, client);
    if (session->fleet_page() && !fleet_poller_.joinable()) {
      fleet_poller_ = std::thread([this] { PollFleet(); });
    }
  }
  session->Start();
  return session;
}

void EventHub::PollFleet() {
  double last_gpu_hours = -1;
  int64_t last_jobs = -1;
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping), options_.fleet_poll);
      if (stopping_) return;
      bool watched = false;
      for (const auto& [s, client] : sessions_) watched = watched || s->fleet_totals();
      if (!watched) continue;  // no fleet page open: nothing to ask
    }
    const absl::Time now = absl::Now();
    v1::FleetGroup total;
    if (!gateway_->FleetTotal(now - absl::Hours(24), now, &total).ok()) continue;
    // A fleet whose GPU-hours (or jobs) grew has new windows: tell the pages to re-read.
    if (total.gpu_hours() == last_gpu_hours && total.job_count() == last_jobs) continue;
    const bool first = last_jobs < 0;
    last_gpu_hours = total.gpu_hours();
    last_jobs = total.job_count();
    if (first) continue;
    const std::string message = SseMessage(
        "fleet", Json{{"gpu_hours", total.gpu_hours()}, {"job_count", total.job_count()}});
    absl::MutexLock lock(&mu_);
    for (const auto& [s, client] : sessions_) {
      if (s->fleet_totals()) s->Push(message);
    }
  }
}

void EventHub::Close(const std::shared_ptr<EventSession>& session) {
  session->Stop();
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end()) return;
  auto count = per_client_.find(it->second);
  if (count != per_client_.end() && --count->second == 0) per_client_.erase(count);
  sessions_.erase(it);
}

void EventHub::StopAll() {
  std::map<std::shared_ptr<EventSession>, std::string> sessions;
  std::thread poller;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    sessions.swap(sessions_);
    per_client_.clear();
    poller.swap(fleet_poller_);
  }
  for (const auto& [s, client] : sessions) s->Stop();
  if (poller.joinable()) poller.join();
}

}  // namespace goodput::dashboard
