#include "services/alerting/digest.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/civil_time.h"
#include "gtest/gtest.h"

namespace goodput::alerting {
namespace {

absl::Time Utc(int y, int mo, int d, int h = 0, int mi = 0) {
  return absl::FromCivil(absl::CivilMinute(y, mo, d, h, mi), absl::UTCTimeZone());
}

DigestJob Job(const std::string& id, const std::string& user, const std::string& team,
              double gpu_hours, std::optional<double> ofu) {
  const double effective = gpu_hours * ofu.value_or(0);
  return DigestJob{.cluster = "eos",
                   .job_id = id,
                   .user = user,
                   .team = team,
                   .gpu_model = "NVIDIA H100 80GB HBM3",
                   .gpus = 8,
                   .ofu = ofu,
                   .gpu_hours = gpu_hours,
                   .effective_gpu_hours = effective,
                   .wasted_gpu_hours = gpu_hours - effective};
}

const absl::Time kStart = Utc(2026, 11, 23);
const absl::Time kEnd = Utc(2026, 11, 30);

TEST(AssembleDigests, SumsPerUserAndRanksTheMostWastedJobsFirst) {
  std::vector<DigestJob> jobs = {
      Job("1", "alice", "vision", 10, 0.5), Job("2", "alice", "vision", 40, 0.25),
      Job("3", "alice", "vision", 20, 0.1), Job("4", "bob", "vision", 8, 0.4)};
  jobs[2].regressions = 1;
  std::vector<Digest> d = AssembleDigests(jobs, DigestGroup::kUser, kStart, kEnd, {.top_jobs = 2});
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].name, "alice");
  EXPECT_EQ(d[0].jobs, 3);
  EXPECT_DOUBLE_EQ(d[0].gpu_hours, 70);
  EXPECT_DOUBLE_EQ(d[0].effective_gpu_hours, 5 + 10 + 2);
  EXPECT_DOUBLE_EQ(d[0].wasted_gpu_hours, 70 - 17);
  ASSERT_TRUE(d[0].ofu.has_value());
  EXPECT_DOUBLE_EQ(*d[0].ofu, 17.0 / 70);
  EXPECT_EQ(d[0].jobs_with_regressions, 1);
  ASSERT_EQ(d[0].top_jobs.size(), 2u);
  EXPECT_EQ(d[0].top_jobs[0].job_id, "2");  // 30 GPU-hours wasted
  EXPECT_EQ(d[0].top_jobs[1].job_id, "3");  // 18
  EXPECT_EQ(d[1].name, "bob");
  EXPECT_EQ(d[1].period_start, kStart);
  EXPECT_EQ(d[1].period_end, kEnd);
}

TEST(AssembleDigests, GroupsByTeamAndLeavesOutJobsWithoutOne) {
  std::vector<DigestJob> jobs = {Job("1", "alice", "vision", 10, 0.5),
                                 Job("2", "bob", "vision", 10, 0.3),
                                 Job("3", "carol", "", 10, 0.3)};
  std::vector<Digest> d = AssembleDigests(jobs, DigestGroup::kTeam, kStart, kEnd, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].name, "vision");
  EXPECT_EQ(d[0].group, DigestGroup::kTeam);
  EXPECT_EQ(d[0].jobs, 2);
  EXPECT_DOUBLE_EQ(*d[0].ofu, 0.4);
}

TEST(AssembleDigests, SkipsGroupsBelowTheMinimumGpuHours) {
  std::vector<DigestJob> jobs = {Job("1", "alice", "vision", 10, 0.5),
                                 Job("2", "carol", "vision", 0.5, 0.1)};
  std::vector<Digest> d =
      AssembleDigests(jobs, DigestGroup::kUser, kStart, kEnd, {.min_gpu_hours = 1});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].name, "alice");
}

