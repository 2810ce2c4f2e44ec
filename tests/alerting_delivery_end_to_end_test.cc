// The whole path with real processes: a real Slurm job runs; the telemetry of that job, whose
// OFU falls 2.5x, is stored; goodput-ofu computes and forwards its windows; goodput-alerting
// raises the regression and delivers it to the job through scontrol: exactly one line on the
// job's stderr, and the alert's summary in the job's comment.
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "tests/alerting_delivery_fixture.h"
#include "tests/support/free_port.h"
#include "tests/support/redis_server.h"
#include "tests/support/slurm_cluster.h"

namespace goodput::alerting {
namespace {

namespace v1 = ::goodput::v1;

constexpr int kGpus = 4;
constexpr int kMinutes = 170;
constexpr int kDropMinute = 110;
constexpr int kIntervalS = 20;

std::string ReadWhole(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int CountLines(const std::string& text, const std::string& needle) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) n += absl::StrContains(line, needle) ? 1 : 0;
  return n;
}

class DeliveryEndToEndTest : public DeliveryTest {
 protected:
  // Samples of `job_id` on cluster c1: warm-up, steady near 50% tensor activity, then 2.5x
  // lower from kDropMinute on.
  void StoreJob(const std::string& job_id, int64_t start_ms) {
    Sql(absl::StrCat("SELECT samples_create_partitions(timestamptz 'epoch' + ", start_ms,
                     " * interval '1 millisecond', now() + interval '1 day')"));
    Sql(absl::StrCat(
        "INSERT INTO jobs (cluster, job_id, scheduler, team, gpu_model, start_time) VALUES "
        "('c1', '",
        job_id, "', 'slurm', 'llm', 'NVIDIA H100 80GB HBM3', now() - interval '1 day')"));
    for (int g = 0; g < kGpus; ++g) {
      Sql(
          absl::StrCat("INSERT INTO job_gpus (job, cluster, host, gpu_index, valid) SELECT id, "
                       "'c1', 'node-1', ",
                       g, ", tstzrange(now() - interval '2 days', NULL) FROM jobs"));
    }
    std::vector<std::string> values;
    for (int64_t t = 0; t < int64_t{kMinutes} * 60; t += kIntervalS) {
      const double m = t / 60.0;
      const double ramp = m < 8 ? 0.1 + 0.9 * m / 8.0 : 1.0;
      const double level = 0.5 * ramp * (m >= kDropMinute ? 0.4 : 1.0);
      for (int g = 0; g < kGpus; ++g) {
        values.push_back(absl::StrFormat(
            "(timestamptz 'epoch' + %d * interval '1 millisecond', 'c1', 'node-1', %d, "
            "'NVIDIA H100 80GB HBM3', (SELECT id FROM jobs WHERE job_id = '%s'), %.6f, 1755)",
            start_ms + t * 1000 + g * 13, g, job_id,
            level * (1.0 + 0.02 * std::sin(t / 70.0 + g))));
      }
    }
    Sql(
        absl::StrCat("INSERT INTO samples (sample_time, cluster, host, gpu_index, gpu_model, "
                     "job, tensor_active, sm_clock_mhz) VALUES ",
                     absl::StrJoin(values, ",")));
  }
  void Sql(const std::string& sql) {
    absl::Status s = pg_->Execute("goodput", sql);
    ASSERT_TRUE(s.ok()) << s;
  }
};

TEST_F(DeliveryEndToEndTest, RegressionOfARealSlurmJobNotifiesItOnceAndCommentsIt) {
  auto slurm = testing::SlurmCluster::Create();
  ASSERT_TRUE(slurm.ok()) << slurm.status();
  absl::StatusOr<std::string> job = (*slurm)->SubmitSleepJob({.comment = "llama 7b pretrain"});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE((*slurm)->WaitForJobState(*job, "RUNNING", absl::Seconds(60)).ok());
  auto redis = testing::RedisServer::Create();
  ASSERT_TRUE(redis.ok()) << redis.status();
  auto port = testing::FreePort();
  ASSERT_TRUE(port.ok());
  const std::string common = absl::StrCat("postgres: {dsn: '", pg_->Dsn("goodput"),
                                          "'}\nredis: {host: 127.0.0.1, port: ", (*redis)->port(),
                                          "}\nlog: {format: text}\n");
  auto alerting = testing::ServiceProcess::Start(
      {.binary = testing::BuiltBinary("services/alerting/goodput-alerting"),
       .config_yaml = absl::StrCat(common, "grpc: {port: ", *port, "}\n",
                                   "alerting:\n"
                                   "  sweep_interval_s: 1\n"
                                   "  routes:\n"
                                   "    - {match: {cluster: c1}, targets: [slurm-c1]}\n"
                                   "  delivery: {poll_interval_s: 0.2}\n"
                                   "  targets:\n"
                                   "    - {name: slurm-c1, kind: slurm, cluster: c1, slurm_conf: '",
                                   (*slurm)->slurm_conf().string(), "'}\n")});
  ASSERT_TRUE(alerting.ok()) << alerting.status();
  auto ofu = testing::ServiceProcess::Start(
      {.binary = testing::BuiltBinary("services/ofu/goodput-ofu"),
       .config_yaml = absl::StrCat(common,
                                   "ofu:\n  poll_interval_s: 0.1\n  idle_flush_s: 2\n"
                                   "  forward: {alerting_address: '127.0.0.1:",
                                   *port, "', timeout_s: 5}\n")});
  ASSERT_TRUE(ofu.ok()) << ofu.status();
  // Recent enough that the job's telemetry is not "stopped" for the sweep.
  StoreJob(*job, (absl::ToUnixSeconds(absl::Now()) / 60 - kMinutes - 5) * 60 * 1000);

  const std::filesystem::path err = (*slurm)->JobStderrPath(*job);
  ASSERT_TRUE(testing::PollUntil(
      [&] { return Query("SELECT count(*) FROM alert_outbox WHERE status = 'delivered'") == "1"; },
      absl::Seconds(120)))
      << Query("SELECT string_agg(status || ' ' || last_error, '; ') FROM alert_outbox")
      << (*alerting)->process().LogTail();
  // Let ofu finish forwarding, so that any second notification would have been sent.
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        return Query("SELECT coalesce(max(acked_seq), 0) FROM ofu_forward_state") ==
               Query("SELECT coalesce(max(commit_seq), 0) FROM ofu_windows WHERE gpu = ''");
      },
      absl::Seconds(90)));
  ASSERT_TRUE((*slurm)->Run({"scontrol", "notify", *job, "end-of-test-marker"}).ok());
  ASSERT_TRUE(testing::PollUntil(
      [&] { return absl::StrContains(ReadWhole(err), "end-of-test-marker"); }, absl::Seconds(20)));

  auto stub = v1::AlertService::NewStub((*alerting)->Channel());
  grpc::ClientContext ctx;
  v1::ListAlertsResponse alerts;
  ASSERT_TRUE(stub->ListAlerts(&ctx, v1::ListAlertsRequest(), &alerts).ok());
  ASSERT_EQ(alerts.alerts_size(), 1);
  const v1::Alert& alert = alerts.alerts(0);
  const std::string stderr_text = ReadWhole(err);
  EXPECT_EQ(CountLines(stderr_text, "goodput "), 1) << stderr_text;
  EXPECT_EQ(CountLines(stderr_text, alert.summary()), 1) << stderr_text;
  absl::StatusOr<std::string> show = (*slurm)->ShowJob(*job);
  ASSERT_TRUE(show.ok());
  EXPECT_TRUE(
      absl::StrContains(*show, absl::StrCat("Comment=llama 7b pretrain [goodput ", alert.alert_id(),
                                            ":slurm-c1:firing] goodput ")))
      << *show;
  EXPECT_TRUE(absl::StrContains(*show, alert.summary())) << *show;
}

}  // namespace
}  // namespace goodput::alerting
