// goodputctl as an operator runs it, the real binary against real services: a job registered
// with it and fed samples through IngestService shows its OFU as a table with a sparkline and
// as JSON; the catalog, GEMM overhead and fleet summary answer; bad input and unknown jobs
// end with a message on stderr and a non-zero exit; and commands whose RPC a service does not
// serve yet say which service and RPC instead of crashing.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"

namespace goodput::testing {
namespace {

namespace v1 = ::goodput::v1;

using ::testing::HasSubstr;

constexpr char kModel[] = "NVIDIA H100 80GB HBM3";

class GoodputCtl : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Create();
    ASSERT_TRUE(pg.ok()) << pg.status();
    pg_ = *std::move(pg);
    ASSERT_TRUE(pg_->CreateDatabase("goodput").ok());
    absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Create();
    ASSERT_TRUE(redis.ok()) << redis.status();
    redis_ = *std::move(redis);
  }

  std::string Yaml(const std::string& extra = "") const {
    return absl::StrCat("postgres:\n  dsn: \"", pg_->Dsn("goodput"),
                        "\"\nredis:\n  host: ", redis_->host(), "\n  port: ", redis_->port(),
                        "\nlog:\n  format: text\n", extra);
  }

  std::unique_ptr<ServiceProcess> Start(const std::string& name, const std::string& extra = "",
                                        bool migrate = false) {
    std::vector<std::string> args;
    if (migrate) args = {"--migrate", "--migrations-dir", (SourceDir() / "migrations").string()};
    absl::StatusOr<std::unique_ptr<ServiceProcess>> service = ServiceProcess::Start(
        {.binary = BuiltBinary(absl::StrCat("services/", name, "/goodput-", name)),
         .config_yaml = Yaml(extra),
         .extra_args = args});
    EXPECT_TRUE(service.ok()) << service.status();
    return service.ok() ? *std::move(service) : nullptr;
  }

  // Runs goodputctl with the services' addresses in the environment, as the local stack's
  // users do.
  ProgramResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), BuiltBinary("tools/goodputctl/goodputctl").string());
    std::vector<std::pair<std::string, std::string>> env = {{"GOODPUT_TOKEN", ""}};
    if (ingest_) env.emplace_back("GOODPUT_INGEST_ADDR", ingest_->grpc_address());
    if (ofu_) env.emplace_back("GOODPUT_OFU_ADDR", ofu_->grpc_address());
    if (mfu_) env.emplace_back("GOODPUT_MFU_ADDR", mfu_->grpc_address());
    if (alerting_) env.emplace_back("GOODPUT_ALERTING_ADDR", alerting_->grpc_address());
    absl::StatusOr<ProgramResult> result = RunProgram(args, env);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : ProgramResult{};
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<ServiceProcess> ingest_, ofu_, mfu_, alerting_;
};

// Ten minutes of two H100s at tensor activity 0.5 and the tensor max clock: OFU 50%.
v1::PushSamplesRequest Samples(absl::Time start) {
  v1::PushSamplesRequest batch;
  batch.set_batch_id("ctl-test-1");
  batch.set_cluster("eos");
  for (int gpu = 0; gpu < 2; ++gpu) {
    for (int i = 0; i < 20; ++i) {
      v1::GpuSample* s = batch.add_samples();
      s->mutable_gpu()->set_host("node1");
      s->mutable_gpu()->set_gpu_index(gpu);
      s->set_time_unix_ms(absl::ToUnixMillis(start + absl::Seconds(30 * i)));
      s->set_gpu_model(kModel);
      s->set_tensor_active(0.5);
      s->set_sm_clock_mhz(1830);
    }
  }
  return batch;
}

