#include "services/ingest/scraper.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace goodput::ingest {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<std::vector<ScrapeTarget>> Parse(const std::string& yaml) {
  return ParseScrapeTargets(YAML::Load(yaml));
}

TEST(ParseScrapeTargets, ReadsUrlClusterIntervalAndLabels) {
  absl::StatusOr<std::vector<ScrapeTarget>> targets = Parse(R"(
ingest:
  scrape:
    targets:
      - url: http://gpu-node-042:9400/metrics
        cluster: eos
        interval_s: 10
        labels: {rack: r12}
      - url: http://gpu-node-043:9400/metrics
        cluster: eos
)");
  ASSERT_TRUE(targets.ok()) << targets.status();
  ASSERT_EQ(targets->size(), 2u);
  EXPECT_EQ((*targets)[0].url, "http://gpu-node-042:9400/metrics");
  EXPECT_EQ((*targets)[0].cluster, "eos");
  EXPECT_EQ((*targets)[0].interval, absl::Seconds(10));
  EXPECT_EQ((*targets)[0].labels.at("rack"), "r12");
  EXPECT_EQ((*targets)[1].interval, absl::Seconds(15));
}

TEST(ParseScrapeTargets, NoKeyMeansNoTargets) {
  absl::StatusOr<std::vector<ScrapeTarget>> targets = Parse("ingest: {max_batch_samples: 5}");
  ASSERT_TRUE(targets.ok());
  EXPECT_TRUE(targets->empty());
}

TEST(ParseScrapeTargets, RefusesBadEntriesNamingTheKey) {
  EXPECT_THAT(Parse("ingest: {scrape: {targets: [{cluster: eos}]}}").status().message(),
              HasSubstr("ingest.scrape.targets[0].url is required"));
  EXPECT_THAT(Parse("ingest: {scrape: {targets: [{url: 'http://a/m'}]}}").status().message(),
              HasSubstr("ingest.scrape.targets[0].cluster is required"));
  EXPECT_THAT(
      Parse("ingest: {scrape: {targets: [{url: 'ftp://a/m', cluster: c}]}}").status().message(),
      HasSubstr("must start with http://"));
  EXPECT_THAT(Parse("ingest: {scrape: {targets: [{url: 'http://a/m', cluster: c, "
                    "interval_s: 0}]}}")
                  .status()
                  .message(),
              HasSubstr("interval_s=0 is outside"));
  EXPECT_THAT(Parse("ingest: {scrape: {targets: [{url: 'http://a/m', cluster: c}, "
                    "{url: 'http://a/m', cluster: d}]}}")
                  .status()
                  .message(),
              HasSubstr("listed twice"));
}

TEST(IntervalWarning, WarnsAboveThirtySecondsAboutAveragesOfAverages) {
  ScrapeTarget target{.url = "http://a:9400/metrics", .cluster = "eos"};
  target.interval = absl::Seconds(30);
  EXPECT_EQ(IntervalWarning(target), "");
  EXPECT_FALSE(target.interval_above_limit());
  target.interval = absl::Seconds(60);
  EXPECT_TRUE(target.interval_above_limit());
  EXPECT_THAT(IntervalWarning(target), HasSubstr("average of averages"));
}

class ScraperTest : public ::testing::Test {
 protected:
  IngestPipeline pipeline_{nullptr, &core::GpuCatalog::BuiltIn(), IngestOptions{},
                           [] { return int64_t{1714564800000}; }, nullptr};
};

TEST_F(ScraperTest, AFailedFetchMarksTheTargetDownWithTheErrorAndCountsFailures) {
  std::vector<ScrapeTarget> targets = {
      {.url = "http://b:9400/metrics", .cluster = "eos"},
      {.url = "http://a:9400/metrics", .cluster = "eos", .interval = absl::Seconds(45)}};
  Scraper scraper(
      targets, &pipeline_,
      [](const std::string& url, absl::Duration) -> absl::StatusOr<std::string> {
        return absl::UnavailableError(absl::StrCat("GET ", url, " answered HTTP 500"));
      },
      [] { return int64_t{1714564800000}; }, platform::Logger());
  scraper.ScrapeOnce(0);
  scraper.ScrapeOnce(0);
  std::vector<v1::ScrapeTargetStatus> status = scraper.Status();
  ASSERT_EQ(status.size(), 2u);
  EXPECT_EQ(status[0].url(), "http://a:9400/metrics");  // ordered by URL
  EXPECT_EQ(status[0].health(), v1::SCRAPE_HEALTH_UNSPECIFIED);
  EXPECT_TRUE(status[0].interval_above_limit());
  EXPECT_EQ(status[1].health(), v1::SCRAPE_HEALTH_DOWN);
  EXPECT_EQ(status[1].consecutive_failures(), 2);
  EXPECT_THAT(status[1].last_error(), HasSubstr("HTTP 500"));
  EXPECT_EQ(status[1].last_scrape_time().seconds(), 1714564800);
}

TEST_F(ScraperTest, ListScrapeTargetsFiltersAndPages) {
  std::vector<ScrapeTarget> targets;
  for (const char* host : {"a", "b", "c"}) {
    targets.push_back({.url = absl::StrCat("http://", host, ":9400/metrics"), .cluster = "eos"});
  }
  targets.push_back({.url = "http://d:9400/metrics", .cluster = "selene"});
  Scraper scraper(
      targets, &pipeline_,
      [](const std::string&, absl::Duration) -> absl::StatusOr<std::string> {
        return absl::UnavailableError("down");
      },
      [] { return int64_t{1714564800000}; }, platform::Logger());
  ScrapingIngestService service(nullptr, &scraper);
  v1::ListScrapeTargetsRequest request;
  request.set_cluster("eos");
  request.set_page_size(2);
  v1::ListScrapeTargetsResponse page1;
  ASSERT_TRUE(service.ListScrapeTargets(static_cast<grpc::ServerContext*>(nullptr), &request, &page1).ok());
  ASSERT_EQ(page1.targets_size(), 2);
  EXPECT_EQ(page1.next_page_token(), "http://b:9400/metrics");
  request.set_page_token(page1.next_page_token());
  v1::ListScrapeTargetsResponse page2;
  ASSERT_TRUE(service.ListScrapeTargets(static_cast<grpc::ServerContext*>(nullptr), &request, &page2).ok());
  ASSERT_EQ(page2.targets_size(), 1);
  EXPECT_EQ(page2.targets(0).url(), "http://c:9400/metrics");
  EXPECT_EQ(page2.next_page_token(), "");
}

}  // namespace
}  // namespace goodput::ingest
