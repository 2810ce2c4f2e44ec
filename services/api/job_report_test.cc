#include "services/api/job_report.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "google/protobuf/util/message_differencer.h"

namespace goodput::api {
namespace {

v1::ReportSummary Sample() {
  v1::ReportSummary s;
  s.set_version(1);
  s.mutable_job()->set_cluster("gpu-east");
  s.mutable_job()->set_job_id("4242");
  s.set_user("alice");
  s.set_team("vision");
  s.set_gpu_model("NVIDIA H100 80GB HBM3");
  s.set_gpus_allocated(8);
  s.set_state(v1::JOB_STATE_COMPLETED);
  s.set_ofu(0.123456789);
  s.set_ofu_ci95_low(0.12);
  s.set_ofu_ci95_high(0.127);
  s.set_gpu_hours(16.004);
  s.set_effective_gpu_hours(1.97);
  s.set_wasted_gpu_hours(14.034);
  s.set_idle_gpu_hours(4.0);
  s.set_idle_gpu_count(2);
  s.set_hbm_peak_fraction(0.31);
  s.set_hbm_capacity_gib(79.6);
  s.set_roofline_class(v1::ROOFLINE_CLASS_COMPUTE_BOUND);
  s.add_flags(v1::DATA_QUALITY_FLAG_SPARSE_SAMPLING);
  RoundSummary(s);
  for (v1::AdviceKind a : ChooseAdvice(s)) s.add_advice(a);
  return s;
}

TEST(JobReport, AdminCommentRoundTripsTheSummaryExactly) {
  const v1::ReportSummary s = Sample();
  absl::StatusOr<std::string> comment = EncodeAdminComment(s);
  ASSERT_TRUE(comment.ok()) << comment.status();
  EXPECT_TRUE(absl::StartsWith(*comment, "goodput1:")) << *comment;
  absl::StatusOr<v1::ReportSummary> back = DecodeAdminComment(*comment);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(s, *back))
      << s.DebugString() << "\nvs\n"
      << back->DebugString();
  EXPECT_EQ(RenderSummaryText(s), RenderSummaryText(*back));
}

// sacctmgr (Slurm 22.05) lower-cases the AdminComment it sets: the base32 spelling is lower
// case already, and decodes the same in either case, padded or not.
TEST(JobReport, Base32AdminCommentSurvivesLowerCasingAndRoundTrips) {
  const v1::ReportSummary s = Sample();
  absl::StatusOr<std::string> comment = EncodeAdminComment(s, AdminCommentEncoding::kBase32);
  ASSERT_TRUE(comment.ok()) << comment.status();
  EXPECT_TRUE(absl::StartsWith(*comment, "goodput1-b32:")) << *comment;
  EXPECT_EQ(absl::AsciiStrToLower(*comment), *comment);
  absl::StatusOr<std::string> base64 = EncodeAdminComment(s);
  ASSERT_TRUE(base64.ok());
  EXPECT_NE(absl::AsciiStrToLower(*base64), *base64);
  const std::string payload = comment->substr(kAdminCommentBase32Prefix.size());
  std::string padded = *comment;
  padded.append((8 - payload.size() % 8) % 8, '=');
  for (const std::string& text : {*comment, absl::AsciiStrToUpper(*comment), padded}) {
    absl::StatusOr<v1::ReportSummary> back = DecodeAdminComment(text);
    ASSERT_TRUE(back.ok()) << back.status() << " for " << text;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(s, *back))
        << s.DebugString() << "\nvs\n"
        << back->DebugString();
  }
  // RFC 4648's test vectors, through a payload that is not zlib: the decoder gets past base32.
  absl::StatusOr<v1::ReportSummary> r = DecodeAdminComment("goodput1-b32:mzxw6ytboi");  // foobar
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "zlib")) << r.status();
}

TEST(JobReport, DecoderNamesWhatIsWrong) {
  absl::StatusOr<v1::ReportSummary> r = DecodeAdminComment("JS1:abcd");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(), "\"JS1:abcd\"")) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "goodput1:")) << r.status();
  r = DecodeAdminComment("goodput1:!!!");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "not base64")) << r.status();
  r = DecodeAdminComment("goodput1:aGVsbG8=");  // "hello", not zlib
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "zlib")) << r.status();
  r = DecodeAdminComment("goodput1-b32:abc!");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "not base32")) << r.status();
  r = DecodeAdminComment("goodput1-b32:a");  // 5 bits: not a byte
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "not base32")) << r.status();
}

