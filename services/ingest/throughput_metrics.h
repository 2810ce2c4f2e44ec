// Framework throughput metrics that arrive through remote_write (Megatron-LM's
// `megatron_training_throughput_tflops`, NeMo's TFLOP/s per GPU, ...) turned into MFU reports
// for goodput-mfu, for jobs whose framework exports metrics instead of using the SDK.
//
// Each sample of a mapped series becomes one report covering [t - interval_s, t), for the job
// named by the first present of the metric's job labels in the series' cluster (its `cluster`
// label, else the receiver's default cluster). The report id is derived from cluster, series
// labels and timestamp, so a retried remote_write request yields the same ids and goodput-mfu
// stores each report once.
//
// Delivery is synchronous (see services/mfu/README.md): the receiver hands the reports of a
// request to a ReportSink (goodput-mfu's StreamMfuReports) and answers remote_write only once
// goodput-mfu has committed them; when goodput-mfu cannot be reached it answers 503, and
// Prometheus retries the request.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "goodput/v1/mfu.pb.h"
#include "grpcpp/grpcpp.h"
#include "prometheus/remote.pb.h"
#include "services/ingest/sample.h"
#include "yaml-cpp/yaml.h"

namespace goodput::ingest {

// What a metric's value is.
enum class ThroughputForm {
  kMfu,                // MFU as a fraction
  kMfuPercent,         // MFU in percent
  kModelTflopsPerGpu,  // model TFLOP/s per GPU
  kTotalTflops,        // model TFLOP/s of the whole job; GPU count from `gpu_count_label`
};

// How one metric maps to reports.
struct ThroughputMetric {
  std::string name;
  ThroughputForm form = ThroughputForm::kModelTflopsPerGpu;
  // Labels naming the job id, first present wins.
  std::vector<std::string> job_labels = {"job_id", "hpc_job", "slurm_job_id"};
  // Label holding the GPU count for kTotalTflops.
  std::string gpu_count_label = "gpu_count";
  // Interval a sample covers, ending at its timestamp (the exporter's scrape interval).
  double interval_s = 30;
  // goodput.v1.Precision of the run; unspecified: a `precision` label if present, else BF16
  // is assumed by goodput-mfu.
  goodput::v1::Precision precision = goodput::v1::PRECISION_UNSPECIFIED;
  std::string framework;
};

// The defaults: Megatron-LM's and NeMo's TFLOP/s per GPU, and an MFU gauge.
std::vector<ThroughputMetric> DefaultThroughputMetrics();

// `ingest.mfu_metrics.metrics` from the configuration: a list of {name, form (mfu,
// mfu_percent, model_tflops_per_gpu, total_tflops), job_labels, gpu_count_label, interval_s,
// precision, framework}; the defaults when absent. INVALID_ARGUMENT naming the key.
absl::StatusOr<std::vector<ThroughputMetric>> ParseThroughputMetrics(const YAML::Node& root);

struct MappedReports {
  std::vector<goodput::v1::MfuReport> reports;
  std::vector<Refusal> refusals;  // "series S sample K of batch B: ..."
  int64_t sample_count = 0;       // samples of mapped metrics (reports + refused)
  int64_t refused_count = 0;      // samples refused (a refused series counts all its samples)
};

// Maps the samples of the series of `metrics` in `request`. Stale markers are skipped; a
// series with more than `max_labels` labels (besides __name__) is refused.
MappedReports MapThroughputSeries(const prometheus::WriteRequest& request,
                                  const std::vector<ThroughputMetric>& metrics,
                                  const std::string& default_cluster, const std::string& batch_id,
                                  size_t max_labels = std::numeric_limits<size_t>::max());

// What the receiver of the reports answered.
struct ReportSinkResult {
  int64_t stored = 0;
  int64_t duplicates = 0;
  int64_t refused = 0;
  std::vector<std::string> refusal_messages;
};
// Delivers reports durably; an error when they may not have been stored (retry later).
using ReportSink = std::function<absl::StatusOr<ReportSinkResult>(
    const std::string& batch_id, const std::vector<goodput::v1::MfuReport>& reports)>;

// goodput-mfu's MfuService.StreamMfuReports on `channel`, with `bearer_token` (empty: none).
ReportSink MfuStreamSink(std::shared_ptr<grpc::Channel> channel, std::string bearer_token,
                         absl::Duration timeout);

}  // namespace goodput::ingest
