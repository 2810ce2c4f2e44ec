#include "services/core/bottleneck.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace goodput::core {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;

// Counters as an H100 shows them (means over the job's GPUs for one window), all fields
// exported: the realistic shapes of each class.
BottleneckInputs Full(double gr, double sm, double occupancy, double tensor, double dram) {
  return {.gr_engine_active = gr,
          .sm_active = sm,
          .sm_occupancy = occupancy,
          .tensor_active = tensor,
          .dram_active = dram,
          .nvlink_bytes_per_s = 5e9,
          .pcie_bytes_per_s = 1e9,
          .nvlink_peak_bytes_per_s = 450e9,
          .pcie_peak_bytes_per_s = 63e9};
}

TEST(Bottleneck, IdleControlIsIdleWithFullConfidence) {
  BottleneckVerdict v = ClassifyBottleneck(Full(0.01, 0.0, 0.0, 0.0, 0.0));
  EXPECT_EQ(v.cls, BottleneckClass::kIdle);
  EXPECT_DOUBLE_EQ(v.confidence, 0.9);
  EXPECT_TRUE(v.missing.empty());
}

TEST(Bottleneck, MemoryBoundControlIsMemoryBound) {
  // Decode of a large model: DRAM streaming weights, tensor cores mostly waiting.
  BottleneckVerdict v = ClassifyBottleneck(Full(0.97, 0.85, 0.25, 0.12, 0.78));
  EXPECT_EQ(v.cls, BottleneckClass::kMemoryBound);
  EXPECT_THAT(v.reason, HasSubstr("DRAM active 78%"));
}

TEST(Bottleneck, ComputeBoundTraining) {
  EXPECT_EQ(ClassifyBottleneck(Full(0.99, 0.93, 0.4, 0.55, 0.35)).cls,
            BottleneckClass::kComputeBound);
}

TEST(Bottleneck, TinyKernelLaunchLoopIsLaunchBound) {
  // The engine is always busy, but each kernel uses a handful of SMs.
  BottleneckVerdict v = ClassifyBottleneck(Full(0.92, 0.09, 0.02, 0.01, 0.02));
  EXPECT_EQ(v.cls, BottleneckClass::kLaunchBound);
  EXPECT_FALSE(BottleneckAdvice(v.cls).empty());
  EXPECT_THAT(std::string(BottleneckAdvice(v.cls)), HasSubstr("CUDA graphs"));
}

TEST(Bottleneck, DataLoaderStarvedJobIsInputBound) {
  // Full kernels, a third of the time: the rest waiting for the next batch.
  BottleneckVerdict v = ClassifyBottleneck(Full(0.3, 0.27, 0.35, 0.18, 0.1));
  EXPECT_EQ(v.cls, BottleneckClass::kInputBound);
  EXPECT_THAT(std::string(BottleneckAdvice(v.cls)), HasSubstr("data-loader"));
}

TEST(Bottleneck, SaturatedNvlinkWithIdleTensorCoresIsCommunicationBound) {
  BottleneckInputs in = Full(0.95, 0.4, 0.2, 0.08, 0.3);
  in.nvlink_bytes_per_s = 300e9;
  BottleneckVerdict v = ClassifyBottleneck(in);
  EXPECT_EQ(v.cls, BottleneckClass::kCommunicationBound);
  EXPECT_THAT(v.reason, HasSubstr("NVLink at 67%"));
}

TEST(Bottleneck, WithoutTheOptionalSmFieldsFallsBackWithLowerConfidenceAndSaysSo) {
  // dcgm-exporter's default metric list: no SM active, no SM occupancy.
  BottleneckInputs launch = {.gr_engine_active = 0.92, .tensor_active = 0.01, .dram_active = 0.01};
  BottleneckVerdict v = ClassifyBottleneck(launch);
  EXPECT_EQ(v.cls, BottleneckClass::kLaunchBound);
  EXPECT_LT(v.confidence, 0.9);
  EXPECT_THAT(v.missing, Contains("sm_active"));
  EXPECT_THAT(v.missing, Contains("sm_occupancy"));

  BottleneckInputs gaps = {.gr_engine_active = 0.3, .tensor_active = 0.18, .dram_active = 0.1};
  EXPECT_EQ(ClassifyBottleneck(gaps).cls, BottleneckClass::kInputBound);
  EXPECT_LT(ClassifyBottleneck(gaps).confidence, 0.9);

  // The memory-bound and idle controls need no optional field.
  EXPECT_EQ(
      ClassifyBottleneck({.gr_engine_active = 0.97, .tensor_active = 0.12, .dram_active = 0.78})
          .cls,
      BottleneckClass::kMemoryBound);
  EXPECT_EQ(ClassifyBottleneck({.gr_engine_active = 0.0}).cls, BottleneckClass::kIdle);
  EXPECT_EQ(ClassifyBottleneck({}).cls, BottleneckClass::kUnknown);
}

