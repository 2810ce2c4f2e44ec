#include "services/alerting/gpu_fault_findings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace goodput::alerting {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kT0 = 1'790'000'000;  // unix s

FaultObs Xid(int64_t code, int64_t t_s, int index = 3, const std::string& host = "node-7") {
  return {.id = t_s,
          .host = host,
          .gpu_index = index,
          .gpu_uuid = absl::StrCat("GPU-aaaa-", index),
          .time_ms = t_s * 1000,
          .signal = "xid",
          .xid = code,
          .value = static_cast<double>(code)};
}
FaultObs Counter(const std::string& signal, int64_t t_s, int index = 3, double count = 2) {
  return {.id = t_s + 1,
          .host = "node-7",
          .gpu_index = index,
          .gpu_uuid = absl::StrCat("GPU-aaaa-", index),
          .time_ms = t_s * 1000,
          .signal = signal,
          .value = count,
          .count = count};
}

TEST(GpuFaultFindings, HardwareXidIsCriticalWithTheCatalogsWords) {
  std::vector<Finding> f = GpuFaultFindings({Xid(79, kT0)});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].kind, Kind::kGpuFault);
  EXPECT_EQ(f[0].detail, "node-7/3/GPU-aaaa-3");
  EXPECT_EQ(f[0].onset_s, kT0);
  EXPECT_EQ(f[0].extra_labels.at("xid"), "79");
  EXPECT_EQ(f[0].extra_labels.at("host"), "node-7");
  EXPECT_EQ(f[0].extra_labels.at("gpu_index"), "3");
  EXPECT_EQ(f[0].extra_labels.at("fault_blame"), "hardware");
  EXPECT_EQ(f[0].extra_labels.at("catalog_severity"), "critical");
  Message m = Describe(f[0], {.cluster = "eos", .job_id = "4711", .now_s = kT0 + 60});
  EXPECT_THAT(m.summary, HasSubstr("XID 79 (GPU has fallen off the bus; hardware fault)"));
  EXPECT_THAT(m.summary, HasSubstr("node-7/3"));
  EXPECT_THAT(m.description, HasSubstr("hardware fault"));
  EXPECT_THAT(m.description, HasSubstr("drain the node"));
  EXPECT_THAT(m.description, HasSubstr("Source: NVIDIA XID Errors document"));
  // Through the default severity rules.
  Labels labels = {{"kind", "gpu_fault"}};
  for (const auto& [k, v] : f[0].extra_labels) labels[k] = v;
  EXPECT_EQ(DecideSeverity({}, labels, std::nullopt), Severity::kCritical);
}

TEST(GpuFaultFindings, ApplicationXidIsAWarningAndSaysWhoseFault) {
  std::vector<Finding> f = GpuFaultFindings({Xid(13, kT0)});
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].extra_labels.at("fault_blame"), "application");
  Labels labels = {{"kind", "gpu_fault"}};
  for (const auto& [k, v] : f[0].extra_labels) labels[k] = v;
  EXPECT_EQ(DecideSeverity({}, labels, std::nullopt), Severity::kWarning);
  Message m = Describe(f[0], {.cluster = "eos", .job_id = "4711", .now_s = kT0});
  EXPECT_THAT(m.description, HasSubstr("application's fault"));
  // An operator's rule can lower it.
  EXPECT_EQ(DecideSeverity({{.match = {{"kind", "gpu_fault"}, {"fault_blame", "application"}},
                             .severity = Severity::kInfo}},
                           labels, std::nullopt),
            Severity::kInfo);
}

TEST(GpuFaultFindings, OneFindingPerGpuWorstFirstAndQuietSignalsAlertNothing) {
  std::vector<Finding> f = GpuFaultFindings({
      Xid(13, kT0),                                         // GPU 3: application
      Xid(45, kT0 + 5),                                     // informational: no alert
      Counter("ecc_dbe_volatile", kT0 + 60),                // GPU 3: hardware, worse
      Counter("nvlink_replay_errors", kT0, 5),              // GPU 5: no alert by itself
      Counter("ecc_sbe_volatile", kT0, 6),                  // GPU 6: no alert
      Counter("remapped_rows_uncorrectable", kT0 + 90, 1),  // GPU 1
  });
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].detail, "node-7/1/GPU-aaaa-1");
  EXPECT_EQ(f[1].detail, "node-7/3/GPU-aaaa-3");
  ASSERT_EQ(f[1].faults.size(), 2u);
  EXPECT_EQ(f[1].faults[0].signal, "ecc_dbe_volatile");
  EXPECT_EQ(f[1].onset_s, kT0);  // the first alerting fault
  EXPECT_EQ(f[1].extra_labels.at("catalog_severity"), "critical");
  EXPECT_TRUE(GpuFaultFindings({Counter("pcie_replays", kT0)}).empty());
}

TEST(GpuFaultFindings, ClearedPendingRemapEnds) {
  FaultObs pending = Counter("row_remap_pending", kT0);
  pending.cleared_ms = (kT0 + 600) * 1000;
  std::vector<Finding> f = GpuFaultFindings({pending});
  ASSERT_EQ(f.size(), 1u);
  ASSERT_TRUE(f[0].condition_end_s.has_value());
  EXPECT_EQ(*f[0].condition_end_s, kT0 + 600);
}

TEST(CoincidingFaults, StragglerTakesOnlyItsOwnGpuWithinTheWindow) {
  Finding straggler;
  straggler.kind = Kind::kStraggler;
  straggler.detail = "node-7/3/GPU-aaaa-3";
  straggler.onset_s = kT0;
  straggler.detected_s = kT0 + 900;
  const std::vector<FaultObs> faults = {
      Counter("nvlink_crc_flit_errors", kT0 - 300, 3),  // on it, before the onset
      Xid(79, kT0 - 200, 4),                            // another GPU
      Counter("ecc_dbe_volatile", kT0 - 4000, 3),       // too early
      Counter("hw_slowdown", kT0 + 100, 3),             // on it, after the onset
  };
  std::vector<FaultObs> c = CoincidingFaults(straggler, faults, 1800);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].signal, "nvlink_crc_flit_errors");  // NVLink before a clock slowdown
  EXPECT_EQ(c[1].signal, "hw_slowdown");
  EXPECT_THAT(LikelyCause(c[0], kT0, kT0), HasSubstr("before the onset"));
  EXPECT_THAT(LikelyCause(c[0], kT0, kT0), HasSubstr("on GPU node-7/3"));

  Finding regression;
  regression.kind = Kind::kRegressionInJob;
  regression.onset_s = kT0;
  regression.detected_s = kT0 + 900;
  std::vector<FaultObs> r = CoincidingFaults(regression, faults, 1800);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].xid, 79) << "an alerting fault on any of the job's GPUs comes first";
  Finding divergence;
  divergence.kind = Kind::kDivergence;
  EXPECT_TRUE(CoincidingFaults(divergence, faults, 1800).empty());
}

TEST(CoincidingFaults, FailedJobTakesTheFaultsBeforeItsEnd) {
  const std::vector<FaultObs> faults = {Xid(13, kT0 - 7200), Xid(79, kT0 - 600)};
  std::vector<FaultObs> c = FaultsBeforeEnd(faults, kT0, 1800);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].xid, 79);
  EXPECT_THAT(LikelyCause(c[0], kT0, kT0, "the job ended"),
              HasSubstr("10 minutes before the job ended"));
}

}  // namespace
}  // namespace goodput::alerting
