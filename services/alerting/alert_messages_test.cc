#include "services/alerting/alert_messages.h"

#include "gtest/gtest.h"

namespace goodput::alerting {
namespace {

constexpr int64_t kNow = 1'795'000'000;  // a Monday afternoon in 2026, UTC

int64_t Today(int h, int m) { return kNow - kNow % 86400 + h * 3600 + m * 60; }

TEST(Messages, RegressionInJobSaysFactorTimeAndLevels) {
  Finding f;
  f.kind = Kind::kRegressionInJob;
  f.onset_s = Today(14, 2);
  f.before_ofu = 0.58;
  f.after_ofu = 0.232;
  f.factor = 2.5;
  f.confidence = 0.93;
  Message m = Describe(f, {.cluster = "eos", .job_id = "4711", .now_s = kNow});
  EXPECT_EQ(m.summary, "OFU fell 2.5× at 14:02 UTC (58% → 23%)");
  EXPECT_NE(m.description.find("high confidence (93%)"), std::string::npos) << m.description;
  EXPECT_NE(m.description.find("debug flags"), std::string::npos);
  EXPECT_NE(m.description.find("job 4711 on eos"), std::string::npos);
}

TEST(Messages, WorkloadRegressionSaysWhenTheWorkloadRanBetter) {
  Finding f;
  f.kind = Kind::kRegressionVsWorkload;
  f.onset_s = Today(9, 30);
  f.after_ofu = 0.22;
  f.baseline_ofu = 0.55;
  f.factor = 2.5;
  f.baseline_jobs = 3;
  f.baseline_job_ids = {"4690", "4650", "4600"};
  f.baseline_last_end_s = kNow - 8 * 86400;
  f.confidence = 0.85;
  Message m = Describe(f, {.cluster = "eos", .job_id = "4711", .now_s = kNow});
  EXPECT_EQ(m.summary, "OFU 2.5× below its workload: 22% vs 55% in earlier runs");
  EXPECT_NE(
      m.description.find("the same workload ran at 55% last week (3 earlier jobs, latest 4690)"),
      std::string::npos)
      << m.description;
  EXPECT_NE(m.description.find("debug settings"), std::string::npos);
}

TEST(Messages, EveryKindHasASummaryAndAdvice) {
  for (Kind k : kAllKinds) {
    Finding f;
    f.kind = k;
    f.onset_s = Today(1, 0);
    f.gpus = {"n1/3/"};
    f.flags = 1u << 1;
    Message m = Describe(f, {.cluster = "c", .job_id = "j", .now_s = kNow});
    EXPECT_FALSE(m.summary.empty()) << KindName(k);
    EXPECT_NE(m.description.find("ook"), std::string::npos) << KindName(k) << ": " << m.description;
  }
}

TEST(Messages, DataQualityNamesPausedAndStuckProfilingInPlainWords) {
  Finding f;
  f.kind = Kind::kDataQuality;
  f.flags = 1u << 11;
  f.flagged_windows = 10;
  f.recent_windows = 10;
  f.profiling_unavailable_gpus = 2;
  Message m = Describe(f, {.cluster = "eos", .job_id = "4711", .now_s = kNow});
  EXPECT_EQ(m.summary, "Telemetry unreliable: DCGM profiling paused or unavailable");
  EXPECT_NE(m.description.find("DCGM profiling paused or unavailable on 2 GPUs — e.g. Nsight "
                               "holds the counters"),
            std::string::npos)
      << m.description;
  EXPECT_NE(m.description.find("Neither a regression nor idle GPUs"), std::string::npos);
  EXPECT_EQ(m.description.find("sampling interval"), std::string::npos) << m.description;

  f.flags = (1u << 12) | (1u << 6);
  f.stuck_power_w_per_gpu = 651.4;
  m = Describe(f, {.cluster = "eos", .job_id = "4711", .now_s = kNow});
  EXPECT_EQ(m.summary, "Telemetry unreliable: GPUs not reporting, profiling counters stuck at 0");
  EXPECT_NE(m.description.find("Profiling counters stuck at 0 while GPUs draw 651 W at boost "
                               "clock"),
            std::string::npos)
      << m.description;
  EXPECT_NE(m.description.find("restart"), std::string::npos) << m.description;
}

TEST(Messages, TimesAndAgesReadNaturally) {
  EXPECT_EQ(Percent(0.58), "58%");
  EXPECT_EQ(Percent(0.004), "0.4%");
  EXPECT_EQ(ClockTime(Today(14, 2), kNow), "14:02 UTC");
  EXPECT_EQ(Ago(kNow - 7200, kNow), "2 hours ago");
  EXPECT_EQ(Ago(kNow - 30 * 3600, kNow), "yesterday");
  EXPECT_EQ(Ago(kNow - 3 * 86400, kNow), "3 days ago");
  EXPECT_EQ(Ago(kNow - 21 * 86400, kNow), "3 weeks ago");
}

}  // namespace
}  // namespace goodput::alerting
