#include "services/core/ledger.h"

#include <gtest/gtest.h>

namespace goodput::core {
namespace {

using Kind = LedgerCause::Kind;

// 8 GPUs, 60 s windows; GPU 7 idle all along; every other GPU at `ofu` (the job level over
// the 8 reporting GPUs, idle one included).
LedgerWindow Window(int i, double ofu, int reporting = 8, bool warmup = false) {
  return {.start_s = 1'000'000 + i * 60LL,
          .end_s = 1'000'000 + (i + 1) * 60LL,
          .gpus_allocated = 8,
          .gpus_reporting = reporting,
          .idle_gpus = 1,
          .warmup = warmup,
          .ofu = ofu};
}

int64_t At(int i) { return 1'000'000 + i * 60LL; }

// Every cause planted once in a 110-minute job of 8 GPUs whose telemetry covers 100 minutes.
TEST(JobLedger, EachPlantedCauseGetsItsGpuHoursAndThePartsSumToTheAllocation) {
  JobLedgerInput in;
  in.allocated_gpu_hours = 8 * 110 / 60.0;
  for (int i = 0; i < 100; ++i) {
    double ofu = 0.4;
    int reporting = 8;
    if (i >= 60 && i < 80) ofu = 0.2;   // an in-job regression: half the speed
    if (i >= 85 && i < 88) ofu = 0.3;   // a transient slowdown
    if (i >= 40 && i < 50) reporting = 7;  // one GPU fell off the bus for 10 minutes
    in.windows.push_back(Window(i, ofu, reporting, /*warmup=*/i < 5));
  }
  in.causes = {
      {.kind = Kind::kHung, .from_s = At(20), .to_s = At(30)},
      {.kind = Kind::kRegression, .from_s = At(60), .to_s = At(80), .reference_ofu = 0.4},
      {.kind = Kind::kTransient, .from_s = At(85), .to_s = At(88), .reference_ofu = 0.4},
      // The workload's earlier jobs ran at 0.5: the job's own level is 20% below.
      {.kind = Kind::kBelowWorkload, .from_s = At(5), .to_s = At(100), .reference_ofu = 0.5},
  };
  const JobLedger l = BuildJobLedger(in);

  const double m = 1 / 60.0;  // one GPU-minute in GPU-hours
  EXPECT_DOUBLE_EQ(l.allocated_gpu_hours, 8 * 110 * m);
  EXPECT_NEAR(l.no_telemetry, 8 * 10 * m, 1e-12);
  EXPECT_NEAR(l.coverage, 100 / 110.0, 1e-12);
  EXPECT_NEAR(l.idle_gpus, 1 * 90 * m, 1e-12);  // in the hang, the hung job's
  EXPECT_NEAR(l.silent_gpus, 1 * 10 * m, 1e-12);
  EXPECT_NEAR(l.warmup, 7 * 5 * m, 1e-12);
  EXPECT_NEAR(l.hung, 8 * 10 * m, 1e-12);
  EXPECT_NEAR(l.regression, 7 * 20 * m * 0.5, 1e-12);
  EXPECT_NEAR(l.transient, 7 * 3 * m * 0.25, 1e-12);
  // The rest runs at its level before any drop (0.4), 20% below the workload's 0.5:
  // 52 windows of 7 busy GPUs, 10 of 6, and the regression's and transient's remainders.
  const double rest = (52 * 7 + 10 * 6) * m + 7 * 20 * m * 0.5 + 7 * 3 * m * 0.75;
  EXPECT_NEAR(l.below_workload_baseline, rest * 0.2, 1e-12);
  EXPECT_NEAR(l.productive, rest * 0.8, 1e-12);
  EXPECT_NEAR(l.Sum(), l.allocated_gpu_hours, 1e-9);
  EXPECT_NEAR(l.Sum() / l.allocated_gpu_hours, 1.0, 0.001);
}

// A hung window is hung even in warm-up or a regression, idle GPU included; warm-up is not a
// regression.
TEST(JobLedger, AWindowCountsOnceUnderTheFirstCauseThatHoldsIt) {
  JobLedgerInput in;
  in.windows = {Window(0, 0.0, 8, /*warmup=*/true), Window(1, 0.1, 8, /*warmup=*/true),
                Window(2, 0.1)};
  in.causes = {{.kind = Kind::kHung, .from_s = At(0), .to_s = At(1)},
               {.kind = Kind::kRegression, .from_s = At(0), .to_s = At(3), .reference_ofu = 0.4},
               {.kind = Kind::kJobIdle, .from_s = At(2), .to_s = At(3)}};
  const JobLedger l = BuildJobLedger(in);
  const double m = 1 / 60.0;
  EXPECT_NEAR(l.hung, 8 * m, 1e-12);
  EXPECT_NEAR(l.warmup, 7 * m, 1e-12);
  EXPECT_NEAR(l.idle_gpus, 1 * m, 1e-12);
  EXPECT_NEAR(l.job_idle, 8 * m, 1e-12);
  EXPECT_EQ(l.regression, 0);
  EXPECT_EQ(l.productive, 0);
  // The allocation unknown: the windows' own.
  EXPECT_NEAR(l.allocated_gpu_hours, 3 * 8 * m, 1e-12);
  EXPECT_EQ(l.no_telemetry, 0);
  EXPECT_DOUBLE_EQ(l.coverage, 1);
}

// An inference service's per-token regression has a factor, not a level before.
TEST(JobLedger, ARegressionKnownByItsFactorCostsOneMinusItsInverse) {
  JobLedgerInput in;
  in.windows = {Window(0, 0.3), Window(1, 0.3)};
  in.causes = {{.kind = Kind::kRegression, .from_s = At(1), .to_s = At(2), .factor = 2.5}};
  const JobLedger l = BuildJobLedger(in);
  const double m = 1 / 60.0;
  EXPECT_NEAR(l.regression, 7 * m * 0.6, 1e-12);
  EXPECT_NEAR(l.productive, 7 * m + 7 * m * 0.4, 1e-12);
  EXPECT_NEAR(l.Sum(), l.allocated_gpu_hours, 1e-12);
}

// Each transient slowdown keeps what its own windows cost, in time order whatever order the
// detectors found them in; a sum of ledgers keeps their count, not the list.
TEST(JobLedger, EachTransientSlowdownIsListedWithTheGpuHoursItsWindowsLost) {
  JobLedgerInput in;
  for (int i = 0; i < 30; ++i) {
    double ofu = 0.4;
    if (i >= 10 && i < 13) ofu = 0.16;  // 2.5x for 3 minutes
    if (i >= 20 && i < 22) ofu = 0.2;   // 2x for 2 minutes
    in.windows.push_back(Window(i, ofu));
  }
  in.causes = {
      {.kind = Kind::kTransient, .from_s = At(20), .to_s = At(22), .reference_ofu = 0.4,
       .factor = 2.0},
      {.kind = Kind::kTransient, .from_s = At(10), .to_s = At(13), .reference_ofu = 0.4,
       .factor = 2.5},
  };
  const JobLedger l = BuildJobLedger(in);
  const double m = 1 / 60.0;
  ASSERT_EQ(l.transient_slowdowns, 2);
  ASSERT_EQ(l.transients.size(), 2u);
  EXPECT_EQ(l.transients[0].onset_s, At(10));
  EXPECT_EQ(l.transients[0].end_s, At(13));
  EXPECT_DOUBLE_EQ(l.transients[0].factor, 2.5);
  EXPECT_NEAR(l.transients[0].lost_gpu_hours, 7 * 3 * m * 0.6, 1e-12);
  EXPECT_EQ(l.transients[1].onset_s, At(20));
  EXPECT_NEAR(l.transients[1].lost_gpu_hours, 7 * 2 * m * 0.5, 1e-12);
  EXPECT_NEAR(l.transient, l.transients[0].lost_gpu_hours + l.transients[1].lost_gpu_hours,
              1e-12);
  EXPECT_NEAR(l.Sum(), l.allocated_gpu_hours, 1e-12);
  EXPECT_NE(LedgerWords(l).find("0.33 in 2 transient slowdowns (8.2%)"), std::string::npos)
      << LedgerWords(l);

  JobLedger sum;
  AddLedger(l, sum);
  AddLedger(l, sum);
  EXPECT_EQ(sum.transient_slowdowns, 4);
  EXPECT_TRUE(sum.transients.empty());
  EXPECT_NEAR(sum.transient, 2 * l.transient, 1e-12);
}

}  // namespace
}  // namespace goodput::core