TEST(JobReport, AdviceFollowsTheFigures) {
  v1::ReportSummary s = Sample();
  std::vector<v1::AdviceKind> advice = ChooseAdvice(s);
  ASSERT_GE(advice.size(), 3u);
  EXPECT_EQ(advice[0], v1::ADVICE_KIND_IDLE_GPUS);
  EXPECT_NE(std::find(advice.begin(), advice.end(), v1::ADVICE_KIND_LOW_OFU), advice.end());
  EXPECT_NE(std::find(advice.begin(), advice.end(), v1::ADVICE_KIND_HBM_UNDERUSED), advice.end());
  EXPECT_TRUE(absl::StrContains(AdviceText(v1::ADVICE_KIND_IDLE_GPUS, s), "request 6 GPUs"))
      << AdviceText(v1::ADVICE_KIND_IDLE_GPUS, s);
  EXPECT_TRUE(absl::StrContains(AdviceText(v1::ADVICE_KIND_HBM_UNDERUSED, s), "24.7 of 79.6 GiB"))
      << AdviceText(v1::ADVICE_KIND_HBM_UNDERUSED, s);

  v1::ReportSummary good;
  good.set_ofu(0.45);
  good.set_hbm_peak_fraction(0.8);
  EXPECT_EQ(ChooseAdvice(good), std::vector<v1::AdviceKind>{v1::ADVICE_KIND_WELL_USED});
  v1::ReportSummary none;
  EXPECT_EQ(ChooseAdvice(none).front(), v1::ADVICE_KIND_NO_OFU);
}

// J/PFLOP at least 1.3x the workload's earlier runs on the same GPU model is an energy
// regression; a memory-bound run is told the usual cause.
TEST(JobReport, EnergyPerPflopWellAboveTheWorkloadsIsAnEnergyRegression) {
  v1::ReportSummary s;
  s.set_ofu(0.3);
  s.set_hbm_peak_fraction(0.8);
  s.set_gpu_model("NVIDIA H100 80GB HBM3");
  s.set_joules_per_pflop(1500);
  s.set_workload_joules_per_pflop(1153.9);
  s.set_workload_energy_jobs(3);
  EXPECT_FALSE(EnergyRegression(s));  // 1.2999x
  EXPECT_EQ(ChooseAdvice(s), std::vector<v1::AdviceKind>{v1::ADVICE_KIND_WELL_USED});
  s.set_workload_joules_per_pflop(1150);
  EXPECT_TRUE(EnergyRegression(s));
  EXPECT_EQ(ChooseAdvice(s), std::vector<v1::AdviceKind>{v1::ADVICE_KIND_ENERGY_REGRESSION});
  const std::string text = AdviceText(v1::ADVICE_KIND_ENERGY_REGRESSION, s);
  EXPECT_TRUE(absl::StartsWith(text,
                               "This run spent 1.30x the energy per PFLOP of tensor work of its "
                               "workload's earlier runs on NVIDIA H100 80GB HBM3 (1500.0 vs "
                               "1150.0 J/PFLOP, the median of 3 jobs): the GPUs drew power"))
      << text;
  s.set_roofline_class(v1::ROOFLINE_CLASS_MEMORY_BOUND);
  EXPECT_TRUE(absl::StrContains(AdviceText(v1::ADVICE_KIND_ENERGY_REGRESSION, s),
                                "it was mostly memory-bound, and power spent waiting on memory"));
  // Without a baseline (fewer than 2 earlier runs) nothing is said.
  s.clear_workload_joules_per_pflop();
  EXPECT_FALSE(EnergyRegression(s));
  EXPECT_TRUE(absl::StrContains(RenderSummaryText(s), "1500.0 J/PFLOP")) << RenderSummaryText(s);
  s.set_workload_joules_per_pflop(1150);
  EXPECT_TRUE(absl::StrContains(RenderSummaryText(s), "its workload's earlier runs 1150.0 (median of 3)"))
      << RenderSummaryText(s);
}

TEST(JobReport, TextShowsTheFigures) {
  const std::string text = RenderSummaryText(Sample());
  EXPECT_TRUE(absl::StrContains(text, "gpu-east/4242")) << text;
  EXPECT_TRUE(absl::StrContains(text, "12.3% (95% CI 12.0% - 12.7%)")) << text;
  EXPECT_TRUE(absl::StrContains(text, "16.00 allocated, 1.97 effective, 14.03 wasted")) << text;
  EXPECT_TRUE(absl::StrContains(text, "sparse sampling")) << text;
}

// One idle GPU of eight, the framework's MFU over its 7 busy GPUs: MFU/OFU 1.14 = 8/7 is the
// idle GPU, named as such, not a FLOPs miscount; 1.5x with the same idle GPU still is one.
TEST(JobReport, AnOvercountThatTheIdleGpusExplainNamesThemNotTheFlopsFormula) {
  v1::ReportSummary s;
  s.set_ofu(0.35);
  s.set_gpus_allocated(8);
  s.set_idle_gpu_count(1);
  s.set_idle_gpu_hours(2);
  s.set_mfu_verdict(v1::VERDICT_APP_FLOPS_OVERCOUNT);
  s.set_mfu_ofu_ratio(1.14);
  EXPECT_TRUE(MfuGapIsTheIdleGpus(s));
  std::vector<v1::AdviceKind> advice = ChooseAdvice(s);
  EXPECT_EQ(advice.front(), v1::ADVICE_KIND_IDLE_GPUS);
  EXPECT_EQ(std::find(advice.begin(), advice.end(), v1::ADVICE_KIND_FLOPS_MISCOUNT), advice.end());
  const std::string idle = AdviceText(v1::ADVICE_KIND_IDLE_GPUS, s);
  EXPECT_TRUE(absl::StrContains(idle, "over the 7 busy GPUs, OFU over all 8")) << idle;
  EXPECT_TRUE(absl::StrContains(idle, "not a FLOPs miscount")) << idle;
  const std::string text = RenderSummaryText(s);
  EXPECT_TRUE(absl::StrContains(text, "consistent over the busy GPUs (MFU/OFU 1.14), 1 idle GPU"))
      << text;

  s.set_mfu_ofu_ratio(1.5);
  EXPECT_FALSE(MfuGapIsTheIdleGpus(s));
  advice = ChooseAdvice(s);
  EXPECT_NE(std::find(advice.begin(), advice.end(), v1::ADVICE_KIND_FLOPS_MISCOUNT), advice.end());
  s.set_mfu_ofu_ratio(1.14);
  s.set_idle_gpu_count(0);
  EXPECT_FALSE(MfuGapIsTheIdleGpus(s));
}