TEST(AssembleDigests, OfuIsWeightedOnlyOverJobsThatHaveOne) {
  std::vector<DigestJob> jobs = {Job("1", "alice", "v", 10, 0.5),
                                 Job("2", "alice", "v", 30, std::nullopt)};
  std::vector<Digest> d = AssembleDigests(jobs, DigestGroup::kUser, kStart, kEnd, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_DOUBLE_EQ(*d[0].ofu, 0.5);
  std::vector<Digest> none = AssembleDigests({Job("2", "alice", "v", 30, std::nullopt)},
                                             DigestGroup::kUser, kStart, kEnd, {});
  EXPECT_FALSE(none[0].ofu.has_value());
  EXPECT_TRUE(absl::StrContains(DigestText(none[0]), "(OFU n/a)"));
}

TEST(DigestPeriods, WeeklyStartsOnMondayAtMidnightUtc) {
  absl::StatusOr<DigestPeriod> weekly = ParseDigestPeriod("weekly");
  ASSERT_TRUE(weekly.ok());
  // Thursday Nov 26 2026, 09:00: the last closed week is Mon Nov 16 - Mon Nov 23.
  std::vector<PeriodRange> p = ClosedPeriods(*weekly, Utc(2026, 11, 26, 9), 2);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[1].start, Utc(2026, 11, 16));
  EXPECT_EQ(p[1].end, Utc(2026, 11, 23));
  EXPECT_EQ(p[0].start, Utc(2026, 11, 9));
  // A boundary closes the period that ends there.
  EXPECT_EQ(ClosedPeriods(*weekly, Utc(2026, 11, 23), 1)[0].end, Utc(2026, 11, 23));
}

TEST(DigestPeriods, DailyAndSeconds) {
  absl::StatusOr<DigestPeriod> daily = ParseDigestPeriod("daily");
  ASSERT_TRUE(daily.ok());
  std::vector<PeriodRange> d = ClosedPeriods(*daily, Utc(2026, 11, 26, 0, 30), 1);
  EXPECT_EQ(d[0].start, Utc(2026, 11, 25));
  EXPECT_EQ(d[0].end, Utc(2026, 11, 26));
  absl::StatusOr<DigestPeriod> s = ParseDigestPeriod("600");
  ASSERT_TRUE(s.ok());
  std::vector<PeriodRange> p = ClosedPeriods(*s, Utc(2026, 11, 26, 9, 25), 3);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[2].start, Utc(2026, 11, 26, 9, 10));
  EXPECT_EQ(p[2].end, Utc(2026, 11, 26, 9, 20));
  EXPECT_EQ(p[0].start, Utc(2026, 11, 26, 8, 50));
  EXPECT_EQ(std::string(ParseDigestPeriod("fortnightly").status().message()),
            "\"fortnightly\" is not weekly, daily or a whole number of seconds >= 1");
  EXPECT_FALSE(ParseDigestPeriod("0").ok());
}

TEST(DigestRecipients, FixedAddressesWinOverTemplatesAndOddNamesGetNone) {
  DigestRecipients r{.users = {{"alice", "a.smith@example.org"}},
                     .user_template = "{user}@example.org"};
  EXPECT_EQ(r.AddressFor(DigestGroup::kUser, "alice"), "a.smith@example.org");
  EXPECT_EQ(r.AddressFor(DigestGroup::kUser, "bob"), "bob@example.org");
  EXPECT_EQ(r.AddressFor(DigestGroup::kUser, "eve>\r\nBcc: x"), std::nullopt);
  EXPECT_EQ(r.AddressFor(DigestGroup::kTeam, "vision"), std::nullopt);
  EXPECT_TRUE(CheckMailAddress("ops+gpu@example.org").ok());
  EXPECT_FALSE(CheckMailAddress("ops").ok());
  EXPECT_FALSE(CheckMailAddress("a b@example.org").ok());
  EXPECT_FALSE(CheckMailAddress("a@example.org\r\nBcc: x@y").ok());
}