TEST_F(GoodputCtl, ShowsAJobsOfuAsTableSparklineAndJsonAndTheCatalogAndFleet) {
  ingest_ = Start("ingest", "", /*migrate=*/true);
  ASSERT_NE(ingest_, nullptr);
  ofu_ = Start(
      "ofu",
      "ofu:\n  window_s: 60\n  allowed_lateness_s: 0\n  idle_flush_s: 1\n  poll_interval_s: 0.2\n");
  ASSERT_NE(ofu_, nullptr);

  const absl::Time start =
      absl::FromUnixSeconds(absl::ToUnixSeconds(absl::Now()) / 60 * 60) - absl::Minutes(15);
  ProgramResult reg =
      Ctl({"register-job", "eos/42", "--gpus", "node1:0,node1:1", "--gpu-model", kModel, "--user",
           "alice", "--start", absl::FormatTime(absl::RFC3339_full, start, absl::UTCTimeZone())});
  ASSERT_EQ(reg.exit.exit_code, 0) << reg.output;
  EXPECT_THAT(reg.output, HasSubstr("registered eos/42 (2 GPUs)"));

  auto ingest = v1::IngestService::NewStub(ingest_->Channel());
  {
    grpc::ClientContext ctx;
    v1::PushSamplesResponse response;
    auto writer = ingest->PushSamples(&ctx, &response);
    ASSERT_TRUE(writer->Write(Samples(start)));
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.stored_count(), 40);
  }
  auto ofu = v1::OfuService::NewStub(ofu_->Channel());
  ASSERT_TRUE(PollUntil(
      [&] {
        grpc::ClientContext ctx;
        v1::GetJobSummaryRequest request;
        request.mutable_job()->set_cluster("eos");
        request.mutable_job()->set_job_id("42");
        v1::GetJobSummaryResponse response;
        return ofu->GetJobSummary(&ctx, request, &response).ok() &&
               response.summary().sample_count() == 40;
      },
      absl::Seconds(60), absl::Milliseconds(200)))
      << "goodput-ofu never counted the 40 samples";

  ProgramResult table = Ctl({"ofu", "eos/42", "--per-gpu", "--windows"});
  ASSERT_EQ(table.exit.exit_code, 0) << table.output;
  EXPECT_THAT(table.output, HasSubstr("OFU          50.0%"));
  EXPECT_THAT(table.output, HasSubstr("2 x " + std::string(kModel)));
  EXPECT_THAT(table.output, HasSubstr("█"));  // the sparkline, at its maximum
  EXPECT_THAT(table.output, HasSubstr("node1:1"));
  EXPECT_THAT(table.output, HasSubstr("START (UTC)"));

  ProgramResult json = Ctl({"ofu", "eos/42", "--json"});
  ASSERT_EQ(json.exit.exit_code, 0) << json.output;
  nlohmann::json parsed = nlohmann::json::parse(json.output, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << json.output;
  ASSERT_TRUE(parsed.contains("windows")) << json.output;
  ASSERT_GE(parsed["windows"].size(), 9u);
  EXPECT_EQ(parsed["summary"]["sample_count"], "40");  // int64 is a string in protobuf JSON
  for (const auto& w : parsed["windows"]) {
    EXPECT_NEAR(w["ofu"].get<double>(), 0.5, 1e-6);
    EXPECT_EQ(w["job"]["job_id"], "42");
  }

  ProgramResult jobs = Ctl({"jobs", "list", "--cluster", "eos"});
  ASSERT_EQ(jobs.exit.exit_code, 0) << jobs.output;
  EXPECT_THAT(jobs.output, HasSubstr("alice"));
  EXPECT_THAT(jobs.output, HasSubstr("1 jobs"));

  ProgramResult fleet = Ctl({"fleet", "summary", "--since", "2h", "--group-by", "cluster"});
  ASSERT_EQ(fleet.exit.exit_code, 0) << fleet.output;
  EXPECT_THAT(fleet.output, HasSubstr("eos"));
  EXPECT_THAT(fleet.output, HasSubstr("50.0%"));
  EXPECT_THAT(fleet.output, HasSubstr("TOTAL"));

  ProgramResult gpus = Ctl({"gpus"});
  ASSERT_EQ(gpus.exit.exit_code, 0) << gpus.output;
  EXPECT_THAT(gpus.output, HasSubstr("H100 SXM"));
  EXPECT_THAT(gpus.output, HasSubstr("1,830"));  // the tensor clock, not the 1,980 boost
  EXPECT_THAT(gpus.output, HasSubstr("989.4"));

  // nvJet 256x160 tile, cluster 2x1, on 4096^3: N pads to 4160, overhead 1.5625%.
  ProgramResult gemm = Ctl({"gemm-overhead", "nvjet_sm90_hsh_256x160_64x4_2x1", "--shape",
                            "4096x4096x4096", "--ofu", "0.5"});
  ASSERT_EQ(gemm.exit.exit_code, 0) << gemm.output;
  EXPECT_THAT(gemm.output, HasSubstr("4160"));
  EXPECT_THAT(gemm.output, HasSubstr("1.56%"));
  EXPECT_THAT(gemm.output, HasSubstr("adjusted for it: 49.2%"));

  ProgramResult unknown = Ctl({"ofu", "eos/nope"});
  EXPECT_EQ(unknown.exit.exit_code, 1) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("goodputctl: ofu: "));
  EXPECT_THAT(unknown.output, HasSubstr("goodput-ofu at " + ofu_->grpc_address()));

  ProgramResult bad_kernel = Ctl({"gemm-overhead", "cutlass_foo", "--shape", "64x64x64"});
  EXPECT_EQ(bad_kernel.exit.exit_code, 1) << bad_kernel.output;
  EXPECT_THAT(bad_kernel.output, HasSubstr("cutlass_foo"));
}

