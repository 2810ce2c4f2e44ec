// goodput-mfu: composition root. See services/platform/service_main.h for the command line
// and services/mfu/README.md for the `mfu.*` configuration keys.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "services/mfu/event_forwarder.h"
#include "services/mfu/mfu_service.h"
#include "services/mfu/mfu_store.h"
#include "services/mfu/reconciler.h"
#include "services/mfu/reconciliation_store.h"
#include "services/platform/gpu_catalog_config.h"
#include "services/platform/ordered_forwarder.h"
#include "services/platform/service_main.h"
#include "services/platform/tls.h"

namespace {

// Everything goodput-mfu keeps alive while serving.
struct MfuRuntime {
  std::unique_ptr<goodput::core::GpuCatalog> catalog;  // built-in + gpu_catalog.overrides
  std::unique_ptr<goodput::mfu::MfuStore> store;
  std::unique_ptr<goodput::mfu::ReconciliationStore> reconciliations;
  std::unique_ptr<goodput::platform::OrderedForwarder> forwarder;
  std::unique_ptr<goodput::mfu::Reconciler> reconciler;
  std::unique_ptr<goodput::mfu::MfuServiceImpl> service;
};

absl::StatusOr<std::shared_ptr<void>> Setup(goodput::platform::ServiceContext& ctx) {
  const goodput::platform::ConfigTree& cfg = *ctx.config_tree;
  absl::StatusOr<std::string> producer_id = cfg.GetString("mfu.producer_id", "mfu-0");
  if (!producer_id.ok()) return producer_id.status();
  if (producer_id->empty()) return absl::InvalidArgumentError("mfu.producer_id: must not be empty");
  absl::StatusOr<int64_t> interval_s =
      cfg.GetIntInRange("mfu.reconcile.interval_s", 3600, 60, 30 * 86400);
  if (!interval_s.ok()) return interval_s.status();
  absl::StatusOr<double> min_report_coverage =
      cfg.GetDouble("mfu.reconcile.min_report_coverage", 0.5);
  if (!min_report_coverage.ok()) return min_report_coverage.status();
  if (*min_report_coverage <= 0 || *min_report_coverage > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "mfu.reconcile.min_report_coverage: ", *min_report_coverage, " is outside (0, 1]"));
  }
  absl::StatusOr<int64_t> min_windows =
      cfg.GetIntInRange("mfu.divergence.min_windows", 5, 1, 100000);
  if (!min_windows.ok()) return min_windows.status();
  absl::StatusOr<int64_t> min_duration_s =
      cfg.GetIntInRange("mfu.divergence.min_duration_s", 600, 0, 30 * 86400);
  if (!min_duration_s.ok()) return min_duration_s.status();
  absl::StatusOr<double> min_gpu_coverage = cfg.GetDouble("mfu.divergence.min_gpu_coverage", 0.8);
  if (!min_gpu_coverage.ok()) return min_gpu_coverage.status();
  if (*min_gpu_coverage < 0 || *min_gpu_coverage > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("mfu.divergence.min_gpu_coverage: ", *min_gpu_coverage, " is outside [0, 1]"));
  }
  absl::StatusOr<absl::Duration> poll = cfg.GetSeconds("mfu.reconcile.poll_interval_s", 1.0);
  if (!poll.ok()) return poll.status();
  absl::StatusOr<std::vector<std::string>> groups = cfg.GetStringList("mfu.fleet.gpu_count_groups");
  if (!groups.ok()) return groups.status();
  goodput::mfu::MfuServiceOptions service_options;
  if (!groups->empty()) {
    service_options.gpu_count_groups.clear();
    for (const std::string& g : *groups) {
      int64_t bound = 0;
      if (!absl::SimpleAtoi(g, &bound) || bound < 1 ||
          (!service_options.gpu_count_groups.empty() &&
           bound <= service_options.gpu_count_groups.back())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "mfu.fleet.gpu_count_groups: \"", g,
            "\" is not a GPU count above the previous bound (ascending integers >= 1)"));
      }
      service_options.gpu_count_groups.push_back(bound);
    }
  }
  absl::StatusOr<std::string> alerting_address = cfg.GetString("mfu.forward.alerting_address", "");
  if (!alerting_address.ok()) return alerting_address.status();
  absl::StatusOr<std::string> forward_token = cfg.GetString("mfu.forward.token", "");
  if (!forward_token.ok()) return forward_token.status();
  absl::StatusOr<absl::Duration> forward_timeout = cfg.GetSeconds("mfu.forward.timeout_s", 10.0);
  if (!forward_timeout.ok()) return forward_timeout.status();
  absl::StatusOr<absl::Duration> retry_backoff = cfg.GetSeconds("mfu.forward.retry_backoff_s", 5.0);
  if (!retry_backoff.ok()) return retry_backoff.status();
  if (ctx.pg == nullptr) {
    return absl::FailedPreconditionError("postgres.dsn: required by goodput-mfu");
  }

  goodput::mfu::ReconcileOptions reconcile;
  reconcile.interval_s = *interval_s;
  reconcile.min_report_coverage = *min_report_coverage;
  reconcile.divergence.min_windows = static_cast<int>(*min_windows);
  reconcile.divergence.min_duration_s = *min_duration_s;
  reconcile.divergence.min_gpu_coverage = *min_gpu_coverage;

  auto rt = std::make_shared<MfuRuntime>();
  // The catalog ofu and ingest use too, so an operator-added model has one peak everywhere.
  absl::StatusOr<goodput::core::GpuCatalog> catalog = goodput::platform::LoadGpuCatalog(cfg);
  if (!catalog.ok()) return catalog.status();
  rt->catalog = std::make_unique<goodput::core::GpuCatalog>(*std::move(catalog));
  rt->store = std::make_unique<goodput::mfu::MfuStore>(ctx.pg, rt->catalog.get());
  rt->reconciliations = std::make_unique<goodput::mfu::ReconciliationStore>(
      ctx.pg, *producer_id, reconcile, rt->catalog.get());
  std::vector<goodput::platform::OrderedTarget> targets;
  if (!alerting_address->empty()) {
    targets.push_back(goodput::mfu::AlertingTarget(
        rt->reconciliations.get(),
        goodput::platform::MakeChannel(*alerting_address,
                                      goodput::platform::ClientTlsFrom(ctx.config->tls)), *forward_token,
        *forward_timeout));
  }
  rt->forwarder = std::make_unique<goodput::platform::OrderedForwarder>(
      goodput::mfu::EventLog(rt->reconciliations.get()), std::move(targets),
      goodput::platform::OrderedForwarderOptions{.poll_interval = *poll,
                                                 .retry_backoff = *retry_backoff},
      ctx.logger.With({{"component", "forwarder"}}));
  goodput::platform::OrderedForwarder* forwarder = rt->forwarder.get();
  rt->reconciler = std::make_unique<goodput::mfu::Reconciler>(
      rt->reconciliations.get(), [forwarder] { forwarder->Wake(); },
      goodput::mfu::ReconcilerOptions{.poll_interval = *poll},
      ctx.logger.With({{"component", "reconciler"}}));
  rt->forwarder->Start();
  rt->reconciler->Start();
  MfuRuntime* raw = rt.get();
  ctx.on_shutdown->push_back([raw] {
    raw->reconciler->Stop();
    raw->forwarder->Stop();
  });
  rt->service = std::make_unique<goodput::mfu::MfuServiceImpl>(
      rt->store.get(), rt->reconciliations.get(), rt->reconciler.get(), std::move(service_options),
      ctx.logger);
  ctx.grpc->AddService(rt->service.get(), goodput::v1::MfuService::service_full_name());
  return std::shared_ptr<void>(rt);
}

}  // namespace

int main(int argc, char** argv) {
  return goodput::platform::RunServiceMain(
      argc, argv,
      {.name = "goodput-mfu",
       .config_sections = {"mfu", "gpu_catalog"},
       .needs_redis = false,  // reports and reconciliations live in PostgreSQL only
       .setup = Setup});
}
