// OFU window benchmark: one 6,144-GPU job, DCGM-like samples every 10 s (6 per GPU per 60 s
// window, 36,864 per window). Measures, per window:
//   - the full engine path: adding the window's samples and closing it (core math, SI/TI,
//     stragglers, idle GPUs, roofline, HBM, energy, per-GPU windows);
//   - the window computation alone (ComputeWindow on the packed samples);
//   - a baseline in the same run: a naive mean of TPA x clock / f_max over the same samples;
// and the engine's memory per active GPU with the default 120 s lateness (three windows
// open). Median and spread (p10..p90) over the measured windows after warm-up; no timing is
// asserted.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "services/core/gpu_catalog.h"
#include "services/ofu/window_engine.h"

namespace {

using Clock = std::chrono::steady_clock;
using goodput::ofu::EngineOptions;
using goodput::ofu::JobInfo;
using goodput::ofu::Sample;
using goodput::ofu::WindowEngine;

constexpr int kGpus = 6144;
constexpr int kSampleIntervalS = 10;
constexpr int kWarmupWindows = 3;
constexpr int kMeasuredWindows = 15;
constexpr int64_t kT0 = 1'767'225'600'000;
constexpr char kModel[] = "NVIDIA H100 80GB HBM3";

struct Spread {
  double p10, median, p90;
};

Spread SpreadOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[static_cast<size_t>(q * (v.size() - 1) + 0.5)]; };
  return {at(0.1), at(0.5), at(0.9)};
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

long MaxRssKib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

}  // namespace