TEST_F(GoodputCtl, RefusesBadCommandLinesWithExitTwoAndExplainsEveryCommand) {
  ProgramResult no_job = Ctl({"ofu", "4211873"});
  EXPECT_EQ(no_job.exit.exit_code, 2);
  EXPECT_THAT(no_job.output, HasSubstr("\"4211873\" is not CLUSTER/JOB_ID"));
  ProgramResult bad_flag = Ctl({"alerts", "list", "--colour", "red"});
  EXPECT_EQ(bad_flag.exit.exit_code, 2);
  EXPECT_THAT(bad_flag.output, HasSubstr("unknown flag --colour for 'alerts list'"));
  ProgramResult bad_since = Ctl({"fleet", "summary", "--since", "soon"});
  EXPECT_EQ(bad_since.exit.exit_code, 2);
  EXPECT_THAT(bad_since.output, HasSubstr("--since: \"soon\""));
  ProgramResult bad_state = Ctl({"alerts", "list", "--state", "burning"});
  EXPECT_EQ(bad_state.exit.exit_code, 2);
  EXPECT_THAT(bad_state.output, HasSubstr("--state: \"burning\""));
  ProgramResult bad_shape = Ctl({"gemm-overhead", "--tile", "128x128x64", "--shape", "1x2"});
  EXPECT_EQ(bad_shape.exit.exit_code, 2);
  EXPECT_THAT(bad_shape.output, HasSubstr("--shape: \"1x2\""));

  for (std::vector<std::string> words : {std::vector<std::string>{"ofu"},
                                         {"reconcile"},
                                         {"report"},
                                         {"fleet", "report"},
                                         {"fleet", "summary"},
                                         {"alerts", "list"},
                                         {"alerts", "silence", "create"},
                                         {"gemm-overhead"},
                                         {"gpus"},
                                         {"jobs", "list"},
                                         {"register-job"},
                                         {"migrate"}}) {
    words.push_back("--help");
    ProgramResult help = Ctl(words);
    EXPECT_EQ(help.exit.exit_code, 0) << help.output;
    EXPECT_THAT(help.output, HasSubstr("usage: goodputctl " + words[0])) << help.output;
  }

  // Nothing listens: one clear line, exit 1.
  absl::StatusOr<int> port = FreePort();
  ASSERT_TRUE(port.ok());
  ProgramResult down = Ctl({"fleet", "summary", "--ofu-addr", absl::StrCat("127.0.0.1:", *port)});
  EXPECT_EQ(down.exit.exit_code, 1) << down.output;
  EXPECT_THAT(down.output, HasSubstr("cannot reach goodput-ofu at 127.0.0.1:"));
}

