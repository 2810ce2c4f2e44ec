// Efficiency digests end to end with the real binaries: PostgreSQL, Redis, goodput-ofu
// computing the OFU of four ended jobs (alice's two and bob's in team vision, carol's small
// one in team nlp), goodput-alerting assembling their job reports from ofu's summaries once
// their evaluation is complete, then with digests on a 60-second period, an
// SMTP sink (aiosmtpd, tests/support/smtp_sink.py) and a webhook receiver. Once the period
// of the jobs' end has closed and their reports exist, each user of vision gets one mail
// naming their most wasteful job with its advice and the figures of its report, the team
// gets one, the webhook gets the three digests as JSON, and carol (below the minimum
// GPU-hours) and her team get nothing. A restarted alerting that re-assembles the period
// sends nothing twice.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "goodput/v1/report.grpc.pb.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "services/alerting/digest.h"
#include "services/alerting/targets/webhook_target.h"
#include "tests/support/child_process.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_steps.h"
#include "tests/support/webhook_receiver.h"

namespace goodput::alerting {
namespace {

using ::goodput::testing::BuiltBinary;
using ::goodput::testing::ChildProcess;
using ::goodput::testing::PollUntil;
using ::goodput::testing::ServiceProcess;
using ::goodput::testing::SourceDir;
namespace v1 = ::goodput::v1;

constexpr char kSecret[] = "digest-s3cret";
constexpr int kPeriodS = 60;


// The SMTP sink: messages as Python's e-mail parser reads them (smtp_sink.py).
class SmtpSink {
 public:
  static void Start(std::unique_ptr<SmtpSink>* out) {
    auto sink = std::make_unique<SmtpSink>();
    auto dir = goodput::testing::TempDir::Create("smtp-sink");
    ASSERT_TRUE(dir.ok()) << dir.status();
    sink->dir_ = std::make_unique<goodput::testing::TempDir>(*std::move(dir));
    auto port = goodput::testing::FreePort();
    ASSERT_TRUE(port.ok());
    sink->port_ = *port;
    auto proc = ChildProcess::Start(
        {.argv = {"/usr/bin/python3", (SourceDir() / "tests/support/smtp_sink.py").string(),
                  "--port", absl::StrCat(*port), "--dir", sink->dir_->path().string()},
         .log_path = sink->dir_->path() / "sink.log"});
    ASSERT_TRUE(proc.ok()) << proc.status();
    sink->proc_ = *std::move(proc);
    ASSERT_TRUE(PollUntil([&] { return std::filesystem::exists(sink->dir_->path() / "ready"); },
                          absl::Seconds(30)))
        << sink->proc_->LogTail();
    *out = std::move(sink);
  }
  int port() const { return port_; }
  std::vector<nlohmann::json> Messages() const {
    std::vector<nlohmann::json> out;
    for (int n = 1;; ++n) {
      std::ifstream in(dir_->path() / absl::StrCat(n, ".json"));
      if (!in) break;
      out.push_back(nlohmann::json::parse(in));
    }
    return out;
  }
  std::string Raw(int n) const {
    std::ifstream in(dir_->path() / absl::StrCat(n, ".eml"), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::unique_ptr<goodput::testing::TempDir> dir_;
  std::unique_ptr<ChildProcess> proc_;
  int port_ = 0;
};

std::string Ts(int64_t ms) {
  return absl::StrCat("(timestamptz 'epoch' + ", ms, " * interval '1 millisecond')");
}

struct TestJob {
  std::string job_id;
  std::string user;
  std::string team;
  int gpus = 4;
  int minutes = 10;
  std::vector<double> tensor_active;  // per GPU
  // A slowdown that recovers: tensor activity / dip_factor in minutes [dip_from, dip_to).
  int dip_from = 0;
  int dip_to = 0;
  double dip_factor = 1;
};

class AlertingDigests : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(goodput::testing::StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(goodput::testing::StartRedis(&redis_));
    ASSERT_NO_FATAL_FAILURE(SmtpSink::Start(&sink_));
    // Every job ends at the start of the 60-second period that has just closed (so that the
    // period is closed when alerting starts and within its catch-up window), on a window
    // boundary: its windows are all whole, and its report's figures settle once they are final.
    const int64_t now_s = absl::ToUnixSeconds(absl::Now());
    end_ms_ = (now_s / kPeriodS * kPeriodS - kPeriodS) * 1000;
  }

  std::string Common() const {
    return goodput::testing::PostgresConfigYaml(*pg_) + goodput::testing::RedisConfigYaml(*redis_);
  }

  // ofu forwards its windows to alerting's port (fixed, so that a restarted alerting is found
  // again), and alerting reads ofu's job summaries from ofu's.
  void ReservePorts() {
    absl::StatusOr<int> ofu = goodput::testing::FreePort();
    absl::StatusOr<int> alerting = goodput::testing::FreePort();
    ASSERT_TRUE(ofu.ok() && alerting.ok());
    ofu_port_ = *ofu;
    alerting_port_ = *alerting;
  }

  void StartOfu() {
    goodput::testing::StartService(
        {.binary = BuiltBinary("services/ofu/goodput-ofu"),
         .config_yaml = absl::StrCat(Common(), "grpc:\n  port: ", ofu_port_,
                                     "\nofu:\n  poll_interval_s: 0.1\n  idle_flush_s: 1\n"
                                     "  allowed_lateness_s: 2\n"
                                     "  forward:\n    alerting_address: \"127.0.0.1:",
                                     alerting_port_, "\"\n"),
         .extra_args = goodput::testing::MigrateArgs()},
        &ofu_);
  }

  // With `digests` off, alerting only assembles the job reports.
  absl::StatusOr<std::unique_ptr<ServiceProcess>> StartAlerting(int hook_port,
                                                                bool digests = true) {
    return ServiceProcess::Start(
        {.binary = BuiltBinary("services/alerting/goodput-alerting"),
         .config_yaml =
             absl::StrCat(Common(), "grpc:\n  port: ", alerting_port_,
                          "\nalerting:\n"
                          "  dashboard_url: https://goodput.example.org\n"
                          "  delivery: {poll_interval_s: 0.2}\n"
                          "  reports: {ofu_address: \"127.0.0.1:",
                          ofu_port_,
                          "\"}\n"
                          "  targets:\n"
                          "    - {name: hook, kind: webhook, url: \"http://127.0.0.1:",
                          hook_port, "/hook\", secret: ", kSecret, "}\n",
                          "    - {name: mail, kind: smtp, url: \"smtp://127.0.0.1:", sink_->port(),
                          "\", from: goodput@example.org, from_name: \"goodput digests\"}\n"
                          "  digests:\n"
                          "    enabled: ",
                          digests ? "true" : "false",
                          "\n"
                          "    period: ",
                          kPeriodS,
                          "\n"
                          "    groups: [user, team]\n"
                          "    top_jobs: 2\n"
                          "    min_gpu_hours: 0.2\n"
                          "    settle_s: 1\n"
                          "    catch_up_periods: 30\n"
                          "    check_interval_s: 0.5\n"
                          "    targets: [hook, mail]\n"
                          "    recipients:\n"
                          "      user_template: \"{user}@example.org\"\n"
                          "      teams: {vision: vision-leads@example.org}\n"),
         .extra_args = goodput::testing::MigrateArgs()});
  }

  // The job, its GPUs and its samples (every 10 s, one GPU each at its tensor activity), all
  // in one transaction, so that ofu sees the ended job with all its telemetry.
  void StoreJob(const TestJob& job) {
    const int64_t start_ms = end_ms_ - job.minutes * 60'000;
    std::vector<std::string> sql = {"BEGIN"};
    sql.push_back(absl::StrCat(
        "INSERT INTO jobs (cluster, job_id, scheduler, user_name, team, name, gpu_model, state, "
        "start_time, end_time) VALUES ('eos', '",
        job.job_id, "', 'slurm', '", job.user, "', '", job.team, "', 'train', '",
        goodput::testing::kH100, "', 'completed', ", Ts(start_ms), ", ", Ts(end_ms_), ")"));
    for (int g = 0; g < job.gpus; ++g) {
      sql.push_back(absl::StrCat(
          "INSERT INTO job_gpus (job, cluster, host, gpu_index, valid) SELECT id, 'eos', 'node-",
          job.job_id, "', ", g, ", tstzrange(", Ts(start_ms), ", ", Ts(end_ms_),
          ") FROM jobs WHERE job_id = '", job.job_id, "'"));
    }
    std::vector<std::string> values;
    for (int t = 0; t < job.minutes * 60; t += 10) {
      for (int g = 0; g < job.gpus; ++g) {
        values.push_back(absl::StrFormat(
            "(%s, 'eos', 'node-%s', %d, '%s', (SELECT id FROM jobs WHERE job_id = '%s'), %.3f, "
            "1755)",
            Ts(start_ms + t * 1000 + g * 11), job.job_id, g, goodput::testing::kH100, job.job_id,
            t / 60 >= job.dip_from && t / 60 < job.dip_to ? job.tensor_active[g] / job.dip_factor
                                                           : job.tensor_active[g]));
      }
    }
    sql.push_back(
        absl::StrCat("INSERT INTO samples (sample_time, cluster, host, gpu_index, gpu_model, job, "
                     "tensor_active, sm_clock_mhz) VALUES ",
                     absl::StrJoin(values, ",")));
    sql.push_back("COMMIT");
    ASSERT_TRUE(pg_->Execute("goodput", absl::StrJoin(sql, ";\n")).ok());
  }

  int64_t Value(const std::string& sql) {
    auto v = pg_->QueryValue("goodput", sql);
    return v.ok() && !v->empty() ? std::stoll(*v) : -1;
  }

  // The job's report once every window of it (each minute: the job's and one per GPU) is
  // written, ofu's summary is final, and the report holds it: ofu writes a job's windows
  // over several commits, each final as it is written, and alerting revises the report as
  // they arrive.
  void FinalReport(ServiceProcess& alerting, const TestJob& job, v1::JobReport* out) {
    const std::string& job_id = job.job_id;
    const double gpu_hours = job.gpus * job.minutes / 60.0;
    auto reports = v1::ReportService::NewStub(alerting.Channel());
    auto ofu = v1::OfuService::NewStub(ofu_->Channel());
    const int64_t windows = int64_t{job.minutes} * (job.gpus + 1);
    v1::JobOfuSummary summary;
    ASSERT_TRUE(PollUntil(
        [&] {
          if (Value(absl::StrCat("SELECT count(*) FROM ofu_windows w JOIN jobs j ON j.id = w.job "
                                 "WHERE j.job_id = '",
                                 job_id, "'")) != windows) {
            return false;
          }
          v1::GetJobSummaryRequest summary_request;
          summary_request.mutable_job()->set_cluster("eos");
          summary_request.mutable_job()->set_job_id(job_id);
          v1::GetJobSummaryResponse summary_response;
          grpc::ClientContext summary_ctx;
          summary_ctx.set_deadline(goodput::testing::Deadline());
          if (!ofu->GetJobSummary(&summary_ctx, summary_request, &summary_response).ok()) {
            return false;
          }
          summary = summary_response.summary();
          grpc::ClientContext ctx;
          ctx.set_deadline(goodput::testing::Deadline());
          v1::GetJobReportRequest request;
          *request.mutable_job() = summary_request.job();
          v1::GetJobReportResponse response;
          if (!reports->GetJobReport(&ctx, request, &response).ok()) return false;
          *out = response.report();
          return out->final() && out->summary().has_ofu() &&
                 std::abs(out->summary().gpu_hours() - gpu_hours) < 0.01 &&
                 google::protobuf::util::MessageDifferencer::Equals(out->ofu(), summary);
        },
        absl::Seconds(120)))
        << "no final report of " << gpu_hours << " GPU-hours for " << job_id << ": "
        << out->ShortDebugString() << "\nofu's summary: " << summary.ShortDebugString();
  }

  std::unique_ptr<goodput::testing::PostgresServer> pg_;
  std::unique_ptr<goodput::testing::RedisServer> redis_;
  std::unique_ptr<SmtpSink> sink_;
  std::unique_ptr<ServiceProcess> ofu_;
  int ofu_port_ = 0;
  int alerting_port_ = 0;
  int64_t end_ms_ = 0;
};

const nlohmann::json* MailTo(const std::vector<nlohmann::json>& mails, const std::string& to) {
  for (const nlohmann::json& m : mails) {
    if (m["rcpt_tos"] == nlohmann::json::array({to})) return &m;
  }
  return nullptr;
}

std::string NoCr(std::string s) { return absl::StrReplaceAll(s, {{"\r\n", "\n"}}); }

// "1. eos/a1: 5.00 of 6.67 GPU-hours wasted, OFU 30.0%" as the digest prints the job.
std::string JobLine(int rank, const v1::JobReport& r) {
  const v1::ReportSummary& s = r.summary();
  return absl::StrCat(rank, ". eos/", s.job().job_id(), ": ", FormatGpuHours(s.wasted_gpu_hours()),
                      " of ", FormatGpuHours(s.gpu_hours()), " GPU-hours wasted, OFU ",
                      FormatOfu(s.has_ofu() ? std::optional<double>(s.ofu()) : std::nullopt));
}

TEST_F(AlertingDigests, UsersAndTeamGetOneDigestEachByMailAndWebhookAndARestartSendsNothingTwice) {
  auto hook_port = goodput::testing::FreePort();
  ASSERT_TRUE(hook_port.ok());
  testing::WebhookReceiver hooks(*hook_port);
  ASSERT_TRUE(hooks.ok());
  ASSERT_NO_FATAL_FAILURE(ReservePorts());
  // First alerting without digests: it assembles the reports as the jobs' evaluation
  // completes; the digests then read the final ones.
  auto alerting = StartAlerting(*hook_port, /*digests=*/false);
  ASSERT_TRUE(alerting.ok()) << alerting.status();
  ASSERT_NO_FATAL_FAILURE(StartOfu());
  // alice: a1 with one of four GPUs idle (her most wasteful), a2 busy; bob: b1, one GPU for
  // 40 minutes that ran 2.5x slower in minutes 30-32 and recovered (a transient slowdown:
  // recorded, not paged; the detector decides once warm-up and its reference are behind); carol: one GPU for two minutes (0.03 GPU-hours, below the 0.2
  // minimum), alone in team nlp.
  const std::vector<TestJob> jobs = {
      {"a1", "alice", "vision", 4, 10, {0.3, 0.3, 0.3, 0.0}},
      {"a2", "alice", "vision", 4, 10, {0.6, 0.6, 0.6, 0.6}},
      {"b1", "bob", "vision", 1, 40, {0.5}, /*dip_from=*/30, /*dip_to=*/33, /*dip_factor=*/2.5},
      {"c1", "carol", "nlp", 1, 2, {0.1}}};
  for (const TestJob& job : jobs) ASSERT_NO_FATAL_FAILURE(StoreJob(job));
  std::map<std::string, v1::JobReport> reports;
  for (const TestJob& job : jobs) {
    ASSERT_NO_FATAL_FAILURE(FinalReport(**alerting, job, &reports[job.job_id]));
  }
  ASSERT_GT(reports["a1"].summary().wasted_gpu_hours(), reports["a2"].summary().wasted_gpu_hours());
  ASSERT_GT(reports["a1"].advice_size(), 0);
  // b1's slowdown is in its report, with what its three windows lost at the level before
  // (1 GPU x 3 minutes x (1 - 1/2.5)), and no regression was paged.
  {
    const v1::JobReport& b1 = reports["b1"];
    ASSERT_EQ(b1.transient_slowdowns_size(), 1) << b1.ShortDebugString();
    const v1::TransientSlowdown& t = b1.transient_slowdowns(0);
    EXPECT_EQ(t.onset_time().seconds(), (end_ms_ - 40 * 60'000) / 1000 + 30 * 60);
    EXPECT_NEAR(t.factor(), 2.5, 0.01);
    // The level before: tensor activity 0.5 x SM clock 1755 / the H100's 1830 MHz tensor clock.
    EXPECT_NEAR(t.before_ofu(), 0.5 * 1755 / 1830.0, 0.001);
    EXPECT_NEAR(t.during_ofu(), t.before_ofu() / 2.5, 0.005);
    EXPECT_NEAR(t.lost_gpu_hours(), 3 / 60.0 * 0.6, 0.001);
    EXPECT_EQ(b1.summary().ledger().transient_slowdown_count(), 1);
    EXPECT_DOUBLE_EQ(b1.summary().ledger().transient_gpu_hours(), 0.03);
    EXPECT_EQ(b1.summary().regression_count(), 0);
    for (const v1::ReportAlert& a : b1.alerts()) {
      EXPECT_NE(a.kind(), v1::ALERT_KIND_REGRESSION_IN_JOB) << a.ShortDebugString();
    }
  }
  {
    // What the digests read: ListJobReports over the period, one summary a page here, most
    // wasted first, every job once, none still waiting for its report.
    auto stub = v1::ReportService::NewStub((*alerting)->Channel());
    std::vector<std::string> listed;
    std::vector<double> wasted;
    std::string token;
    do {
      grpc::ClientContext ctx;
      ctx.set_deadline(goodput::testing::Deadline());
      v1::ListJobReportsRequest request;
      request.mutable_ended_in()->mutable_start_time()->set_seconds(end_ms_ / 1000);
      request.mutable_ended_in()->mutable_end_time()->set_seconds(end_ms_ / 1000 + kPeriodS);
      request.set_page_size(1);
      request.set_page_token(token);
      v1::ListJobReportsResponse response;
      grpc::Status status = stub->ListJobReports(&ctx, request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      ASSERT_LE(response.reports_size(), 1);
      EXPECT_EQ(response.pending_reports(), 0);
      for (const v1::ReportSummary& r : response.reports()) {
        listed.push_back(r.job().job_id());
        wasted.push_back(r.wasted_gpu_hours());
      }
      token = response.next_page_token();
      ASSERT_LE(listed.size(), 4u) << "a page came twice";
    } while (!token.empty());
    std::vector<std::string> sorted = listed;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<std::string>{"a1", "a2", "b1", "c1"}));
    EXPECT_TRUE(std::is_sorted(wasted.rbegin(), wasted.rend())) << absl::StrJoin(wasted, ", ");
  }

  (*alerting)->process().Terminate(absl::Seconds(10));
  alerting = StartAlerting(*hook_port);
  ASSERT_TRUE(alerting.ok()) << alerting.status();
  ASSERT_TRUE(PollUntil([&] { return sink_->Messages().size() >= 3 && hooks.posts().size() >= 3; },
                        absl::Seconds(90)))
      << "mails " << sink_->Messages().size() << ", webhook posts " << hooks.posts().size() << "\n"
      << (*alerting)->process().LogTail();
  ASSERT_TRUE(PollUntil(
      [&] { return Value("SELECT count(*) FROM alert_outbox WHERE status <> 'delivered'") == 0; },
      absl::Seconds(60)));

  // Mail: one per user of vision and one for the team; nothing for carol or nlp.
  const std::vector<nlohmann::json> mails = sink_->Messages();
  ASSERT_EQ(mails.size(), 3u);
  const nlohmann::json* alice = MailTo(mails, "alice@example.org");
  const nlohmann::json* bob = MailTo(mails, "bob@example.org");
  const nlohmann::json* team = MailTo(mails, "vision-leads@example.org");
  ASSERT_NE(alice, nullptr);
  ASSERT_NE(bob, nullptr);
  ASSERT_NE(team, nullptr);
  EXPECT_EQ(MailTo(mails, "carol@example.org"), nullptr);
  const std::string period =
      PeriodLabel(absl::FromUnixMillis(end_ms_), absl::FromUnixMillis(end_ms_ + kPeriodS * 1000));
  EXPECT_EQ((*alice)["subject"], absl::StrCat("GPU efficiency digest for alice (user), ", period));
  EXPECT_EQ((*alice)["from"], "goodput digests <goodput@example.org>");
  EXPECT_EQ((*alice)["mail_from"], "goodput@example.org");
  EXPECT_EQ((*alice)["content_type"], "text/plain");
  EXPECT_EQ((*alice)["charset"], "utf-8");
  EXPECT_EQ((*alice)["defects"], nlohmann::json::array());
  EXPECT_NE((*alice)["message_id"], (*bob)["message_id"]);
  const std::string alice_body = NoCr((*alice)["body"].get<std::string>());
  EXPECT_TRUE(absl::StrContains(alice_body, "Jobs ended: 2\n")) << alice_body;
  const double alice_hours =
      reports["a1"].summary().gpu_hours() + reports["a2"].summary().gpu_hours();
  EXPECT_TRUE(absl::StrContains(alice_body,
                                absl::StrCat("GPU-hours allocated: ", FormatGpuHours(alice_hours))))
      << alice_body;
  EXPECT_TRUE(absl::StrContains(
      alice_body, absl::StrCat(JobLine(1, reports["a1"]), ", 4 x ", goodput::testing::kH100,
                               "\n   Advice: ", reports["a1"].advice(0).text(), "\n")))
      << alice_body;
  EXPECT_TRUE(absl::StrContains(alice_body, "   https://goodput.example.org/#/job/eos/a1\n"));
  EXPECT_TRUE(absl::StrContains(alice_body, JobLine(2, reports["a2"]))) << alice_body;
  const std::string bob_body = NoCr((*bob)["body"].get<std::string>());
  EXPECT_TRUE(absl::StrContains(bob_body, JobLine(1, reports["b1"]))) << bob_body;
  EXPECT_FALSE(absl::StrContains(bob_body, "eos/a1")) << bob_body;
  EXPECT_TRUE(absl::StrContains(bob_body, "Transient slowdowns: 1 (0.03 GPU-hours), drops that "
                                          "recovered before they were confirmed; not paged\n"))
      << bob_body;
  EXPECT_TRUE(absl::StrContains(bob_body, "[1 TRANSIENT SLOWDOWN]")) << bob_body;
  EXPECT_FALSE(absl::StrContains(alice_body, "ransient")) << alice_body;
  const std::string team_body = NoCr((*team)["body"].get<std::string>());
  EXPECT_TRUE(absl::StrContains(team_body, "GPU efficiency digest for team vision\n"));
  EXPECT_TRUE(absl::StrContains(team_body, "Jobs ended: 3\n")) << team_body;
  EXPECT_TRUE(absl::StrContains(team_body, JobLine(1, reports["a1"]))) << team_body;
  for (int n = 1; n <= 3; ++n) {
    const std::string raw = sink_->Raw(n);
    for (absl::string_view line : absl::StrSplit(raw, "\r\n")) {
      EXPECT_LE(line.size(), 78u) << line;
    }
  }

  // Webhook: the three digests as JSON, signed.
  std::vector<testing::WebhookReceiver::Post> posts = hooks.posts();
  ASSERT_EQ(posts.size(), 3u);
  std::map<std::string, nlohmann::json> digests;
  for (const auto& [key, ts, signature, body] : posts) {
    EXPECT_EQ(signature, WebhookSignature(kSecret, ts, body)) << key;
    nlohmann::json j = nlohmann::json::parse(body);
    EXPECT_EQ(j["type"], "digest");
    EXPECT_EQ(j["idempotency_key"], key);
    digests[absl::StrCat(j["digest"]["group"].get<std::string>(), ":",
                         j["digest"]["name"].get<std::string>())] = j["digest"];
  }
  ASSERT_EQ(digests.size(), 3u);
  ASSERT_TRUE(digests.count("user:alice") && digests.count("user:bob") &&
              digests.count("team:vision"));
  const nlohmann::json& a = digests["user:alice"];
  EXPECT_EQ(a["jobs"], 2);
  EXPECT_DOUBLE_EQ(a["gpu_hours"].get<double>(), alice_hours);
  EXPECT_EQ(a["top_jobs"][0]["job_id"], "a1");
  EXPECT_DOUBLE_EQ(a["top_jobs"][0]["wasted_gpu_hours"].get<double>(),
                   reports["a1"].summary().wasted_gpu_hours());
  EXPECT_EQ(a["top_jobs"][0]["advice"], reports["a1"].advice(0).text());
  EXPECT_EQ(digests["team:vision"]["jobs"], 3);
  EXPECT_EQ(digests["team:vision"]["ledger"]["transient_slowdowns"], 1);
  EXPECT_EQ(digests["user:bob"]["top_jobs"][0]["transient_slowdowns"], 1);
  const std::string start =
      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(end_ms_), absl::UTCTimeZone());
  std::vector<std::string> keys;
  for (const auto& p : posts) keys.push_back(p.idempotency_key);
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{absl::StrCat("digest:team:vision:", start, ":hook"),
                                            absl::StrCat("digest:user:alice:", start, ":hook"),
                                            absl::StrCat("digest:user:bob:", start, ":hook")}));
  EXPECT_EQ(Value("SELECT count(*) FROM alert_outbox"), 6);