int main() {
  const goodput::core::GpuCatalog& catalog = goodput::core::GpuCatalog::BuiltIn();
  const double f_max = (*catalog.Find(kModel))->tensor_max_clock_mhz;
  std::vector<std::string> gpu_names;
  for (int g = 0; g < kGpus; ++g) {
    gpu_names.push_back("node-" + std::to_string(g / 8) + "/" + std::to_string(g % 8) + "/");
  }
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> tensor(0.30, 0.50), clock(1200, 1560), dram(0.2, 0.4);
  std::vector<double> energy_mj(kGpus, 1e9);

  auto window_samples = [&](int w) {
    std::vector<Sample> out;
    out.reserve(static_cast<size_t>(kGpus) * 60 / kSampleIntervalS);
    for (int i = 0; i < 60 / kSampleIntervalS; ++i) {
      for (int g = 0; g < kGpus; ++g) {
        Sample s;
        s.gpu = gpu_names[g];
        s.timestamp_ms = kT0 + int64_t{w} * 60'000 + int64_t{i} * kSampleIntervalS * 1000 + g % 997;
        s.tensor_active = g % 512 == 0 ? 0.0 : tensor(rng);
        s.sm_clock_mhz = clock(rng);
        s.dram_active = dram(rng);
        s.gr_engine_active = g % 512 == 0 ? 0.0 : 0.95;
        s.fb_used_mib = 60'000;
        s.power_w = 650;
        energy_mj[g] += 650.0 * kSampleIntervalS * 1000;
        s.energy_mj = energy_mj[g];
        out.push_back(std::move(s));
      }
    }
    return out;
  };

  const JobInfo job{.job = 1, .gpu_model = kModel, .gpus_allocated = kGpus};
  WindowEngine engine(&catalog, EngineOptions{});
  std::vector<double> engine_ms, compute_ms, naive_ms;
  size_t memory_bytes = 0, active_gpus = 0;
  double last_engine_ofu = 0, last_naive_ofu = 0;
  const long rss_before_kib = MaxRssKib();
  for (int w = 0; w < kWarmupWindows + kMeasuredWindows; ++w) {
    const std::vector<Sample> samples = window_samples(w);

    // Baseline: a naive mean over the same samples.
    const auto n0 = Clock::now();
    double sum = 0;
    for (const Sample& s : samples) sum += s.tensor_active * s.sm_clock_mhz / f_max;
    const double naive = sum / static_cast<double>(samples.size());
    const auto n1 = Clock::now();

    // Engine: add the window's samples, then close the previous window (event time passed it).
    const auto e0 = Clock::now();
    for (const Sample& s : samples) engine.Add(job, s, 0);
    engine.Advance();
    std::vector<goodput::ofu::WindowResult> results = engine.TakeResults();
    const auto e1 = Clock::now();

    // Computation alone: the same math on one window's packed samples.
    goodput::ofu::WindowInput in;
    in.job = 1;
    in.gpu_model = kModel;
    in.spec = *catalog.Find(kModel);
    in.gpus_allocated = kGpus;
    in.start_ms = kT0 + int64_t{w} * 60'000;
    in.end_ms = in.start_ms + 60'000;
    in.gpu_names = gpu_names;
    for (size_t k = 0; k < samples.size(); ++k) {
      const Sample& s = samples[k];
      in.samples.push_back({.offset_ms = static_cast<int32_t>(s.timestamp_ms - in.start_ms),
                            .gpu = static_cast<uint32_t>(k % kGpus),
                            .tensor_active = static_cast<float>(s.tensor_active),
                            .sm_clock_mhz = static_cast<float>(s.sm_clock_mhz),
                            .dram_active = static_cast<float>(s.dram_active),
                            .gr_engine_active = static_cast<float>(s.gr_engine_active),
                            .fb_used_mib = static_cast<float>(s.fb_used_mib),
                            .power_w = static_cast<float>(s.power_w),
                            .sm_active = static_cast<float>(s.sm_active),
                            .energy_mj = s.energy_mj});
    }
    const auto c0 = Clock::now();
    std::vector<goodput::ofu::WindowResult> computed = goodput::ofu::ComputeWindow(in, {});
    const auto c1 = Clock::now();

    if (w >= kWarmupWindows) {
      naive_ms.push_back(Ms(n1 - n0));
      engine_ms.push_back(Ms(e1 - e0));
      compute_ms.push_back(Ms(c1 - c0));
      memory_bytes = std::max(memory_bytes, engine.MemoryBytes());
      active_gpus = engine.ActiveGpuCount();
      last_naive_ofu = naive;
      last_engine_ofu = computed.front().ofu.value_or(0);
    }
    if (results.empty() && w > 0) std::fprintf(stderr, "window %d closed nothing\n", w);
  }
  const long rss_after_kib = MaxRssKib();

  const Spread e = SpreadOf(engine_ms), c = SpreadOf(compute_ms), n = SpreadOf(naive_ms);
  std::printf(
      "OFU window benchmark: one job of %d GPUs, %d s sampling, %d samples per 60 s "
      "window, %d windows measured after %d warm-up (median [p10..p90])\n\n",
      kGpus, kSampleIntervalS, kGpus * 60 / kSampleIntervalS, kMeasuredWindows, kWarmupWindows);
  std::printf("%-52s %12s %22s\n", "measure", "median", "spread");
  std::printf("%-52s %9.2f ms %10.2f .. %6.2f ms\n",
              "engine: add window's samples + close + compute", e.median, e.p10, e.p90);
  std::printf("%-52s %9.2f ms %10.2f .. %6.2f ms\n", "window computation alone (ComputeWindow)",
              c.median, c.p10, c.p90);
  std::printf("%-52s %9.2f ms %10.2f .. %6.2f ms\n", "baseline: naive mean of TPA x clock / f_max",
              n.median, n.p10, n.p90);
  std::printf("%-52s %9.1f x\n", "ratio: computation / naive mean", c.median / n.median);
  std::printf("%-52s %12s\n", "target per window", "< 50 ms");
  std::printf("\n%-52s %9zu B\n", "engine memory per active GPU (3 windows open)",
              active_gpus ? memory_bytes / active_gpus : 0);
  std::printf("%-52s %12s\n", "target per active GPU", "< 2048 B");
  std::printf("%-52s %9ld KiB\n", "process peak RSS growth during the run",
              rss_after_kib - rss_before_kib);
  std::printf("\nlast window OFU: engine %.6f, naive mean %.6f (same samples)\n", last_engine_ofu,
              last_naive_ofu);
  return 0;
}
