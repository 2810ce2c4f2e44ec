// goodput-alerting: composition root. See services/platform/service_main.h for the command line
// and services/alerting/README.md for the `alerting.*` configuration keys.
#include <unistd.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/alerting/alert_config.h"
#include "services/alerting/alert_engine.h"
#include "services/alerting/alerting_service.h"
#include "services/alerting/delivery_setup.h"
#include "services/alerting/digest_scheduler.h"
#include "services/alerting/targets/smtp_target.h"
#include "services/platform/tls.h"
#include "services/platform/service_main.h"

namespace {

constexpr char kSweepLease[] = "goodput:alerting:sweep";
constexpr char kDigestLease[] = "goodput:alerting:digests";

// True while this replica holds `lease` (acquiring it when free). Redis down: true, every
// replica runs the work, which is safe (idempotent under PostgreSQL), only redundant.
std::function<bool()> LeaseHolder(goodput::platform::ServiceContext& ctx, const char* lease,
                                  absl::Duration ttl) {
  if (ctx.redis == nullptr) return {};
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string owner = absl::StrCat(ctx.config->service_name, "/", host, "/", getpid());
  goodput::platform::RedisClient* redis = ctx.redis;
  return [redis, owner, ttl, lease] {
    absl::StatusOr<bool> mine = redis->RenewLease(lease, owner, ttl);
    if (mine.ok() && !*mine) mine = redis->AcquireLease(lease, owner, ttl);
    return !mine.ok() || *mine;
  };
}

// Everything goodput-alerting keeps alive while serving.
struct AlertingRuntime {
  // Alert engine: detectors, lifecycle, routing into the outbox.
  std::unique_ptr<goodput::alerting::AlertHub> hub;
  std::unique_ptr<goodput::alerting::AlertEngine> engine;
  std::unique_ptr<goodput::alerting::AlertServiceImpl> service;
  // Delivery: outbox -> targets.
  std::shared_ptr<goodput::alerting::DeliveryRuntime> delivery;
  // Digests (alerting.digests): job reports -> outbox.
  std::unique_ptr<goodput::alerting::DigestScheduler> digests;
};

absl::StatusOr<std::shared_ptr<void>> Setup(goodput::platform::ServiceContext& ctx) {
  if (ctx.pg == nullptr) {
    return absl::FailedPreconditionError("postgres.dsn: required by goodput-alerting");
  }
  auto rt = std::make_shared<AlertingRuntime>();

  // --- Alert engine ---
  absl::StatusOr<goodput::alerting::AlertingConfig> config =
      goodput::alerting::LoadAlertingConfig(*ctx.config_tree);
  if (!config.ok()) return config.status();
  rt->hub = std::make_unique<goodput::alerting::AlertHub>();
  goodput::platform::CounterFamily* changes = &ctx.metrics->AddCounter(
      "goodput_alerting_alert_changes_total",
      "Alert changes committed by this replica (fired, updated, resolved, ...), by kind.",
      {"kind", "change"});
  rt->hub->Subscribe({}, [changes](const goodput::v1::SubscribeAlertsResponse& c) {
    changes
        ->WithLabels({goodput::v1::AlertKind_Name(c.alert().kind()),
                      goodput::v1::AlertChange_Name(c.change())})
        .Increment();
  });
  rt->engine = std::make_unique<goodput::alerting::AlertEngine>(
      ctx.pg, config->engine, rt->hub.get(), ctx.logger.With({{"component", "engine"}}));
  // One replica sweeps at a time: the holder of a Redis lease. Without Redis every replica
  // sweeps, which is safe (idempotent under PostgreSQL locks), only redundant.
  std::function<bool()> may_sweep = LeaseHolder(ctx, kSweepLease, 3 * config->sweep_interval);
  rt->engine->Start(config->sweep_interval, std::move(may_sweep));
  goodput::alerting::AlertEngine* engine = rt->engine.get();
  ctx.on_shutdown->push_back([engine] { engine->Stop(); });
  rt->service =
      std::make_unique<goodput::alerting::AlertServiceImpl>(rt->engine.get(), rt->hub.get());
  ctx.grpc->AddService(rt->service.get(), goodput::v1::AlertService::service_full_name());
  // --- end alert engine ---

  // --- Delivery ---
  std::vector<goodput::alerting::RoutedTarget> routed;
  const goodput::alerting::RoutingConfig& routing = config->engine.routing;
  for (size_t i = 0; i < routing.routes.size(); ++i) {
    for (const std::string& t : routing.routes[i].targets) {
      routed.push_back({absl::StrCat("alerting.routes[", i, "].targets"), t});
    }
  }
  for (const std::string& t : routing.default_targets) {
    routed.push_back({"alerting.default_targets", t});
  }
  absl::StatusOr<std::shared_ptr<goodput::alerting::DeliveryRuntime>> delivery =
      goodput::alerting::StartDelivery(ctx, routed);
  if (!delivery.ok()) return delivery.status();
  rt->delivery = *std::move(delivery);
  for (const goodput::alerting::RoutedTarget& r : routed) {
    const auto* smtp = dynamic_cast<const goodput::alerting::SmtpTarget*>(
        rt->delivery->worker->FindTarget(r.name));
    if (smtp != nullptr && !smtp->has_alert_recipients()) {
      return absl::InvalidArgumentError(absl::StrCat(
          r.where, ": \"", r.name, "\" is an smtp target without `to`: alerts need recipients"));
    }
  }
  // Every committed alert change may have enqueued outbox rows: look now rather than at the
  // worker's next poll. The hub publishes after the commit, so the rows are visible.
  goodput::alerting::DeliveryWorker* worker = rt->delivery->worker.get();
  rt->hub->Subscribe({}, [worker](const goodput::v1::SubscribeAlertsResponse&) { worker->Wake(); });
  // --- end delivery ---

  // --- Digests (opt-in): ofu's job reports -> outbox ---
  absl::StatusOr<goodput::alerting::DigestConfig> digests =
      goodput::alerting::LoadDigestConfig(*ctx.config_tree);
  if (!digests.ok()) return digests.status();
  if (digests->enabled) {
    for (size_t i = 0; i < digests->targets.size(); ++i) {
      const std::string& name = digests->targets[i];
      const goodput::alerting::Target* target = worker->FindTarget(name);
      const std::string key = absl::StrCat("alerting.digests.targets[", i, "]");
      if (target == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(key, ": \"", name, "\" is not a target in alerting.targets"));
      }
      if (!target->delivers_digests()) {
        return absl::InvalidArgumentError(
            absl::StrCat(key, ": \"", name, "\" is a target of kind ", target->kind(),
                         "; digests go to webhook and smtp targets"));
      }
      if (std::string(target->kind()) == "smtp") digests->mail_targets.insert(name);
    }
    const goodput::alerting::DigestRecipients& r = digests->recipients;
    if (!digests->mail_targets.empty() && r.users.empty() && r.teams.empty() &&
        r.user_template.empty() && r.team_template.empty()) {
      return absl::InvalidArgumentError(
          "alerting.digests.recipients: is required with an smtp target (users, teams, "
          "user_template or team_template)");
    }
    auto stub = goodput::v1::ReportService::NewStub(goodput::platform::MakeChannel(
        digests->ofu_address, goodput::platform::ClientTlsFrom(ctx.config->tls)));
    const absl::Duration check = digests->check_interval;
    rt->digests = std::make_unique<goodput::alerting::DigestScheduler>(
        ctx.pg, std::move(stub), *std::move(digests), [worker] { worker->Wake(); },
        ctx.logger.With({{"component", "digests"}}));
    rt->digests->Start(LeaseHolder(ctx, kDigestLease, 3 * check));
    goodput::alerting::DigestScheduler* scheduler = rt->digests.get();
    ctx.on_shutdown->push_back([scheduler] { scheduler->Stop(); });
  }
  // --- end digests ---

  return rt;
}

}  // namespace

int main(int argc, char** argv) {
  return goodput::platform::RunServiceMain(
      argc, argv, {.name = "goodput-alerting", .config_sections = {"alerting"}, .setup = Setup});
}
