// Job-end reports with a real goodput-ofu and goodput-alerting, PostgreSQL, Redis and a real
// one-node Slurm (munge, slurmctld, slurmd). goodput-alerting writes a job's report once its
// evaluation of the ended job is complete, from ofu's job summary (over gRPC), and its
// AdminComment through the outbox (a `slurm_admin_comment` target of cluster eos). A job that
// goodput has ended while slurmctld still runs it (as when goodput ends a job whose GPUs fell
// silent) gets its report's compact summary in its AdminComment through scontrol, and
// `goodputctl report --from-admin-comment` decodes what `scontrol show job` prints into exactly
// the summary of the service's report and prints it as `goodputctl report` does. A job Slurm
// has already finished is refused by slurmctld (as Slurm 22.05 does for every finished job;
// sites with slurmdbd use the sacctmgr mode), and the report says so instead of retrying. The
// same job id on another cluster is another job: its report is never written to eos's Slurm.
//
// With accounting (slurmdbd on a private MariaDB), the production path: a job Slurm has
// finished gets its summary through `sacctmgr -i update job`, `sacct -o AdminComment` reads it
// back and goodputctl decodes it into the service's summary; while slurmdbd is down the report
// is stored, says why the AdminComment is missing, and the outbox retries the write until
// slurmdbd is back; while sacctmgr is not even installed (missing, then present), the same.
#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "goodput/v1/report.grpc.pb.h"
#include "absl/strings/escaping.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "services/api/job_report.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/slurm_cluster.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_steps.h"

namespace goodput::ofu {
namespace {

using ::goodput::testing::BuiltBinary;
using ::goodput::testing::PollUntil;
using ::goodput::testing::RunProgram;
using ::goodput::testing::ServiceProcess;
namespace v1 = ::goodput::v1;

constexpr int64_t kStartMs = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr int kMinutes = 10;
constexpr int kGpus = 4;

std::string Ts(int64_t ms) {
  return absl::StrCat("(timestamptz 'epoch' + ", ms, " * interval '1 millisecond')");
}

class JobReportSlurmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(::goodput::testing::StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(::goodput::testing::StartRedis(&redis_));
    auto slurm = ::goodput::testing::SlurmCluster::Create(ClusterOptions());
    ASSERT_TRUE(slurm.ok()) << slurm.status();
    slurm_ = *std::move(slurm);
  }

  virtual ::goodput::testing::SlurmClusterOptions ClusterOptions() const { return {}; }

  std::string Common() const {
    return absl::StrCat("postgres:\n  dsn: \"", pg_->Dsn("goodput"),
                        "\"\nredis:\n  host: ", redis_->host(), "\n  port: ", redis_->port(),
                        "\nlog:\n  format: text\n");
  }

  // goodput-alerting (reports, and the AdminComment target `eos-admin-comment` of cluster eos
  // in `mode`, running `sacctmgr_path` for sacctmgr; `alerting_extra` adds keys to its
  // section), then goodput-ofu forwarding its windows to it. Alerting reads ofu's job
  // summaries at ofu's port, reserved first.
  void StartServices(const std::string& mode = "scontrol",
                     const std::string& sacctmgr_path = "sacctmgr",
                     const std::string& alerting_extra = "", bool ofu_forwards = true,
                     const std::string& reports_extra = "") {
    absl::StatusOr<int> ofu_port = ::goodput::testing::FreePort();
    ASSERT_TRUE(ofu_port.ok()) << ofu_port.status();
    ofu_port_ = *ofu_port;
    auto alerting = ServiceProcess::Start(
        {.binary = BuiltBinary("services/alerting/goodput-alerting"),
         .config_yaml = absl::StrCat(
             Common(),
             "alerting:\n"
             "  delivery: {poll_interval_s: 0.2, initial_backoff_s: 0.5, max_backoff_s: 2}\n"
             "  reports:\n    ofu_address: \"127.0.0.1:",
             ofu_port_,
             "\"\n    admin_comment_targets: [eos-admin-comment]\n", reports_extra,
             "  targets:\n"
             "    - name: eos-admin-comment\n      kind: slurm_admin_comment\n"
             "      cluster: eos\n      mode: ",
             mode, "\n      sacctmgr_path: \"", sacctmgr_path, "\"\n      slurm_conf: \"",
             slurm_->slurm_conf().string(), "\"\n", alerting_extra),
         .extra_args = ::goodput::testing::MigrateArgs()});
    ASSERT_TRUE(alerting.ok()) << alerting.status();
    alerting_ = *std::move(alerting);
    ASSERT_NO_FATAL_FAILURE(StartOfu(ofu_forwards));
  }

  // goodput-ofu on its reserved port, forwarding its windows to alerting or not.
  void StartOfu(bool forwards) {
    auto ofu = ServiceProcess::Start(
        {.binary = BuiltBinary("services/ofu/goodput-ofu"),
         .config_yaml = absl::StrCat(Common(), "grpc:\n  port: ", ofu_port_,
                                     "\nofu:\n  poll_interval_s: 0.1\n  idle_flush_s: 1\n",
                                     forwards ? absl::StrCat("  forward:\n    alerting_address: \"",
                                                             alerting_->grpc_address(), "\"\n")
                                              : "")});
    ASSERT_TRUE(ofu.ok()) << ofu.status();
    ofu_ = *std::move(ofu);
  }

  void Sql(const std::string& sql) {
    absl::Status s = pg_->Execute("goodput", sql);
    ASSERT_TRUE(s.ok()) << s << "\n" << sql.substr(0, 300);
  }

