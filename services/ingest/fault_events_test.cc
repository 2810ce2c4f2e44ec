#include "services/ingest/fault_events.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_replace.h"
#include "services/ingest/exposition.h"

namespace goodput::ingest {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMs = 1714564800000;

std::string ReadDcgmData(const std::string& name) {
  std::ifstream in(std::string(GOODPUT_SOURCE_DIR) + "/tests/data/dcgm/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

ExpositionResult Parse(const std::string& body, int64_t time_ms = kMs) {
  ExpositionOptions o;
  o.batch_id = "scrape-1";
  o.scrape_time_unix_ms = time_ms;
  o.validation = {.catalog = &core::GpuCatalog::BuiltIn(), .now_unix_ms = time_ms};
  return ParseDcgmExposition(body, o);
}

TEST(FaultExposition, ReadsTheXidGaugePerMigInstance) {
  ExpositionResult r = Parse(ReadDcgmData("a30_mig_xid_gauge.prom"));
  EXPECT_TRUE(r.refusals.empty());
  EXPECT_EQ(r.ignored_line_count, 0);
  ASSERT_EQ(r.samples.size(), 6u);
  const Sample& s = r.samples[0].sample;
  ASSERT_EQ(s.faults.size(), 1u);
  EXPECT_EQ(s.faults[0].signal, core::FaultSignal::kXid);
  EXPECT_EQ(s.faults[0].value, 0);
  ASSERT_TRUE(s.gpu.mig.has_value());
  EXPECT_EQ(s.gpu.mig->gpu_instance_id, 3);
}

TEST(FaultExposition, ReadsTheXidWindowCountWithItsCodeAndWindow) {
  ExpositionResult r = Parse(ReadDcgmData("t400_xid_errors_active.prom"));
  EXPECT_TRUE(r.refusals.empty());
  ASSERT_EQ(r.samples.size(), 1u);
  const Sample& s = r.samples[0].sample;
  ASSERT_EQ(s.faults.size(), 1u);
  EXPECT_EQ(s.faults[0].signal, core::FaultSignal::kXidCount);
  EXPECT_EQ(s.faults[0].xid, 42);
  EXPECT_EQ(s.faults[0].window_ms, 300000);
  EXPECT_EQ(s.faults[0].value, 1);
  // The value's labels are not kept as sample labels; the driver version is.
  EXPECT_FALSE(s.labels.contains("xid"));
  EXPECT_FALSE(s.labels.contains("window_size_in_ms"));
  EXPECT_EQ(s.labels.at("DCGM_FI_DRIVER_VERSION"), "545.29.02");
}

TEST(FaultExposition, ReadsEveryGb200FaultFieldIntoOneSamplePerGpu) {
  ExpositionResult r = Parse(ReadDcgmData("gb200_fault_fields.prom"));
  EXPECT_TRUE(r.refusals.empty());
  EXPECT_EQ(r.ignored_line_count, 0);
  ASSERT_EQ(r.samples.size(), 2u);
  EXPECT_EQ(r.samples[1].sample.faults.size(), 13u);
  EXPECT_EQ(r.samples[1].sample.gpu.uuid, "GPU-67ff7ed1-19b8-1998-84ef-59fc0cbb0f3e");
}

TEST(FaultExposition, XidGaugeErrorLabelsAreReadNotKept) {
  ExpositionResult r = Parse(
      "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"GPU-a\",err_code=\"31\",err_msg=\"GPU memory page "
      "fault\",Hostname=\"n1\"} 31\n");
  ASSERT_EQ(r.samples.size(), 1u);
  EXPECT_TRUE(r.samples[0].sample.labels.empty());
  EXPECT_EQ(r.samples[0].sample.faults[0].value, 31);
}

TEST(FaultExposition, BadFaultLinesAreRefusedAloneWithTheirReason) {
  ExpositionResult r = Parse(
      "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",Hostname=\"n1\"} 7.5\n"
      "DCGM_EXP_XID_ERRORS_COUNT{gpu=\"0\",Hostname=\"n1\"} 1\n"
      "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{gpu=\"0\",Hostname=\"n1\"} -1\n"
      "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{gpu=\"0\",Hostname=\"n1\"} 9223372036854775794\n"
      "DCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu=\"0\",Hostname=\"n1\"} 4\n"
      "DCGM_FI_DEV_PCIE_REPLAY_COUNTER{gpu=\"0\",Hostname=\"n1\"} 5\n");
  ASSERT_EQ(r.refusals.size(), 4u);
  EXPECT_THAT(r.refusals[0].message, HasSubstr("not an XID code"));
  EXPECT_THAT(r.refusals[1].message, HasSubstr("has no xid label"));
  EXPECT_THAT(r.refusals[2].message, HasSubstr("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL=-1"));
  EXPECT_THAT(r.refusals[3].message, HasSubstr("repeats line 5"));
  EXPECT_EQ(r.blank_value_count, 1);
  ASSERT_EQ(r.samples.size(), 1u);
  ASSERT_EQ(r.samples[0].sample.faults.size(), 1u);
  EXPECT_EQ(r.samples[0].sample.faults[0].value, 4);
}

std::vector<core::FaultSignal> Signals(const FaultDetection& d) {
  std::vector<core::FaultSignal> out;
  for (const FaultEvent& e : d.events) out.push_back(e.reading.signal);
  return out;
}

TEST(DetectFaultEvents, StuckGaugeOverManyBatchesIsOneEventWithItsJob) {
  absl::flat_hash_map<std::string, GpuFaultState> states;
  int events = 0;
  for (int i = 0; i < 100; ++i) {
    Sample s;
    s.gpu = {.host = "n1", .gpu_index = 3};
    s.time_unix_ms = kMs + i * 15'000;
    s.faults.push_back({.signal = core::FaultSignal::kXid, .value = 79});
    FaultDetection d = DetectFaultEvents({&s}, {std::optional<int64_t>(7)}, &states);
    events += static_cast<int>(d.events.size());
    if (!d.events.empty()) {
      EXPECT_EQ(d.events[0].job, 7);
    }
    // The state is written only when it changed: on the first batch.
    EXPECT_EQ(d.changed_gpus.size(), i == 0 ? 1u : 0u) << i;
    // Round trip through storage, as every batch reads it again.
    for (auto& [key, state] : states) {
      auto decoded = DecodeFaultState(EncodeFaultState(state));
      ASSERT_TRUE(decoded.ok());
      state = *decoded;
    }
  }
  EXPECT_EQ(events, 1);
}

TEST(DetectFaultEvents, ClockEventBitsRiseOnceAndOrdinaryBitsAreNoFault) {
  absl::flat_hash_map<std::string, GpuFaultState> states;
  auto run = [&](int64_t t, double mask) {
    Sample s;
    s.gpu = {.host = "n1", .gpu_index = 0};
    s.time_unix_ms = t;
    s.set(SampleField::kClockThrottleReasons, mask);
    return DetectFaultEvents({&s}, {std::nullopt}, &states);
  };
  EXPECT_TRUE(run(kMs, 0x1 | 0x4).events.empty());  // idle, SW power cap
  EXPECT_EQ(Signals(run(kMs + 1000, 0x4 | 0x40)),
            std::vector<core::FaultSignal>{core::FaultSignal::kHwThermalSlowdown});
  EXPECT_TRUE(run(kMs + 2000, 0x40).events.empty());
  EXPECT_EQ(Signals(run(kMs + 3000, 0x40 | 0x8)),
            std::vector<core::FaultSignal>{core::FaultSignal::kHwSlowdown});
}

TEST(DetectFaultEvents, SamplesOfOneBatchAreTakenInTimeOrderPerGpu) {
  absl::flat_hash_map<std::string, GpuFaultState> states;
  Sample late, early;
  late.gpu = early.gpu = {.host = "n1", .gpu_index = 0};
  early.time_unix_ms = kMs;
  late.time_unix_ms = kMs + 60'000;
  early.faults.push_back({.signal = core::FaultSignal::kNvlinkReplayErrors, .value = 5});
  late.faults.push_back({.signal = core::FaultSignal::kNvlinkReplayErrors, .value = 8});
  FaultDetection d = DetectFaultEvents({&late, &early}, {std::nullopt, std::nullopt}, &states);
  ASSERT_EQ(d.events.size(), 1u);
  EXPECT_EQ(d.events[0].edge.count, 3);
  EXPECT_EQ(d.events[0].sample, &late);
}

TEST(DetectFaultEvents, UnreadableStoredStateIsDataLoss) {
  EXPECT_EQ(DecodeFaultState("[1]").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeFaultState("{\"xid\": 5}").status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace goodput::ingest
