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
#include "services/alerting/job_reporter.h"
#include "services/alerting/policy_stage.h"
#include "services/alerting/report_service.h"
#include "services/alerting/report_store.h"
#include "services/alerting/targets/admin_comment_target.h"
#include "services/alerting/targets/osmo_target.h"
#include "services/alerting/targets/smtp_target.h"
#include "services/platform/gpu_catalog_config.h"
#include "services/platform/service_main.h"
#include "services/platform/tls.h"

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
  // Job-end reports (alerting.reports): ofu's summary, mfu's verdict, the job's alerts ->
  // job_reports, AdminComment -> outbox.
  std::unique_ptr<goodput::core::GpuCatalog> catalog;  // built-in + gpu_catalog.overrides
  std::unique_ptr<goodput::alerting::ReportStore> report_store;
  std::unique_ptr<goodput::alerting::ReportServiceImpl> report_service;
  std::unique_ptr<goodput::alerting::JobReporter> reporter;
  // Digests (alerting.digests): job reports -> outbox.
  std::unique_ptr<goodput::alerting::DigestScheduler> digests;
  // Policies (alerting.policies): findings -> warnings (outbox), then Slurm/Osmo actions.
  std::unique_ptr<goodput::alerting::PolicyActuator> actuator;
  std::unique_ptr<goodput::alerting::PolicyStage> policies;
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
  goodput::alerting::AlertEngine* engine = rt->engine.get();
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
    if (const goodput::alerting::Target* t = rt->delivery->worker->FindTarget(r.name);
        t != nullptr && t->delivers_admin_comments()) {
      return absl::InvalidArgumentError(
          absl::StrCat(r.where, ": \"", r.name,
                       "\" is a slurm_admin_comment target: it takes job reports "
                       "(alerting.reports.admin_comment_targets), not alerts"));
    }
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

  // --- Policies (opt-in, dry-run by default): act on findings after warning their owners.
  // The audit log is served (and undone) even while the stage is off, so drains done before
  // it was turned off can be resumed. ---
  {
    goodput::alerting::PolicySettings& p = config->policies;
    auto known = [&](const std::string& where, const std::string& name) -> absl::Status {
      if (worker->FindTarget(name) == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": \"", name, "\" is not a target in alerting.targets"));
      }
      return absl::OkStatus();
    };
    for (size_t i = 0; i < p.config.audit_targets.size(); ++i) {
      if (absl::Status s = known(absl::StrCat("alerting.policies.audit_targets[", i, "]"),
                                 p.config.audit_targets[i]);
          !s.ok()) {
        return s;
      }
    }
    for (size_t r = 0; r < p.config.rules.size(); ++r) {
      for (size_t i = 0; i < p.config.rules[r].notify.size(); ++i) {
        if (absl::Status s = known(absl::StrCat("alerting.policies.rules[", r, "].notify[", i, "]"),
                                   p.config.rules[r].notify[i]);
            !s.ok()) {
          return s;
        }
      }
    }
    std::map<std::string, goodput::alerting::OsmoTargetConfig> osmo;
    for (const auto& [cluster, name] : p.osmo_targets) {
      const auto* target =
          dynamic_cast<const goodput::alerting::OsmoTarget*>(worker->FindTarget(name));
      if (target == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("alerting.policies.clusters.", cluster, ".osmo_target: \"", name,
                         "\" is not a target of kind osmo in alerting.targets"));
      }
      osmo[cluster] = target->config();
    }
    rt->actuator = std::make_unique<goodput::alerting::PolicyActuator>(p.slurm, std::move(osmo));
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    rt->policies = std::make_unique<goodput::alerting::PolicyStage>(
        ctx.pg, rt->actuator.get(),
        goodput::alerting::PolicyStageOptions{
            .config = p.config,
            .replica = absl::StrCat(ctx.config->service_name, "/", host, "/", getpid()),
            .wake_delivery = [worker] { worker->Wake(); },
            .outcomes = &ctx.metrics->AddCounter(
                "goodput_alerting_policy_actions_total",
                "Policy actions that reached a final status on this replica (done, failed, "
                "dry_run, exempt, cleared), by rule and action.",
                {"rule", "action", "status"})},
        ctx.logger.With({{"component", "policies"}}));
    rt->service->SetPolicyStage(rt->policies.get());
    if (p.config.enabled) {
      goodput::alerting::PolicyStage* stage = rt->policies.get();
      rt->hub->Subscribe({},
                         [stage](const goodput::v1::SubscribeAlertsResponse&) { stage->Wake(); });
      if (p.config.dry_run) {
        ctx.logger.Info("policies run dry: actions are recorded, nothing is changed",
                        {{"rules", absl::StrCat(p.config.rules.size())}});
      }
      stage->Start();
      ctx.on_shutdown->push_back([stage] { stage->Stop(); });
    }
  }
  // --- end policies ---

  // --- Job-end reports: at the end of the pipeline, written when an ended job's evaluation
  // is complete (the engine's JobEndHook), read from ofu and mfu as a consumer reads its
  // producers, over the configured TLS ---
  absl::StatusOr<goodput::alerting::ReporterOptions> reports =
      goodput::alerting::LoadReporterOptions(*ctx.config_tree);
  if (!reports.ok()) return reports.status();
  rt->report_store = std::make_unique<goodput::alerting::ReportStore>(ctx.pg);
  rt->report_service =
      std::make_unique<goodput::alerting::ReportServiceImpl>(rt->report_store.get());
  ctx.grpc->AddService(rt->report_service.get(), goodput::v1::ReportService::service_full_name());
  if (reports->enabled) {
    for (size_t i = 0; i < reports->admin_comment_targets.size(); ++i) {
      const std::string& name = reports->admin_comment_targets[i];
      const std::string key = absl::StrCat("alerting.reports.admin_comment_targets[", i, "]");
      const auto* target =
          dynamic_cast<const goodput::alerting::AdminCommentTarget*>(worker->FindTarget(name));
      if (target == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat(key, ": \"", name,
                         "\" is not a target of kind slurm_admin_comment in alerting.targets"));
      }
      for (const goodput::alerting::AdminCommentRoute& r : reports->admin_comment_routes) {
        if (r.cluster == target->cluster()) {
          return absl::InvalidArgumentError(
              absl::StrCat(key, ": \"", name, "\" writes to cluster ", r.cluster, " as \"",
                           r.target, "\" does: one AdminComment target per cluster"));
        }
      }
      reports->admin_comment_routes.push_back(
          {.target = name, .cluster = target->cluster(), .base32 = target->base32()});
    }
    absl::StatusOr<goodput::core::GpuCatalog> loaded =
        goodput::platform::LoadGpuCatalog(*ctx.config_tree);
    if (!loaded.ok()) return loaded.status();
    rt->catalog = std::make_unique<goodput::core::GpuCatalog>(*std::move(loaded));
    const goodput::platform::ClientTls tls = goodput::platform::ClientTlsFrom(ctx.config->tls);
    std::shared_ptr<goodput::v1::OfuService::StubInterface> ofu =
        goodput::v1::OfuService::NewStub(goodput::platform::MakeChannel(reports->ofu_address, tls));
    std::shared_ptr<goodput::v1::MfuService::StubInterface> mfu;
    if (!reports->mfu_address.empty()) {
      mfu = goodput::v1::MfuService::NewStub(
          goodput::platform::MakeChannel(reports->mfu_address, tls));
    }
    reports->fault_correlation_window_s = config->engine.fault_correlation_window_s;
    rt->reporter = std::make_unique<goodput::alerting::JobReporter>(
        rt->report_store.get(), rt->catalog.get(), std::move(ofu), std::move(mfu),
        [engine](const goodput::v1::ListAlertsRequest& r) { return engine->ListAlerts(r); },
        *std::move(reports), [worker] { worker->Wake(); },
        ctx.logger.With({{"component", "reports"}}));
    goodput::alerting::JobReporter* reporter = rt->reporter.get();
    goodput::alerting::PolicyStage* policies = rt->policies.get();
    reporter->SetPolicyActions(
        [policies](const goodput::v1::ListPolicyActionsRequest& r) { return policies->List(r); });
    reporter->SetLedger([engine](const std::string& cluster, const std::string& job_id,
                                 int gpus) { return engine->Ledger(cluster, job_id, gpus); });
    engine->SetJobEndHook(
        {.in_transaction =
             [reporter](pqxx::work& tx, const std::string& cluster, const std::string& job_id) {
               return reporter->Request(tx, cluster, job_id);
             },
         .after_commit = [reporter] { reporter->Wake(); },
         // No window since the previous sweep: nothing more is coming for an ended job.
         .sweep =
             [quiet_for = config->sweep_interval](pqxx::work& tx) {
               return goodput::alerting::ReportStore::RequestMissing(tx, 500, quiet_for);
             }});
    reporter->Start();
    ctx.on_shutdown->push_back([reporter] { reporter->Stop(); });
  }
  // --- end job-end reports ---

  // The engine starts once everything it hands over to is in place. One replica sweeps at a
  // time: the holder of a Redis lease. Without Redis every replica sweeps, which is safe
  // (idempotent under PostgreSQL locks), only redundant.
  std::function<bool()> may_sweep = LeaseHolder(ctx, kSweepLease, 3 * config->sweep_interval);
  engine->Start(config->sweep_interval, std::move(may_sweep));
  ctx.on_shutdown->push_back([engine] { engine->Stop(); });

  // --- Digests (opt-in): the job reports of a period -> outbox ---
  absl::StatusOr<goodput::alerting::DigestConfig> digests =
      goodput::alerting::LoadDigestConfig(*ctx.config_tree);
  if (!digests.ok()) return digests.status();
  if (digests->enabled) {
    if (rt->reporter == nullptr) {
      return absl::InvalidArgumentError(
          "alerting.digests.enabled: digests are made of job reports, which need "
          "alerting.reports.ofu_address");
    }
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
    const absl::Duration check = digests->check_interval;
    rt->digests = std::make_unique<goodput::alerting::DigestScheduler>(
        ctx.pg, rt->report_service.get(), *std::move(digests), [worker] { worker->Wake(); },
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
      argc, argv,
      {.name = "goodput-alerting", .config_sections = {"alerting", "gpu_catalog"}, .setup = Setup});
}