  // The job as a Slurm prolog and epilog register it (user, account as team), holding 4 H100
  // GPUs for 10 minutes; GPUs 0-2 busy at 40% tensor activity, GPU 3 idle; 20 GiB of HBM used.
  // One transaction, so that goodput-ofu sees the ended job with all its telemetry.
  // `telemetry_minutes`: the GPUs report for the first minutes only (a job whose processes
  // exited before Slurm ended it).
  void StoreJobAndTelemetry(const std::string& job_id, const std::string& cluster = "eos",
                            const std::string& host = "node-1", int telemetry_minutes = kMinutes,
                            const std::string& fingerprint = "") {
    Sql(absl::StrCat("SELECT samples_create_partitions(", Ts(kStartMs), ", ",
                     Ts(kStartMs + 86'400'000), ")"));
    const int64_t end_ms = kStartMs + kMinutes * 60'000;
    std::vector<std::string> statements = {"BEGIN"};
    statements.push_back(absl::StrCat(
        "INSERT INTO jobs (cluster, job_id, scheduler, user_name, team, name, gpu_model, state, "
        "start_time, end_time, workload_fingerprint) VALUES ('",
        cluster, "', '", job_id,
        "', 'slurm', 'alice', 'vision', 'vit-pretrain', 'NVIDIA H100 80GB HBM3', ", "'completed', ",
        Ts(kStartMs), ", ", Ts(end_ms), ", '", fingerprint, "')"));
    const std::string job_row = absl::StrCat("(SELECT id FROM jobs WHERE cluster = '", cluster,
                                             "' AND job_id = '", job_id, "')");
    for (int g = 0; g < kGpus; ++g) {
      statements.push_back(absl::StrCat(
          "INSERT INTO job_gpus (job, cluster, host, gpu_index, valid) SELECT ", job_row, ", '",
          cluster, "', '", host, "', ", g, ", tstzrange(", Ts(kStartMs), ", ", Ts(end_ms), ")"));
    }
    std::vector<std::string> values;
    for (int t = 0; t < telemetry_minutes * 60; t += 10) {
      for (int g = 0; g < kGpus; ++g) {
        const bool idle = g == kGpus - 1;
        values.push_back(
            absl::StrFormat("(%s, '%s', '%s', %d, 'NVIDIA H100 80GB HBM3', %s, %.3f, "
                            "1700, %.3f, %.3f, 20480, 500)",
                            Ts(kStartMs + t * 1000 + g * 11), cluster, host, g, job_row,
                            idle ? 0.0 : 0.4, idle ? 0.0 : 0.1, idle ? 0.0 : 0.5));
      }
    }
    statements.push_back(absl::StrCat(
        "INSERT INTO samples (sample_time, cluster, host, gpu_index, gpu_model, job, "
        "tensor_active, sm_clock_mhz, dram_active, gr_engine_active, fb_used_mib, power_w) "
        "VALUES ",
        absl::StrJoin(values, ",")));
    statements.push_back("COMMIT");
    Sql(absl::StrJoin(statements, ";\n"));
  }

  // AdminComment=... as `scontrol show job` prints it ("" when unset).
  std::string AdminComment(const std::string& job_id) {
    absl::StatusOr<std::string> shown = slurm_->ShowJob(job_id);
    EXPECT_TRUE(shown.ok()) << shown.status();
    if (!shown.ok()) return "";
    for (absl::string_view word :
         absl::StrSplit(*shown, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      if (absl::ConsumePrefix(&word, "AdminComment=")) return std::string(word);
    }
    return "";
  }

  absl::StatusOr<::goodput::testing::ProgramResult> Goodputctl(std::vector<std::string> args) {
    args.insert(args.begin(), BuiltBinary("tools/goodputctl/goodputctl").string());
    return RunProgram(std::move(args));
  }

  // A final report with OFU whose AdminComment was written: what WaitForReport usually awaits.
  static bool FinalAndWritten(const v1::JobReport& r) {
    return r.final() && r.summary().has_ofu() && r.admin_comment_status() == "written";
  }

  // Polls alerting's GetJobReport until `done` holds for the job's report (of cluster eos
  // unless given); the last report in `out`.
  void WaitForReport(const std::string& job_id,
                     const std::function<bool(const v1::JobReport&)>& done, v1::JobReport* out,
                     const std::string& cluster = "eos") {
    auto reports = v1::ReportService::NewStub(alerting_->Channel());
    grpc::Status last;
    ASSERT_TRUE(PollUntil(
        [&] {
          grpc::ClientContext ctx;
          v1::GetJobReportRequest request;
          request.mutable_job()->set_cluster(cluster);
          request.mutable_job()->set_job_id(job_id);
          v1::GetJobReportResponse response;
          last = reports->GetJobReport(&ctx, request, &response);
          *out = response.report();
          return last.ok() && done(*out);
        },
        absl::Seconds(90)))
        << last.error_message() << "\n"
        << out->DebugString();
  }

  // `goodputctl report --from-admin-comment` turns `comment` into exactly `summary` (--json)
  // and prints it as the head of `goodputctl report` of the job (whose output goes to
  // `full_report` when given).
  void ExpectGoodputctlDecodes(const std::string& comment, const v1::ReportSummary& summary,
                               const std::string& job_id, std::string* full_report = nullptr) {
    auto decoded_json = Goodputctl({"report", "--from-admin-comment", comment, "--json"});
    ASSERT_TRUE(decoded_json.ok()) << decoded_json.status();
    ASSERT_TRUE(decoded_json->exit.Success()) << decoded_json->output;
    v1::ReportSummary decoded;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(decoded_json->output, &decoded).ok())
        << decoded_json->output;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(decoded, summary))
        << decoded.DebugString() << "\nvs the service's\n"
        << summary.DebugString();
    auto decoded_text = Goodputctl({"report", "--from-admin-comment", comment});
    ASSERT_TRUE(decoded_text.ok() && decoded_text->exit.Success()) << decoded_text->output;
    auto full_text = Goodputctl(
        {"report", absl::StrCat("eos/", job_id), "--alerting-addr", alerting_->grpc_address()});
    ASSERT_TRUE(full_text.ok() && full_text->exit.Success()) << full_text->output;
    EXPECT_TRUE(absl::StartsWith(full_text->output, decoded_text->output))
        << full_text->output << "\n---\n"
        << decoded_text->output;
    if (full_report != nullptr) *full_report = full_text->output;
  }

