// goodput-ingest: composition root. Serves IngestService and JobService. See
// services/platform/service_main.h for the command line; the service's own keys are:
//
//   ingest.max_batch_samples [100000]        samples per PushSamples batch
//   ingest.max_request_bytes [67108864]      gRPC message size limit
//   ingest.max_exposition_bytes [16777216]   PushExposition body size limit
//   ingest.max_inflight_samples [1000000]    backpressure bound (RESOURCE_EXHAUSTED above)
//   ingest.max_labels_per_series [128]       a series (remote_write, PushExposition, scrape)
//                                            or PushSamples sample with more labels is
//                                            refused alone
//   ingest.limits.max_label_name_bytes [256]   label names of samples and jobs (at most 256)
//   ingest.limits.max_label_value_bytes [1024] label values of samples and jobs (at most 1024)
//   ingest.limits.max_text_bytes [1024]        a job's user, team, name, workload fingerprint
//                                            (at most 1024)
//   ingest.limits.max_job_labels [64]          labels a job may carry
//   ingest.max_future_skew_s [300]           how far in the future a timestamp may be
//   ingest.retention_days [30]               samples older are refused; partitions dropped
//   ingest.partitions_ahead_days [7]         daily partitions created ahead of time
//   ingest.batch_id_retention_days [7]       how long a batch id is remembered for retries
//   ingest.fault_event_retention_days [365]  GPU fault events older are deleted
//   ingest.maintenance_interval_s [300]      partition, batch-id and silent-job upkeep period
//   ingest.jobs.max_http_body_bytes [1048576]  body limit of the HTTP job endpoints (413 above)
//   ingest.jobs.max_request_bytes [4194304]  a JobService request, gRPC or HTTP (refused
//                                            RESOURCE_EXHAUSTED / 429 above)
//   ingest.jobs.pool_size [2]                PostgreSQL connections of JobService (and the
//                                            silent-job sweep), apart from postgres.pool_size,
//                                            which sample ingest then has to itself: a burst
//                                            of registrations never makes samples wait for a
//                                            connection. Registrations beyond it wait up to
//                                            5 s, then RESOURCE_EXHAUSTED (HTTP 429, Retry-After).
//                                            JobService's calls run on as many threads of
//                                            their own, never on gRPC's callback threads
//                                            that PushSamples needs (job_workers.h)
//   ingest.jobs.max_pending [64]             JobService calls queued or running at once;
//                                            beyond, RESOURCE_EXHAUSTED at once (HTTP 429)
//   ingest.jobs.silent_after_s [21600]       a running job whose GPUs sent no sample for this
//                                            long (its epilog never came) is ended; 0: never
//   ingest.jobs.workload_kind_labels [goodput.io/workload-kind, goodput_workload_kind]
//                                            job labels (e.g. Kubernetes pod labels an operator
//                                            copies) a registration without a kind takes it
//                                            from: training, inference/serving, interactive,
//                                            other
//   ingest.serving.infer_after_s [600]      a job with no workload kind that has run this long
//                                            and sends vLLM/SGLang metrics (scrape or
//                                            remote_write) is inference (serving_store.h)
//   ingest.remote_write.cluster [""]         cluster of remote_write series without a
//                                            `cluster` label (or ?cluster= on the URL)
//   ingest.remote_write.ha_replica_labels [__replica__, prometheus_replica, replica]
//                                            labels naming a Prometheus HA replica; one
//                                            replica per cluster is stored (remote_write.h)
//   ingest.remote_write.ha_failover_timeout_s [30]  silence after which the standby takes over
//   ingest.remote_write.max_body_bytes [16777216]          compressed body limit (413 above)
//   ingest.remote_write.max_decompressed_bytes [67108864]  decompressed limit (413 above)
//   ingest.mfu_metrics.mfu_address [""]     goodput-mfu address: framework throughput series
//                                            in remote_write become MFU reports (off if empty)
//   ingest.mfu_metrics.token [""]            bearer token for goodput-mfu
//   ingest.mfu_metrics.timeout_s [10]        per-request deadline towards goodput-mfu
//   ingest.mfu_metrics.metrics [Megatron/NeMo defaults]  metric -> report mapping, a list of
//                                            {name, form, job_labels, gpu_count_label,
//                                            interval_s, precision, framework}
//   ingest.hosts.keep_domain [false]         compare host names with their DNS domain
//   ingest.hosts.aliases [{}]                host name -> the host it stands for (e.g. a
//                                            Kubernetes node name -> the Slurm host name)
//   ingest.attribution.pod_labels [exported_pod/exported_namespace, pod/namespace,
//                                  pod_name/pod_namespace]  pod label pairs, most trusted first
//   ingest.scrape.targets [none]             dcgm-exporter endpoints to scrape, a list of
//                                            {url, cluster, interval_s [15], labels {}};
//                                            interval_s above 30 is accepted with a warning
//   ingest.grpc.max_streams [1024]           PushSamples streams open at once; beyond it a new
//                                            stream evicts the one idle longest (idle at least
//                                            evict_idle_after_s [30]) or gets RESOURCE_EXHAUSTED
//                                            with a `retry-after` trailer (retry_after_s [1])
//   ingest.grpc.max_streams_per_connection [128]  HTTP/2 concurrent streams per connection
//   ingest.grpc.max_memory_bytes [536870912] gRPC resource quota: transport memory
//   ingest.grpc.max_threads [64]             gRPC resource quota: threads
//   ingest.grpc.keepalive_s [60], keepalive_timeout_s [20]  pings that find dead clients
//   ingest.grpc.max_connection_age_s [1800], max_connection_age_grace_s [60]  a connection is
//                                            drained and closed after this age (clients
//                                            reconnect), so no abandoned stream lives forever
//   (grpc_limits.h; the HTTP server's bounds are the common http.* keys, config.h)
//
// HTTP: `POST /api/v1/write` is the Prometheus remote_write 1.0 receiver (remote_write.h);
// `POST /api/v1/jobs:register` and `POST /api/v1/jobs:end` are JobService in JSON
// (jobs_http.h), for schedulers' scripts that have curl only.
#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "services/core/gpu_catalog.h"
#include "services/ingest/ingest_service.h"
#include "services/ingest/job_checks.h"
#include "services/ingest/job_service.h"
#include "services/ingest/job_store.h"
#include "services/ingest/jobs_http.h"
#include "services/ingest/maintenance.h"
#include "services/ingest/remote_write.h"
#include "services/ingest/sample_store.h"
#include "services/ingest/scraper.h"
#include "services/ingest/serving_store.h"
#include "services/platform/gpu_catalog_config.h"
#include "services/platform/grpc_limits.h"
#include "services/platform/scope.h"
#include "services/platform/service_main.h"
#include "services/platform/tls.h"

