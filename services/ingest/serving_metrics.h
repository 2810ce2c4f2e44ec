// Serving engines' own metrics (vLLM, SGLang) turned into serving samples attributed to jobs,
// from a scraped exposition body or a remote_write request.
//
// The metrics and labels are the engines' own (their source names them):
//   vLLM  vllm/v1/metrics/loggers.py (PrometheusStatLogger) and vllm/v1/metrics/perf.py
//         (PerfMetricsProm, with --enable-mfu-metrics); labels `model_name` and `engine`
//         (the engine-core index), `finished_reason` on vllm:request_success_total.
//   SGLang python/sglang/srt/metrics/collector.py (TokenizerMetricsCollector,
//         SchedulerMetricsCollector); labels `model_name` and, in newer versions, `engine_type`,
//         `tp_rank`, `pp_rank`, ...
// Each value becomes one ServingSample with goodput's name for what it measures
// (ServingMetricKind). Counters stay cumulative; rates are taken when they are read.
// The series is told apart by its engine labels (everything but the identity labels: host,
// pod, namespace, Prometheus `job`/`instance`, `model_name`, `cluster`). The job is found
// later by storage (ServingStore), from the ids its labels name (`job_id`, `hpc_job`,
// `slurm_job_id`, then the Kubernetes pod as for GPU samples) or, failing that, from the job
// holding GPUs on its host at its time.
//
//   ServingBatch batch = ParseServingExposition(body, {.cluster = "eos",
//                                                      .default_host = "gpu-node-042",
//                                                      .scrape_time_unix_ms = now_ms});
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "prometheus/remote.pb.h"
#include "services/ingest/identity_rules.h"
#include "services/ingest/sample.h"

namespace goodput::ingest {

// What a serving series measures.
enum class ServingMetricKind {
  kPromptTokens,      // counter: prompt (prefill) tokens processed
  kGenerationTokens,  // counter: generated (decode) tokens
  kRequests,          // counter: requests finished
  kRunning,           // gauge: requests in the running batch
  kWaiting,           // gauge: requests queued
  kFlopsPerGpu,       // counter: the engine's own FLOPs estimate per GPU
  kLatencySumS,       // counter: sum of end-to-end request latencies, seconds
  kLatencyCount,      // counter: number of those latencies
};

// "prompt_tokens", "generation_tokens", "requests", "running", "waiting", "flops_per_gpu",
// "latency_sum_s", "latency_count": the `metric` column of serving_samples.
absl::string_view ServingMetricName(ServingMetricKind kind);

struct ServingMetricMapping {
  absl::string_view engine;  // "vllm", "sglang"
  ServingMetricKind kind;
};

// The mapping of an exposed metric name (as printed: counters with their `_total`,
// histograms' `_sum`/`_count`); nullopt for metrics goodput does not use.
std::optional<ServingMetricMapping> MapServingMetric(absl::string_view name);

// One value of one serving series.
struct ServingSample {
  std::string host;    // canonical; empty when the series names none
  std::string pod;     // "namespace/pod" when the series names one
  std::string engine;  // "vllm", "sglang"
  std::string model;   // `model_name`
  std::string series;  // the engine labels telling series apart: "engine=0", "tp_rank=1,..."
  ServingMetricKind metric = ServingMetricKind::kPromptTokens;
  int64_t time_unix_ms = 0;
  double value = 0;
  std::vector<std::string> job_ids;  // ids its labels name, most specific first
};

struct ServingBatch {
  std::string cluster;
  std::vector<ServingSample> samples;
  std::vector<Refusal> refusals;
  int64_t refused_count = 0;
};

struct ServingParseOptions {
  std::string cluster = {};
  std::string batch_id = {};
  // Host of a series that names none (a scrape target's host).
  std::string default_host = {};
  // Time of lines without a timestamp (the scrape's time).
  int64_t scrape_time_unix_ms = 0;
  // Added to every series (a scrape target's configured labels).
  std::map<std::string, std::string> extra_labels = {};
  IdentityRules identity = {};
  size_t max_labels_per_series = std::numeric_limits<size_t>::max();
  // Labels naming a Prometheus HA replica: not part of a series' identity (both replicas
  // send the same engine series).
  std::vector<std::string> replica_labels = {};
  // remote_write: true for a series of a standby HA replica, which is skipped.
  std::function<bool(const prometheus::TimeSeries& series, const std::string& cluster)>
      drop_series = nullptr;
};

// The serving lines of an exposition body; other lines are skipped (the DCGM parser reads
// them). A line that does not parse, or a value that is not finite, is refused with its line
// number; the rest is kept.
ServingBatch ParseServingExposition(absl::string_view body, const ServingParseOptions& options);

// The serving series of a remote_write request, one batch per cluster (a series' `cluster`
// label, else `options.cluster`; series with neither are refused). Stale markers are skipped.
std::vector<ServingBatch> MapServingSeries(const prometheus::WriteRequest& request,
                                           const ServingParseOptions& options);

}  // namespace goodput::ingest
