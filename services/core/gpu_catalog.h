// GPU catalog: the per-model constants every OFU and MFU figure depends on.
//
// For each GPU model the catalog holds the SM count, the dense tensor-core FLOPs per cycle
// per SM for each precision the model has, the tensor-core maximum clock and the SM boost
// clock (two separate fields: they differ on Hopper), device memory capacity and bandwidth,
// the board power limit where a datasheet gives one, and a note citing where the numbers come
// from. Models are looked up by the `modelName` label dcgm-exporter emits ("NVIDIA H100 80GB
// HBM3", "NVIDIA A100-SXM4-80GB", ...), after normalization (case, spaces, dashes,
// underscores and the "NVIDIA" prefix are ignored).
// An unknown model is NOT_FOUND naming the model; there is no default model.
//
//   const GpuCatalog& catalog = GpuCatalog::BuiltIn();
//   absl::StatusOr<const GpuSpec*> h100 = catalog.Find("NVIDIA H100 80GB HBM3");
//   double fp16_peak_tflops = *(*h100)->PeakTflops(Precision::kBf16);  // 989.42976
//
// Operators add or override models with `GpuCatalog::ApplyOverrides`, which takes plain
// structs (the service parses its config file; this library does no I/O).
//
// All peaks are dense: sparse "2:4" marketing peaks are 2x and never a denominator.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace goodput::core {

// Numeric formats a tensor core (or, for kFp64, the FP64 tensor path) executes.
enum class Precision { kFp64, kTf32, kFp16, kBf16, kFp8, kFp4, kInt8 };
inline constexpr int kPrecisionCount = 7;
inline constexpr std::array<Precision, kPrecisionCount> kAllPrecisions = {
    Precision::kFp64, Precision::kTf32, Precision::kFp16, Precision::kBf16,
    Precision::kFp8,  Precision::kFp4,  Precision::kInt8};

// Lower-case canonical name: "fp64", "tf32", "fp16", "bf16", "fp8", "fp4", "int8".
absl::string_view PrecisionName(Precision precision);

// Parses a precision name, case-insensitively. Accepts the canonical names and the common
// spellings "float16", "half", "bfloat16", "e4m3", "e5m2", "nvfp4", "mxfp4", "float64".
// Unknown names are INVALID_ARGUMENT naming the value.
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);

// One GPU model. Clock fields are MHz, capacity GiB, bandwidth GB/s (1e9 bytes/s).
struct GpuSpec {
  // Catalog key, e.g. "H100 SXM". Unique within a catalog (after normalization).
  std::string name;
  // Strings that resolve to this model, typically dcgm-exporter `modelName` values
  // ("NVIDIA H100 80GB HBM3"). `name` always resolves too.
  std::vector<std::string> model_names;
  int sm_count = 0;
  // Dense FLOPs (or integer ops for kInt8) per clock cycle per SM, indexed by Precision.
  // nullopt where the model has no tensor path for that precision.
  std::array<std::optional<double>, kPrecisionCount> dense_flops_per_cycle_per_sm{};
  // Highest clock the tensor cores run at for tensor formats (TF32/FP16/BF16/FP8/FP4/INT8).
  // This is f_max of OFU (domain eq. 1). NOT DCGM_FI_DEV_MAX_SM_CLOCK: on H100 SXM that field
  // reports the 1980 MHz SM boost clock, while tensor formats top out at 1830 MHz; dividing
  // by 1980 biases OFU ~8% low.
  double tensor_max_clock_mhz = 0;
  // SM boost clock: what DCGM_FI_DEV_MAX_SM_CLOCK reports, the clock FP32/FP64 run at, and
  // the ceiling an SM-clock sample can plausibly reach (higher is a data-quality flag).
  double sm_boost_clock_mhz = 0;
  // Device memory (HBM; GDDR on the A10/A40, L-series, RTX and T4 parts) capacity in GiB and
  // peak bandwidth in GB/s.
  double hbm_capacity_gib = 0;
  double hbm_bandwidth_gb_per_s = 0;
  // Board power limit in W: the datasheet's maximum TDP/TGP (the top of a configurable range).
  // What a GPU at work draws near: the profiling-counter-stuck check compares power with it.
  // Unset where no datasheet gives a figure for the GPU alone (the check is then skipped).
  std::optional<double> board_power_w;
  // Where the numbers come from (datasheet, whitepaper, derivation).
  std::string source_note;