TEST(DigestText, NamesTheTopJobsWithTheirNumbersAdviceAndLink) {
  std::vector<DigestJob> jobs = {Job("4711", "alice", "vision", 32, 0.25)};
  jobs[0].regressions = 2;
  jobs[0].advice = "3 of 8 GPUs stayed idle (12.0 GPU-hours): request 5 GPUs.";
  jobs[0].dashboard_url = "https://goodput.example.org/#/job/eos/4711";
  std::vector<Digest> d = AssembleDigests(jobs, DigestGroup::kUser, kStart, kEnd, {});
  const std::string text = DigestText(d[0]);
  EXPECT_TRUE(absl::StrContains(text, "Period: 2026-11-23 00:00 to 2026-11-30 00:00 UTC"));
  EXPECT_TRUE(absl::StrContains(text, "GPU-hours allocated: 32.00"));
  EXPECT_TRUE(absl::StrContains(text, "GPU-hours effective: 8.00 (OFU 25.0%)"));
  EXPECT_TRUE(absl::StrContains(text, "GPU-hours wasted: 24.00"));
  EXPECT_TRUE(absl::StrContains(
      text,
      "1. eos/4711: 24.00 of 32.00 GPU-hours wasted, OFU 25.0%, 8 x NVIDIA H100 80GB HBM3 "
      "[REGRESSION]\n   Advice: 3 of 8 GPUs stayed idle"));
  EXPECT_TRUE(absl::StrContains(text, "   https://goodput.example.org/#/job/eos/4711\n"));
  EXPECT_EQ(DigestSubject(d[0]),
            "GPU efficiency digest for alice (user), 2026-11-23 00:00 to 2026-11-30 00:00 UTC");
}

// The team's ledger is its jobs' summed; a job without one is counted as such.
TEST(DigestText, SaysWhereTheGpuHoursWentOverTheJobsThatHaveALedger) {
  std::vector<DigestJob> jobs = {Job("1", "alice", "vision", 10, 0.5),
                                 Job("2", "bob", "vision", 30, 0.3),
                                 Job("3", "bob", "vision", 2, std::nullopt)};
  jobs[0].ledger = core::JobLedger{
      .allocated_gpu_hours = 10, .productive = 8, .idle_gpus = 2, .coverage = 1};
  jobs[1].ledger = core::JobLedger{.allocated_gpu_hours = 30,
                                   .productive = 18,
                                   .hung = 6,
                                   .regression = 3,
                                   .no_telemetry = 3,
                                   .coverage = 0.9};
  std::vector<Digest> d = AssembleDigests(jobs, DigestGroup::kTeam, kStart, kEnd, {});
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].jobs_with_ledger, 2);
  EXPECT_DOUBLE_EQ(d[0].ledger.allocated_gpu_hours, 40);
  EXPECT_DOUBLE_EQ(d[0].ledger.productive, 26);
  EXPECT_DOUBLE_EQ(d[0].ledger.coverage, (10 * 1 + 30 * 0.9) / 40);
  EXPECT_TRUE(absl::StrContains(
      DigestText(d[0]),
      "Where the GPU-hours went (2 of the 3 jobs): 26.00 productive (65.0%), 2.00 idle GPUs "
      "(5.0%), 6.00 hung (15.0%), 3.00 regressions (7.5%), 3.00 no telemetry (7.5%)\n"))
      << DigestText(d[0]);
}

TEST(DigestJson, RoundTrips) {
  std::vector<DigestJob> jobs = {Job("1", "jürgen", "vision", 10, 0.5),
                                 Job("2", "jürgen", "vision", 5, std::nullopt)};
  jobs[0].advice = "Profile it.";
  jobs[0].ledger = core::JobLedger{.allocated_gpu_hours = 10, .productive = 7, .warmup = 3};
  Digest d = AssembleDigests(jobs, DigestGroup::kUser, kStart, kEnd, {})[0];
  nlohmann::json j = DigestToJson(d);
  EXPECT_EQ(j["period_start"], "2026-11-23T00:00:00Z");
  EXPECT_EQ(j["group"], "user");
  EXPECT_TRUE(j["top_jobs"][1]["ofu"].is_null());
  absl::StatusOr<Digest> back = DigestFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(DigestToJson(*back), j);
  EXPECT_DOUBLE_EQ(back->ledger.warmup, 3);
  EXPECT_EQ(back->jobs_with_ledger, 1);
  // A payload stored before ledgers reads as none.
  nlohmann::json old = j;
  old.erase("ledger");
  old.erase("jobs_with_ledger");
  absl::StatusOr<Digest> before = DigestFromJson(old);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_EQ(before->jobs_with_ledger, 0);
  EXPECT_FALSE(DigestFromJson(nlohmann::json{{"group", "user"}}).ok());
}

}  // namespace
}  // namespace goodput::alerting
