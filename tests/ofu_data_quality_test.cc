// Data-quality flags through the real path, against a real PostgreSQL: samples stored as
// ingest stores them, the ofu consumer, the OfuService queries, and ofu's forwarding of the
// committed windows to a real alert engine over gRPC. A one-minute scrape (one sample per
// GPU per window) and a ten-minute telemetry gap each show in the job summary's flags and
// raise a data-quality alert, not a regression; the gap leaves windows with coverage 0, and
// the job's and the fleet's GPU-hours still count the time it lasted. GPUs whose DCGM
// profiling is paused are flagged, give no OFU and are not idle. One host's telemetry that
// arrives after its windows were final is counted in: they are recomputed from the stored
// samples, exactly as if it had come on time.

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/alerting/alert_engine.h"
#include "services/alerting/alerting_service.h"
#include "services/api/api_convert.h"
#include "services/api/job_report.h"
#include "services/ofu/ofu_forwarder.h"
#include "services/ofu/ofu_live.h"
#include "services/ofu/ofu_service.h"
#include "tests/support/free_port.h"
#include "tests/support/ofu_job_fixture.h"

namespace goodput::ofu {
namespace {

namespace v1 = ::goodput::v1;

using ::goodput::testing::kOfuJobStartMs;

class OfuDataQuality : public goodput::testing::OfuJobFixture {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(OfuJobFixture::SetUp());
    service_ = std::make_unique<OfuServiceImpl>(store_.get(), consumer_.get(), &cache_, &hub_,
                                                &core::GpuCatalog::BuiltIn(),
                                                OfuServiceOptions{.window_s = 60});
  }

  // The job went quiet: the consumer flushes its last windows.
  void EndJob() {
    now_ += 3'600'000;
    for (int i = 0; i < 100; ++i) {
      auto done = consumer_->StepOnce();
      ASSERT_TRUE(done.ok()) << done.status();
      if (*done) break;
    }
  }

  static v1::JobKey Key() {
    v1::JobKey k;
    k.set_cluster("c1");
    k.set_job_id("j1");
    return k;
  }

  std::vector<v1::OfuWindow> JobWindows() {
    v1::GetJobOfuRequest req;
    *req.mutable_job() = Key();
    req.set_page_size(1000);
    v1::GetJobOfuResponse resp;
    EXPECT_TRUE(service_->DoGetJobOfu(req, &resp).ok());
    return {resp.windows().begin(), resp.windows().end()};
  }

  v1::JobOfuSummary Summary() {
    v1::GetJobSummaryRequest req;
    *req.mutable_job() = Key();
    v1::GetJobSummaryResponse resp;
    EXPECT_TRUE(service_->DoGetJobSummary(req, &resp).ok());
    return resp.summary();
  }

  double FleetGpuHours() {
    v1::GetFleetSummaryRequest req;
    *req.mutable_time_range()->mutable_start_time() = api::UnixMsToTimestamp(kOfuJobStartMs);
    *req.mutable_time_range()->mutable_end_time() =
        api::UnixMsToTimestamp(kOfuJobStartMs + 86'400'000);
    v1::GetFleetSummaryResponse resp;
    EXPECT_TRUE(service_->DoGetFleetSummary(req, &resp).ok());
    return resp.total().gpu_hours();
  }

