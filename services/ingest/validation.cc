#include "services/ingest/validation.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace goodput::ingest {
namespace {

bool IsFraction(SampleField field) {
  switch (field) {
    case SampleField::kTensorActive:
    case SampleField::kSmActive:
    case SampleField::kSmOccupancy:
    case SampleField::kDramActive:
    case SampleField::kPipeFp16Active:
    case SampleField::kPipeFp32Active:
    case SampleField::kPipeFp64Active:
    case SampleField::kGrEngineActive:
    case SampleField::kGpuUtil:
      return true;
    default:
      return false;
  }
}

std::string FormatValue(double value) { return absl::StrFormat("%g", value); }

Refusal MakeRefusal(const ItemLocation& where, std::string field, std::string value,
                    RefusalCode code, absl::string_view reason) {
  Refusal r;
  r.batch_id = std::string(where.batch_id);
  r.index = where.index;
  r.line_number = where.line_number;
  r.value = TruncateForRefusal(value);
  r.message = absl::StrCat(DescribeLocation(where), ": ", field, value.empty() ? "" : "=",
                           r.value, " ", reason);
  r.field = std::move(field);
  r.code = code;
  return r;
}

}  // namespace

bool IsDcgmBlank(SampleField field, double raw) {
  // DCGM_FP64_BLANK is 2^47 and its siblings (not found, not supported, not permitted, ...)
  // count up from it by 1, up to 15.
  constexpr double kFp64Blank = 140737488355328.0;
  // DCGM_INT64_BLANK = 2^63 - 16 and its siblings up to 2^63 - 1: as text parsed into a
  // double they all round to 2^63 (doubles there are 1024 apart).
  constexpr double kInt64BlankLow = 9223372036854775808.0 - 2048.0;
  constexpr double kInt64BlankHigh = 9223372036854775808.0;
  constexpr double kInt32Blank = 2147483632.0;  // 0x7ffffff0 .. 0x7fffffff
  constexpr double kInt32Max = 2147483647.0;
  if (raw >= kFp64Blank && raw < kFp64Blank + 16) return true;
  if (raw >= kInt64BlankLow && raw <= kInt64BlankHigh) return true;
  // The fields stored as `real` are the clocks, temperatures, utilizations, memory sizes and
  // power: never near 2^31 in reality. The energy and byte counters (double) and the throttle
  // mask (bigint) can pass through those values, so the INT32 range is no sentinel there.
  return StoredAsReal(field) && raw >= kInt32Blank && raw <= kInt32Max;
}

int DropDcgmBlanks(Sample& sample) {
  int dropped = 0;
  for (int i = 0; i < kSampleFieldCount; ++i) {
    auto& value = sample.values[i];
    if (value.has_value() && IsDcgmBlank(static_cast<SampleField>(i), *value)) {
      value.reset();
      ++dropped;
    }
  }
  return dropped;
}

std::string DescribeLocation(const ItemLocation& where) {
  if (where.line_number > 0) {
    return absl::StrCat("line ", where.line_number, " of batch ", where.batch_id);
  }
  return absl::StrCat("sample ", where.index, " of batch ", where.batch_id);
}

std::optional<FieldProblem> CheckFieldValue(SampleField field, double value,
                                            const core::GpuSpec* spec,
                                            const ValidationOptions& options) {
  if (std::isnan(value)) return FieldProblem{RefusalCode::kNotFinite, "is NaN"};
  if (std::isinf(value)) return FieldProblem{RefusalCode::kNotFinite, "is not finite"};
  if (StoredAsReal(field) && std::fabs(value) > FLT_MAX) {
    return FieldProblem{RefusalCode::kOutOfRange,
                        "is beyond what a 4-byte real holds (magnitude at most 3.4e38)"};
  }
  if (IsFraction(field)) {
    if (value < 0 || value > 1) {
      return FieldProblem{RefusalCode::kOutOfRange, "is outside [0, 1]"};
    }
    return std::nullopt;
  }
  switch (field) {
    case SampleField::kSmClockMhz: {
      if (value < 0) return FieldProblem{RefusalCode::kOutOfRange, "is negative"};
      if (spec != nullptr) {
        const double limit = spec->sm_boost_clock_mhz * options.sm_clock_limit_factor;
        if (value > limit) {
          return FieldProblem{
              RefusalCode::kOutOfRange,
              absl::StrFormat("is above %g MHz, %g x the %s boost clock of %g MHz", limit,
                              options.sm_clock_limit_factor, spec->name, spec->sm_boost_clock_mhz)};
        }
      } else if (value > options.max_sm_clock_mhz) {
        return FieldProblem{RefusalCode::kOutOfRange,
                            absl::StrFormat("is above %g MHz", options.max_sm_clock_mhz)};
      }
      return std::nullopt;
    }
    case SampleField::kGpuTempC:
      if (value < -60 || value > 200) {
        return FieldProblem{RefusalCode::kOutOfRange, "is outside [-60, 200] degrees C"};
      }
      return std::nullopt;
    case SampleField::kClockThrottleReasons:
      if (value < 0 || value != std::floor(value) || value >= 18446744073709551616.0) {
        return FieldProblem{RefusalCode::kOutOfRange, "is not an unsigned 64-bit bit mask"};
      }
      return std::nullopt;
    default:
      // Memory, power, energy and byte rates: non-negative.
      if (value < 0) return FieldProblem{RefusalCode::kOutOfRange, "is negative"};
      return std::nullopt;
  }
}