namespace goodput::ingest {
namespace {

int64_t NowUnixMs() { return absl::ToUnixMillis(absl::Now()); }

// Everything the running service owns, destroyed after the server has stopped.
struct IngestRuntime {
  std::unique_ptr<platform::PgPool> jobs_pg;
  std::unique_ptr<JobWorkers> job_workers;
  std::unique_ptr<core::GpuCatalog> catalog;
  std::unique_ptr<JobStore> job_store;
  std::unique_ptr<ServingStore> serving_store;
  std::unique_ptr<SampleStore> sample_store;
  std::unique_ptr<platform::StreamSlots> push_streams;
  std::unique_ptr<IngestPipeline> pipeline;
  std::unique_ptr<IngestServiceImpl> ingest_service;
  std::unique_ptr<JobServiceImpl> job_service;
  std::unique_ptr<JobsHttp> jobs_http;
  std::unique_ptr<Maintenance> maintenance;
  std::unique_ptr<RemoteWriteReceiver> remote_write;
  std::unique_ptr<Scraper> scraper;
  std::unique_ptr<ScrapingIngestService> ingest_grpc;
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
  absl::StatusOr<int64_t> max_labels =
      config.GetIntInRange("ingest.max_labels_per_series", kDefaultMaxLabelsPerSeries, 1, 1 << 20);
  if (!max_labels.ok()) return max_labels.status();
  options.max_labels_per_series = static_cast<size_t>(*max_labels);
  JobLimits job_limits;
  {
    // Capped at what PostgreSQL and its indexes hold (services/api/api_checks.h).
    struct Limit {
      const char* key;
      int64_t fallback;
      int64_t max;
      std::function<void(int64_t)> set;
    };
    const Limit limits[] = {
        {"ingest.limits.max_label_name_bytes", api::kMaxLabelNameBytes, api::kMaxLabelNameBytes,
         [&](int64_t v) { options.max_label_name_bytes = job_limits.max_label_name_bytes = v; }},
        {"ingest.limits.max_label_value_bytes", api::kMaxLabelValueBytes,
         api::kMaxLabelValueBytes,
         [&](int64_t v) { options.max_label_value_bytes = job_limits.max_label_value_bytes = v; }},
        {"ingest.limits.max_text_bytes", api::kMaxFreeTextBytes, api::kMaxFreeTextBytes,
         [&](int64_t v) { job_limits.max_text_bytes = v; }},
        {"ingest.limits.max_job_labels", kMaxJobLabels, 1 << 16,
         [&](int64_t v) { job_limits.max_labels = static_cast<int>(v); }},
        {"ingest.jobs.max_request_bytes", 4 << 20, 1 << 30,
         [&](int64_t v) { job_limits.max_request_bytes = v; }},
    };
    for (const Limit& limit : limits) {
      absl::StatusOr<int64_t> value = config.GetIntInRange(limit.key, limit.fallback, 1, limit.max);
      if (!value.ok()) return value.status();
      limit.set(*value);
    }
  }
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
  absl::StatusOr<int64_t> fault_days =
      config.GetIntInRange("ingest.fault_event_retention_days", 365, 1, 3650);
  if (!fault_days.ok()) return fault_days.status();
  maintenance.fault_event_retention_ms = *fault_days * kDayMs;
  absl::StatusOr<absl::Duration> interval = config.GetSeconds("ingest.maintenance_interval_s", 300);
  if (!interval.ok()) return interval.status();
  if (*interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("config key ingest.maintenance_interval_s must be positive");
  }
  maintenance.interval = *interval;
  absl::StatusOr<int64_t> silent_after =
      config.GetIntInRange("ingest.jobs.silent_after_s", 6 * 3600, 0, 365LL * 86'400);
  if (!silent_after.ok()) return silent_after.status();
  maintenance.silent_job_after_ms = *silent_after * 1000;
  absl::StatusOr<int64_t> jobs_pool_size =
      config.GetIntInRange("ingest.jobs.pool_size", 2, 1, 1024);
  if (!jobs_pool_size.ok()) return jobs_pool_size.status();
  absl::StatusOr<int64_t> jobs_max_pending =
      config.GetIntInRange("ingest.jobs.max_pending", 64, 1, 1 << 20);
  if (!jobs_max_pending.ok()) return jobs_max_pending.status();
  absl::StatusOr<int64_t> jobs_http_body = config.GetIntInRange(
      "ingest.jobs.max_http_body_bytes", kDefaultJobsHttpMaxBodyBytes, 1 << 10, 64 << 20);
  if (!jobs_http_body.ok()) return jobs_http_body.status();
  absl::StatusOr<std::vector<std::string>> kind_labels =
      config.GetStringList("ingest.jobs.workload_kind_labels");
  if (!kind_labels.ok()) return kind_labels.status();
  if (kind_labels->empty()) *kind_labels = JobStore::DefaultWorkloadKindLabels();
  absl::StatusOr<int64_t> infer_after =
      config.GetIntInRange("ingest.serving.infer_after_s", 600, 0, 365LL * 86'400);
  if (!infer_after.ok()) return infer_after.status();
  RemoteWriteOptions remote_write;
  absl::StatusOr<std::string> rw_cluster = config.GetString("ingest.remote_write.cluster", "");
  if (!rw_cluster.ok()) return rw_cluster.status();
  remote_write.default_cluster = *rw_cluster;
  absl::StatusOr<int64_t> rw_body =
      config.GetIntInRange("ingest.remote_write.max_body_bytes", 16 << 20, 1 << 10, 1 << 30);
  if (!rw_body.ok()) return rw_body.status();
  remote_write.max_body_bytes = *rw_body;
  absl::StatusOr<int64_t> rw_raw = config.GetIntInRange(
      "ingest.remote_write.max_decompressed_bytes", 64 << 20, 1 << 10, 1 << 30);
  if (!rw_raw.ok()) return rw_raw.status();
  remote_write.max_decompressed_bytes = *rw_raw;
  remote_write.max_labels_per_series = options.max_labels_per_series;
  absl::StatusOr<std::vector<std::string>> replica_labels =
      config.GetStringList("ingest.remote_write.ha_replica_labels");
  if (!replica_labels.ok()) return replica_labels.status();
  if (!replica_labels->empty()) remote_write.ha.replica_labels = *replica_labels;
  absl::StatusOr<absl::Duration> failover = config.GetSeconds("ingest.remote_write.ha_failover_timeout_s", 30);
  if (!failover.ok()) return failover.status();
  if (*failover <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("config key ingest.remote_write.ha_failover_timeout_s must be positive");
  }
  remote_write.ha.failover_timeout_ms = absl::ToInt64Milliseconds(*failover);
  absl::StatusOr<std::string> mfu_address = config.GetString("ingest.mfu_metrics.mfu_address", "");
  if (!mfu_address.ok()) return mfu_address.status();
  absl::StatusOr<std::string> mfu_token = config.GetString("ingest.mfu_metrics.token", "");
  if (!mfu_token.ok()) return mfu_token.status();
  absl::StatusOr<absl::Duration> mfu_timeout = config.GetSeconds("ingest.mfu_metrics.timeout_s", 10);
  if (!mfu_timeout.ok()) return mfu_timeout.status();
  absl::StatusOr<std::vector<ThroughputMetric>> throughput = ParseThroughputMetrics(config.root());
  if (!throughput.ok()) return throughput.status();
  if (!mfu_address->empty()) {
    remote_write.throughput_metrics = *std::move(throughput);
    remote_write.report_sink = MfuStreamSink(
        platform::MakeChannel(*mfu_address, platform::ClientTlsFrom(ctx.config->tls)), *mfu_token,
        *mfu_timeout);
  }
  absl::StatusOr<IdentityRules> identity = ParseIdentityRules(config.root());
  if (!identity.ok()) return identity.status();
  options.identity = *identity;
  absl::StatusOr<std::vector<ScrapeTarget>> targets = ParseScrapeTargets(config.root());
  if (!targets.ok()) return targets.status();
  absl::StatusOr<platform::GrpcLimits> grpc_limits = platform::GrpcLimitsFrom(config, "ingest.grpc");
  if (!grpc_limits.ok()) return grpc_limits.status();
  if (ctx.pg == nullptr) {
    return absl::InvalidArgumentError("goodput-ingest needs postgres.dsn");
  }

  auto runtime = std::make_shared<IngestRuntime>();
  platform::PgPoolOptions jobs_pool = ctx.pg->options();
  jobs_pool.max_connections = static_cast<int>(*jobs_pool_size);
  jobs_pool.application_name += "-jobs";
  absl::StatusOr<std::unique_ptr<platform::PgPool>> jobs_pg = platform::PgPool::Create(jobs_pool);
  if (!jobs_pg.ok()) return jobs_pg.status();
  runtime->jobs_pg = *std::move(jobs_pg);
  runtime->job_store = std::make_unique<JobStore>(runtime->jobs_pg.get(), *kind_labels);
  runtime->job_workers = std::make_unique<JobWorkers>(static_cast<int>(*jobs_pool_size),
                                                      static_cast<int>(*jobs_max_pending));
  runtime->sample_store = std::make_unique<SampleStore>(ctx.pg);
  runtime->serving_store = std::make_unique<ServingStore>(ctx.pg, *infer_after * 1000);
  remote_write.serving_store = runtime->serving_store.get();
  // The same catalog as goodput-ofu (built-in models plus gpu_catalog.overrides), so the SM
  // clock bound of an operator-added model is the one the operator configured.
  absl::StatusOr<core::GpuCatalog> catalog = platform::LoadGpuCatalog(config);
  if (!catalog.ok()) return catalog.status();
  runtime->catalog = std::make_unique<core::GpuCatalog>(*std::move(catalog));
  runtime->pipeline =
      std::make_unique<IngestPipeline>(runtime->sample_store.get(), runtime->catalog.get(),
                                       options, NowUnixMs, ctx.metrics, ctx.logger);
  runtime->push_streams = std::make_unique<platform::StreamSlots>(
      platform::StreamSlots::Options{.max_streams = grpc_limits->max_streams,
                                     .evict_idle_after = grpc_limits->evict_idle_after,
                                     .retry_after_s = grpc_limits->retry_after_s,
                                     .config_key = "ingest.grpc.max_streams"});
  runtime->ingest_service =
      std::make_unique<IngestServiceImpl>(runtime->pipeline.get(), runtime->push_streams.get());
  runtime->job_service = std::make_unique<JobServiceImpl>(
      runtime->job_store.get(), NowUnixMs, runtime->catalog.get(), *std::move(identity), job_limits,
      runtime->job_workers.get());
  runtime->maintenance = std::make_unique<Maintenance>(
      runtime->sample_store.get(), runtime->job_store.get(), maintenance, NowUnixMs, ctx.logger);

  const int max_request_bytes = static_cast<int>(*max_request);
  ctx.grpc->ConfigureBuilder([max_request_bytes, limits = *grpc_limits](grpc::ServerBuilder& builder) {
    builder.SetMaxReceiveMessageSize(max_request_bytes);
    platform::ApplyGrpcLimits(limits, builder);
  });
  ctx.grpc->AddService(runtime->job_service.get(), v1::JobService::service_full_name());
  SampleStore* store = runtime->sample_store.get();
  const int64_t failover_ms = remote_write.ha.failover_timeout_ms;
  remote_write.ha_elector = [store, failover_ms](const std::string& cluster,
                                                 const std::string& replica) {
    return store->ElectHaReplica(cluster, replica, failover_ms);
  };
  runtime->remote_write =
      std::make_unique<RemoteWriteReceiver>(runtime->pipeline.get(), remote_write);
  runtime->scraper = std::make_unique<Scraper>(*std::move(targets), runtime->pipeline.get(),
                                               CurlFetch, NowUnixMs, ctx.logger);
  runtime->scraper->set_serving_store(runtime->serving_store.get());
  runtime->maintenance->set_serving_store(runtime->serving_store.get());
  runtime->ingest_grpc = std::make_unique<ScrapingIngestService>(runtime->ingest_service.get(),
                                                                 runtime->scraper.get());
  ctx.grpc->AddService(runtime->ingest_grpc.get(), v1::IngestService::service_full_name());
  RemoteWriteReceiver* receiver = runtime->remote_write.get();
  // remote_write stores telemetry: with auth on it needs a telemetry (or operator) token, as
  // PushSamples does. Prometheus sends it with `authorization: {credentials_file: ...}`.
  constexpr absl::string_view kRemoteWriteRoute = "POST /api/v1/write";
  const platform::AuthPolicy* auth = ctx.auth;
  if (ctx.auth != nullptr) {
    ctx.auth->AllowMethod(kRemoteWriteRoute, {platform::Role::kTelemetry},
                          platform::DeclaredScope(kRemoteWriteRoute));
  }
  auto handle_remote_write = [receiver, auth, kRemoteWriteRoute](const httplib::Request& req,
                                                                 httplib::Response& res) {
    std::optional<platform::Identity> caller;
    if (auth != nullptr) {
      platform::HttpRefusal refusal;
      absl::StatusOr<platform::Identity> identity = platform::CheckHttp(
          *auth, kRemoteWriteRoute, req.get_header_value("Authorization"), &refusal);
      if (!identity.ok()) {
        res.status = refusal.status;
        if (refusal.status == 401) res.set_header("WWW-Authenticate", "Bearer");
        res.set_content(refusal.message + "\n", "text/plain; charset=utf-8");
        return;
      }
      caller = *std::move(identity);
    }
    std::function<absl::Status(absl::string_view)> cluster_allowed;
    if (caller.has_value() && !caller->clusters.empty()) {
      cluster_allowed = [&caller](absl::string_view cluster) {
        return caller->CheckCluster(cluster);
      };
    }
    HttpReply reply = receiver->Handle(req.body, req.get_header_value("Content-Encoding"),
                                       req.get_param_value("cluster"), cluster_allowed);
    res.status = reply.status;
    res.set_content(reply.body, "text/plain; charset=utf-8");
  };
  // The HTTP server refuses a larger body while reading it (413 naming the same key).
  ctx.http->Post("/api/v1/write", handle_remote_write,
                 {.max_bytes = remote_write.max_body_bytes,
                  .config_key = "ingest.remote_write.max_body_bytes"});
  // JobService in JSON: the same code and the same roles as the gRPC methods (jobs_http.h).
  runtime->jobs_http = std::make_unique<JobsHttp>(runtime->job_service.get(), ctx.auth);
  for (const auto method : {JobsHttp::Method::kRegister, JobsHttp::Method::kEnd}) {
    const JobsHttp* jobs = runtime->jobs_http.get();
    ctx.http->Post(method == JobsHttp::Method::kRegister ? kRegisterJobPath : kEndJobPath,
                   [jobs, method](const httplib::Request& req, httplib::Response& res) {
                     JsonHttpReply reply =
                         jobs->Handle(method, req.get_header_value("Authorization"), req.body);
                     res.status = reply.status;
                     if (reply.retry_after_s > 0) {
                       res.set_header("Retry-After", std::to_string(reply.retry_after_s));
                     }
                     if (reply.www_authenticate) res.set_header("WWW-Authenticate", "Bearer");
                     res.set_content(reply.body, "application/json");
                   },
                   {.max_bytes = *jobs_http_body, .config_key = "ingest.jobs.max_http_body_bytes"});
    // The token is checked from the headers, before the body is read, with the gRPC
    // method's roles; refused in the JSON form the route answers with.
    const std::string path = method == JobsHttp::Method::kRegister ? kRegisterJobPath : kEndJobPath;
    ctx.http->RequireToken(
        "POST", path,
        {.policy_route =
             absl::StrCat("/", v1::JobService::service_full_name(), "/",
                          method == JobsHttp::Method::kRegister ? "RegisterJob" : "EndJob"),
         .answer = [path](const platform::HttpRefusal& refusal, httplib::Response& res) {
           res.status = refusal.status;
           if (refusal.status == 401) res.set_header("WWW-Authenticate", "Bearer");
           res.set_content(
               JsonError(refusal.status,
                         refusal.status == 403 ? "PERMISSION_DENIED" : "UNAUTHENTICATED",
                         absl::StrCat("POST ", path, ": ", refusal.message)),
               "application/json");
         }});
  }
  runtime->maintenance->Start();
  runtime->scraper->Start();
  Maintenance* m = runtime->maintenance.get();
  Scraper* scraper = runtime->scraper.get();
  ctx.on_shutdown->push_back([m, scraper] {
    scraper->Stop();
    m->Stop();
  });
  return std::shared_ptr<void>(runtime);
}

}  // namespace
}  // namespace goodput::ingest

int main(int argc, char** argv) {
  return goodput::platform::RunServiceMain(argc, argv,
                                           {.name = "goodput-ingest",
                                            .config_sections = {"ingest", "gpu_catalog"},
                                            .needs_redis = false,
                                            .setup = goodput::ingest::Setup});
}
