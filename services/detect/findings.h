#pragma once
// Idle-GPU and straggler findings for one job, from per-GPU window values.
//
// An idle GPU is allocated to the job but its tensor and SM activity stay ~0 while the job
// runs (Perlmutter: 12% of 4-GPU jobs never used 3 of their GPUs). A straggler is a GPU whose
// OFU sits persistently below the job's median GPU (its straggler score, GPU OFU / job median
// OFU, stays low) — in synchronous training it slows every other GPU down to its pace.
// Windows in which the job as a whole is not computing (checkpoints, stalls) say nothing
// about single GPUs and are skipped. Per-window straggler scores come from the core library's
// characterization (ScoreStragglers); this class accumulates them in a streaming way, since
// core's whole-job functions take every sample of the job at once.
//
// Streaming: memory is a few counters per GPU, whatever the job's length.
//
//   GpuFindingsTracker tracker(gpu_count);
//   tracker.AddWindow(start_s, end_s, per_gpu_values);  // every window
//   for (const GpuFinding& f : tracker.Findings()) ...

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace goodput::detect {

// One GPU's values over a window; `reporting` false when it sent no sample in the window.
struct GpuWindowValue {
  double ofu = 0;        // mean per-sample OFU, fraction
  double sm_active = 0;  // mean SM activity, fraction
  bool reporting = true;
};

struct FindingsOptions {
  double idle_activity = 0.01;    // OFU and SM activity below this count as idle
  double idle_share = 0.95;       // idle in at least this share of the job's windows
  int64_t idle_min_windows = 10;  // and at least this many windows observed
  double straggler_ratio = 0.85;  // GPU OFU / job median OFU below this is a slow window
  double straggler_share = 0.7;   // slow in at least this share of computing windows
  int64_t straggler_min_windows = 10;
  double computing_ofu = 0.02;  // job median GPU OFU below this: window skipped
};

struct GpuFinding {
  enum class Kind { kIdle, kStraggler };
  Kind kind = Kind::kIdle;
  int gpu_index = 0;         // index into the job's allocation
  double score = 0;          // idle: share of idle windows; straggler: median ratio
  int64_t windows = 0;       // windows that support the finding
  int64_t first_seen_s = 0;  // start of the first idle/slow window
  std::string annotation;
};

struct StateCodec;

class GpuFindingsTracker {
  friend struct StateCodec;

 public:
  explicit GpuFindingsTracker(int gpu_count, FindingsOptions options = {});
  // Adds one window; `per_gpu` is indexed like the allocation and must have gpu_count entries
  // (extra entries are ignored, missing ones count as not reporting).
  void AddWindow(int64_t start_s, int64_t end_s, std::span<const GpuWindowValue> per_gpu);
  // Current findings, idle GPUs first, then stragglers by score (slowest first).
  std::vector<GpuFinding> Findings() const;
  // Adds GPUs (never observed so far) up to `gpu_count`; fewer is a no-op.
  void Grow(int gpu_count);
  int gpu_count() const { return static_cast<int>(gpus_.size()); }
  int64_t windows() const { return windows_; }

 private:
  struct PerGpu {
    int64_t observed = 0;  // windows the GPU reported in
    int64_t idle = 0;
    int64_t first_idle_s = -1;
    int64_t computing = 0;  // reported while the job computed
    int64_t slow = 0;
    int64_t first_slow_s = -1;
    double ratio_sum = 0;  // sum of GPU / median over computing windows
  };
  FindingsOptions options_;
  std::vector<PerGpu> gpus_;
  int64_t windows_ = 0;
  std::vector<double> scratch_;
  std::vector<std::pair<std::string, double>> gpu_ofu_;  // reused per window
};

}  // namespace goodput::detect
