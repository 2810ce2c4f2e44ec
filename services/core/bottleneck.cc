#include "services/core/bottleneck.h"

#include <algorithm>
#include <array>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace goodput::core {
namespace {

constexpr double kIdleGr = 0.05;
constexpr double kBusyGr = 0.5;
constexpr double kFewSmsOfGr = 0.4;
constexpr double kFullKernelsOfGr = 0.6;
constexpr double kMemoryDram = 0.5;
constexpr double kMemoryOverTensor = 1.5;
constexpr double kLinkShare = 0.4;
constexpr double kLinkMaxTensor = 0.3;
constexpr double kComputeTensor = 0.3;
constexpr double kComputeSm = 0.8;
constexpr double kComputeOccupancy = 0.3;
// Confidence: full fields, then lowered for each stand-in used.
constexpr double kFull = 0.9;
constexpr double kFallback = 0.55;

BottleneckVerdict Verdict(BottleneckClass cls, double confidence, std::string reason,
                          std::vector<std::string> missing) {
  return {cls, confidence, std::move(reason), std::move(missing)};
}

}  // namespace

absl::string_view BottleneckClassName(BottleneckClass cls) {
  switch (cls) {
    case BottleneckClass::kIdle:
      return "idle";
    case BottleneckClass::kLaunchBound:
      return "launch_bound";
    case BottleneckClass::kInputBound:
      return "input_bound";
    case BottleneckClass::kMemoryBound:
      return "memory_bound";
    case BottleneckClass::kCommunicationBound:
      return "communication_bound";
    case BottleneckClass::kComputeBound:
      return "compute_bound";
    case BottleneckClass::kUnknown:
      break;
  }
  return "unknown";
}

absl::string_view BottleneckAdvice(BottleneckClass cls) {
  switch (cls) {
    case BottleneckClass::kIdle:
      return "the GPUs ran nothing: release them, or check that the job reached its GPU work";
    case BottleneckClass::kLaunchBound:
      return "kernels too small to fill the GPU, launched one by one: CUDA graphs, "
             "torch.compile, a larger batch, or fewer host-side steps per kernel";
    case BottleneckClass::kInputBound:
      return "full kernels with gaps between them: more data-loader workers, pinned memory "
             "and prefetching, or faster storage";
    case BottleneckClass::kMemoryBound:
      return "memory bandwidth bounds the kernels: fused kernels, larger batches (more "
             "reuse per byte), lower-precision weights or KV cache";
    case BottleneckClass::kCommunicationBound:
      return "collectives or host copies hold the GPUs: overlap communication with compute, "
             "fewer GPUs per replica, or a topology-aware placement";
    case BottleneckClass::kComputeBound:
    case BottleneckClass::kUnknown:
      break;
  }
  return "";
}