std::optional<Refusal> ValidateSampleEnvelope(const Sample& sample, const ItemLocation& where,
                                              const ValidationOptions& options) {
  if (sample.gpu.host.empty()) {
    return MakeRefusal(where, "gpu.host", "", RefusalCode::kMissingField,
                       "is missing: a sample needs the GPU's host");
  }
  if (!sample.gpu.gpu_index.has_value() && sample.gpu.uuid.empty()) {
    return MakeRefusal(where, "gpu", "", RefusalCode::kMissingField,
                       "is missing: a sample needs gpu_index or uuid");
  }
  if (sample.gpu.gpu_index.has_value() && *sample.gpu.gpu_index < 0) {
    return MakeRefusal(where, "gpu.gpu_index", absl::StrCat(*sample.gpu.gpu_index),
                       RefusalCode::kOutOfRange, "is negative");
  }
  if (sample.time_unix_ms <= 0) {
    return MakeRefusal(where, "time_unix_ms", absl::StrCat(sample.time_unix_ms),
                       RefusalCode::kMissingField, "is missing or not positive");
  }
  if (sample.time_unix_ms > options.now_unix_ms + options.max_future_skew_ms) {
    return MakeRefusal(where, "time_unix_ms", absl::StrCat(sample.time_unix_ms),
                       RefusalCode::kFutureTimestamp,
                       absl::StrFormat("is %.1f s in the future (allowed clock skew %.1f s)",
                                       (sample.time_unix_ms - options.now_unix_ms) / 1000.0,
                                       options.max_future_skew_ms / 1000.0));
  }
  if (options.max_age_ms > 0 && sample.time_unix_ms < options.now_unix_ms - options.max_age_ms) {
    return MakeRefusal(where, "time_unix_ms", absl::StrCat(sample.time_unix_ms),
                       RefusalCode::kTooOld,
                       absl::StrFormat("is %.1f days old, beyond the retention period of %.1f days",
                                       (options.now_unix_ms - sample.time_unix_ms) / 86400000.0,
                                       options.max_age_ms / 86400000.0));
  }
  // A model the catalog does not know is stored: ofu reports its OFU as unavailable
  // (DATA_QUALITY_FLAG_UNKNOWN_GPU_MODEL) until the operator configures a peak for it.
  struct TextField {
    const char* name;
    absl::string_view value;
    size_t max_bytes;
  };
  const TextField texts[] = {
      {"gpu.host", sample.gpu.host, api::kMaxHostBytes},
      {"gpu.uuid", sample.gpu.uuid, api::kMaxUuidBytes},
      {"gpu_model", sample.gpu_model, api::kMaxGpuModelBytes},
      {"gpu.mig.profile", sample.gpu.mig ? absl::string_view(sample.gpu.mig->profile) : "",
       api::kMaxMigProfileBytes},
  };
  for (const TextField& t : texts) {
    if (auto reason = CheckText(t.value, t.max_bytes)) {
      return MakeRefusal(where, t.name, std::string(t.value), RefusalCode::kMalformed, *reason);
    }
  }
  // The host reaches alert labels, scheduler commands and the dashboard.
  if (auto reason = api::CheckHostChars(sample.gpu.host)) {
    return MakeRefusal(where, "gpu.host", sample.gpu.host, RefusalCode::kMalformed, *reason);
  }
  if (sample.labels.size() > options.max_labels) {
    return MakeRefusal(where, "labels", absl::StrCat(sample.labels.size(), " labels"),
                       RefusalCode::kOutOfRange,
                       absl::StrCat("are more than the ", options.max_labels,
                                    " a sample may carry (ingest.max_labels_per_series)"));
  }
  const size_t max_name = std::min(options.max_label_name_bytes, api::kMaxLabelNameBytes);
  const size_t max_value = std::min(options.max_label_value_bytes, api::kMaxLabelValueBytes);
  for (const auto& [name, value] : sample.labels) {
    if (auto reason = CheckText(name, max_name)) {
      return MakeRefusal(where, "labels", name, RefusalCode::kMalformed,
                         absl::StrCat("has a label name that ", *reason,
                                      name.size() > max_name
                                          ? " (ingest.limits.max_label_name_bytes)"
                                          : ""));
    }
    if (auto reason = CheckText(value, max_value, TextKind::kFreeText)) {
      return MakeRefusal(where, absl::StrCat("labels.", name), value, RefusalCode::kMalformed,
                         absl::StrCat(*reason, value.size() > max_value
                                                   ? " (ingest.limits.max_label_value_bytes)"
                                                   : ""));
    }
  }
  return std::nullopt;
}