  std::unique_ptr<::goodput::testing::PostgresServer> pg_;
  std::unique_ptr<::goodput::testing::RedisServer> redis_;
  std::unique_ptr<::goodput::testing::SlurmCluster> slurm_;
  std::unique_ptr<ServiceProcess> alerting_;
  std::unique_ptr<ServiceProcess> ofu_;
  int ofu_port_ = 0;
};

TEST_F(JobReportSlurmTest, EndedJobCarriesItsReportInAdminCommentAndGoodputctlDecodesIt) {
  absl::StatusOr<std::string> job = slurm_->SubmitSleepJob({.name = "vit-pretrain"});
  ASSERT_TRUE(job.ok()) << job.status();
  absl::Status running = slurm_->WaitForJobState(*job, "RUNNING", absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running;
  ASSERT_FALSE(absl::StartsWith(AdminComment(*job), "goodput1:"));
  ASSERT_NO_FATAL_FAILURE(StartServices());
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(*job));
  v1::JobReport report;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(*job, FinalAndWritten, &report));

  // The report composes the job summary and the registry, with advice from its figures.
  const v1::ReportSummary& s = report.summary();
  EXPECT_EQ(s.user(), "alice");
  EXPECT_EQ(s.team(), "vision");
  EXPECT_EQ(s.gpus_allocated(), kGpus);
  EXPECT_EQ(s.state(), v1::JOB_STATE_COMPLETED);
  EXPECT_EQ(s.idle_gpu_count(), 1);
  EXPECT_NEAR(s.ofu(), 3 * 0.4 * 1700 / 1830.0 / kGpus, 0.002);
  EXPECT_NEAR(s.gpu_hours(), kGpus * kMinutes / 60.0, 0.01);
  EXPECT_NEAR(s.wasted_gpu_hours(), s.gpu_hours() - s.effective_gpu_hours(), 0.011);
  EXPECT_EQ(s.advice(0), v1::ADVICE_KIND_IDLE_GPUS);
  ASSERT_EQ(report.advice_size(), s.advice_size());
  EXPECT_TRUE(absl::StrContains(report.advice(0).text(), "1 of 4 GPUs stayed idle"))
      << report.advice(0).text();
  EXPECT_EQ(report.reconciliation_note(), "mfu is not configured (alerting.reports.mfu_address)");
  EXPECT_EQ(report.job().name(), "vit-pretrain");

  // Slurm holds the summary, and the documented decoder reads back exactly the report's.
  const std::string comment = AdminComment(*job);
  EXPECT_EQ(comment, report.admin_comment());
  ASSERT_TRUE(absl::StartsWith(comment, "goodput1:")) << comment;
  std::string full_report;
  ASSERT_NO_FATAL_FAILURE(ExpectGoodputctlDecodes(comment, s, *job, &full_report));
  EXPECT_TRUE(absl::StrContains(full_report, "1 of 4 GPUs stayed idle")) << full_report;
  EXPECT_TRUE(absl::StrContains(full_report, "idle GPUs")) << full_report;

  // A comment that is not goodput's is refused with what was wrong.
  auto refused = Goodputctl({"report", "--from-admin-comment", "JS1:abc"});
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->exit.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(refused->output, "does not start with \"goodput1:\""))
      << refused->output;
}

// What alerting's policy stage did about the job (its audit log, policy_stage.h) is part of
// the job's report, oldest first.
TEST_F(JobReportSlurmTest, TheReportListsThePolicyActionsTakenOnTheJob) {
  absl::StatusOr<std::string> job = slurm_->SubmitSleepJob({.name = "vit-pretrain"});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(slurm_->WaitForJobState(*job, "RUNNING", absl::Seconds(60)).ok());
  ASSERT_NO_FATAL_FAILURE(StartServices());
  for (const auto& [action, outcome] :
       {std::pair{"drain", "drained (was alloc)"}, std::pair{"requeue", "requeued"}}) {
    Sql(absl::StrCat(
        "INSERT INTO policy_actions (rule, alert_id, fingerprint, kind, cluster, job_id, "
        "scheduler, action, node, dry_run, status, command, outcome, warned_at, act_after, "
        "acted_at) VALUES ('gpu-faults', 7, 'gpu_fault-1', 'gpu_fault', 'eos', '",
        *job, "', 'slurm', '", action, "', '", std::string(action) == "drain" ? "node-1" : "",
        "', false, 'done', 'scontrol -- ", action, "', '", outcome, "', now(), now(), now())"));
  }
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(*job));
  v1::JobReport report;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(*job, FinalAndWritten, &report));
  ASSERT_EQ(report.policy_actions_size(), 2) << report.DebugString();
  EXPECT_EQ(report.policy_actions(0).action(), "drain");
  EXPECT_EQ(report.policy_actions(0).node(), "node-1");
  EXPECT_EQ(report.policy_actions(0).rule(), "gpu-faults");
  EXPECT_EQ(report.policy_actions(0).kind(), v1::ALERT_KIND_GPU_FAULT);
  EXPECT_EQ(report.policy_actions(1).action(), "requeue");
  EXPECT_EQ(report.policy_actions(1).outcome(), "requeued");
  EXPECT_EQ(report.policy_actions(1).status(), "done");
  auto text = Goodputctl(
      {"report", absl::StrCat("eos/", *job), "--alerting-addr", alerting_->grpc_address()});
  ASSERT_TRUE(text.ok() && text->exit.Success()) << (text.ok() ? text->output : "");
  EXPECT_TRUE(absl::StrContains(text->output, "gpu-faults: drain node node-1, done: drained"))
      << text->output;
}