BottleneckVerdict ClassifyBottleneck(const BottleneckInputs& in) {
  std::vector<std::string> missing;
  for (const auto& [name, value] :
       std::array<std::pair<const char*, const std::optional<double>*>, 5>{
           {{"gr_engine_active", &in.gr_engine_active},
            {"sm_active", &in.sm_active},
            {"sm_occupancy", &in.sm_occupancy},
            {"tensor_active", &in.tensor_active},
            {"dram_active", &in.dram_active}}}) {
    if (!value->has_value()) missing.push_back(name);
  }
  const double tensor = in.tensor_active.value_or(0);
  const double dram = in.dram_active.value_or(0);

  // Communication first: copy engines move data with the GR engine idle (host-to-device
  // copies read 0% GR engine active on the H200 calibration).
  auto link_share = [](const std::optional<double>& bytes, double peak) {
    return bytes && peak > 0 ? *bytes / peak : 0.0;
  };
  const double nvlink = link_share(in.nvlink_bytes_per_s, in.nvlink_peak_bytes_per_s);
  const double pcie = link_share(in.pcie_bytes_per_s, in.pcie_peak_bytes_per_s);
  if (std::max(nvlink, pcie) >= kLinkShare && tensor < kLinkMaxTensor) {
    return Verdict(BottleneckClass::kCommunicationBound, in.tensor_active ? kFull : kFallback,
                   absl::StrFormat("%s at %.0f%% of its peak, tensor active %.0f%%",
                                   nvlink >= pcie ? "NVLink" : "PCIe", 100 * std::max(nvlink, pcie),
                                   100 * tensor),
                   missing);
  }

  // Idle.
  if (in.gr_engine_active) {
    if (*in.gr_engine_active < kIdleGr) {
      return Verdict(BottleneckClass::kIdle, kFull,
                     absl::StrFormat("GR engine active %.0f%%", 100 * *in.gr_engine_active),
                     missing);
    }
  } else if (in.sm_active || in.tensor_active || in.dram_active) {
    if (in.sm_active.value_or(0) < kIdleGr && tensor < 0.02 && dram < 0.02) {
      return Verdict(BottleneckClass::kIdle, kFallback,
                     "no GR engine activity exported; SM, tensor and DRAM activity ~0", missing);
    }
  } else {
    return Verdict(BottleneckClass::kUnknown, 0, "no activity field exported", missing);
  }

  // Memory: DRAM busy, well beyond the tensor cores.
  if (in.dram_active && *in.dram_active >= kMemoryDram &&
      *in.dram_active >= kMemoryOverTensor * tensor) {
    return Verdict(
        BottleneckClass::kMemoryBound, in.tensor_active ? kFull : kFallback,
        absl::StrFormat("DRAM active %.0f%%, tensor active %.0f%%", 100 * dram, 100 * tensor),
        missing);
  }

  // Compute.
  if (in.tensor_active && tensor >= kComputeTensor) {
    return Verdict(BottleneckClass::kComputeBound, kFull,
                   absl::StrFormat("tensor active %.0f%%", 100 * tensor), missing);
  }
  if (in.sm_active && *in.sm_active >= kComputeSm &&
      in.sm_occupancy.value_or(kComputeOccupancy) >= kComputeOccupancy) {
    return Verdict(BottleneckClass::kComputeBound, in.sm_occupancy ? kFull : kFallback,
                   absl::StrFormat("SM active %.0f%% (CUDA cores)", 100 * *in.sm_active), missing);
  }

  // Launch- and input-bound need to know how busy the engine was.
  if (!in.gr_engine_active) {
    return Verdict(BottleneckClass::kUnknown, 0,
                   "without GR engine activity launch- and input-bound cannot be told apart",
                   missing);
  }
  const double gr = *in.gr_engine_active;
  if (in.sm_active) {
    // Kernels run, but on few SMs: small kernels launched one by one (the H200's tiny-kernel
    // loop: GR engine 21%, SM active 0%).
    if (*in.sm_active < kFewSmsOfGr * gr) {
      return Verdict(BottleneckClass::kLaunchBound, kFull,
                     absl::StrFormat("GR engine active %.0f%% but SM active %.0f%%: small "
                                     "kernels, few SMs each",
                                     100 * gr, 100 * *in.sm_active),
                     missing);
    }
    // Full kernels with gaps between them (the H200's CPU-heavy loader: GR engine 15%, SM
    // active 12%).
    if (gr < kBusyGr && *in.sm_active >= kFullKernelsOfGr * gr) {
      return Verdict(BottleneckClass::kInputBound, kFull,
                     absl::StrFormat("GR engine active %.0f%% with full kernels (SM active "
                                     "%.0f%%): the GPU waits between them",
                                     100 * gr, 100 * *in.sm_active),
                     missing);
    }
    return Verdict(BottleneckClass::kUnknown, 0,
                   absl::StrFormat("GR engine active %.0f%%, SM active %.0f%%: no resource "
                                   "saturated",
                                   100 * gr, 100 * *in.sm_active),
                   missing);
  }
  // Without SM activity: a busy engine doing no tensor or DRAM work is launching small
  // kernels; an engine with gaps that does real work between them waits for its input.
  if (tensor < 0.02 && dram < 0.02) {
    return Verdict(BottleneckClass::kLaunchBound, kFallback,
                   absl::StrFormat("GR engine active %.0f%% with tensor and DRAM activity ~0: "
                                   "small kernels (SM activity not exported)",
                                   100 * gr),
                   missing);
  }
  if (gr < kBusyGr) {
    return Verdict(BottleneckClass::kInputBound, kFallback,
                   absl::StrFormat("GR engine active %.0f%% with tensor %.0f%% between gaps "
                                   "(SM activity not exported)",
                                   100 * gr, 100 * tensor),
                   missing);
  }
  return Verdict(BottleneckClass::kUnknown, 0,
                 absl::StrFormat("GR engine active %.0f%%, no resource saturated", 100 * gr),
                 missing);
}

BottleneckVerdict ClassifyJobBottleneck(const std::vector<BottleneckVerdict>& windows) {
  std::map<BottleneckClass, std::pair<int, double>> count;  // class -> windows, confidence sum
  int classified = 0;
  for (const BottleneckVerdict& w : windows) {
    if (w.cls == BottleneckClass::kUnknown) continue;
    ++classified;
    count[w.cls].first += 1;
    count[w.cls].second += w.confidence;
  }
  if (classified == 0) return Verdict(BottleneckClass::kUnknown, 0, "no window classified", {});
  BottleneckClass best = BottleneckClass::kUnknown;
  int best_n = -1;
  for (const auto& [cls, c] : count) {
    // Idle loses ties: a job that computes half the time is what it is when it computes.
    if (c.first > best_n || (c.first == best_n && best == BottleneckClass::kIdle)) {
      best = cls;
      best_n = c.first;
    }
  }
  const double share = static_cast<double>(best_n) / classified;
  BottleneckVerdict v;
  v.cls = best;
  v.confidence = count[best].second / best_n * share;
  v.reason = absl::StrFormat("%d of %d windows %s", best_n, classified, BottleneckClassName(best));
  for (const BottleneckVerdict& w : windows) {
    for (const std::string& m : w.missing) {
      if (std::find(v.missing.begin(), v.missing.end(), m) == v.missing.end()) {
        v.missing.push_back(m);
      }
    }
  }
  return v;
}

}  // namespace goodput::core
