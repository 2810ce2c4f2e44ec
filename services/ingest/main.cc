// goodput-ingest: composition root. Serves IngestService and JobService. See
// services/platform/service_main.h for the command line; the service's own keys are:
//
//   ingest.max_batch_samples [100000]        samples per PushSamples batch
//   ingest.max_request_bytes [67108864]      gRPC message size limit
//   ingest.max_exposition_bytes [16777216]   PushExposition body size limit
//   ingest.max_inflight_samples [1000000]    backpressure bound (RESOURCE_EXHAUSTED above)
//   ingest.max_future_skew_s [300]           how far in the future a timestamp may be
//   ingest.retention_days [30]               samples older are refused; partitions dropped
//   ingest.partitions_ahead_days [7]         daily partitions created ahead of time
//   ingest.batch_id_retention_days [7]       how long a batch id is remembered for retries
//   ingest.maintenance_interval_s [300]      partition and batch-id upkeep period
#include <memory>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "services/core/gpu_catalog.h"
#include "services/ingest/ingest_service.h"
#include "services/ingest/job_service.h"
#include "services/ingest/job_store.h"
#include "services/ingest/maintenance.h"
#include "services/ingest/sample_store.h"
#include "services/platform/service_main.h"

namespace goodput::ingest {
namespace {

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

// Everything the running service owns, destroyed after the server has stopped.
struct IngestRuntime {
  std::unique_ptr<JobStore> job_store;
  std::unique_ptr<SampleStore> sample_store;
  std::unique_ptr<IngestPipeline> pipeline;
  std::unique_ptr<IngestServiceImpl> ingest_service;
  std::unique_ptr<JobServiceImpl> job_service;
  std::unique_ptr<Maintenance> maintenance;
};

absl::StatusOr<std::shared_ptr<void>> Setup(platform::ServiceContext& ctx) {
  const platform::ConfigTree& config = *ctx.config_tree;
  constexpr int64_t kDayMs = 86'400'000;
  IngestOptions options;
  MaintenanceOptions maintenance;
  absl::StatusOr<int64_t> max_batch =
      config.GetIntInRange("ingest.max_batch_samples", 100'000, 1, 10'000'000);
  if (!max_batch.ok()) return max_batch.status();
  options.max_batch_samples = *max_batch;
  absl::StatusOr<int64_t> max_request =
      config.GetIntInRange("ingest.max_request_bytes", 64 << 20, 1 << 10, 1 << 30);
  if (!max_request.ok()) return max_request.status();
  absl::StatusOr<int64_t> max_exposition =
      config.GetIntInRange("ingest.max_exposition_bytes", 16 << 20, 1 << 10, 1 << 30);
  if (!max_exposition.ok()) return max_exposition.status();
  options.max_exposition_bytes = *max_exposition;
  absl::StatusOr<int64_t> inflight =
      config.GetIntInRange("ingest.max_inflight_samples", 1'000'000, 1, 1'000'000'000);
  if (!inflight.ok()) return inflight.status();
  options.max_inflight_samples = *inflight;
  absl::StatusOr<int64_t> skew = config.GetIntInRange("ingest.max_future_skew_s", 300, 0, 86'400);
  if (!skew.ok()) return skew.status();
  options.max_future_skew_ms = *skew * 1000;
  absl::StatusOr<int64_t> retention = config.GetIntInRange("ingest.retention_days", 30, 1, 3650);
  if (!retention.ok()) return retention.status();
  options.retention_ms = *retention * kDayMs;
  maintenance.retention_ms = options.retention_ms;
  absl::StatusOr<int64_t> ahead = config.GetIntInRange("ingest.partitions_ahead_days", 7, 1, 366);
  if (!ahead.ok()) return ahead.status();
  maintenance.partitions_ahead_days = *ahead;
  absl::StatusOr<int64_t> batch_days =
      config.GetIntInRange("ingest.batch_id_retention_days", 7, 1, 3650);
  if (!batch_days.ok()) return batch_days.status();
  maintenance.batch_id_retention_ms = *batch_days * kDayMs;
  absl::StatusOr<absl::Duration> interval = config.GetSeconds("ingest.maintenance_interval_s", 300);
  if (!interval.ok()) return interval.status();
  if (*interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("config key ingest.maintenance_interval_s must be positive");
  }
  maintenance.interval = *interval;
  if (ctx.pg == nullptr) {
    return absl::InvalidArgumentError("goodput-ingest needs postgres.dsn");
  }

  auto runtime = std::make_shared<IngestRuntime>();
  runtime->job_store = std::make_unique<JobStore>(ctx.pg);
  runtime->sample_store = std::make_unique<SampleStore>(ctx.pg);
  runtime->pipeline = std::make_unique<IngestPipeline>(
      runtime->sample_store.get(), &core::GpuCatalog::BuiltIn(), options, NowUnixMs, ctx.metrics);
  runtime->ingest_service = std::make_unique<IngestServiceImpl>(runtime->pipeline.get());
  runtime->job_service = std::make_unique<JobServiceImpl>(runtime->job_store.get(), NowUnixMs);
  runtime->maintenance = std::make_unique<Maintenance>(runtime->sample_store.get(), maintenance,
                                                       NowUnixMs, ctx.logger);

  const int max_request_bytes = static_cast<int>(*max_request);
  ctx.grpc->ConfigureBuilder([max_request_bytes](grpc::ServerBuilder& builder) {
    builder.SetMaxReceiveMessageSize(max_request_bytes);
  });
  ctx.grpc->AddService(runtime->job_service.get(), v1::JobService::service_full_name());
  ctx.grpc->AddService(runtime->ingest_service.get(), v1::IngestService::service_full_name());
  runtime->maintenance->Start();
  Maintenance* m = runtime->maintenance.get();
  ctx.on_shutdown->push_back([m] { m->Stop(); });
  return std::shared_ptr<void>(runtime);
}

}  // namespace
}  // namespace goodput::ingest

int main(int argc, char** argv) {
  return goodput::platform::RunServiceMain(argc, argv,
                                           {.name = "goodput-ingest",
                                            .config_sections = {"ingest"},
                                            .needs_redis = false,
                                            .setup = goodput::ingest::Setup});
}