  // Forwards every committed window to a real alert engine, commit by commit, with ofu's
  // alerting target; returns the kinds of the alerts the job got (open or resolved).
  std::set<v1::AlertKind> AlertKinds(std::vector<v1::Alert>* alerts_out = nullptr) {
    alerting::AlertHub hub;
    alerting::AlertEngine engine(pool_.get(), {}, &hub, platform::Logger());
    alerting::AlertServiceImpl alert_service(&engine, &hub);
    auto port = goodput::testing::FreePort();
    EXPECT_TRUE(port.ok());
    grpc::ServerBuilder builder;
    builder.AddListeningPort(absl::StrCat("127.0.0.1:", *port), grpc::InsecureServerCredentials());
    builder.RegisterService(&alert_service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    EXPECT_NE(server, nullptr);
    platform::OrderedTarget target = AlertingTarget(
        store_.get(),
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", *port), grpc::InsecureChannelCredentials()),
        "", absl::Seconds(30));
    auto commits = store_->PendingCommits(0, 100'000);
    EXPECT_TRUE(commits.ok()) << commits.status();
    int64_t previous = 0;
    for (int64_t seq : commits.ok() ? *commits : std::vector<int64_t>{}) {
      auto ack = target.push(seq, previous);
      EXPECT_TRUE(ack.ok()) << ack.status();
      EXPECT_FALSE(ack.ok() && ack->gap_detected);
      previous = seq;
    }
    server->Shutdown();
    v1::ListAlertsRequest req;
    *req.mutable_job() = Key();
    auto listed = engine.ListAlerts(req);
    EXPECT_TRUE(listed.ok()) << listed.status();
    std::set<v1::AlertKind> kinds;
    if (!listed.ok()) return kinds;
    for (const v1::Alert& a : listed->alerts()) kinds.insert(a.kind());
    if (alerts_out != nullptr) alerts_out->assign(listed->alerts().begin(), listed->alerts().end());
    return kinds;
  }

  static bool Has(const google::protobuf::RepeatedField<int>& flags, v1::DataQualityFlag f) {
    return std::find(flags.begin(), flags.end(), f) != flags.end();
  }

  LatestCache cache_{nullptr, absl::Hours(1)};
  StreamHub hub_;
  std::unique_ptr<OfuServiceImpl> service_;
};

TEST_F(OfuDataQuality, AMinuteScrapeIsFlaggedSparseAndRaisesADataQualityAlert) {
  Feed(0, 30, /*step_s=*/60);  // one sample per GPU per 60 s window
  EndJob();

  const std::vector<v1::OfuWindow> windows = JobWindows();
  ASSERT_EQ(windows.size(), 30u);
  for (size_t i = 1; i < windows.size(); ++i) {
    EXPECT_EQ(windows[i].sample_count(), 4);
    EXPECT_TRUE(Has(windows[i].flags(), v1::DATA_QUALITY_FLAG_SPARSE_SAMPLING)) << i;
    EXPECT_FALSE(Has(windows[i].flags(), v1::DATA_QUALITY_FLAG_GAP)) << i;
  }
  const v1::JobOfuSummary s = Summary();
  EXPECT_TRUE(Has(s.flags(), v1::DATA_QUALITY_FLAG_SPARSE_SAMPLING));
  EXPECT_FALSE(Has(s.flags(), v1::DATA_QUALITY_FLAG_GAP));
  // How much of the job the flag touches: 29 of its 30 windows (the first has no spacing to
  // judge yet), so the job report carries it as a caveat.
  EXPECT_EQ(s.window_count(), 30);
  ASSERT_EQ(s.flag_shares_size(), 1);
  EXPECT_EQ(s.flag_shares(0).flag(), v1::DATA_QUALITY_FLAG_SPARSE_SAMPLING);
  EXPECT_EQ(s.flag_shares(0).windows(), 29);
  ASSERT_EQ(api::JobCaveats(s).size(), 1u);
  EXPECT_TRUE(absl::StrContains(api::JobCaveats(s)[0].text, "on 29 of 30 windows"))
      << api::JobCaveats(s)[0].text;

  std::vector<v1::Alert> alerts;
  const std::set<v1::AlertKind> kinds = AlertKinds(&alerts);
  EXPECT_EQ(kinds, std::set<v1::AlertKind>{v1::ALERT_KIND_DATA_QUALITY});
  for (const v1::Alert& a : alerts) {
    EXPECT_TRUE(Has(a.evidence().data_quality_flags(), v1::DATA_QUALITY_FLAG_SPARSE_SAMPLING));
  }
}

TEST_F(OfuDataQuality, ATenMinuteGapLeavesGapWindowsKeepsGpuHoursAndRaisesADataQualityAlert) {
  Feed(0, 20);
  // Telemetry stops for minutes [20, 30), then comes back minute by minute.
  for (int m = 30; m < 50; ++m) Feed(m, m + 1);
  EndJob();

  const std::vector<v1::OfuWindow> windows = JobWindows();
  ASSERT_EQ(windows.size(), 50u);  // no minute of the job is missing
  for (size_t m = 0; m < windows.size(); ++m) {
    const v1::OfuWindow& w = windows[m];
    EXPECT_EQ(api::TimestampToUnixMs(w.start_time()),
              kOfuJobStartMs + static_cast<int64_t>(m) * 60'000);
    EXPECT_EQ(w.gpus_allocated(), 4);
    // The silence touches the windows from the one it began in to the one it ended in.
    EXPECT_EQ(Has(w.flags(), v1::DATA_QUALITY_FLAG_GAP), m >= 19 && m <= 30) << m;
    if (m >= 20 && m < 30) {
      EXPECT_EQ(w.sample_count(), 0) << m;
      EXPECT_EQ(w.gpu_coverage(), 0) << m;
    } else {
      EXPECT_EQ(w.sample_count(), 24) << m;
      EXPECT_EQ(w.gpu_coverage(), 1) << m;
    }
  }

  const v1::JobOfuSummary s = Summary();
  EXPECT_TRUE(Has(s.flags(), v1::DATA_QUALITY_FLAG_GAP));
  EXPECT_TRUE(Has(s.flags(), v1::DATA_QUALITY_FLAG_LOW_GPU_COVERAGE));
  EXPECT_FALSE(Has(s.flags(), v1::DATA_QUALITY_FLAG_SPARSE_SAMPLING));
  EXPECT_NEAR(s.gpu_coverage(), 40.0 / 50.0, 1e-9);
  // The job has no scheduler times here: its GPU-hours come from its windows, gap included.
  EXPECT_NEAR(s.gpu_hours(), 4 * 50 / 60.0, 1e-9);
  EXPECT_NEAR(FleetGpuHours(), 4 * 50 / 60.0, 1e-9);

  const std::set<v1::AlertKind> kinds = AlertKinds();
  EXPECT_TRUE(kinds.contains(v1::ALERT_KIND_DATA_QUALITY));
  EXPECT_FALSE(kinds.contains(v1::ALERT_KIND_REGRESSION_IN_JOB));
  EXPECT_FALSE(kinds.contains(v1::ALERT_KIND_REGRESSION_VS_WORKLOAD));
  EXPECT_FALSE(kinds.contains(v1::ALERT_KIND_IDLE_GPUS));
}

TEST_F(OfuDataQuality, PausedProfilingIsFlaggedNotIdleAndRaisesADataQualityAlert) {
  // GPUs 0 and 1 compute. GPU 2 reports power and memory but blank DCGM profiling fields,
  // the values of tests/data/dcgm/h100_profiling_blank.prom (ingest stores DCGM blanks as
  // NULL: DcgmBlankValuesAreStoredAsMissingAndOtherExportersKept); GPU 3 is busy at boost
  // clock while Nsight holds its counters.
  std::vector<std::string> values;
  for (int t = 0; t < 20 * 60; t += 10) {
    const std::string at = absl::StrCat("timestamptz 'epoch' + ", kOfuJobStartMs + t * 1000,
                                        " * interval '1 millisecond', 'c1', 'n1', ");
    for (int g = 0; g < 2; ++g) {
      values.push_back(absl::StrCat("(", at, g, ", (SELECT id FROM jobs), ", 0.3 + 0.01 * (t % 7),
                                    ", 1500, 0.9, 0.4, 650, 60000)"));
    }
    values.push_back(absl::StrCat("(", at,
                                  "2, (SELECT id FROM jobs), NULL, NULL, NULL, NULL, "
                                  "69.437, 0)"));
    values.push_back(absl::StrCat("(", at,
                                  "3, (SELECT id FROM jobs), NULL, 1980, NULL, NULL, "
                                  "650, 60000)"));
  }
  Sql(
      absl::StrCat("INSERT INTO samples (sample_time, cluster, host, gpu_index, job, "
                   "tensor_active, sm_clock_mhz, gr_engine_active, dram_active, power_w, "
                   "fb_used_mib) VALUES ",
                   absl::StrJoin(values, ",")));
  CatchUp();
  EndJob();

  const std::vector<v1::OfuWindow> windows = JobWindows();
  ASSERT_EQ(windows.size(), 20u);
  for (size_t m = 0; m < windows.size(); ++m) {
    const v1::OfuWindow& w = windows[m];
    SCOPED_TRACE(m);
    EXPECT_TRUE(Has(w.flags(), v1::DATA_QUALITY_FLAG_PROFILING_UNAVAILABLE));
    EXPECT_FALSE(Has(w.flags(), v1::DATA_QUALITY_FLAG_PROFILING_COUNTER_STUCK));
    // GPUs 2 and 3 kept reporting: no gap, and they are not idle.
    EXPECT_FALSE(Has(w.flags(), v1::DATA_QUALITY_FLAG_GAP));
    EXPECT_EQ(w.idle_gpus_size(), 0);
    EXPECT_EQ(w.stragglers_size(), 0);
    // The job's OFU is GPUs 0 and 1's.
    EXPECT_EQ(w.gpus_reporting(), 2);
    EXPECT_EQ(w.gpus_allocated(), 4);
    EXPECT_EQ(w.sample_count(), 12);
    EXPECT_GT(w.ofu(), 0.3 * 1500 / 1830.0 - 1e-6);
  }
  const v1::JobOfuSummary s = Summary();
  EXPECT_TRUE(Has(s.flags(), v1::DATA_QUALITY_FLAG_PROFILING_UNAVAILABLE));
  EXPECT_EQ(s.idle_gpus_size(), 0);

  std::vector<v1::Alert> alerts;
  EXPECT_EQ(AlertKinds(&alerts), std::set<v1::AlertKind>{v1::ALERT_KIND_DATA_QUALITY});
  for (const v1::Alert& a : alerts) {
    EXPECT_TRUE(
        Has(a.evidence().data_quality_flags(), v1::DATA_QUALITY_FLAG_PROFILING_UNAVAILABLE));
    EXPECT_NE(a.description().find("DCGM profiling paused or unavailable on 2 GPUs"),
              std::string::npos)
        << a.description();
  }
}

// Samples of job `job_id` from host `host` (GPUs 0 and 1) every 10 s for minutes [from, to),
// each GPU with its own activity, board power and cumulative energy counter.
std::string HostSamples(const std::string& job_id, const std::string& host, int from_min,
                        int to_min) {
  std::vector<std::string> values;
  for (int t = from_min * 60; t < to_min * 60; t += 10) {
    for (int g = 0; g < 2; ++g) {
      const int gpu = (host == "n1" ? 0 : 2) + g;
      const double power = 400 + 10 * gpu;
      values.push_back(absl::StrCat(
          "(timestamptz 'epoch' + ", kOfuJobStartMs + t * 1000, " * interval '1 millisecond', 'c1', '",
          host, "', ", g, ", (SELECT id FROM jobs WHERE job_id = '", job_id, "'), ",
          0.2 + 0.1 * gpu + 0.01 * ((t / 10) % 5), ", 1500, 0.9, ", power, ", ",
          1e6 * gpu + t * power * 1000, ")"));
    }
  }
  return absl::StrCat(
      "INSERT INTO samples (sample_time, cluster, host, gpu_index, job, tensor_active, "
      "sm_clock_mhz, gr_engine_active, power_w, energy_mj) VALUES ",
      absl::StrJoin(values, ","));
}

TEST_F(OfuDataQuality, AHostsTelemetryArrivingAfterItsWindowsWereFinalIsRecomputedInExactly) {
  // j1 and j2 run the same on two hosts. j1's host n2 is scraped by a Prometheus that fell
  // behind: its minutes 10..19 arrive after minute 30, long past the 120 s lateness, while
  // host n1 kept reporting. j2's telemetry all comes on time.
  Sql("INSERT INTO jobs (cluster, job_id, gpu_model) VALUES ('c1', 'j2', 'NVIDIA H100 80GB "
      "HBM3')");
  for (int m = 0; m < 30; ++m) {
    Sql(HostSamples("j1", "n1", m, m + 1));
    if (m < 10 || m >= 20) Sql(HostSamples("j1", "n2", m, m + 1));
    Sql(HostSamples("j2", "n1", m, m + 1));
    Sql(HostSamples("j2", "n2", m, m + 1));
    CatchUp();
  }
  auto job_window = [&](const std::string& job_id, int m) {
    return *pg_->QueryValue(goodput::testing::kDatabase,
                            absl::StrCat("SELECT gpus_reporting || '/' || flags || '/' || "
                                         "finalized FROM ofu_windows w JOIN jobs j ON j.id = w.job "
                                         "WHERE j.job_id = '",
                                         job_id, "' AND w.gpu = '' AND w.start_time = "
                                         "timestamptz 'epoch' + ",
                                         kOfuJobStartMs + m * 60'000, " * interval '1 ms'"));
  };
  // Before: minute 15 of j1 was final with host n2 silent (a gap, low coverage).
  EXPECT_EQ(job_window("j1", 15), absl::StrCat("2/", kFlagGap | kFlagLowGpuCoverage, "/true"));
  auto commits = store_->PendingCommits(0, 100'000);
  ASSERT_TRUE(commits.ok());
  const int64_t last_commit = commits->empty() ? 0 : commits->back();

  Sql(HostSamples("j1", "n2", 10, 20));
  CatchUp();
  EXPECT_EQ(consumer_->Stats().late_samples, 2 * 6 * 10);
  EXPECT_EQ(consumer_->Stats().windows_recomputed, 12);  // minutes 9..20, with the neighbours
  // The recomputed windows went out in the next commit, for mfu and alerting to revise.
  commits = store_->PendingCommits(last_commit, 100'000);
  ASSERT_TRUE(commits.ok());
  ASSERT_FALSE(commits->empty());
  int revised = 0;
  for (int64_t seq : *commits) {
    auto windows = store_->CommitWindows(seq);
    ASSERT_TRUE(windows.ok()) << windows.status();
    for (const auto& [job, w] : *windows) {
      if (job.job_id == "j1" && (w.result.flags & kFlagLateSamplesRecomputed)) {
        EXPECT_TRUE(w.result.finalized);
        EXPECT_GE(w.revision, 1);
        ++revised;
      }
    }
  }
  EXPECT_EQ(revised, 12);
  EndJob();

  // Every window of j1 is j2's: the late telemetry counted as if it had come on time.
  v1::JobKey j2 = Key();
  j2.set_job_id("j2");
  auto windows_of = [&](const v1::JobKey& key) {
    v1::GetJobOfuRequest req;
    *req.mutable_job() = key;
    req.set_page_size(1000);
    req.set_include_per_gpu(true);
    v1::GetJobOfuResponse resp;
    EXPECT_TRUE(service_->DoGetJobOfu(req, &resp).ok());
    return resp;
  };
  const v1::GetJobOfuResponse late = windows_of(Key()), on_time = windows_of(j2);
  ASSERT_EQ(late.windows_size(), 30);
  ASSERT_EQ(on_time.windows_size(), 30);
  ASSERT_EQ(late.gpu_windows_size(), on_time.gpu_windows_size());
  ASSERT_EQ(late.gpu_windows_size(), 4 * 30);
  auto same = [&](const v1::OfuWindow& a, const v1::OfuWindow& b, bool recomputed) {
    EXPECT_EQ(api::TimestampToUnixMs(a.start_time()), api::TimestampToUnixMs(b.start_time()));
    EXPECT_EQ(a.sample_count(), b.sample_count());
    EXPECT_EQ(a.gpus_reporting(), b.gpus_reporting());
    EXPECT_DOUBLE_EQ(a.ofu(), b.ofu());
    EXPECT_DOUBLE_EQ(a.energy_j(), b.energy_j());
    std::vector<int> flags(a.flags().begin(), a.flags().end());
    if (recomputed) {
      ASSERT_TRUE(Has(a.flags(), v1::DATA_QUALITY_FLAG_LATE_SAMPLES_RECOMPUTED));
      std::erase(flags, v1::DATA_QUALITY_FLAG_LATE_SAMPLES_RECOMPUTED);
    }
    EXPECT_EQ(flags, std::vector<int>(b.flags().begin(), b.flags().end()));
    EXPECT_FALSE(Has(a.flags(), v1::DATA_QUALITY_FLAG_LATE_SAMPLES_DROPPED));
  };
  for (int m = 0; m < 30; ++m) {
    SCOPED_TRACE(m);
    same(late.windows(m), on_time.windows(m), m >= 9 && m <= 20);
    EXPECT_EQ(late.windows(m).late_sample_count(), m >= 10 && m < 20 ? 12 : 0);
  }
  for (int i = 0; i < late.gpu_windows_size(); ++i) {
    SCOPED_TRACE(late.gpu_windows(i).gpu().ShortDebugString());
    const int m = static_cast<int>(
        (api::TimestampToUnixMs(late.gpu_windows(i).start_time()) - kOfuJobStartMs) / 60'000);
    same(late.gpu_windows(i), on_time.gpu_windows(i), m >= 9 && m <= 20);
  }
  const v1::JobOfuSummary s = Summary();
  v1::GetJobSummaryRequest req;
  *req.mutable_job() = j2;
  v1::GetJobSummaryResponse reference;
  ASSERT_TRUE(service_->DoGetJobSummary(req, &reference).ok());
  EXPECT_DOUBLE_EQ(s.ofu(), reference.summary().ofu());
  EXPECT_DOUBLE_EQ(s.gpu_hours(), reference.summary().gpu_hours());
  EXPECT_DOUBLE_EQ(s.energy_j(), reference.summary().energy_j());
  EXPECT_EQ(s.late_sample_count(), 120);
  EXPECT_FALSE(Has(s.flags(), v1::DATA_QUALITY_FLAG_GAP));
  EXPECT_FALSE(Has(s.flags(), v1::DATA_QUALITY_FLAG_LATE_SAMPLES_DROPPED));
  EXPECT_TRUE(Has(s.flags(), v1::DATA_QUALITY_FLAG_LATE_SAMPLES_RECOMPUTED));
  EXPECT_TRUE(api::JobCaveats(s).empty());  // the figures are exact: nothing to qualify
}

}  // namespace
}  // namespace goodput::ofu
