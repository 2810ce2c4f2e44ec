#include "services/api/api_convert.h"

#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "google/protobuf/util/time_util.h"

namespace goodput::api {
namespace {

constexpr std::array<std::pair<v1::SchedulerKind, absl::string_view>, 4> kSchedulers = {{
    {v1::SCHEDULER_KIND_SLURM, "slurm"},
    {v1::SCHEDULER_KIND_OSMO, "osmo"},
    {v1::SCHEDULER_KIND_KUBERNETES, "kubernetes"},
    {v1::SCHEDULER_KIND_OTHER, "other"},
}};

constexpr std::array<std::pair<v1::JobState, absl::string_view>, 8> kJobStates = {{
    {v1::JOB_STATE_PENDING, "pending"},
    {v1::JOB_STATE_RUNNING, "running"},
    {v1::JOB_STATE_COMPLETED, "completed"},
    {v1::JOB_STATE_FAILED, "failed"},
    {v1::JOB_STATE_CANCELLED, "cancelled"},
    {v1::JOB_STATE_TIMED_OUT, "timed_out"},
    {v1::JOB_STATE_PREEMPTED, "preempted"},
    {v1::JOB_STATE_ENDED, "ended"},
}};

constexpr std::array<std::pair<core::Precision, v1::Precision>, 7> kPrecisions = {{
    {core::Precision::kFp64, v1::PRECISION_FP64},
    {core::Precision::kTf32, v1::PRECISION_TF32},
    {core::Precision::kFp16, v1::PRECISION_FP16},
    {core::Precision::kBf16, v1::PRECISION_BF16},
    {core::Precision::kFp8, v1::PRECISION_FP8},
    {core::Precision::kFp4, v1::PRECISION_FP4},
    {core::Precision::kInt8, v1::PRECISION_INT8},
}};

}  // namespace

std::string SchedulerKindName(v1::SchedulerKind kind) {
  for (const auto& [value, name] : kSchedulers) {
    if (value == kind) return std::string(name);
  }
  return "";
}

v1::SchedulerKind SchedulerKindFromName(absl::string_view name) {
  for (const auto& [value, text] : kSchedulers) {
    if (text == name) return value;
  }
  return v1::SCHEDULER_KIND_UNSPECIFIED;
}

std::string WorkloadKindName(v1::WorkloadKind kind) {
  switch (kind) {
    case v1::WORKLOAD_KIND_TRAINING:
      return "training";
    case v1::WORKLOAD_KIND_INFERENCE:
      return "inference";
    case v1::WORKLOAD_KIND_INTERACTIVE:
      return "interactive";
    case v1::WORKLOAD_KIND_OTHER:
      return "other";
    default:
      return "";
  }
}

v1::WorkloadKind WorkloadKindFromName(absl::string_view name) {
  const std::string word = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
  if (word == "training" || word == "train") return v1::WORKLOAD_KIND_TRAINING;
  if (word == "inference" || word == "serving" || word == "service") {
    return v1::WORKLOAD_KIND_INFERENCE;
  }
  if (word == "interactive" || word == "notebook") return v1::WORKLOAD_KIND_INTERACTIVE;
  if (word == "other" || word == "batch") return v1::WORKLOAD_KIND_OTHER;
  return v1::WORKLOAD_KIND_UNSPECIFIED;
}

std::string WorkloadKindSourceName(v1::WorkloadKindSource source) {
  switch (source) {
    case v1::WORKLOAD_KIND_SOURCE_REGISTERED:
      return "registered";
    case v1::WORKLOAD_KIND_SOURCE_LABEL:
      return "label";
    case v1::WORKLOAD_KIND_SOURCE_INFERRED:
      return "inferred";
    default:
      return "";
  }
}

v1::WorkloadKindSource WorkloadKindSourceFromName(absl::string_view name) {
  if (name == "registered") return v1::WORKLOAD_KIND_SOURCE_REGISTERED;
  if (name == "label") return v1::WORKLOAD_KIND_SOURCE_LABEL;
  if (name == "inferred") return v1::WORKLOAD_KIND_SOURCE_INFERRED;
  return v1::WORKLOAD_KIND_SOURCE_UNSPECIFIED;
}

std::string JobStateName(v1::JobState state) {
  for (const auto& [value, name] : kJobStates) {
    if (value == state) return std::string(name);
  }
  return "";
}

v1::JobState JobStateFromName(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  for (const auto& [value, text] : kJobStates) {
    if (text == lower) return value;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

v1::Precision PrecisionToProto(core::Precision precision) {
  for (const auto& [core_value, proto_value] : kPrecisions) {
    if (core_value == precision) return proto_value;
  }
  return v1::PRECISION_UNSPECIFIED;
}

std::optional<core::Precision> PrecisionFromProto(v1::Precision precision) {
  for (const auto& [core_value, proto_value] : kPrecisions) {
    if (proto_value == precision) return core_value;
  }
  return std::nullopt;
}

int64_t TimestampToUnixMs(const google::protobuf::Timestamp& t) {
  return google::protobuf::util::TimeUtil::TimestampToMilliseconds(t);
}

google::protobuf::Timestamp UnixMsToTimestamp(int64_t unix_ms) {
  return google::protobuf::util::TimeUtil::MillisecondsToTimestamp(unix_ms);
}

int64_t TimestampToUnixMicros(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1000000 + t.nanos() / 1000;
}

google::protobuf::Timestamp UnixMicrosToTimestamp(int64_t unix_us) {
  google::protobuf::Timestamp t;
  int64_t seconds = unix_us / 1000000;
  int64_t rest = unix_us % 1000000;
  if (rest < 0) {
    rest += 1000000;
    --seconds;
  }
  t.set_seconds(seconds);
  t.set_nanos(static_cast<int32_t>(rest * 1000));
  return t;
}

}  // namespace goodput::api