// The demo fleet's jobs (30 s scrapes, dcgm-exporter's default collection interval) have a
// few windows flagged sparse by jitter: no caveat on the job. A quarter of its windows
// sparse, or one window in ten with a gap, is one, saying how much of the job it touches.
TEST(JobReport, ACaveatIsOnTheJobOnlyWhenItChangesWhatTheFiguresMean) {
  v1::JobOfuSummary ofu;
  ofu.set_window_count(120);
  ofu.add_flags(v1::DATA_QUALITY_FLAG_SPARSE_SAMPLING);
  v1::DataQualityShare* sparse = ofu.add_flag_shares();
  sparse->set_flag(v1::DATA_QUALITY_FLAG_SPARSE_SAMPLING);
  sparse->set_windows(19);
  EXPECT_TRUE(JobCaveats(ofu).empty());

  sparse->set_windows(30);
  std::vector<JobCaveat> caveats = JobCaveats(ofu);
  ASSERT_EQ(caveats.size(), 1u);
  EXPECT_EQ(caveats[0].flag, v1::DATA_QUALITY_FLAG_SPARSE_SAMPLING);
  EXPECT_TRUE(absl::StrContains(caveats[0].text, "sparse sampling")) << caveats[0].text;
  EXPECT_TRUE(absl::StrContains(caveats[0].text, "on 30 of 120 windows, 25.0%")) << caveats[0].text;

  sparse->set_windows(4);
  ofu.add_flags(v1::DATA_QUALITY_FLAG_GAP);
  v1::DataQualityShare* gap = ofu.add_flag_shares();
  gap->set_flag(v1::DATA_QUALITY_FLAG_GAP);
  gap->set_windows(12);
  ofu.add_flags(v1::DATA_QUALITY_FLAG_SHARED_GPU);
  v1::DataQualityShare* shared = ofu.add_flag_shares();
  shared->set_flag(v1::DATA_QUALITY_FLAG_SHARED_GPU);
  shared->set_windows(1);
  caveats = JobCaveats(ofu);
  ASSERT_EQ(caveats.size(), 2u);
  EXPECT_EQ(caveats[0].flag, v1::DATA_QUALITY_FLAG_GAP);
  EXPECT_TRUE(absl::StrContains(caveats[0].text, "on 12 of 120 windows, 10.0%")) << caveats[0].text;
  EXPECT_EQ(caveats[1].flag, v1::DATA_QUALITY_FLAG_SHARED_GPU);

  // A summary that counts no windows (from an older ofu) keeps every flag.
  ofu.clear_window_count();
  EXPECT_EQ(JobCaveats(ofu).size(), 3u);

  // Energy estimated from board power qualifies the energy figure, not OFU: no caveat.
  ofu.set_window_count(120);
  ofu.add_flags(v1::DATA_QUALITY_FLAG_ENERGY_ESTIMATED);
  v1::DataQualityShare* energy = ofu.add_flag_shares();
  energy->set_flag(v1::DATA_QUALITY_FLAG_ENERGY_ESTIMATED);
  energy->set_windows(120);
  EXPECT_EQ(JobCaveats(ofu).size(), 2u);
  ofu.clear_window_count();
  EXPECT_EQ(JobCaveats(ofu).size(), 3u);
}

TEST(RenderSummaryText, SaysWhenTheEnergyIsPartlyEstimatedAndWhereTheGpuHoursWent) {
  v1::ReportSummary s;
  s.set_energy_kwh(12.5);
  s.set_energy_estimated(true);
  core::JobLedger l{.allocated_gpu_hours = 10, .productive = 7, .idle_gpus = 2, .hung = 1};
  *s.mutable_ledger() = LedgerToProto(l);
  const std::string text = RenderSummaryText(s);
  EXPECT_TRUE(absl::StrContains(text, "12.500 kWh (partly estimated: board power x time"))
      << text;
  EXPECT_TRUE(absl::StrContains(
      text, "where they went    7.00 productive (70.0%), 2.00 idle GPUs (20.0%), 1.00 hung "
            "(10.0%)\n"))
      << text;
  EXPECT_EQ(LedgerFromProto(LedgerToProto(l)).hung, 1);
}

}  // namespace
}  // namespace goodput::api
