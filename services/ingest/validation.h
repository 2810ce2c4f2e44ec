// Sample validation: decides, field by field, whether a GPU sample is physically plausible
// and complete enough to store, and says precisely why not.
//
// Refused: a missing GPU identity (no host, or neither index nor UUID), a missing or
// non-positive timestamp, no measurement at all, NaN or infinity, utilizations outside
// [0, 1], negative clocks, power, memory, energy or byte rates, an SM clock beyond what the
// GPU model can reach, a GPU model the catalog does not know, timestamps further in the
// future than the allowed clock skew or older than the retention period, and the same GPU
// and timestamp twice in one batch. The caller's clock is injected (`now_unix_ms`).
//
//   ValidationOptions options{.catalog = &catalog, .now_unix_ms = now_ms};
//   BatchValidation v = ValidateBatch(samples, "b-3", options);
//   // v.kept: indexes of good samples; v.refusals: one per refused sample, e.g.
//   // "sample 17 of batch b-3: tensor_active=1.7 is outside [0, 1]"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "services/api/api_checks.h"
#include "services/core/gpu_catalog.h"
#include "services/ingest/sample.h"

namespace goodput::ingest {

struct ValidationOptions {
  // Models a sample's `gpu_model` must resolve in; null accepts any model.
  const core::GpuCatalog* catalog = nullptr;
  // The current time, from the caller's clock.
  int64_t now_unix_ms = 0;
  // How far ahead of `now_unix_ms` a timestamp may be (sender clock skew).
  int64_t max_future_skew_ms = 5 * 60 * 1000;
  // How far behind `now_unix_ms` a timestamp may be (the retention period); 0 = no limit.
  int64_t max_age_ms = 0;
  // An SM clock above the model's boost clock times this factor is impossible and refused.
  // (Slightly above boost is reported as a data-quality flag by ofu, not refused here.)
  double sm_clock_limit_factor = 1.5;
  // Without a known model, SM clocks above this are refused.
  double max_sm_clock_mhz = 5000;
  // Labels a sample may carry and their sizes (ingest.max_labels_per_series,
  // ingest.limits.max_label_name_bytes, ingest.limits.max_label_value_bytes); the byte limits
  // are at most api_checks.h's, what PostgreSQL and its indexes hold.
  size_t max_labels = 128;
  size_t max_label_name_bytes = api::kMaxLabelNameBytes;
  size_t max_label_value_bytes = api::kMaxLabelValueBytes;
};

// What is wrong with one value: a code and the end of a sentence ("is outside [0, 1]").
struct FieldProblem {
  RefusalCode code;
  std::string reason;
};

// Checks one measurement. `spec` (may be null) tightens the SM clock bound.
std::optional<FieldProblem> CheckFieldValue(SampleField field, double value,
                                            const core::GpuSpec* spec,
                                            const ValidationOptions& options);

// Where an item sits, for refusal messages: "sample 17 of batch b-3" or, with a line number,
// "line 12 of batch b-3".
struct ItemLocation {
  absl::string_view batch_id;
  int64_t index = 0;
  int64_t line_number = 0;
};
std::string DescribeLocation(const ItemLocation& where);

// Identity and label text is checked with api::CheckText against the limits of
// services/api/api_checks.h (what PostgreSQL text and its indexes can hold) and the host with
// api::CheckHostChars; values stored in `real` columns must be at most 3.4028235e38 in
// magnitude.
using api::CheckText;
using api::TextKind;

// DCGM's "no value" sentinels (dcgm_structs.h: DCGM_FP64_BLANK = 2^47 and the 15 values
// after it, DCGM_INT64_BLANK = 0x7ffffffffffffff0 to 0x7fffffffffffffff, DCGM_INT32_BLANK =
// 0x7ffffff0 to 0x7fffffff): dcgm-exporter prints them as numbers when a field could not be
// read, not found, not supported or not permitted. Other huge values are not blanks: they
// are refused by validation as out of range. `raw` is the value as DCGM reported it (before
// percent scaling). The INT32 range is checked only for fields DCGM reports as 32-bit-sized
// quantities (clocks, temperature, utilization, memory, power): the cumulative energy and
// byte counters can legitimately pass through those values.
bool IsDcgmBlank(SampleField field, double raw);

// Removes the fields of `sample` that hold a DCGM blank; returns how many it removed.
int DropDcgmBlanks(Sample& sample);

// Validates one sample; nullopt when it may be stored, else the first problem found.
std::optional<Refusal> ValidateSample(const Sample& sample, const ItemLocation& where,
                                      const ValidationOptions& options);

// Validates identity, model and timestamp only (the per-field checks are left to the
// caller, as the exposition parser applies them line by line).
std::optional<Refusal> ValidateSampleEnvelope(const Sample& sample, const ItemLocation& where,
                                              const ValidationOptions& options);

struct BatchValidation {
  std::vector<size_t> kept;       // indexes of the samples to store, in input order
  std::vector<Refusal> refusals;  // one per refused sample, in input order
};

// Validates every sample of a batch, also refusing a repeated (GPU, timestamp).
BatchValidation ValidateBatch(const std::vector<Sample>& samples, absl::string_view batch_id,
                              const ValidationOptions& options);

}  // namespace goodput::ingest
