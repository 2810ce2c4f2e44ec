#include "services/api/job_report.h"

#include <gtest/gtest.h>

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

TEST(JobReport, TextShowsTheFigures) {
  const std::string text = RenderSummaryText(Sample());
  EXPECT_TRUE(absl::StrContains(text, "gpu-east/4242")) << text;
  EXPECT_TRUE(absl::StrContains(text, "12.3% (95% CI 12.0% - 12.7%)")) << text;
  EXPECT_TRUE(absl::StrContains(text, "16.00 allocated, 1.97 effective, 14.03 wasted")) << text;
  EXPECT_TRUE(absl::StrContains(text, "sparse sampling")) << text;
}

}  // namespace
}  // namespace goodput::api
