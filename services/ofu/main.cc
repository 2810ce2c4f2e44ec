// goodput-ofu: composition root. See services/platform/service_main.h for the command line
// and services/ofu/README.md for the `ofu.*` configuration keys.
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "services/core/gpu_catalog.h"
#include "services/ofu/ofu_consumer.h"
#include "services/ofu/ofu_forwarder.h"
#include "services/ofu/ofu_live.h"
#include "services/ofu/ofu_service.h"
#include "services/ofu/ofu_store.h"
#include "services/platform/gpu_catalog_config.h"
#include "services/platform/ordered_forwarder.h"
#include "services/platform/service_main.h"
#include "services/platform/tls.h"

namespace {

// Everything goodput-ofu keeps alive while serving.
struct OfuRuntime {
  std::unique_ptr<goodput::core::GpuCatalog> catalog;  // built-in + gpu_catalog.overrides
  std::unique_ptr<goodput::ofu::OfuStore> store;
  std::unique_ptr<goodput::ofu::LatestCache> cache;
  std::unique_ptr<goodput::ofu::StreamHub> hub;
  std::unique_ptr<goodput::platform::OrderedForwarder> forwarder;
  std::unique_ptr<goodput::ofu::OfuConsumer> consumer;
  std::unique_ptr<goodput::ofu::FaultEventStore> faults;
  std::unique_ptr<goodput::ofu::OfuServiceImpl> service;
};

absl::StatusOr<std::shared_ptr<void>> Setup(goodput::platform::ServiceContext& ctx) {
  const goodput::platform::ConfigTree& cfg = *ctx.config_tree;
  absl::StatusOr<int64_t> window_s = cfg.GetIntInRange("ofu.window_s", 60, 1, 86400);
  if (!window_s.ok()) return window_s.status();
  absl::StatusOr<int64_t> lateness_s = cfg.GetIntInRange("ofu.allowed_lateness_s", 120, 0, 86400);
  if (!lateness_s.ok()) return lateness_s.status();
  absl::StatusOr<int64_t> idle_flush_s = cfg.GetIntInRange("ofu.idle_flush_s", 300, 1, 7 * 86400);
  if (!idle_flush_s.ok()) return idle_flush_s.status();
  absl::StatusOr<int64_t> shard_count = cfg.GetIntInRange("ofu.shard_count", 1, 1, 4096);
  if (!shard_count.ok()) return shard_count.status();
  absl::StatusOr<int64_t> shard_index =
      cfg.GetIntInRange("ofu.shard_index", 0, 0, *shard_count - 1);
  if (!shard_index.ok()) return shard_index.status();
  absl::StatusOr<int64_t> page_limit = cfg.GetIntInRange("ofu.page_limit", 20000, 1, 1'000'000);
  if (!page_limit.ok()) return page_limit.status();
  absl::StatusOr<int64_t> recompute =
      cfg.GetIntInRange("ofu.late_recompute_gpu_windows", 20000, 0, 10'000'000);
  if (!recompute.ok()) return recompute.status();
  absl::StatusOr<absl::Duration> poll = cfg.GetSeconds("ofu.poll_interval_s", 1.0);
  if (!poll.ok()) return poll.status();
  absl::StatusOr<absl::Duration> cache_ttl = cfg.GetSeconds("ofu.latest_cache_ttl_s", 86400.0);
  if (!cache_ttl.ok()) return cache_ttl.status();
  absl::StatusOr<std::string> mfu_address = cfg.GetString("ofu.forward.mfu_address", "");
  if (!mfu_address.ok()) return mfu_address.status();
  absl::StatusOr<std::string> alerting_address = cfg.GetString("ofu.forward.alerting_address", "");
  if (!alerting_address.ok()) return alerting_address.status();
  absl::StatusOr<std::string> forward_token = cfg.GetString("ofu.forward.token", "");
  if (!forward_token.ok()) return forward_token.status();
  absl::StatusOr<absl::Duration> forward_timeout = cfg.GetSeconds("ofu.forward.timeout_s", 10.0);
  if (!forward_timeout.ok()) return forward_timeout.status();
  if (ctx.pg == nullptr)
    return absl::FailedPreconditionError("postgres.dsn: required by goodput-ofu");

  auto rt = std::make_shared<OfuRuntime>();
  absl::StatusOr<goodput::core::GpuCatalog> loaded = goodput::platform::LoadGpuCatalog(cfg);
  if (!loaded.ok()) return loaded.status();
  rt->catalog = std::make_unique<goodput::core::GpuCatalog>(*std::move(loaded));
  const goodput::core::GpuCatalog* catalog = rt->catalog.get();
  rt->store = std::make_unique<goodput::ofu::OfuStore>(
      ctx.pg, goodput::ofu::ShardConfig{.index = static_cast<int>(*shard_index),
                                        .count = static_cast<int>(*shard_count)});
  rt->cache = std::make_unique<goodput::ofu::LatestCache>(ctx.redis, *cache_ttl);
  rt->hub = std::make_unique<goodput::ofu::StreamHub>();
  goodput::ofu::EngineOptions engine;
  engine.window_ms = *window_s * 1000;
  engine.allowed_lateness_ms = *lateness_s * 1000;
  engine.idle_flush_ms = *idle_flush_s * 1000;
  const int32_t w = static_cast<int32_t>(*window_s);
  OfuRuntime* raw = rt.get();
  std::vector<goodput::platform::OrderedTarget> targets;
  if (!mfu_address->empty()) {
    targets.push_back(goodput::ofu::MfuTarget(
        rt->store.get(), goodput::platform::MakeChannel(*mfu_address, goodput::platform::ClientTlsFrom(ctx.config->tls)),
        *forward_token, *forward_timeout));
  }
  if (!alerting_address->empty()) {
    targets.push_back(goodput::ofu::AlertingTarget(
        rt->store.get(), goodput::platform::MakeChannel(*alerting_address,
                                          goodput::platform::ClientTlsFrom(ctx.config->tls)),
        *forward_token, *forward_timeout));
  }
  rt->forwarder = std::make_unique<goodput::platform::OrderedForwarder>(
      goodput::ofu::ForwardLog(rt->store.get()), std::move(targets),
      goodput::platform::OrderedForwarderOptions{}, ctx.logger.With({{"component", "forwarder"}}));
  goodput::platform::Gauge* consumed =
      &ctx.metrics
           ->AddGauge("goodput_ofu_samples_consumed",
                      "Samples this shard has consumed from PostgreSQL since it started.")
           .WithLabels(std::vector<std::string>{});
  goodput::platform::Gauge* late =
      &ctx.metrics
           ->AddGauge("goodput_ofu_late_samples",
                      "Samples that arrived after their window was final, since start.")
           .WithLabels(std::vector<std::string>{});
  goodput::platform::Gauge* recomputed =
      &ctx.metrics
           ->AddGauge("goodput_ofu_windows_recomputed",
                      "Final job-level windows recomputed from stored samples for late samples.")
           .WithLabels(std::vector<std::string>{});
  goodput::platform::Gauge* written =
      &ctx.metrics
           ->AddGauge("goodput_ofu_windows_written",
                      "Job-level and per-GPU window rows written since start.")
           .WithLabels(std::vector<std::string>{});
  goodput::platform::Gauge* memory =
      &ctx.metrics
           ->AddGauge("goodput_ofu_engine_memory_bytes",
                      "Memory held by the window engine for windows that are not final.")
           .WithLabels(std::vector<std::string>{});
  rt->consumer = std::make_unique<goodput::ofu::OfuConsumer>(
      rt->store.get(), catalog, engine,
      goodput::ofu::ConsumerOptions{.page_limit = static_cast<int>(*page_limit),
                                    .recompute_gpu_windows = static_cast<int>(*recompute),
                                    .poll_interval = *poll},
      [raw, w, consumed, late, recomputed, written, memory](const goodput::ofu::CommittedWindows& c) {
        raw->cache->Publish(c, w);
        raw->hub->Publish(c, w);
        raw->forwarder->Wake();
        const goodput::ofu::ConsumerStats stats = raw->consumer->Stats();
        consumed->Set(static_cast<double>(stats.samples_consumed));
        late->Set(static_cast<double>(stats.late_samples));
        recomputed->Set(static_cast<double>(stats.windows_recomputed));
        written->Set(static_cast<double>(stats.windows_written));
        memory->Set(static_cast<double>(raw->consumer->EngineMemoryBytes()));
      },
      ctx.logger.With(
          {{"component", "consumer"}, {"shard", absl::StrCat(*shard_index, "/", *shard_count)}}));
  if (absl::Status s = rt->consumer->Start(); !s.ok()) return s;
  rt->forwarder->Start();
  ctx.on_shutdown->push_back([raw] {
    raw->consumer->Stop();
    raw->forwarder->Stop();
  });
  rt->faults = std::make_unique<goodput::ofu::FaultEventStore>(ctx.pg);
  rt->service = std::make_unique<goodput::ofu::OfuServiceImpl>(
      rt->store.get(), rt->consumer.get(), rt->cache.get(), rt->hub.get(), catalog,
      goodput::ofu::OfuServiceOptions{.window_s = w, .faults = rt->faults.get()});
  ctx.grpc->AddService(rt->service.get(), goodput::v1::OfuService::service_full_name());
  return rt;
}

}  // namespace

int main(int argc, char** argv) {
  return goodput::platform::RunServiceMain(
      argc, argv,
      {.name = "goodput-ofu", .config_sections = {"ofu", "gpu_catalog"}, .setup = Setup});
}