// The report is a job-end product of alerting: it is written when alerting has evaluated the
// ended job to its end, not when ofu has the job's figures. With ofu computing the job but not
// forwarding its windows (and alerting's sweep an hour away), ofu's summary is final and still
// no report is due; once ofu forwards them, alerting evaluates the job to its end and the
// report, final, follows, with its AdminComment.
TEST_F(JobReportSlurmTest, ReportIsWrittenOnceAlertingHasEvaluatedTheEndedJob) {
  absl::StatusOr<std::string> job = slurm_->SubmitSleepJob({.name = "vit-pretrain"});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(slurm_->WaitForJobState(*job, "RUNNING", absl::Seconds(60)).ok());
  ASSERT_NO_FATAL_FAILURE(StartServices("scontrol", "sacctmgr", "  sweep_interval_s: 3600\n",
                                        /*ofu_forwards=*/false));
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(*job));
  auto ofu = v1::OfuService::NewStub(ofu_->Channel());
  v1::GetJobSummaryResponse summary;
  ASSERT_TRUE(PollUntil(
      [&] {
        grpc::ClientContext ctx;
        v1::GetJobSummaryRequest request;
        request.mutable_job()->set_cluster("eos");
        request.mutable_job()->set_job_id(*job);
        return ofu->GetJobSummary(&ctx, request, &summary).ok() && summary.summary().finalized();
      },
      absl::Seconds(60)));
  auto count = [&](const std::string& sql) {
    return pg_->QueryValue("goodput", sql).value_or("?");
  };
  EXPECT_EQ(count("SELECT count(*) FROM alert_job_state"), "0");
  EXPECT_EQ(count("SELECT count(*) FROM job_report_requests"), "0");
  {
    auto reports = v1::ReportService::NewStub(alerting_->Channel());
    grpc::ClientContext ctx;
    v1::GetJobReportRequest request;
    request.mutable_job()->set_cluster("eos");
    request.mutable_job()->set_job_id(*job);
    v1::GetJobReportResponse response;
    grpc::Status status = reports->GetJobReport(&ctx, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), "its report is being assembled"))
        << status.error_message();
  }

  // ofu forwards its windows (caught up from PostgreSQL): the evaluation reaches the job's end.
  ofu_->process().Terminate(absl::Seconds(10));
  ASSERT_NO_FATAL_FAILURE(StartOfu(/*forwards=*/true));
  v1::JobReport report;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(
      *job,
      [&](const v1::JobReport& r) {
        return FinalAndWritten(r) && AdminComment(*job) == r.admin_comment();
      },
      &report));
  // ofu sends the ended job's windows in more than one push (its last window, revised when
  // the job ended, in a later commit): the report waits for the windows that reach the end,
  // so its first revision already holds the idle GPU that the whole job shows.
  EXPECT_EQ(report.summary().revision(), 0) << report.DebugString();
  ASSERT_EQ(report.alerts_size(), 1) << report.DebugString();
  EXPECT_EQ(report.alerts(0).kind(), v1::ALERT_KIND_IDLE_GPUS);
  // Where its 0.67 GPU-hours went: GPU 3's idle 10 minutes, the rest productive.
  const v1::GoodputLedger& ledger = report.summary().ledger();
  EXPECT_DOUBLE_EQ(ledger.allocated_gpu_hours(), 0.67) << ledger.DebugString();
  EXPECT_DOUBLE_EQ(ledger.idle_gpu_hours(), 0.17) << ledger.DebugString();
  EXPECT_DOUBLE_EQ(ledger.productive_gpu_hours(), 0.5) << ledger.DebugString();
  EXPECT_DOUBLE_EQ(ledger.coverage(), 1) << ledger.DebugString();
  // The telemetry has board power (500 W) but no energy counter: 4 GPUs x 500 W x 600 s,
  // estimated, over the tensor work the busy GPUs did.
  EXPECT_DOUBLE_EQ(report.summary().energy_kwh(), 0.333) << report.summary().DebugString();
  EXPECT_TRUE(report.summary().energy_estimated());
  ASSERT_TRUE(report.summary().has_joules_per_pflop()) << report.summary().DebugString();
  // 1.2 MJ over the 0.1858 effective GPU-hours x 989.4 TFLOP/s (H100 SXM dense BF16) =
  // 661.8 PFLOP the GPUs did; no framework figure without MFU reports.
  EXPECT_NEAR(report.summary().joules_per_pflop(),
              1.2e6 / (report.ofu().effective_gpu_hours() * 3600 * 989.4 / 1000), 0.05);
  EXPECT_FALSE(report.summary().has_framework_joules_per_pflop());
  EXPECT_EQ(count(absl::StrCat("SELECT evaluated_end = last_window_end FROM alert_job_state "
                               "WHERE cluster = 'eos' AND job_id = '",
                               *job, "'")),
            "t");
  EXPECT_NEAR(report.summary().gpu_hours(), summary.summary().gpu_hours(), 0.01);
  EXPECT_EQ(AdminComment(*job), report.admin_comment());
  EXPECT_TRUE(absl::StrContains(alerting_->process().LogTail(1 << 20), "job report written"))
      << alerting_->process().LogTail();
}

