#include "services/mfu/report_check.h"

#include <cmath>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/api/api_checks.h"

namespace goodput::mfu {
namespace {

std::string Num(double value) { return absl::StrFormat("%g", value); }

v1::Refusal Refuse(const v1::MfuReport& report, const std::string& field,
                   const std::string& value, v1::RefusalCode code, const std::string& why) {
  v1::Refusal refusal;
  // Echo at most 200 bytes of what was received, control characters escaped.
  refusal.set_item_id(api::Sanitize(report.report_id()));
  refusal.set_field(field);
  refusal.set_value(api::Sanitize(value));
  refusal.set_code(code);
  refusal.set_message(absl::StrCat("report \"", refusal.item_id(), "\": ", field, "=",
                                   refusal.value(), " ", why));
  return refusal;
}

// Refusal for a number that must be finite and > 0 (or >= 0 with `allow_zero`).
std::optional<v1::Refusal> CheckPositive(const v1::MfuReport& report, const std::string& field,
                                         double value, bool allow_zero = false) {
  if (!std::isfinite(value)) {
    return Refuse(report, field, Num(value), v1::REFUSAL_CODE_NOT_FINITE, "is not finite");
  }
  if (value < 0 || (!allow_zero && value == 0)) {
    return Refuse(report, field, Num(value), v1::REFUSAL_CODE_OUT_OF_RANGE,
                  allow_zero ? "is negative" : "must be greater than 0");
  }
  return std::nullopt;
}

bool HasTime(const google::protobuf::Timestamp& t) { return t.seconds() != 0 || t.nanos() != 0; }

std::string TimeText(const google::protobuf::Timestamp& t) {
  return absl::StrCat(t.seconds(), "s+", t.nanos(), "ns");
}

}  // namespace

std::optional<core::Precision> ToCorePrecision(v1::Precision precision) {
  switch (precision) {
    case v1::PRECISION_FP64: return core::Precision::kFp64;
    case v1::PRECISION_TF32: return core::Precision::kTf32;
    case v1::PRECISION_FP16: return core::Precision::kFp16;
    case v1::PRECISION_BF16: return core::Precision::kBf16;
    case v1::PRECISION_FP8: return core::Precision::kFp8;
    case v1::PRECISION_FP4: return core::Precision::kFp4;
    case v1::PRECISION_INT8: return core::Precision::kInt8;
    default: return std::nullopt;
  }
}

bool PrecisionAssumed(const v1::MfuReport& report) {
  return report.precision_mix().empty() && report.precision() == v1::PRECISION_UNSPECIFIED;
}

std::optional<v1::Refusal> CheckReport(const v1::MfuReport& report) {
  if (report.report_id().empty()) {
    return Refuse(report, "report_id", "\"\"", v1::REFUSAL_CODE_MISSING_FIELD,
                  "is required (a unique id per report)");
  }
  if (report.report_id().size() > kMaxReportIdBytes) {
    return Refuse(report, "report_id", absl::StrCat(report.report_id().size(), " bytes"),
                  v1::REFUSAL_CODE_OUT_OF_RANGE,
                  absl::StrCat("is longer than ", kMaxReportIdBytes, " bytes"));
  }
  if (!report.has_job() || report.job().cluster().empty()) {
    return Refuse(report, "job.cluster", "\"\"", v1::REFUSAL_CODE_MISSING_FIELD,
                  "is required (the job key is cluster + job id)");
  }
  if (report.job().job_id().empty()) {
    return Refuse(report, "job.job_id", "\"\"", v1::REFUSAL_CODE_MISSING_FIELD,
                  "is required (the job key is cluster + job id)");
  }
  struct Text {
    const char* field;
    const std::string& value;
    size_t max_bytes;
  };
  for (const Text& t : {Text{"report_id", report.report_id(), kMaxReportIdBytes},
                        Text{"job.cluster", report.job().cluster(), api::kMaxClusterBytes},
                        Text{"job.job_id", report.job().job_id(), api::kMaxJobIdBytes}}) {
    if (auto reason = api::CheckText(t.value, t.max_bytes)) {
      return Refuse(report, t.field, absl::StrCat("\"", api::Sanitize(t.value), "\""),
                    v1::REFUSAL_CODE_MALFORMED, *reason);
    }
  }
  if (auto reason = api::CheckJobIdChars(report.job().job_id())) {
    return Refuse(report, "job.job_id", absl::StrCat("\"", api::Sanitize(report.job().job_id()), "\""),
                  v1::REFUSAL_CODE_MALFORMED, *reason);
  }
  for (const Text& t : {Text{"framework", report.framework(), kMaxReportTextBytes},
                        Text{"framework_version", report.framework_version(), kMaxReportTextBytes},
                        Text{"flops_formula", report.flops_formula(), kMaxReportTextBytes},
                        Text{"workload_fingerprint", report.workload_fingerprint(),
                             kMaxReportTextBytes}}) {
    if (auto reason = api::CheckText(t.value, t.max_bytes, api::TextKind::kFreeText)) {
      return Refuse(report, t.field, absl::StrCat("\"", api::Sanitize(t.value), "\""),
                    v1::REFUSAL_CODE_MALFORMED, *reason);
    }
  }
  if (report.labels_size() > kMaxReportLabels) {
    return Refuse(report, "labels", absl::StrCat(report.labels_size(), " labels"),
                  v1::REFUSAL_CODE_OUT_OF_RANGE,
                  absl::StrCat("are more than the ", kMaxReportLabels, " a report may carry"));
  }
  for (const auto& [name, value] : report.labels()) {
    if (auto reason = api::CheckText(name, api::kMaxLabelNameBytes)) {
      return Refuse(report, "labels", absl::StrCat("\"", api::Sanitize(name), "\""),
                    v1::REFUSAL_CODE_MALFORMED, absl::StrCat("has a label name that ", *reason));
    }
    if (auto reason = api::CheckText(value, api::kMaxLabelValueBytes, api::TextKind::kFreeText)) {
      return Refuse(report, absl::StrCat("labels[", api::Sanitize(name), "]"),
                    absl::StrCat("\"", api::Sanitize(value), "\""), v1::REFUSAL_CODE_MALFORMED,
                    *reason);
    }
  }
  if (!report.has_interval() || !HasTime(report.interval().start_time())) {
    return Refuse(report, "interval.start_time", "unset", v1::REFUSAL_CODE_MISSING_FIELD,
                  "is required");
  }
  if (!HasTime(report.interval().end_time())) {
    return Refuse(report, "interval.end_time", "unset", v1::REFUSAL_CODE_MISSING_FIELD,
                  "is required");
  }
  const auto& start = report.interval().start_time();
  const auto& end = report.interval().end_time();
  if (auto reason = api::CheckApiTime(start)) {
    return Refuse(report, "interval.start_time", TimeText(start), v1::REFUSAL_CODE_OUT_OF_RANGE,
                  *reason);
  }
  if (auto reason = api::CheckApiTime(end)) {
    return Refuse(report, "interval.end_time", TimeText(end), v1::REFUSAL_CODE_OUT_OF_RANGE,
                  *reason);
  }
  if (end.seconds() < start.seconds() ||
      (end.seconds() == start.seconds() && end.nanos() <= start.nanos())) {
    return Refuse(report, "interval.end_time", TimeText(end), v1::REFUSAL_CODE_INCONSISTENT,
                  absl::StrCat("is not after interval.start_time=", TimeText(start)));
  }

  switch (report.measurement_case()) {
    case v1::MfuReport::kMfu: {
      if (auto r = CheckPositive(report, "mfu", report.mfu())) return r;
      if (report.mfu() > kMaxReportedMfu) {
        return Refuse(report, "mfu", Num(report.mfu()), v1::REFUSAL_CODE_OUT_OF_RANGE,
                      absl::StrCat("is above ", kMaxReportedMfu,
                                   " (MFU is a fraction: 54% is 0.54)"));
      }
      break;
    }
    case v1::MfuReport::kModelTflopsPerGpu:
      if (auto r = CheckPositive(report, "model_tflops_per_gpu", report.model_tflops_per_gpu())) {
        return r;
      }
      break;
    case v1::MfuReport::kTotalThroughput:
      if (auto r = CheckPositive(report, "total_throughput.total_tflops",
                                 report.total_throughput().total_tflops())) {
        return r;
      }
      if (report.total_throughput().gpu_count() <= 0) {
        return Refuse(report, "total_throughput.gpu_count",
                      absl::StrCat(report.total_throughput().gpu_count()),
                      v1::REFUSAL_CODE_OUT_OF_RANGE, "must be greater than 0");
      }
      break;
    case v1::MfuReport::kStepFlops:
      if (auto r = CheckPositive(report, "step_flops.flops_per_step",
                                 report.step_flops().flops_per_step())) {
        return r;
      }
      if (auto r = CheckPositive(report, "step_flops.step_time_s",
                                 report.step_flops().step_time_s())) {
        return r;
      }
      if (report.step_flops().gpu_count() < 0) {
        return Refuse(report, "step_flops.gpu_count",
                      absl::StrCat(report.step_flops().gpu_count()),
                      v1::REFUSAL_CODE_OUT_OF_RANGE, "is negative (0: the job's GPU count)");
      }
      break;
    case v1::MfuReport::MEASUREMENT_NOT_SET:
      return Refuse(report, "measurement", "unset", v1::REFUSAL_CODE_MISSING_FIELD,
                    "is required: one of mfu, model_tflops_per_gpu, total_throughput, "
                    "step_flops");
  }

  if (report.precision() != v1::PRECISION_UNSPECIFIED && !ToCorePrecision(report.precision())) {
    return Refuse(report, "precision", absl::StrCat(static_cast<int>(report.precision())),
                  v1::REFUSAL_CODE_UNKNOWN_VALUE, "is not a known precision");
  }
  if (!report.precision_mix().empty()) {
    std::set<int> seen;
    double sum = 0;
    for (int i = 0; i < report.precision_mix_size(); ++i) {
      const v1::PrecisionShare& share = report.precision_mix(i);
      const std::string field = absl::StrCat("precision_mix[", i, "]");
      if (!ToCorePrecision(share.precision())) {
        return Refuse(report, field + ".precision",
                      share.precision() == v1::PRECISION_UNSPECIFIED
                          ? std::string("PRECISION_UNSPECIFIED")
                          : absl::StrCat(static_cast<int>(share.precision())),
                      v1::REFUSAL_CODE_UNKNOWN_VALUE, "is not a known precision");
      }
      if (!seen.insert(share.precision()).second) {
        return Refuse(report, field + ".precision", v1::Precision_Name(share.precision()),
                      v1::REFUSAL_CODE_INCONSISTENT, "appears more than once in the mix");
      }
      if (!std::isfinite(share.flops_share())) {
        return Refuse(report, field + ".flops_share", Num(share.flops_share()),
                      v1::REFUSAL_CODE_NOT_FINITE, "is not finite");
      }
      if (share.flops_share() < 0 || share.flops_share() > 1) {
        return Refuse(report, field + ".flops_share", Num(share.flops_share()),
                      v1::REFUSAL_CODE_OUT_OF_RANGE, "is outside [0, 1]");
      }
      sum += share.flops_share();
    }
    if (std::fabs(sum - 1.0) > core::kPrecisionMixTolerance) {
      return Refuse(report, "precision_mix", absl::StrCat("sum ", Num(sum)),
                    v1::REFUSAL_CODE_OUT_OF_RANGE,
                    absl::StrCat("shares must sum to 1 (within ", core::kPrecisionMixTolerance,
                                 ")"));
    }
  }
  if (report.has_tokens_per_s()) {
    if (auto r = CheckPositive(report, "tokens_per_s", report.tokens_per_s(), true)) return r;
  }
  if (report.step_times_s_size() > kMaxStepTimes) {
    return Refuse(report, "step_times_s", absl::StrCat(report.step_times_s_size(), " values"),
                  v1::REFUSAL_CODE_OUT_OF_RANGE,
                  absl::StrCat("holds more than ", kMaxStepTimes, " step times"));
  }
  for (int i = 0; i < report.step_times_s_size(); ++i) {
    if (auto r = CheckPositive(report, absl::StrCat("step_times_s[", i, "]"),
                               report.step_times_s(i))) {
      return r;
    }
  }
  if (!v1::ActivationCheckpointing_IsValid(report.activation_checkpointing())) {
    return Refuse(report, "activation_checkpointing",
                  absl::StrCat(static_cast<int>(report.activation_checkpointing())),
                  v1::REFUSAL_CODE_UNKNOWN_VALUE, "is not a known setting");
  }
  if (!v1::MfuReportSource_IsValid(report.source())) {
    return Refuse(report, "source", absl::StrCat(static_cast<int>(report.source())),
                  v1::REFUSAL_CODE_UNKNOWN_VALUE, "is not a known source");
  }
  return std::nullopt;
}

int32_t StatedGpuCount(const v1::MfuReport& report) {
  switch (report.measurement_case()) {
    case v1::MfuReport::kTotalThroughput:
      return report.total_throughput().gpu_count();
    case v1::MfuReport::kStepFlops:
      return report.step_flops().gpu_count();
    default:
      return 0;
  }
}

absl::StatusOr<AppMfu> ComputeAppMfu(const v1::MfuReport& report, const std::string& gpu_model,
                                     int64_t allocated_gpu_count,
                                     const core::GpuCatalog& catalog) {
  if (gpu_model.empty()) {
    if (report.measurement_case() == v1::MfuReport::kMfu) {
      return AppMfu{.app_mfu = report.mfu(), .model_tflops_per_gpu = {}, .peak_tflops = {}};
    }
    return absl::NotFoundError(
        absl::StrCat("job ", report.job().cluster(), "/", report.job().job_id(),
                     " has no GPU model yet"));
  }
  absl::StatusOr<const core::GpuSpec*> spec = catalog.Find(gpu_model);
  if (!spec.ok()) return spec.status();

  core::MfuReport in;
  switch (report.measurement_case()) {
    case v1::MfuReport::kMfu: in.mfu_fraction = report.mfu(); break;
    case v1::MfuReport::kModelTflopsPerGpu:
      in.tflops_per_gpu = report.model_tflops_per_gpu();
      break;
    case v1::MfuReport::kTotalThroughput:
      in.total_tflops = report.total_throughput().total_tflops();
      in.gpu_count = report.total_throughput().gpu_count();
      break;
    case v1::MfuReport::kStepFlops: {
      in.flops_per_step = report.step_flops().flops_per_step();
      in.step_time_s = report.step_flops().step_time_s();
      int64_t gpus = report.step_flops().gpu_count();
      if (gpus == 0) gpus = allocated_gpu_count;
      if (gpus <= 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("report ", report.report_id(),
                         ": step_flops.gpu_count=0 and the job's GPU allocation is unknown"));
      }
      in.gpu_count = gpus;
      break;
    }
    case v1::MfuReport::MEASUREMENT_NOT_SET:
      return absl::InvalidArgumentError(
          absl::StrCat("report ", report.report_id(), ": measurement is unset"));
  }
  for (const v1::PrecisionShare& share : report.precision_mix()) {
    std::optional<core::Precision> p = ToCorePrecision(share.precision());
    if (!p) {
      return absl::InvalidArgumentError(absl::StrCat(
          "precision_mix precision=", static_cast<int>(share.precision()), " is not known"));
    }
    in.precision_mix.push_back({.precision = *p, .flops_share = share.flops_share()});
  }
  in.precision = PrecisionAssumed(report) ? core::Precision::kBf16
                                          : ToCorePrecision(report.precision())
                                                .value_or(core::Precision::kBf16);
  absl::StatusOr<core::MfuResult> result = core::ComputeMfu(**spec, in);
  if (!result.ok()) return result.status();
  return AppMfu{.app_mfu = result->mfu_fraction,
                .model_tflops_per_gpu = result->tflops_per_gpu,
                .peak_tflops = result->peak_tflops_per_gpu};
}

}  // namespace goodput::mfu