  // Dense FLOPs per cycle per SM for `precision`, or nullopt if the model lacks it.
  std::optional<double> FlopsPerCyclePerSm(Precision precision) const;
  bool Supports(Precision precision) const { return FlopsPerCyclePerSm(precision).has_value(); }
  // The clock `precision` peaks at: the SM boost clock for kFp64 (FP64 runs at the SM clock),
  // the tensor-core max clock for every tensor format.
  double PeakClockMhz(Precision precision) const;
  // Dense peak in TFLOP/s (domain eq. 5): SMs x FLOPs/cycle/SM x clock / 1e12, unrounded.
  // NOT_FOUND naming model and precision if the model has no such precision.
  absl::StatusOr<double> PeakTflops(Precision precision) const;
};

// Rounds a TFLOP/s figure to 0.1 the way datasheets and the domain tables print peaks
// (H100 SXM: 989.42976 -> 989.4; GB200: 2500.0018 -> 2500.0).
double RoundTflopsForDisplay(double tflops);

// Canonical lookup key for a model string: lower case, "nvidia" prefix dropped, spaces,
// dashes, underscores and dots removed ("NVIDIA A100-SXM4-80GB" -> "a100sxm480gb").
std::string NormalizeModelName(absl::string_view model_name);

// Operator-supplied addition or change. Unset fields keep the value of the entry being
// changed (or of `base_model` for a new entry). Parsed by the caller from its config file.
struct GpuSpecOverride {
  // Existing catalog name or alias to change, or the name of a new model.
  std::string name;
  // Existing model to copy a new entry from (e.g. a new SKU of a known die). Optional.
  std::optional<std::string> base_model;
  // Extra model strings resolving to this entry (added to the existing ones).
  std::vector<std::string> model_names;
  std::optional<int> sm_count;
  // Per-precision dense FLOPs/cycle/SM to set; a value <= 0 removes the precision.
  std::vector<std::pair<Precision, double>> dense_flops_per_cycle_per_sm;
  std::optional<double> tensor_max_clock_mhz;
  std::optional<double> sm_boost_clock_mhz;
  std::optional<double> hbm_capacity_gib;
  std::optional<double> hbm_bandwidth_gb_per_s;
  std::optional<double> board_power_w;
  std::optional<std::string> source_note;
};

// A set of GPU models with lookup by normalized model string. Copyable value type; not
// synchronized (build it at start-up, then share it const).
class GpuCatalog {
 public:
  GpuCatalog() = default;

  // The models this library ships with (see gpu_catalog.cc for sources).
  static const GpuCatalog& BuiltIn();

  // Looks `model_name` up after NormalizeModelName. NOT_FOUND naming the model if absent.
  // The pointer stays valid until the catalog is next modified.
  absl::StatusOr<const GpuSpec*> Find(absl::string_view model_name) const;

  // Adds `spec`, or replaces the entry with the same normalized name. INVALID_ARGUMENT if
  // the spec is incomplete (no name, sm_count <= 0, clocks <= 0, no precision), a board power
  // is set but not > 0, or one of its model names already resolves to a different entry.
  absl::Status Upsert(GpuSpec spec);

  // Applies operator overrides in order; all-or-nothing: on error the catalog is unchanged
  // and the message names the override and the offending field.
  absl::Status ApplyOverrides(const std::vector<GpuSpecOverride>& overrides);

  // All entries, in insertion order.
  const std::vector<GpuSpec>& specs() const { return specs_; }

 private:
  absl::Status Validate(const GpuSpec& spec, int replacing_index) const;
  void Reindex();

  std::vector<GpuSpec> specs_;
  absl::flat_hash_map<std::string, int> index_;  // normalized name/alias -> specs_ index
};

}  // namespace goodput::core