// Energy per useful work against the workload's earlier runs on the same GPU model: the job
// spends its 4 GPUs' 500 W on 3 busy GPUs (about 1,814 J/PFLOP), where earlier runs of
// the workload on H100s spent 1,000 and 1,300 (median 1,150): 1.58x, an energy regression.
// A run on another GPU model and one that started after the job are no baseline.
TEST_F(JobReportSlurmTest, AJobSpendingMoreEnergyPerPflopThanItsWorkloadsEarlierRunsIsToldSo) {
  absl::StatusOr<std::string> job = slurm_->SubmitSleepJob({.name = "vit-pretrain"});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(slurm_->WaitForJobState(*job, "RUNNING", absl::Seconds(60)).ok());
  struct Earlier {
    std::string job_id, gpu_model;
    int64_t start_ms;
    double joules_per_pflop;
  };
  const std::vector<Earlier> earlier = {
      {"e1", "NVIDIA H100 80GB HBM3", kStartMs - 3 * 86'400'000, 1000},
      {"e2", "NVIDIA H100 80GB HBM3", kStartMs - 2 * 86'400'000, 1300},
      {"e3", "NVIDIA A100-SXM4-80GB", kStartMs - 1 * 86'400'000, 100},
      {"later", "NVIDIA H100 80GB HBM3", kStartMs + 60'000, 100},
  };
  // Carbon and cost at eos's rates (another cluster's would be the catch-all's).
  ASSERT_NO_FATAL_FAILURE(StartServices(
      "scontrol", "sacctmgr", "", true,
      "    sites:\n"
      "      - {cluster: \"*\", pue: 1.5}\n"
      "      - {cluster: eos, pue: 1.2, grid_gco2e_per_kwh: 380, price_per_gpu_hour: 2.5,\n"
      "         price_per_kwh: 0.12}\n"));  // applies the migrations
  for (const Earlier& e : earlier) {
    v1::JobReport r;
    r.mutable_summary()->set_gpu_model(e.gpu_model);
    r.mutable_summary()->set_joules_per_pflop(e.joules_per_pflop);
    Sql(absl::StrCat("INSERT INTO jobs (cluster, job_id, scheduler, gpu_model, state, start_time, "
                     "end_time, workload_fingerprint) VALUES ('eos', '", e.job_id,
                     "', 'slurm', '", e.gpu_model, "', 'completed', ", Ts(e.start_ms), ", ",
                     Ts(e.start_ms + 3'600'000), ", 'wf-vit')"));
    Sql(absl::StrCat("INSERT INTO job_reports (job, content_hash, report_pb, final) SELECT id, "
                     "'h', decode('", absl::Base64Escape(r.SerializeAsString()),
                     "', 'base64'), true FROM jobs WHERE cluster = 'eos' AND job_id = '",
                     e.job_id, "'"));
  }
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(*job, "eos", "node-1", kMinutes, "wf-vit"));
  v1::JobReport report;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(*job, FinalAndWritten, &report));
  const v1::ReportSummary& s = report.summary();
  ASSERT_TRUE(s.has_joules_per_pflop()) << s.DebugString();
  EXPECT_DOUBLE_EQ(s.workload_joules_per_pflop(), 1150) << s.DebugString();
  EXPECT_EQ(s.workload_energy_jobs(), 2);
  EXPECT_GE(s.joules_per_pflop() / s.workload_joules_per_pflop(), api::kEnergyRegressionFactor);
  const auto advice = std::find_if(report.advice().begin(), report.advice().end(),
                                   [](const v1::Advice& a) {
                                     return a.kind() == v1::ADVICE_KIND_ENERGY_REGRESSION;
                                   });
  ASSERT_NE(advice, report.advice().end()) << report.DebugString();
  EXPECT_TRUE(absl::StrContains(
      advice->text(),
      absl::StrFormat("This run spent %.2fx the energy per PFLOP of tensor work of its "
                      "workload's earlier runs on NVIDIA H100 80GB HBM3 (%.1f vs 1150.0 "
                      "J/PFLOP, the median of 2 jobs)",
                      s.joules_per_pflop() / 1150, s.joules_per_pflop())))
      << advice->text();
  // 0.333 kWh of the GPUs (estimated from board power) x PUE 1.2 at the facility, x 380 g/kWh;
  // 4 GPUs x 10 minutes x USD 2.50 + 0.4 kWh x USD 0.12 = USD 1.71.
  EXPECT_NEAR(s.facility_energy_kwh(), 0.4, 0.001) << s.DebugString();
  EXPECT_NEAR(s.co2e_kg(), 0.152, 0.001);
  EXPECT_NEAR(s.cost(), kGpus * kMinutes / 60.0 * 2.5 + 0.048, 0.006);
  EXPECT_EQ(s.currency(), "USD");
  EXPECT_EQ(s.carbon_cost_basis(),
            "PUE 1.20; grid 380 gCO2e/kWh; USD 2.50/GPU-h + USD 0.120/kWh; energy partly "
            "estimated (site eos)");
  // The AdminComment carries the baseline, and goodputctl prints it.
  std::string full_report;
  ASSERT_NO_FATAL_FAILURE(ExpectGoodputctlDecodes(AdminComment(*job), s, *job, &full_report));
  EXPECT_TRUE(absl::StrContains(full_report, "its workload's earlier runs 1150.0 (median of 2)"))
      << full_report;
  EXPECT_TRUE(absl::StrContains(full_report, "kg CO2e, USD ")) << full_report;
  // Summed by team with the ledger: the job's kWh, emissions and cost.
  auto ledger = Goodputctl({"ledger", "--group-by", "team", "--from", "2025-12-01T00:00:00Z",
                            "--to", "2026-02-01T00:00:00Z", "--json", "--alerting-addr",
                            alerting_->grpc_address()});
  ASSERT_TRUE(ledger.ok() && ledger->exit.Success()) << (ledger.ok() ? ledger->output : "");
  const nlohmann::json total = nlohmann::json::parse(ledger->output)["total"];
  EXPECT_NEAR(total["co2e_kg"].get<double>(), s.co2e_kg(), 1e-9) << ledger->output;
  EXPECT_EQ(total["jobs_with_co2e"].get<int>(), 1) << ledger->output;
  EXPECT_NEAR(total["cost"]["USD"].get<double>(), s.cost(), 1e-9) << ledger->output;
}

// The GPUs stopped reporting 4 minutes before Slurm ended the job: the windows never reach
// its end, and the report is asked for by the sweep once no window has come since the last.
TEST_F(JobReportSlurmTest, JobWhoseTelemetryStoppedBeforeItsEndGetsItsReportFromTheSweep) {
  absl::StatusOr<std::string> job = slurm_->SubmitSleepJob({.name = "vit-pretrain"});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(slurm_->WaitForJobState(*job, "RUNNING", absl::Seconds(60)).ok());
  ASSERT_NO_FATAL_FAILURE(StartServices("scontrol", "sacctmgr", "  sweep_interval_s: 1\n"));
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(*job, "eos", "node-1", /*telemetry_minutes=*/6));
  v1::JobReport report;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(*job, FinalAndWritten, &report));
  EXPECT_EQ(report.summary().revision(), 0) << report.DebugString();
  EXPECT_EQ(report.ofu().window_count(), 6) << report.ofu().DebugString();
  // Its last 4 minutes had no telemetry: 4 GPUs x 4 minutes of its 10.
  const v1::GoodputLedger& ledger = report.summary().ledger();
  EXPECT_DOUBLE_EQ(ledger.no_telemetry_gpu_hours(), 0.27) << ledger.DebugString();
  EXPECT_DOUBLE_EQ(ledger.coverage(), 0.6) << ledger.DebugString();
  EXPECT_EQ(AdminComment(*job), report.admin_comment());
}

