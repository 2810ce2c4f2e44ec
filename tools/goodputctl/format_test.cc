#include "tools/goodputctl/format.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::ctl {
namespace {

TEST(DisplayWidth, CountsCodePointsNotBytesAndIgnoresColour) {
  EXPECT_EQ(DisplayWidth("abc"), 3);
  EXPECT_EQ(DisplayWidth("▁▄█"), 3);  // 9 bytes
  EXPECT_EQ(DisplayWidth("\033[1mOFU\033[0m"), 3);
  EXPECT_EQ(DisplayWidth(""), 0);
}

TEST(Sparkline, MapsLowToLowestBlockAndHighToHighest) {
  EXPECT_EQ(Sparkline(std::vector<double>{0, 0.5, 1}, 0, 1), "▁▅█");
  EXPECT_EQ(Sparkline(std::vector<double>{0.25, 0.75}, 0, 1), "▃▆");
}

TEST(Sparkline, ClampsValuesOutsideTheScale) {
  EXPECT_EQ(Sparkline(std::vector<double>{-1, 2}, 0, 1), "▁█");
}

TEST(Sparkline, ShowsMissingValuesAsGaps) {
  std::vector<std::optional<double>> v = {0.0, std::nullopt, 1.0,
                                          std::numeric_limits<double>::quiet_NaN()};
  EXPECT_EQ(Sparkline(v, 0, 1), "▁ █ ");
}

TEST(Sparkline, MergesIntoExactlyWidthColumnsByMean) {
  // 6 values into 3 columns: means 0, 0.5, 1.
  std::vector<double> v = {0, 0, 0.4, 0.6, 1, 1};
  std::string line = Sparkline(v, 0, 1, 3);
  EXPECT_EQ(line, "▁▅█");
  EXPECT_EQ(DisplayWidth(Sparkline(std::vector<double>(1000, 0.3), 0, 1, 60)), 60);
  // Never stretched.
  EXPECT_EQ(DisplayWidth(Sparkline(std::vector<double>{0.1, 0.2}, 0, 1, 60)), 2);
}

TEST(Sparkline, AColumnWithOnlyGapsStaysAGap) {
  std::vector<std::optional<double>> v = {1.0, 1.0, std::nullopt, std::nullopt, 0.0, 0.0};
  EXPECT_EQ(Sparkline(v, 0, 1, 3), "█ ▁");
}

TEST(Sparkline, EmptyAndFlatSeries) {
  EXPECT_EQ(Sparkline(std::vector<double>{}, 0, 1), "");
  // A zero-width scale draws the middle block rather than dividing by zero.
  EXPECT_EQ(Sparkline(std::vector<double>{0.3, 0.3}, 0.3, 0.3), "▅▅");
}

TEST(Table, AlignsColumnsByDisplayWidth) {
  Table t({{"JOB"}, {"OFU", Align::kRight}, {"TREND"}});
  t.AddRow({"eos/1", "42.0%", "▁▂▃"});
  t.AddRow({"eos/12345", "7.5%", "█"});
  EXPECT_EQ(t.Render(),
            "JOB          OFU  TREND\n"
            "eos/1      42.0%  ▁▂▃\n"
            "eos/12345   7.5%  █\n");
  EXPECT_EQ(t.row_count(), 2u);
}

TEST(Table, EscapesControlCharactersSoACellCannotDriveTheTerminal) {
  Table t({{"JOB"}, {"NAME"}});
  t.AddRow({"1", "\x1b[2J\x1b[31mpwned\r"});
  EXPECT_EQ(t.Render(), "JOB  NAME\n1    \\x1b[2J\\x1b[31mpwned\\x0d\n");
}

TEST(Table, PadsShortRowsAndTrimsTrailingSpaces) {
  Table t({{"A"}, {"B"}});
  t.AddRow({"x"});
  EXPECT_EQ(t.Render(), "A  B\nx\n");
}

TEST(Format, PercentAndPoints) {
  EXPECT_EQ(Percent(0.4234), "42.3%");
  EXPECT_EQ(Percent(0.5, 0), "50%");
  EXPECT_EQ(Percent(std::nullopt), "-");
  EXPECT_EQ(Percent(std::nan("")), "-");
  EXPECT_EQ(PercentagePoints(3.21), "+3.2 pp");
  EXPECT_EQ(PercentagePoints(-12), "-12.0 pp");
}

TEST(Format, NumberGroupsThousands) {
  EXPECT_EQ(Number(1234567.891, 1), "1,234,567.9");
  EXPECT_EQ(Number(999, 0), "999");
  EXPECT_EQ(Number(-1000, 0), "-1,000");
  EXPECT_EQ(Number(-0.01, 1), "0.0");
}

TEST(Format, TimesAndDurations) {
  EXPECT_EQ(FormatUtc(absl::FromUnixSeconds(0)), "-");
  EXPECT_EQ(FormatUtc(absl::FromUnixSeconds(1700000000)), "2023-11-14 22:13:20");
  EXPECT_EQ(ShortDuration(absl::Seconds(45)), "45s");
  EXPECT_EQ(ShortDuration(absl::Minutes(192)), "3h12m");
  EXPECT_EQ(ShortDuration(absl::Hours(52)), "2d4h");
  EXPECT_EQ(ShortDuration(absl::Hours(24)), "1d");
}

TEST(Format, ProgressBar) {
  EXPECT_EQ(ProgressBar(0.5, 10), "[#####.....]  50%");
  EXPECT_EQ(ProgressBar(2, 4), "[####] 100%");
  EXPECT_EQ(ProgressBar(-1, 4), "[....]   0%");
}

TEST(Parse, Durations) {
  EXPECT_EQ(*ParseDurationFlag("since", "24h"), absl::Hours(24));
  EXPECT_EQ(*ParseDurationFlag("since", "7d"), absl::Hours(168));
  EXPECT_EQ(*ParseDurationFlag("since", "1d12h"), absl::Hours(36));
  EXPECT_EQ(*ParseDurationFlag("since", "90s"), absl::Seconds(90));
  absl::StatusOr<absl::Duration> bad = ParseDurationFlag("since", "soon");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("--since: \"soon\""));
  EXPECT_FALSE(ParseDurationFlag("since", "0s").ok());
  EXPECT_FALSE(ParseDurationFlag("since", "").ok());
}