// Every MFU and alert command either works or names the service and RPC that is not served
// yet; none crashes, and a failure is never exit 0.
TEST_F(GoodputCtl, MfuAndAlertCommandsWorkOrSayWhatIsNotServedYet) {
  ingest_ = Start("ingest", "", /*migrate=*/true);
  ASSERT_NE(ingest_, nullptr);
  mfu_ = Start("mfu");
  ASSERT_NE(mfu_, nullptr);
  alerting_ = Start("alerting");
  ASSERT_NE(alerting_, nullptr);

  auto served_or_says = [](const ProgramResult& r, const std::string& service,
                           const std::string& method, const std::string& when_served) {
    if (r.exit.exit_code == 0) {
      EXPECT_THAT(r.output, HasSubstr(when_served));
    } else {
      EXPECT_EQ(r.exit.exit_code, 1) << r.output;
      EXPECT_THAT(r.output, HasSubstr(absl::StrCat(service, " does not serve ", method, " yet")));
    }
  };
  served_or_says(Ctl({"fleet", "report", "--since", "1d"}), "goodput-mfu", "GetFleetReport",
                 "coverage:");
  served_or_says(Ctl({"alerts", "list"}), "goodput-alerting", "ListAlerts", "0 alerts");
  served_or_says(Ctl({"alerts", "silence", "list"}), "goodput-alerting", "ListSilences",
                 "silences");
  ProgramResult silence = Ctl({"alerts", "silence", "create", "--match", "cluster=eos",
                               "--duration", "1h", "--by", "test", "--comment", "maintenance"});
  served_or_says(silence, "goodput-alerting", "CreateSilence", "silence ");
  if (silence.exit.exit_code == 0) {
    ProgramResult listed = Ctl({"alerts", "silence", "list"});
    EXPECT_EQ(listed.exit.exit_code, 0) << listed.output;
    EXPECT_THAT(listed.output, HasSubstr("cluster=eos"));
    EXPECT_THAT(listed.output, HasSubstr("maintenance"));
  }
  // A server without the RPC (here: alerting's address pointing at ingest) is named, with
  // the RPC, and the exit code is 1.
  ProgramResult unserved = Ctl({"alerts", "list", "--alerting-addr", ingest_->grpc_address()});
  EXPECT_EQ(unserved.exit.exit_code, 1) << unserved.output;
  EXPECT_THAT(unserved.output,
              HasSubstr("alerts list: goodput-alerting does not serve ListAlerts yet"));
  ProgramResult show = Ctl({"alerts", "show", "no-such-alert"});
  EXPECT_EQ(show.exit.exit_code, 1) << show.output;
  ProgramResult reconcile = Ctl({"reconcile", "eos/unknown"});
  EXPECT_EQ(reconcile.exit.exit_code, 1) << reconcile.output;
  EXPECT_THAT(reconcile.output, HasSubstr("goodputctl: reconcile: "));
}

