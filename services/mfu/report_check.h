// Checking and interpreting framework MFU reports (goodput.v1.MfuReport).
//
// CheckReport finds the first reason a report cannot be stored (a refusal naming field and
// value); ComputeAppMfu turns a stored report into application MFU with the core library,
// once the job's GPU model (and, for per-step FLOPs without a GPU count, its allocated GPU
// count) is known. Reports of jobs not registered yet are stored anyway and computed later.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "goodput/v1/common.pb.h"
#include "goodput/v1/mfu.pb.h"
#include "services/api/api_checks.h"
#include "services/core/gpu_catalog.h"
#include "services/core/mfu.h"

namespace goodput::mfu {

namespace v1 = ::goodput::v1;

// Longest accepted report_id, bytes.
inline constexpr size_t kMaxReportIdBytes = 256;
// Most step times accepted in one report.
inline constexpr int kMaxStepTimes = 1000;
// Free-text fields (framework, framework_version, flops_formula, workload_fingerprint) and
// labels: sizes as goodput-ingest allows for jobs (services/api/api_checks.h).
inline constexpr size_t kMaxReportTextBytes = api::kMaxFreeTextBytes;
inline constexpr int kMaxReportLabels = 64;
// Highest accepted framework MFU fraction (above 1 is kept as evidence of an overcount).
inline constexpr double kMaxReportedMfu = 1.5;

// The first problem of `report`, or nullopt if it can be stored. The job id must pass
// api::CheckJobIdChars, as ingest's job ids do. The refusal carries
// item_id (the report id), field, value, code and a sentence naming all three; batch_id and
// index are left for the caller to fill.
std::optional<v1::Refusal> CheckReport(const v1::MfuReport& report);

// The core precision of an API precision; nullopt for PRECISION_UNSPECIFIED or an unknown
// value.
std::optional<core::Precision> ToCorePrecision(v1::Precision precision);

// True when the report names neither a precision nor a mix (BF16 is then assumed).
bool PrecisionAssumed(const v1::MfuReport& report);

// What the service computes from a report.
struct AppMfu {
  double app_mfu = 0;                         // fraction
  std::optional<double> model_tflops_per_gpu;  // unset for the `mfu` form
  std::optional<double> peak_tflops;           // dense peak or P_eff used
};

// App MFU of a checked report for a job on `gpu_model` (dcgm-exporter model name) holding
// `allocated_gpu_count` GPUs (0 when unknown). NOT_FOUND when the model is not in the
// catalog, FAILED_PRECONDITION when a per-step report has no GPU count and the job's
// allocation is unknown, INVALID_ARGUMENT from the core library (e.g. a precision the model
// lacks). A report in `mfu` form without a known model yields the framework's MFU as is.
// `catalog` is the service's (built-in models plus gpu_catalog.overrides).
// The GPUs a report's figure is spread over when it says so (total_throughput.gpu_count,
// step_flops.gpu_count); 0 when it is per GPU of the job.
int32_t StatedGpuCount(const v1::MfuReport& report);

absl::StatusOr<AppMfu> ComputeAppMfu(
    const v1::MfuReport& report, const std::string& gpu_model, int64_t allocated_gpu_count,
    const core::GpuCatalog& catalog = core::GpuCatalog::BuiltIn());

}  // namespace goodput::mfu