TEST_F(JobReportSlurmTest, FinishedSlurmJobIsRefusedAndReportsAreListedByWaste) {
  absl::StatusOr<std::string> job = slurm_->SubmitJob("sleep 1");
  ASSERT_TRUE(job.ok()) << job.status();
  absl::Status completed = slurm_->WaitForJobState(*job, "COMPLETED", absl::Seconds(60));
  ASSERT_TRUE(completed.ok()) << completed;
  ASSERT_NO_FATAL_FAILURE(StartServices());
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(*job));
  Sql("INSERT INTO jobs (cluster, job_id, scheduler, state, start_time) VALUES ('eos', "
      "'still-running', 'slurm', 'running', now())");
  auto reports = v1::ReportService::NewStub(alerting_->Channel());
  {
    grpc::ClientContext ctx;
    v1::GetJobReportRequest request;
    request.mutable_job()->set_cluster("eos");
    request.mutable_job()->set_job_id("still-running");
    v1::GetJobReportResponse response;
    grpc::Status status = reports->GetJobReport(&ctx, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_TRUE(absl::StrContains(status.error_message(), "reports are written when a job ends"))
        << status.error_message();
  }
  v1::ListJobReportsResponse listed;
  ASSERT_TRUE(PollUntil(
      [&] {
        grpc::ClientContext ctx;
        v1::ListJobReportsRequest request;
        *request.mutable_ended_in()->mutable_start_time() =
            google::protobuf::util::TimeUtil::MillisecondsToTimestamp(kStartMs);
        *request.mutable_ended_in()->mutable_end_time() =
            google::protobuf::util::TimeUtil::MillisecondsToTimestamp(kStartMs + 86'400'000);
        request.set_user("alice");
        listed.Clear();
        return reports->ListJobReports(&ctx, request, &listed).ok() && listed.reports_size() == 1;
      },
      absl::Seconds(60)));
  EXPECT_EQ(listed.reports(0).job().job_id(), *job);
  {
    // The outbox's attempt is refused for good: the row fails, and the report says why.
    v1::JobReport report;
    ASSERT_NO_FATAL_FAILURE(WaitForReport(
        *job,
        [](const v1::JobReport& r) {
          return absl::StartsWith(r.admin_comment_status(), "not written: ");
        },
        &report));
    EXPECT_TRUE(absl::StrContains(report.admin_comment_status(), "already finished"))
        << report.admin_comment_status();
    EXPECT_FALSE(absl::StartsWith(AdminComment(*job), "goodput1:"));
  }
  EXPECT_GT(listed.reports(0).wasted_gpu_hours(), 0);
  // The fleet by user and team on the command line: alice's job in team vision, with its
  // wasted GPU-hours.
  auto fleet =
      Goodputctl({"fleet", "summary", "--group-by", "user,team", "--from", "2026-01-01T00:00:00Z",
                  "--to", "2026-01-02T00:00:00Z", "--ofu-addr", ofu_->grpc_address()});
  ASSERT_TRUE(fleet.ok() && fleet->exit.Success()) << (fleet.ok() ? fleet->output : "");
  EXPECT_TRUE(absl::StrContains(fleet->output, "USER")) << fleet->output;
  EXPECT_TRUE(absl::StrContains(fleet->output, "alice")) << fleet->output;
  EXPECT_TRUE(absl::StrContains(fleet->output, "vision")) << fleet->output;
  // Where the team's GPU-hours went, from the ended jobs' reports: GPU 3's idle 10 minutes.
  auto ledger = Goodputctl({"ledger", "--group-by", "team", "--from", "2026-01-01T00:00:00Z",
                            "--to", "2026-01-02T00:00:00Z", "--alerting-addr",
                            alerting_->grpc_address()});
  ASSERT_TRUE(ledger.ok() && ledger->exit.Success()) << (ledger.ok() ? ledger->output : "");
  EXPECT_TRUE(absl::StrContains(ledger->output, "TEAM")) << ledger->output;
  EXPECT_TRUE(absl::StrContains(ledger->output, "PRODUCTIVE")) << ledger->output;
  EXPECT_TRUE(absl::StrContains(ledger->output, "vision  ")) << ledger->output;
  // Of the rounded figures the summaries carry: 0.50 of 0.67.
  EXPECT_TRUE(absl::StrContains(ledger->output, "0.50 (74.6%)")) << ledger->output;
  auto ledger_json = Goodputctl({"ledger", "--group-by", "user", "--from",
                                 "2026-01-01T00:00:00Z", "--to", "2026-01-02T00:00:00Z",
                                 "--alerting-addr", alerting_->grpc_address(), "--json"});
  ASSERT_TRUE(ledger_json.ok() && ledger_json->exit.Success())
      << (ledger_json.ok() ? ledger_json->output : "");
  const nlohmann::json by_user = nlohmann::json::parse(ledger_json->output, nullptr, false);
  ASSERT_TRUE(by_user.is_object()) << ledger_json->output;
  ASSERT_EQ(by_user["groups"].size(), 1u) << ledger_json->output;
  EXPECT_EQ(by_user["groups"][0]["name"], "alice");
  EXPECT_EQ(by_user["groups"][0]["jobs"], 1);
  EXPECT_DOUBLE_EQ(by_user["groups"][0]["ledger"]["idle_gpu_hours"].get<double>(), 0.17);
  EXPECT_DOUBLE_EQ(by_user["total"]["ledger"]["allocated_gpu_hours"].get<double>(), 0.67);
  auto bad_group =
      Goodputctl({"fleet", "summary", "--group-by", "planet", "--ofu-addr", ofu_->grpc_address()});
  ASSERT_TRUE(bad_group.ok());
  EXPECT_EQ(bad_group->exit.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(bad_group->output, "\"planet\" is not user, team, workload"))
      << bad_group->output;
  {
    grpc::ClientContext ctx;
    v1::ListJobReportsRequest request;
    v1::ListJobReportsResponse response;
    grpc::Status status = reports->ListJobReports(&ctx, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_TRUE(absl::StrContains(status.error_message(), "ended_in")) << status.error_message();
  }
}

class JobReportSlurmdbdTest : public JobReportSlurmTest {
 protected:
  ::goodput::testing::SlurmClusterOptions ClusterOptions() const override {
    return {.accounting = true};
  }

  // Runs `sleep 1` and waits until Slurm has finished it and slurmdbd has its record.
  void RunFinishedJob(std::string* job_id) {
    absl::StatusOr<std::string> job = slurm_->SubmitJob("sleep 1", {"--job-name=vit-pretrain"});
    ASSERT_TRUE(job.ok()) << job.status();
    *job_id = *job;
    absl::Status completed = slurm_->WaitForJobState(*job, "COMPLETED", absl::Seconds(60));
    ASSERT_TRUE(completed.ok()) << completed;
    std::string state;
    ASSERT_TRUE(PollUntil(
        [&] {
          absl::StatusOr<std::string> s = slurm_->SacctField(*job, "State");
          state = s.ok() ? *s : std::string(s.status().message());
          return state == "COMPLETED";
        },
        absl::Seconds(30), absl::Milliseconds(200)))
        << "sacct -j " << *job << ": " << state;
  }
};

TEST_F(JobReportSlurmdbdTest, FinishedJobGetsItsReportThroughSacctmgrAndSacctReadsItBack) {
  std::string job;
  ASSERT_NO_FATAL_FAILURE(RunFinishedJob(&job));
  // slurmctld no longer takes an AdminComment for it: only slurmdbd does.
  auto refused =
      slurm_->Run({"scontrol", "update", absl::StrCat("JobId=", job), "AdminComment=goodput1:x"});
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "already finished"))
      << refused.status();
  ASSERT_NO_FATAL_FAILURE(StartServices("sacctmgr"));
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(job));
  v1::JobReport report;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(job, FinalAndWritten, &report));
  const v1::ReportSummary& s = report.summary();
  EXPECT_EQ(s.user(), "alice");
  EXPECT_EQ(s.gpus_allocated(), kGpus);
  EXPECT_EQ(s.idle_gpu_count(), 1);
  EXPECT_NEAR(s.ofu(), 3 * 0.4 * 1700 / 1830.0 / kGpus, 0.002);

  // slurmdbd holds the summary as written: sacctmgr lower-cases what it sets, so the comment
  // is spelled in lower-case base32.
  absl::StatusOr<std::string> comment = slurm_->SacctField(job, "AdminComment");
  ASSERT_TRUE(comment.ok()) << comment.status();
  EXPECT_EQ(*comment, report.admin_comment());
  ASSERT_TRUE(absl::StartsWith(*comment, "goodput1-b32:")) << *comment;
  ASSERT_NO_FATAL_FAILURE(ExpectGoodputctlDecodes(*comment, s, job));
  // As a user pipes it: sacct's padded column on stdin.
  auto piped = RunProgram({"/bin/sh", "-c",
                           absl::StrCat("sacct -n -X -j ", job, " -o AdminComment%4000 | ",
                                        BuiltBinary("tools/goodputctl/goodputctl").string(),
                                        " report --from-admin-comment - --json")},
                          slurm_->Env());
  ASSERT_TRUE(piped.ok()) << piped.status();
  ASSERT_TRUE(piped->exit.Success()) << piped->output;
  v1::ReportSummary decoded;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(piped->output, &decoded).ok())
      << piped->output;
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(decoded, s));
}

