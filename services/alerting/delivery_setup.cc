#include "services/alerting/delivery_setup.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/alerting/targets/targets_config.h"

namespace goodput::alerting {

absl::StatusOr<DeliveryOptions> ParseDeliveryOptions(const platform::ConfigTree& cfg) {
  DeliveryOptions o;
  absl::StatusOr<absl::Duration> poll = cfg.GetSeconds("alerting.delivery.poll_interval_s", 1.0);
  if (!poll.ok()) return poll.status();
  absl::StatusOr<absl::Duration> lease = cfg.GetSeconds("alerting.delivery.claim_lease_s", 120.0);
  if (!lease.ok()) return lease.status();
  absl::StatusOr<int64_t> batch = cfg.GetIntInRange("alerting.delivery.batch_size", 50, 1, 10000);
  if (!batch.ok()) return batch.status();
  absl::StatusOr<absl::Duration> initial =
      cfg.GetSeconds("alerting.delivery.initial_backoff_s", 5.0);
  if (!initial.ok()) return initial.status();
  absl::StatusOr<absl::Duration> max_backoff =
      cfg.GetSeconds("alerting.delivery.max_backoff_s", 600.0);
  if (!max_backoff.ok()) return max_backoff.status();
  absl::StatusOr<double> jitter = cfg.GetDouble("alerting.delivery.jitter", 0.5);
  if (!jitter.ok()) return jitter.status();
  absl::StatusOr<int64_t> max_attempts =
      cfg.GetIntInRange("alerting.delivery.max_attempts", 20, 1, 1000000);
  if (!max_attempts.ok()) return max_attempts.status();
  absl::StatusOr<absl::Duration> max_age = cfg.GetSeconds("alerting.delivery.max_age_s", 86400.0);
  if (!max_age.ok()) return max_age.status();
  if (*poll <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "alerting.delivery.poll_interval_s: ", absl::ToDoubleSeconds(*poll), " must be > 0"));
  }
  // A claim must outlast the slowest send (a Slurm send runs up to four scontrol commands of
  // timeout_s each); a shorter one would let another replica send the row again meanwhile.
  if (*lease < absl::Seconds(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "alerting.delivery.claim_lease_s: ", absl::ToDoubleSeconds(*lease), " must be >= 1"));
  }
  o.poll_interval = *poll;
  o.claim_lease = *lease;
  o.batch_size = static_cast<int>(*batch);
  o.retry = RetryPolicy{.initial_backoff = *initial,
                        .max_backoff = *max_backoff,
                        .jitter = *jitter,
                        .max_attempts = static_cast<int>(*max_attempts),
                        .max_age = *max_age};
  if (absl::Status s = ValidateRetryPolicy(o.retry); !s.ok()) return s;
  return o;
}

absl::StatusOr<std::shared_ptr<DeliveryRuntime>> StartDelivery(
    platform::ServiceContext& ctx, const std::vector<RoutedTarget>& routed) {
  absl::StatusOr<DeliveryOptions> options = ParseDeliveryOptions(*ctx.config_tree);
  if (!options.ok()) return options.status();
  absl::StatusOr<std::vector<ConfiguredTarget>> configured = ParseTargets(*ctx.config_tree);
  if (!configured.ok()) return configured.status();
  std::set<std::string> names;
  for (const ConfiguredTarget& c : *configured) names.insert(c.target->name());
  for (const RoutedTarget& r : routed) {
    if (!names.count(r.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.where, ": \"", r.name, "\" is not a target in alerting.targets (",
                       names.empty() ? "none configured" : absl::StrJoin(names, ", "), ")"));
    }
  }
  if (ctx.pg == nullptr) {
    return absl::FailedPreconditionError("postgres.dsn: required by alert delivery");
  }
  auto rt = std::make_shared<DeliveryRuntime>();
  rt->store = std::make_unique<DeliveryStore>(ctx.pg);
  rt->limiter =
      std::make_unique<RateLimiter>(ctx.redis, ctx.logger.With({{"component", "delivery"}}));
  std::vector<std::unique_ptr<Target>> targets;
  for (ConfiguredTarget& c : *configured) {
    if (c.rate_limit) rt->limiter->SetLimit(c.target->name(), *c.rate_limit);
    ctx.logger.Info("delivery target", {{"name", c.target->name()}, {"kind", c.target->kind()}});
    if (!c.warning.empty()) {
      ctx.logger.Warn(c.warning, {{"name", c.target->name()}, {"kind", c.target->kind()}});
    }
    targets.push_back(std::move(c.target));
  }
  platform::CounterFamily& outcomes = ctx.metrics->AddCounter(
      "goodput_alerting_delivery_outcomes_total",
      "Delivery attempts and postponements by target and outcome (delivered, retry, failed, "
      "postponed, resent, resend_failed).",
      {"target", "outcome"});
  options->on_outcome = [&outcomes](const std::string& target, const char* outcome) {
    outcomes.WithLabels({target, outcome}).Increment();
  };
  rt->limiter->set_fallback_gauge(
      &ctx.metrics
           ->AddGauge("goodput_alerting_delivery_rate_limit_local",
                      "1 while per-target rate limits are kept in this process because Redis is "
                      "unavailable.")
           .WithLabels(std::vector<std::string>{}));
  rt->worker = std::make_unique<DeliveryWorker>(rt->store.get(), std::move(targets),
                                                rt->limiter.get(), *std::move(options),
                                                ctx.logger.With({{"component", "delivery"}}));
  rt->worker->Start();
  DeliveryRuntime* raw = rt.get();
  ctx.on_shutdown->push_back([raw] { raw->worker->Stop(); });
  return rt;
}

}  // namespace goodput::alerting
