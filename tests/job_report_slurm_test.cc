// Job-end reports with a real goodput-ofu, PostgreSQL, Redis and a real one-node Slurm
// (munge, slurmctld, slurmd). A job that goodput has ended while slurmctld still runs it (as
// when goodput ends a job whose GPUs fell silent) gets its report's compact summary in its
// AdminComment through scontrol, and `goodputctl report --from-admin-comment` decodes what
// `scontrol show job` prints into exactly the summary of the service's report and prints it
// as `goodputctl report` does. A job Slurm has already finished is refused by slurmctld (as
// Slurm 22.05 does for every finished job; sites with slurmdbd use the sacctmgr mode), and the
// report says so instead of retrying.
//
// With accounting (slurmdbd on a private MariaDB), the production path: a job Slurm has
// finished gets its summary through `sacctmgr -i update job`, `sacct -o AdminComment` reads it
// back and goodputctl decodes it into the service's summary; while slurmdbd is down the report
// is stored, says why the AdminComment is missing, and the write is retried until slurmdbd is
// back.
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
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "gtest/gtest.h"
#include "services/api/job_report.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/slurm_cluster.h"
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

  // `mode`: ofu.reports.slurm_admin_comment.
  absl::StatusOr<std::unique_ptr<ServiceProcess>> StartOfu(const std::string& mode = "scontrol") {
    return ServiceProcess::Start(
        {.binary = BuiltBinary("services/ofu/goodput-ofu"),
         .config_yaml = absl::StrCat(
             "postgres:\n  dsn: \"", pg_->Dsn("goodput"), "\"\nredis:\n  host: ", redis_->host(),
             "\n  port: ", redis_->port(),
             "\nlog:\n  format: text\nofu:\n  poll_interval_s: 0.1\n  idle_flush_s: 1\n"
             "  reports:\n    poll_interval_s: 0.2\n    recheck_s: 0.5\n"
             "    slurm_admin_comment: ",
             mode, "\n    slurm_conf: \"", slurm_->slurm_conf().string(), "\"\n"),
         .extra_args = ::goodput::testing::MigrateArgs()});
  }

  void Sql(const std::string& sql) {
    absl::Status s = pg_->Execute("goodput", sql);
    ASSERT_TRUE(s.ok()) << s << "\n" << sql.substr(0, 300);
  }

  // The job as a Slurm prolog and epilog register it (user, account as team), holding 4 H100
  // GPUs for 10 minutes; GPUs 0-2 busy at 40% tensor activity, GPU 3 idle; 20 GiB of HBM used.
  // One transaction, so that goodput-ofu sees the ended job with all its telemetry.
  void StoreJobAndTelemetry(const std::string& job_id) {
    Sql(absl::StrCat("SELECT samples_create_partitions(", Ts(kStartMs), ", ",
                     Ts(kStartMs + 86'400'000), ")"));
    const int64_t end_ms = kStartMs + kMinutes * 60'000;
    std::vector<std::string> statements = {"BEGIN"};
    statements.push_back(absl::StrCat(
        "INSERT INTO jobs (cluster, job_id, scheduler, user_name, team, name, gpu_model, state, "
        "start_time, end_time) VALUES ('eos', '",
        job_id, "', 'slurm', 'alice', 'vision', 'vit-pretrain', 'NVIDIA H100 80GB HBM3', ",
        "'completed', ", Ts(kStartMs), ", ", Ts(end_ms), ")"));
    for (int g = 0; g < kGpus; ++g) {
      statements.push_back(
          absl::StrCat("INSERT INTO job_gpus (job, cluster, host, gpu_index, valid) SELECT id, "
                       "'eos', 'node-1', ",
                       g, ", tstzrange(", Ts(kStartMs), ", ", Ts(end_ms), ") FROM jobs"));
    }
    std::vector<std::string> values;
    for (int t = 0; t < kMinutes * 60; t += 10) {
      for (int g = 0; g < kGpus; ++g) {
        const bool idle = g == kGpus - 1;
        values.push_back(absl::StrFormat(
            "(%s, 'eos', 'node-1', %d, 'NVIDIA H100 80GB HBM3', (SELECT id FROM jobs), %.3f, "
            "1700, %.3f, %.3f, 20480, 500)",
            Ts(kStartMs + t * 1000 + g * 11), g, idle ? 0.0 : 0.4, idle ? 0.0 : 0.1,
            idle ? 0.0 : 0.5));
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

  // Polls GetJobReport until `done` holds for the job's report; the last report in `out`.
  void WaitForReport(ServiceProcess& ofu, const std::string& job_id,
                     const std::function<bool(const v1::JobReport&)>& done, v1::JobReport* out) {
    auto reports = v1::ReportService::NewStub(ofu.Channel());
    grpc::Status last;
    ASSERT_TRUE(PollUntil(
        [&] {
          grpc::ClientContext ctx;
          v1::GetJobReportRequest request;
          request.mutable_job()->set_cluster("eos");
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
                               ServiceProcess& ofu, const std::string& job_id,
                               std::string* full_report = nullptr) {
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
    auto full_text =
        Goodputctl({"report", absl::StrCat("eos/", job_id), "--ofu-addr", ofu.grpc_address()});
    ASSERT_TRUE(full_text.ok() && full_text->exit.Success()) << full_text->output;
    EXPECT_TRUE(absl::StartsWith(full_text->output, decoded_text->output))
        << full_text->output << "\n---\n"
        << decoded_text->output;
    if (full_report != nullptr) *full_report = full_text->output;
  }

  std::unique_ptr<::goodput::testing::PostgresServer> pg_;
  std::unique_ptr<::goodput::testing::RedisServer> redis_;
  std::unique_ptr<::goodput::testing::SlurmCluster> slurm_;
};

TEST_F(JobReportSlurmTest, EndedJobCarriesItsReportInAdminCommentAndGoodputctlDecodesIt) {
  absl::StatusOr<std::string> job = slurm_->SubmitSleepJob({.name = "vit-pretrain"});
  ASSERT_TRUE(job.ok()) << job.status();
  absl::Status running = slurm_->WaitForJobState(*job, "RUNNING", absl::Seconds(60));
  ASSERT_TRUE(running.ok()) << running;
  ASSERT_FALSE(absl::StartsWith(AdminComment(*job), "goodput1:"));
  auto ofu = StartOfu();
  ASSERT_TRUE(ofu.ok()) << ofu.status();
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(*job));
  v1::JobReport report;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(**ofu, *job, FinalAndWritten, &report));

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
  EXPECT_EQ(report.reconciliation_note(), "mfu is not configured (ofu.forward.mfu_address)");
  EXPECT_EQ(report.job().name(), "vit-pretrain");

  // Slurm holds the summary, and the documented decoder reads back exactly the report's.
  const std::string comment = AdminComment(*job);
  EXPECT_EQ(comment, report.admin_comment());
  ASSERT_TRUE(absl::StartsWith(comment, "goodput1:")) << comment;
  std::string full_report;
  ASSERT_NO_FATAL_FAILURE(ExpectGoodputctlDecodes(comment, s, **ofu, *job, &full_report));
  EXPECT_TRUE(absl::StrContains(full_report, "1 of 4 GPUs stayed idle")) << full_report;
  EXPECT_TRUE(absl::StrContains(full_report, "idle GPUs")) << full_report;

  // A comment that is not goodput's is refused with what was wrong.
  auto refused = Goodputctl({"report", "--from-admin-comment", "JS1:abc"});
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->exit.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(refused->output, "does not start with \"goodput1:\""))
      << refused->output;
}

TEST_F(JobReportSlurmTest, FinishedSlurmJobIsRefusedAndReportsAreListedByWaste) {
  absl::StatusOr<std::string> job = slurm_->SubmitJob("sleep 1");
  ASSERT_TRUE(job.ok()) << job.status();
  absl::Status completed = slurm_->WaitForJobState(*job, "COMPLETED", absl::Seconds(60));
  ASSERT_TRUE(completed.ok()) << completed;
  auto ofu = StartOfu();
  ASSERT_TRUE(ofu.ok()) << ofu.status();
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(*job));
  Sql("INSERT INTO jobs (cluster, job_id, scheduler, state, start_time) VALUES ('eos', "
      "'still-running', 'slurm', 'running', now())");
  auto reports = v1::ReportService::NewStub((*ofu)->Channel());
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
    grpc::ClientContext ctx;
    v1::GetJobReportRequest request;
    request.mutable_job()->set_cluster("eos");
    request.mutable_job()->set_job_id(*job);
    v1::GetJobReportResponse response;
    ASSERT_TRUE(reports->GetJobReport(&ctx, request, &response).ok());
    EXPECT_TRUE(absl::StrContains(response.report().admin_comment_status(), "already finished"))
        << response.report().admin_comment_status();
    EXPECT_FALSE(absl::StartsWith(AdminComment(*job), "goodput1:"));
  }
  EXPECT_GT(listed.reports(0).wasted_gpu_hours(), 0);
  // The fleet by user and team on the command line: alice's job in team vision, with its
  // wasted GPU-hours.
  auto fleet =
      Goodputctl({"fleet", "summary", "--group-by", "user,team", "--from", "2026-01-01T00:00:00Z",
                  "--to", "2026-01-02T00:00:00Z", "--ofu-addr", (*ofu)->grpc_address()});
  ASSERT_TRUE(fleet.ok() && fleet->exit.Success()) << (fleet.ok() ? fleet->output : "");
  EXPECT_TRUE(absl::StrContains(fleet->output, "USER")) << fleet->output;
  EXPECT_TRUE(absl::StrContains(fleet->output, "alice")) << fleet->output;
  EXPECT_TRUE(absl::StrContains(fleet->output, "vision")) << fleet->output;
  auto bad_group = Goodputctl(
      {"fleet", "summary", "--group-by", "planet", "--ofu-addr", (*ofu)->grpc_address()});
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
  auto ofu = StartOfu("sacctmgr");
  ASSERT_TRUE(ofu.ok()) << ofu.status();
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(job));
  v1::JobReport report;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(**ofu, job, FinalAndWritten, &report));
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
  ASSERT_NO_FATAL_FAILURE(ExpectGoodputctlDecodes(*comment, s, **ofu, job));
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
  auto ofu = StartOfu("sacctmgr");
  ASSERT_TRUE(ofu.ok()) << ofu.status();
  ASSERT_NO_FATAL_FAILURE(StoreJobAndTelemetry(job));

  // The report is stored and served; why its AdminComment is missing is in the report and the
  // log.
  v1::JobReport report;
  ASSERT_NO_FATAL_FAILURE(WaitForReport(
      **ofu, job,
      [](const v1::JobReport& r) {
        return r.final() && r.summary().has_ofu() && !r.admin_comment_status().empty();
      },
      &report));
  EXPECT_TRUE(absl::StartsWith(report.admin_comment_status(), "sacctmgr update ... of job "))
      << report.admin_comment_status();
  EXPECT_TRUE(absl::StrContains(report.admin_comment_status(), "Connection refused"))
      << report.admin_comment_status();
  EXPECT_TRUE(absl::StrContains((*ofu)->process().LogTail(1 << 20), "AdminComment not written"))
      << (*ofu)->process().LogTail();

  // Once slurmdbd is back, the retry writes it, and the report says so.
  ASSERT_TRUE(slurm_->StartSlurmdbd().ok());
  ASSERT_NO_FATAL_FAILURE(WaitForReport(
      **ofu, job, [](const v1::JobReport& r) { return r.admin_comment_status() == "written"; },
      &report));
  absl::StatusOr<std::string> comment = slurm_->SacctField(job, "AdminComment");
  ASSERT_TRUE(comment.ok()) << comment.status();
  EXPECT_EQ(*comment, report.admin_comment());
  ASSERT_NO_FATAL_FAILURE(ExpectGoodputctlDecodes(*comment, report.summary(), **ofu, job));
}

}  // namespace
}  // namespace goodput::ofu