TEST(Parse, Times) {
  absl::Time now = absl::FromUnixSeconds(1700000000);
  EXPECT_EQ(*ParseTimeFlag("from", "now", now), now);
  EXPECT_EQ(*ParseTimeFlag("from", "2023-11-14T22:13:20Z", now), now);
  EXPECT_EQ(*ParseTimeFlag("from", "2023-11-14 22:13:20", now), now);
  absl::StatusOr<absl::Time> bad = ParseTimeFlag("from", "yesterday", now);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("--from: \"yesterday\""));
}

TEST(Parse, JobRefSplitsAtTheFirstSlash) {
  auto ref = ParseJobRef("k8s-prod/team-a/pretrain");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->first, "k8s-prod");
  EXPECT_EQ(ref->second, "team-a/pretrain");
  EXPECT_FALSE(ParseJobRef("4211873").ok());
  EXPECT_FALSE(ParseJobRef("/4211873").ok());
  EXPECT_FALSE(ParseJobRef("eos/").ok());
}

TEST(Parse, GemmShapesAndDims) {
  auto shape = ParseGemmShape("8192x4096x2048x3");
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(shape->m, 8192);
  EXPECT_EQ(shape->count, 3);
  EXPECT_EQ(ParseGemmShape("16x16x16")->count, 1);
  EXPECT_FALSE(ParseGemmShape("16x16").ok());
  EXPECT_FALSE(ParseGemmShape("16x0x16").ok());
  EXPECT_THAT(ParseGemmShape("axbxc").status().message(), ::testing::HasSubstr("\"axbxc\""));
  EXPECT_EQ(*ParseDims("tile", "256x128x64", 2, 3), (std::vector<int>{256, 128, 64}));
  EXPECT_FALSE(ParseDims("cluster", "2x1x1", 2, 2).ok());
}

}  // namespace
}  // namespace goodput::ctl