TEST_F(JobReportSlurmdbdTest, ReportIsStoredWhileSlurmdbdIsDownAndItsAdminCommentFollows) {
  std::string job;
  ASSERT_NO_FATAL_FAILURE(RunFinishedJob(&job));
  ASSERT_TRUE(slurm_->StopSlurmdbd().ok());
  ASSERT_NO_FATAL_FAILURE(StartServices("sacctmgr"));
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(job));

  // The report is stored and served; why its AdminComment is missing is in the report (from
  // its outbox row) and the log.
  v1::JobReport report;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(
      job,
      [](const v1::JobReport& r) {
        return r.final() && r.summary().has_ofu() &&
               absl::StrContains(r.admin_comment_status(), "Connection refused");
      },
      &report));
  EXPECT_TRUE(absl::StartsWith(report.admin_comment_status(), "not written yet ("))
      << report.admin_comment_status();
  EXPECT_TRUE(absl::StrContains(report.admin_comment_status(),
                                absl::StrCat("sacctmgr update ... of job ", job, " exited")))
      << report.admin_comment_status();
  const std::string log = alerting_->process().LogTail(1 << 20);
  EXPECT_TRUE(absl::StrContains(log, "delivery attempt failed")) << log;
  EXPECT_TRUE(absl::StrContains(log, absl::StrCat("admin_comment:eos/", job, ":"))) << log;

  // Once slurmdbd is back, the outbox's retry writes it, and the report says so.
  ASSERT_TRUE(slurm_->StartSlurmdbd().ok());
  ASSERT_NO_FATAL_FAILURE(WaitForReport(
      job, [](const v1::JobReport& r) { return r.admin_comment_status() == "written"; }, &report));
  absl::StatusOr<std::string> comment = slurm_->SacctField(job, "AdminComment");
  ASSERT_TRUE(comment.ok()) << comment.status();
  EXPECT_EQ(*comment, report.admin_comment());
  ASSERT_NO_FATAL_FAILURE(ExpectGoodputctlDecodes(*comment, report.summary(), job));
}

