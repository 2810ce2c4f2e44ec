#include "services/core/bottleneck.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
          .nvlink_peak_bytes_per_s = 900e9,
          .pcie_peak_bytes_per_s = 128e9};
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
  in.nvlink_bytes_per_s = 600e9;
  BottleneckVerdict v = ClassifyBottleneck(in);
  EXPECT_EQ(v.cls, BottleneckClass::kCommunicationBound);
  EXPECT_THAT(v.reason, HasSubstr("NVLink at 67%"));
}

TEST(Bottleneck, WithoutTheOptionalSmFieldsFallsBackWithLowerConfidenceAndSaysSo) {
  // dcgm-exporter's default metric list: no SM active, no SM occupancy.
  BottleneckInputs launch = {.gr_engine_active = 0.92, .tensor_active = 0.01, .dram_active = 0.02};
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

}  // namespace
}  // namespace goodput::core
