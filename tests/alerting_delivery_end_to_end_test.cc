// The whole path with real processes: a real Slurm job runs; the telemetry of that job, whose
// OFU falls 2.5x, is stored; goodput-ofu computes and forwards its windows; goodput-alerting
// raises the regression and delivers it to the job through scontrol: exactly one line on the
// job's stderr, and the alert's summary in the job's comment.
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "services/alerting/targets/slurm_target.h"
#include "tests/alerting_delivery_fixture.h"
#include "tests/support/free_port.h"
#include "tests/support/redis_server.h"
#include "tests/support/slurm_cluster.h"
#include "tests/support/test_steps.h"

namespace goodput::alerting {
namespace {

namespace v1 = ::goodput::v1;

constexpr testing::RegressingJobShape kJob;
constexpr char kMarkerSecret[] = "e2e-marker-secret";

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
  // lower from the drop minute on.
  void StoreJob(const std::string& job_id, int64_t start_ms) {
    testing::ExecuteAll(*pg_, testing::RegressingJobSql(job_id, start_ms, kJob));
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
                                   "    - {name: slurm-c1, kind: slurm, cluster: c1, "
                                   "marker_secret: ",
                                   kMarkerSecret, ", slurm_conf: '",
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
  StoreJob(*job, (absl::ToUnixSeconds(absl::Now()) / 60 - kJob.minutes - 5) * 60 * 1000);

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
  const std::string marker = SlurmCommentMarker(kMarkerSecret, "c1", *job)
                                 .For(absl::StrCat(alert.alert_id(), ":slurm-c1:firing"));
  EXPECT_TRUE(
      absl::StrContains(*show, absl::StrCat("Comment=llama 7b pretrain ", marker, " goodput ")))
      << *show;
  EXPECT_TRUE(absl::StrContains(*show, alert.summary())) << *show;
}

}  // namespace
}  // namespace goodput::alerting