std::optional<Refusal> ValidateSample(const Sample& sample, const ItemLocation& where,
                                      const ValidationOptions& options) {
  if (auto refusal = ValidateSampleEnvelope(sample, where, options)) return refusal;
  if (!sample.HasAnyValue()) {
    return MakeRefusal(where, "samples", "", RefusalCode::kMissingField,
                       "has no measurement: a sample needs at least one field");
  }
  const core::GpuSpec* spec = nullptr;
  if (!sample.gpu_model.empty() && options.catalog != nullptr) {
    if (auto found = options.catalog->Find(sample.gpu_model); found.ok()) spec = *found;
  }
  for (int i = 0; i < kSampleFieldCount; ++i) {
    const auto& value = sample.values[i];
    if (!value.has_value()) continue;
    const auto field = static_cast<SampleField>(i);
    if (auto problem = CheckFieldValue(field, *value, spec, options)) {
      return MakeRefusal(where, std::string(SampleFieldName(field)), FormatValue(*value),
                         problem->code, problem->reason);
    }
  }
  absl::flat_hash_set<std::string> fault_keys;
  for (size_t i = 0; i < sample.faults.size(); ++i) {
    const core::FaultReading& f = sample.faults[i];
    const std::string field = absl::StrCat("faults[", i, "]");
    const int signal = static_cast<int>(f.signal);
    if (signal < 0 || signal >= core::kFaultSignalCount) {
      return MakeRefusal(where, absl::StrCat(field, ".signal"), "", RefusalCode::kUnknownValue,
                         "is not a fault signal goodput knows");
    }
    const bool clock_bit =
        absl::c_any_of(core::FaultClockEventBits(),
                       [&](const core::ClockEventBit& b) { return b.signal == f.signal; });
    if (clock_bit) {
      return MakeRefusal(where, absl::StrCat(field, ".signal"),
                         std::string(core::FaultSignalName(f.signal)), RefusalCode::kUnknownValue,
                         "is derived from clock_throttle_reasons; send that field instead");
    }
    if (!std::isfinite(f.value) || f.value < 0) {
      return MakeRefusal(
          where, absl::StrCat(field, ".value"), FormatValue(f.value),
          std::isfinite(f.value) ? RefusalCode::kOutOfRange : RefusalCode::kNotFinite,
          absl::StrCat("is not a value of ", std::string(core::FaultSignalName(f.signal)),
                       " (a finite number, 0 or more)"));
    }
    if (f.signal == core::FaultSignal::kXidCount && f.xid <= 0) {
      return MakeRefusal(where, absl::StrCat(field, ".xid"), absl::StrCat(f.xid),
                         RefusalCode::kMissingField,
                         "is required for xid_count (the XID code counted)");
    }
    if (f.window_ms < 0) {
      return MakeRefusal(where, absl::StrCat(field, ".window_ms"), absl::StrCat(f.window_ms),
                         RefusalCode::kOutOfRange, "is negative");
    }
    if (!fault_keys.insert(core::FaultStateKey(f)).second) {
      return MakeRefusal(where, absl::StrCat(field, ".signal"), core::FaultStateKey(f),
                         RefusalCode::kDuplicate, "appears twice in the sample");
    }
  }
  return std::nullopt;
}

BatchValidation ValidateBatch(const std::vector<Sample>& samples, absl::string_view batch_id,
                              const ValidationOptions& options) {
  BatchValidation result;
  result.kept.reserve(samples.size());
  // (GPU, time) -> the first kept sample there. Several samples of one GPU at one time are
  // duplicates unless their workload labels differ (time-sliced GPUs: one series per pod).
  absl::flat_hash_map<std::pair<std::string, int64_t>, size_t> first;
  first.reserve(samples.size());
  absl::flat_hash_set<std::string> shared_seen;  // SeriesKey + time, only for shared GPUs
  for (size_t i = 0; i < samples.size(); ++i) {
    const ItemLocation where{batch_id, static_cast<int64_t>(i), 0};
    if (auto refusal = ValidateSample(samples[i], where, options)) {
      result.refusals.push_back(*std::move(refusal));
      continue;
    }
    auto [it, inserted] = first.try_emplace({GpuKey(samples[i].gpu), samples[i].time_unix_ms}, i);
    bool duplicate = false;
    if (!inserted) {
      const int64_t t = samples[i].time_unix_ms;
      shared_seen.insert(absl::StrCat(SeriesKey(samples[it->second]), "@", t));
      duplicate = !shared_seen.insert(absl::StrCat(SeriesKey(samples[i]), "@", t)).second;
    }
    if (duplicate) {
      result.refusals.push_back(MakeRefusal(
          where, "time_unix_ms", absl::StrCat(samples[i].time_unix_ms), RefusalCode::kDuplicate,
          absl::StrCat("repeats an earlier sample of GPU ", GpuKey(samples[i].gpu),
                       " at the same time in this batch")));
      continue;
    }
    result.kept.push_back(i);
  }
  return result;
}

}  // namespace goodput::ingest
