// What the window engine tells alerting about silent GPUs and about how the job's GPUs work:
// the GPUs of a job that sent nothing in a window while others did (with their last sample
// and whether their whole host is silent), and the GR-engine, SM and tensor activity figures.
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/ofu/window_engine.h"

namespace goodput::ofu {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kH100[] = "NVIDIA H100 80GB HBM3";
constexpr int64_t kT0 = 1'767'225'600'000;  // a minute boundary

JobInfo Job(int gpus) { return {.job = 7, .gpu_model = kH100, .gpus_allocated = gpus}; }

Sample S(const std::string& gpu, int64_t t_ms, double tensor, double sm, double gr) {
  Sample s;
  s.gpu = gpu;
  s.timestamp_ms = t_ms;
  s.tensor_active = tensor;
  s.sm_clock_mhz = 1830;
  s.sm_active = sm;
  s.gr_engine_active = gr;
  return s;
}

// Final job-level windows by start.
std::map<int64_t, WindowResult> FinalJobWindows(const std::vector<WindowResult>& all) {
  std::map<int64_t, WindowResult> out;
  for (const WindowResult& r : all) {
    if (r.gpu.empty() && r.finalized) out[r.start_ms] = r;
  }
  return out;
}

std::vector<std::string> SilentNames(const WindowResult& w) {
  std::vector<std::string> out;
  for (const SilentGpuResult& g : w.silent_gpus) out.push_back(g.gpu);
  return out;
}

TEST(WindowActivity, AGpuSilentWhileItsHostReportsIsNamedWithItsLastSample) {
  // Two hosts of two GPUs; n1/1 stops after 2 minutes.
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  const int64_t last_n1_1 = kT0 + 110'000;
  for (int i = 0; i < 60; ++i) {
    const int64_t t = kT0 + i * 10'000;
    for (const char* g : {"n1/0/GPU-a", "n1/1/GPU-b", "n2/0/GPU-c", "n2/1/GPU-d"}) {
      if (std::string(g) == "n1/1/GPU-b" && t > last_n1_1) continue;
      engine.Add(Job(4), S(g, t, 0.5, 0.8, 0.95), 0);
    }
    engine.Advance();
  }
  engine.FlushJob(7);
  const std::map<int64_t, WindowResult> w = FinalJobWindows(engine.TakeResults());
  ASSERT_EQ(w.size(), 10u);
  EXPECT_THAT(w.at(kT0 + 60'000).silent_gpus, IsEmpty());
  for (int64_t start = kT0 + 120'000; start < kT0 + 600'000; start += 60'000) {
    const WindowResult& r = w.at(start);
    ASSERT_THAT(SilentNames(r), ElementsAre("n1/1/GPU-b")) << (start - kT0);
    EXPECT_EQ(r.silent_gpus[0].last_sample_ms, last_n1_1);
    EXPECT_FALSE(r.silent_gpus[0].host_silent);
    EXPECT_EQ(r.gpus_reporting, 3);
    EXPECT_EQ(r.gpus_allocated, 4);
  }
}

TEST(WindowActivity, AWholeHostSilentIsMarkedSoAndAWholeJobSilenceNamesNoGpu) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 60; ++i) {
    const int64_t t = kT0 + i * 10'000;
    const bool outage = t >= kT0 + 420'000 && t < kT0 + 540'000;  // nobody reports
    for (const char* g : {"n1/0/GPU-a", "n1/1/GPU-b", "n2/0/GPU-c", "n2/1/GPU-d"}) {
      if (outage || (g[1] == '2' && t >= kT0 + 180'000)) continue;
      engine.Add(Job(4), S(g, t, 0.5, 0.8, 0.95), 0);
    }
    engine.Advance();
  }
  engine.FlushJob(7);
  const std::map<int64_t, WindowResult> w = FinalJobWindows(engine.TakeResults());
  const WindowResult& r = w.at(kT0 + 240'000);
  ASSERT_THAT(SilentNames(r), ElementsAre("n2/0/GPU-c", "n2/1/GPU-d"));
  EXPECT_TRUE(r.silent_gpus[0].host_silent);
  EXPECT_TRUE(r.silent_gpus[1].host_silent);
  EXPECT_EQ(r.silent_gpus[0].last_sample_ms, kT0 + 170'000);
  // Minutes 7 and 8: no GPU reported (gap windows): that is the job's silence, not a GPU's.
  EXPECT_THAT(w.at(kT0 + 420'000).silent_gpus, IsEmpty());
  EXPECT_THAT(w.at(kT0 + 480'000).silent_gpus, IsEmpty());
}

TEST(WindowActivity, CarriesGrEngineSmAndTensorActivityWithPerGpuMaxima) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 18; ++i) {
    const int64_t t = kT0 + i * 10'000;
    // A spinning collective: GR engine busy, SMs mostly empty, no tensor work; one GPU's SMs
    // a little busier.
    engine.Add(Job(2), S("n1/0/GPU-a", t, 0.0, 0.10, 0.98), 0);
    engine.Add(Job(2), S("n1/1/GPU-b", t, 0.0, 0.20, 0.96), 0);
    engine.Advance();
  }
  engine.FlushJob(7);
  const std::map<int64_t, WindowResult> w = FinalJobWindows(engine.TakeResults());
  const WindowResult& r = w.at(kT0);
  ASSERT_TRUE(r.gr_engine_active_mean && r.sm_active_mean && r.gpu_sm_active_max &&
              r.gpu_tensor_active_max && r.gpu_gr_engine_active_max);
  EXPECT_NEAR(*r.gr_engine_active_mean, 0.97, 1e-6);
  EXPECT_NEAR(*r.sm_active_mean, 0.15, 1e-6);
  EXPECT_NEAR(*r.gpu_sm_active_max, 0.20, 1e-6);
  EXPECT_NEAR(*r.gpu_gr_engine_active_max, 0.98, 1e-6);
  EXPECT_EQ(*r.gpu_tensor_active_max, 0.0);
  // Spinning GPUs are not idle GPUs.
  EXPECT_THAT(r.idle_gpus, IsEmpty());
}

TEST(WindowActivity, MissingFieldsLeaveTheirFiguresUnset) {
  WindowEngine engine(&core::GpuCatalog::BuiltIn(), {});
  for (int i = 0; i < 18; ++i) {
    Sample s = S("n1/0/GPU-a", kT0 + i * 10'000, 0.4, 0.7, 0.9);
    s.sm_active = kNoValue;
    s.gr_engine_active = kNoValue;
    engine.Add(Job(1), s, 0);
    engine.Advance();
  }
  engine.FlushJob(7);
  const WindowResult& r = FinalJobWindows(engine.TakeResults()).at(kT0);
  EXPECT_FALSE(r.gr_engine_active_mean.has_value());
  EXPECT_FALSE(r.sm_active_mean.has_value());
  EXPECT_FALSE(r.gpu_sm_active_max.has_value());
  EXPECT_FALSE(r.gpu_gr_engine_active_max.has_value());
  ASSERT_TRUE(r.gpu_tensor_active_max.has_value());
  EXPECT_NEAR(*r.gpu_tensor_active_max, 0.4, 1e-6);
}

}  // namespace
}  // namespace goodput::ofu