  // A replica that has not seen the period's record re-assembles it after a restart: the
  // outbox keys make that add and send nothing.
  (*alerting)->process().Terminate(absl::Seconds(10));
  ASSERT_EQ(Value("SELECT count(*) FROM alert_digest_periods WHERE digests > 0"), 2);
  ASSERT_TRUE(pg_->Execute("goodput", "DELETE FROM alert_digest_periods").ok());
  alerting = StartAlerting(*hook_port);
  ASSERT_TRUE(alerting.ok()) << alerting.status();
  ASSERT_TRUE(PollUntil(
      [&] { return Value("SELECT count(*) FROM alert_digest_periods WHERE digests > 0") == 2; },
      absl::Seconds(60)))
      << (*alerting)->process().LogTail();
  EXPECT_EQ(Value("SELECT count(*) FROM alert_digest_periods WHERE digests > 0 AND rows = 0"), 2);
  EXPECT_EQ(Value("SELECT count(*) FROM alert_outbox"), 6);
  EXPECT_EQ(Value("SELECT count(*) FROM alert_outbox WHERE status = 'delivered' AND attempts = 1"),
            6);
  EXPECT_EQ(sink_->Messages().size(), 3u);
  EXPECT_EQ(hooks.posts().size(), 3u);
}

// Bad digest configuration, or an smtp target that alerts are routed to without recipients,
// stops start-up with the key and value named (exit code 2).
TEST_F(AlertingDigests, BadConfigurationStopsStartUpNamingTheKey) {
  auto dir = goodput::testing::TempDir::Create("digest-config");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string targets =
      "  targets:\n"
      "    - {name: hook, kind: webhook, url: \"http://127.0.0.1:9/hook\", secret: s}\n"
      "    - {name: am, kind: alertmanager, url: \"http://127.0.0.1:9\"}\n"
      "    - {name: mail, kind: smtp, url: \"smtp://127.0.0.1:9\", from: goodput@example.org}\n";
  const std::string reports = "  reports: {ofu_address: 127.0.0.1:9}\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {reports + "  digests:\n    enabled: true\n    period: fortnightly\n    targets: [hook]\n",
       "alerting.digests.period: \"fortnightly\" is not weekly, daily or a whole number of "
       "seconds >= 1"},
      {reports + "  digests:\n    enabled: true\n    targets: [am]\n",
       "alerting.digests.targets[0]: \"am\" is a target of kind alertmanager; digests go to "
       "webhook and smtp targets"},
      {reports + "  digests:\n    enabled: true\n    targets: [mail]\n",
       "alerting.digests.recipients: is required with an smtp target"},
      {"  digests:\n    enabled: true\n    targets: [hook]\n",
       "alerting.digests.enabled: digests are made of job reports, which need "
       "alerting.reports.ofu_address"},
      {reports + "  digests:\n    enabled: true\n    targets: [hook]\n"
                 "    recipients: {user_template: \"{user} at example.org\"}\n",
       "alerting.digests.recipients.user_template: \"name at example.org\" is not an e-mail "
       "address"},
      {reports + "  digests:\n    enabled: true\n    targets: [hook]\n    weekday: 1\n",
       "alerting.digests.weekday: unknown key"},
      {reports + "  digests:\n    enabled: true\n    targets: [hook]\n    ofu_address: x\n",
       "alerting.digests.ofu_address: unknown key"},
      {"  reports: {enabled: true}\n",
       "alerting.reports.ofu_address: is required when reports are enabled"},
      {"  reports: {ofu_address: 127.0.0.1:9, recheck_s: 1}\n",
       "alerting.reports.recheck_s: unknown key"},
      {"  default_targets: [mail]\n",
       "alerting.default_targets: \"mail\" is an smtp target without `to`: alerts need "
       "recipients"},
  };
  for (const auto& [section, message] : cases) {
    SCOPED_TRACE(section);  // the rest of the alerting section
    const std::filesystem::path config = dir->path() / "alerting.yaml";
    std::ofstream(config) << Common() << "alerting:\n" << targets << section;
    std::vector<std::string> argv = {BuiltBinary("services/alerting/goodput-alerting").string(),
                                     "--config", config.string()};
    for (const std::string& arg : goodput::testing::MigrateArgs()) argv.push_back(arg);
    auto result = goodput::testing::RunProgram(argv);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->exit.exit_code, 2) << result->output;
    EXPECT_TRUE(absl::StrContains(result->output, message)) << result->output;
  }
}

}  // namespace
}  // namespace goodput::alerting