TEST(Bottleneck, TheJobTakesTheClassOfMostWindowsAndIdleLosesTies) {
  std::vector<BottleneckVerdict> windows = {ClassifyBottleneck(Full(0.01, 0, 0, 0, 0)),
                                            ClassifyBottleneck(Full(0.01, 0, 0, 0, 0)),
                                            ClassifyBottleneck(Full(0.97, 0.85, 0.25, 0.12, 0.78)),
                                            ClassifyBottleneck(Full(0.97, 0.85, 0.25, 0.12, 0.78))};
  BottleneckVerdict job = ClassifyJobBottleneck(windows);
  EXPECT_EQ(job.cls, BottleneckClass::kMemoryBound);
  EXPECT_DOUBLE_EQ(job.confidence, 0.9 * 0.5);
  EXPECT_EQ(ClassifyJobBottleneck({}).cls, BottleneckClass::kUnknown);
}

// The H200 calibration (tests/data/calibration/h200_bottleneck_2026-11-28.json): six
// workloads of known bottleneck, their GPM counters over 1-s windows. Each lands in its class,
// window by window and for the case, with every field and with the optional SM fields left
// out (dcgm-exporter's default list), launch- and input-bound then at a lower confidence.
TEST(Bottleneck, TheH200CalibrationRunsLandInTheirClasses) {
  std::ifstream in(GOODPUT_SOURCE_DIR "/tests/data/calibration/h200_bottleneck_2026-11-28.json");
  ASSERT_TRUE(in.good());
  const nlohmann::json data = nlohmann::json::parse(in);
  ASSERT_EQ(data.at("cases").size(), 6u);
  constexpr double kPciePeakPerDirection = 63e9;  // Gen5 x16, as the run's link reported
  ASSERT_EQ(data.at("info").at("pcie_link").at("gen"), 5);
  for (const nlohmann::json& c : data.at("cases")) {
    const std::string expected = c.at("expected");
    for (bool with_sm : {true, false}) {
      std::vector<BottleneckVerdict> windows;
      for (const nlohmann::json& w : c.at("windows")) {
        BottleneckInputs x = {
            .gr_engine_active = w.at("gr_engine_active").get<double>(),
            .tensor_active = w.at("tensor_active").get<double>(),
            .dram_active = w.at("dram_active").get<double>(),
            .pcie_bytes_per_s = std::max(w.at("pcie_tx_bytes_per_s").get<double>(),
                                         w.at("pcie_rx_bytes_per_s").get<double>()),
            .pcie_peak_bytes_per_s = kPciePeakPerDirection};
        if (with_sm) {
          x.sm_active = w.at("sm_active").get<double>();
          x.sm_occupancy = w.at("sm_occupancy").get<double>();
        }
        windows.push_back(ClassifyBottleneck(x));
        EXPECT_EQ(BottleneckClassName(windows.back().cls), expected)
            << c.at("name") << (with_sm ? "" : " without SM fields") << ": "
            << windows.back().reason;
      }
      const BottleneckVerdict job = ClassifyJobBottleneck(windows);
      EXPECT_EQ(BottleneckClassName(job.cls), expected) << c.at("name");
      // Only launch- and input-bound need the SM fields.
      if (!with_sm && (expected == "launch_bound" || expected == "input_bound")) {
        EXPECT_LT(job.confidence, 0.9) << c.at("name");
      }
    }
  }
}

}  // namespace
}  // namespace goodput::core