// The AdminComment is an outbox row like any notification: while sacctmgr cannot even be run
// (not installed yet) its attempts fail and are retried with backoff; once it is there, the
// next attempt writes the same comment, and the row is delivered once.
TEST_F(JobReportSlurmdbdTest, AdminCommentIsRetriedThroughTheOutboxUntilSacctmgrIsThere) {
  std::string job;
  ASSERT_NO_FATAL_FAILURE(RunFinishedJob(&job));
  auto dir = ::goodput::testing::TempDir::Create("admin-comment-bin");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::filesystem::path sacctmgr = dir->path() / "sacctmgr";
  ASSERT_NO_FATAL_FAILURE(StartServices("sacctmgr", sacctmgr.string()));
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(job));
  v1::JobReport report;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(
      job,
      [](const v1::JobReport& r) {
        return r.final() && absl::StartsWith(r.admin_comment_status(), "not written yet (2 ");
      },
      &report));
  EXPECT_TRUE(absl::StrContains(report.admin_comment_status(), sacctmgr.string()))
      << report.admin_comment_status();
  const std::string key = absl::StrCat("admin_comment:eos/", job, ":", report.summary().revision(),
                                       ":eos-admin-comment");
  auto outbox = [&](const std::string& column) {
    absl::StatusOr<std::string> v = pg_->QueryValue(
        "goodput",
        absl::StrCat("SELECT ", column, " FROM alert_outbox WHERE idempotency_key = '", key, "'"));
    return v.ok() ? *v : std::string(v.status().message());
  };
  EXPECT_EQ(outbox("status"), "pending");

  std::filesystem::create_symlink("/usr/bin/sacctmgr", sacctmgr);
  ASSERT_NO_FATAL_FAILURE(WaitForReport(
      job, [](const v1::JobReport& r) { return r.admin_comment_status() == "written"; }, &report));
  EXPECT_EQ(outbox("status"), "delivered");
  EXPECT_GE(std::stoi(outbox("attempts")), 3);
  absl::StatusOr<std::string> comment = slurm_->SacctField(job, "AdminComment");
  ASSERT_TRUE(comment.ok()) << comment.status();
  EXPECT_EQ(*comment, report.admin_comment());
}

// Job 777001 of another cluster is another job: the AdminComment target of cluster eos never
// writes it to eos's Slurm, whatever its id. The report of the other cluster's job says why;
// a row of it that reaches eos's target anyway is skipped with the reason, not sent. Ids that
// are not Slurm job ids are refused naming the id, and nothing is run for them.
TEST_F(JobReportSlurmTest, AJobOfAnotherClusterOrWithANonSlurmIdIsNotWrittenToThisClustersSlurm) {
  absl::StatusOr<std::string> job = slurm_->SubmitSleepJob({.name = "vit-pretrain"});
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE(slurm_->WaitForJobState(*job, "RUNNING", absl::Seconds(60)).ok());
  ASSERT_NO_FATAL_FAILURE(StartServices());
  // The same id on cluster west, and a job of eos whose id is not a Slurm job id.
  const std::string bad_id = "7$(id)";
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(*job, "west"));
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(bad_id, "eos", "node-2"));
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(*job));

  v1::JobReport eos;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(*job, FinalAndWritten, &eos));
  v1::JobReport west;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(
      *job, [](const v1::JobReport& r) { return r.final() && r.summary().has_ofu(); }, &west,
      "west"));
  EXPECT_EQ(west.admin_comment_status(),
            "not written: no slurm_admin_comment target serves cluster west "
            "(alerting.reports.admin_comment_targets serve eos)");
  v1::JobReport bad;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(
      bad_id, [](const v1::JobReport& r) { return r.final() && r.summary().has_ofu(); }, &bad));
  EXPECT_EQ(bad.admin_comment_status(), "not written: job_id=\"7$(id)\" is not a Slurm job id");
  // Slurm's job holds eos's summary, and only eos's job is in the outbox (a row per revision).
  EXPECT_EQ(AdminComment(*job), eos.admin_comment());
  EXPECT_EQ(
      pg_->QueryValue("goodput",
                      "SELECT string_agg(DISTINCT payload ->> 'cluster' || '/' || (payload ->> "
                      "'job_id'), ',') FROM alert_outbox WHERE kind = 'admin_comment'")
          .value_or("?"),
      absl::StrCat("eos/", *job));

  // Rows that reach eos's target anyway (another version's, or written by hand): west's job is
  // skipped with the reason, the non-Slurm id fails naming it; neither runs scontrol.
  Sql(absl::StrCat(
      "INSERT INTO alert_outbox (alert_id, kind, target, state, idempotency_key, payload) VALUES "
      "(NULL, 'admin_comment', 'eos-admin-comment', 'admin_comment', 'by-hand-west', "
      "'{\"cluster\": \"west\", \"job_id\": \"",
      *job,
      "\", \"revision\": 9, \"comment\": \"goodput1:x\"}'), "
      "(NULL, 'admin_comment', 'eos-admin-comment', 'admin_comment', 'by-hand-bad', "
      "'{\"cluster\": \"eos\", \"job_id\": \"-h\", \"revision\": 9, \"comment\": "
      "\"goodput1:x\"}')"));
  auto row = [&](const std::string& key) {
    absl::StatusOr<std::string> v = pg_->QueryValue(
        "goodput",
        absl::StrCat("SELECT status || ' ' || attempts || ' ' || last_error FROM alert_outbox "
                     "WHERE idempotency_key = '",
                     key, "'"));
    return v.ok() ? *v : std::string(v.status().message());
  };
  ASSERT_TRUE(PollUntil([&] { return !absl::StartsWith(row("by-hand-west"), "pending"); },
                        absl::Seconds(60)));
  ASSERT_TRUE(PollUntil([&] { return !absl::StartsWith(row("by-hand-bad"), "pending"); },
                        absl::Seconds(60)));
  EXPECT_EQ(row("by-hand-west"),
            absl::StrCat("dropped 0 skipped: job west/", *job,
                         " is not on cluster eos that target eos-admin-comment "
                         "(slurm_admin_comment) serves; nothing was sent"));
  EXPECT_EQ(row("by-hand-bad"), "failed 1 INVALID_ARGUMENT: job_id=\"-h\" is not a Slurm job id");
  EXPECT_EQ(AdminComment(*job), eos.admin_comment());
}

}  // namespace
}  // namespace goodput::ofu