// The alert lifecycle from the command line, on a real alert: the framework's MFU of a
// running job is reported 2.1x its OFU (mfu's verdict, pushed as mfu pushes it), alerting
// opens a divergence alert, and goodputctl lists, shows, acknowledges and silences it.
TEST_F(GoodputCtl, ListsShowsAcknowledgesAndSilencesARealAlert) {
  ingest_ = Start("ingest", "", /*migrate=*/true);
  ASSERT_NE(ingest_, nullptr);
  alerting_ = Start("alerting");
  ASSERT_NE(alerting_, nullptr);
  ProgramResult reg = Ctl({"register-job", "eos/7", "--gpus", "node7:0", "--gpu-model", kModel,
                           "--team", "llm", "--start", "now"});
  ASSERT_EQ(reg.exit.exit_code, 0) << reg.output;

  auto alerting = v1::AlertService::NewStub(alerting_->Channel());
  {
    v1::PushDivergenceEventsRequest request;
    request.mutable_position()->set_producer_id("mfu-test");
    request.mutable_position()->set_sequence(1);
    v1::DivergenceEvent* e = request.add_events();
    e->set_event_id("verdict-1");
    e->mutable_job()->set_cluster("eos");
    e->mutable_job()->set_job_id("7");
    const absl::Time now = absl::Now();
    e->mutable_time()->set_seconds(absl::ToUnixSeconds(now));
    e->mutable_interval()->mutable_start_time()->set_seconds(absl::ToUnixSeconds(now) - 3600);
    e->mutable_interval()->mutable_end_time()->set_seconds(absl::ToUnixSeconds(now));
    v1::Divergence* d = e->mutable_verdict();
    d->set_verdict(v1::VERDICT_APP_FLOPS_OVERCOUNT);
    d->set_ratio(2.1);
    d->set_confidence(0.99);
    d->set_app_mfu_mean(0.52);
    d->set_ofu_mean(0.25);
    d->set_correction_factor(1 / 2.1);
    d->set_windows_used(60);
    d->set_reason("framework MFU is 2.1x OFU");
    grpc::ClientContext ctx;
    v1::PushDivergenceEventsResponse response;
    grpc::Status status = alerting->PushDivergenceEvents(&ctx, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  std::string id;
  ASSERT_TRUE(PollUntil(
      [&] {
        ProgramResult r = Ctl({"alerts", "list", "--cluster", "eos", "--json"});
        nlohmann::json j = nlohmann::json::parse(r.output, nullptr, false);
        if (r.exit.exit_code != 0 || j.is_discarded() || !j.contains("alerts")) return false;
        for (const auto& a : j["alerts"]) {
          if (a["kind"] == "ALERT_KIND_DIVERGENCE") id = a["alert_id"];
        }
        return !id.empty();
      },
      absl::Seconds(30), absl::Milliseconds(300)))
      << "no divergence alert";

  ProgramResult list = Ctl({"alerts", "list", "--kind", "divergence", "--state", "firing"});
  ASSERT_EQ(list.exit.exit_code, 0) << list.output;
  EXPECT_THAT(list.output, HasSubstr("eos/7"));
  EXPECT_THAT(list.output, HasSubstr("divergence"));
  EXPECT_THAT(list.output, HasSubstr("1 alerts"));

  ProgramResult show = Ctl({"alerts", "show", id});
  ASSERT_EQ(show.exit.exit_code, 0) << show.output;
  EXPECT_THAT(show.output, HasSubstr("alert        " + id));
  EXPECT_THAT(show.output, HasSubstr("MFU/OFU 2.10"));

  ProgramResult ack =
      Ctl({"alerts", "ack", id, "--by", "alice", "--comment", "fixing the formula"});
  ASSERT_EQ(ack.exit.exit_code, 0) << ack.output;
  EXPECT_THAT(ack.output, HasSubstr("acknowledged " + id));
  ProgramResult acked = Ctl({"alerts", "show", id});
  EXPECT_THAT(acked.output, HasSubstr("acknowledged by alice"));
  EXPECT_THAT(acked.output, HasSubstr("fixing the formula"));
  ProgramResult firing = Ctl({"alerts", "list", "--state", "firing"});
  EXPECT_THAT(firing.output, HasSubstr("0 alerts")) << firing.output;

  ProgramResult silence = Ctl({"alerts", "silence", "create", "--job", "eos/7", "--duration", "1h",
                               "--by", "alice", "--comment", "known"});
  ASSERT_EQ(silence.exit.exit_code, 0) << silence.output;
  EXPECT_THAT(silence.output, HasSubstr("cluster=eos job_id=7"));
  ProgramResult silences = Ctl({"alerts", "silence", "list", "--json"});
  nlohmann::json sj = nlohmann::json::parse(silences.output, nullptr, false);
  ASSERT_FALSE(sj.is_discarded()) << silences.output;
  ASSERT_EQ(sj["silences"].size(), 1u) << silences.output;
  const std::string silence_id = sj["silences"][0]["silence_id"];
  ProgramResult deleted = Ctl({"alerts", "silence", "delete", silence_id});
  ASSERT_EQ(deleted.exit.exit_code, 0) << deleted.output;
  EXPECT_THAT(Ctl({"alerts", "silence", "list"}).output, HasSubstr("0 silences"));
  EXPECT_THAT(Ctl({"alerts", "silence", "list", "--all"}).output, HasSubstr("expired"));

  ProgramResult unknown = Ctl({"alerts", "ack", "99999", "--by", "alice"});
  EXPECT_EQ(unknown.exit.exit_code, 1) << unknown.output;
}

}  // namespace
}  // namespace goodput::testing
