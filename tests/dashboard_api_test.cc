// goodput-dashboard's JSON API and live events against the real services: job pages with
// per-GPU series (also for job ids holding '/'), jobs and fleet listings, parts whose RPC is
// not built yet reported as such, errors with their HTTP status, the built front-end served
// at /, an "ofu" event on the live stream when a job's windows close, and a clean exit on
// SIGTERM with a stream open.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/support/child_process.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_steps.h"

namespace goodput::testing {
namespace {

namespace v1 = ::goodput::v1;
using Json = nlohmann::json;

constexpr char kCluster[] = "dash";
constexpr char kModel[] = "NVIDIA H100 80GB HBM3";

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// PostgreSQL, Redis, the four services and goodput-dashboard (with a stand-in front-end).
class DashboardApi : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(StartRedis(&redis_));
    const std::string yaml = PostgresConfigYaml(*pg_) + RedisConfigYaml(*redis_);
    auto start = [&](const char* path, const std::string& extra, std::vector<std::string> args,
                     std::unique_ptr<ServiceProcess>* out) {
      StartService({.binary = BuiltBinary(path), .config_yaml = yaml + extra, .extra_args = args},
                   out);
    };
    ASSERT_NO_FATAL_FAILURE(start("services/ingest/goodput-ingest", "", MigrateArgs(), &ingest_));
    ASSERT_NO_FATAL_FAILURE(start("services/mfu/goodput-mfu", "", {}, &mfu_));
    ASSERT_NO_FATAL_FAILURE(start("services/alerting/goodput-alerting", "", {}, &alerting_));
    ASSERT_NO_FATAL_FAILURE(start(
        "services/ofu/goodput-ofu",
        "ofu:\n  poll_interval_s: 0.1\n  idle_flush_s: 2\n  allowed_lateness_s: 5\n", {}, &ofu_));

    auto dir = TempDir::Create("dashboard-api");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<TempDir>(*std::move(dir));
    std::filesystem::create_directories(dir_->path() / "www");
    std::ofstream(dir_->path() / "www" / "index.html") << "<!doctype html><title>goodput</title>";
    const std::filesystem::path ready = dir_->path() / "ready";
    auto dashboard = ChildProcess::Start(
        {.argv = {BuiltBinary("tools/dashboard/goodput-dashboard").string(), "--port", "0",
                  "--ingest", ingest_->grpc_address(), "--ofu", ofu_->grpc_address(), "--mfu",
                  mfu_->grpc_address(), "--alerting", alerting_->grpc_address(), "--static-dir",
                  (dir_->path() / "www").string(), "--ready-file", ready.string()},
         .log_path = dir_->path() / "dashboard.log"});
    ASSERT_TRUE(dashboard.ok()) << dashboard.status();
    dashboard_ = *std::move(dashboard);
    ASSERT_TRUE(PollUntil(
        [&] {
          std::string text = ReadFile(ready);
          return text.rfind("http_port=", 0) == 0 && (port_ = std::atoi(text.c_str() + 10)) > 0;
        },
        absl::Seconds(30)))
        << dashboard_->LogTail();
  }

  // GET `path`; the status and the body parsed as JSON (null if it is not JSON).
  std::pair<int, Json> Get(const std::string& path) {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(30, 0);
    httplib::Result result = client.Get(path);
    if (!result) return {0, nullptr};
    return {result->status, Json::parse(result->body, nullptr, /*allow_exceptions=*/false)};
  }

  void RegisterJob(const std::string& job_id, int gpus, int64_t start_s) {
    v1::RegisterJobRequest request;
    v1::Job* job = request.mutable_job();
    job->mutable_key()->set_cluster(kCluster);
    job->mutable_key()->set_job_id(job_id);
    job->set_scheduler(v1::SCHEDULER_KIND_KUBERNETES);
    job->set_name("train");
    job->set_user("alice");
    job->mutable_labels()->insert({"team", "vision"});
    job->set_gpu_model(kModel);
    job->set_state(v1::JOB_STATE_RUNNING);
    job->mutable_start_time()->set_seconds(start_s);
    for (int g = 0; g < gpus; ++g) {
      v1::GpuAllocation* a = job->add_allocations();
      a->mutable_gpu()->set_host(absl::StrCat("node-", job_id.size()));
      a->mutable_gpu()->set_gpu_index(g);
    }
    v1::RegisterJobResponse response;
    grpc::Status status =
        v1::JobService::NewStub(ingest_->Channel())->RegisterJob(Ctx().get(), request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
  }

  // Samples every 10 s over [from_s, to_s) for each GPU, tensor activity 0.5.
  void PushSamples(const std::string& job_id, int gpus, int64_t from_s, int64_t to_s) {
    v1::PushSamplesRequest batch;
    batch.set_batch_id(absl::StrCat(job_id, "-", from_s));
    batch.set_cluster(kCluster);
    for (int64_t t = from_s; t < to_s; t += 10) {
      for (int g = 0; g < gpus; ++g) {
        v1::GpuSample* s = batch.add_samples();
        s->mutable_gpu()->set_host(absl::StrCat("node-", job_id.size()));
        s->mutable_gpu()->set_gpu_index(g);
        s->set_time_unix_ms(t * 1000);
        s->set_gpu_model(kModel);
        s->set_tensor_active(0.5 + 0.05 * g);
        s->set_sm_clock_mhz(1500);
      }
    }
    v1::PushSamplesResponse response;
    auto ctx = Ctx();
    auto writer = v1::IngestService::NewStub(ingest_->Channel())->PushSamples(ctx.get(), &response);
    ASSERT_TRUE(writer->Write(batch));
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.refused_count(), 0) << response.ShortDebugString();
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<ServiceProcess> ingest_, ofu_, mfu_, alerting_;
  std::unique_ptr<TempDir> dir_;
  std::unique_ptr<ChildProcess> dashboard_;
  int port_ = 0;
};

TEST_F(DashboardApi, ServesJobPagesListingsAndSaysWhichPartsAreNotBuilt) {
  const int64_t now_s = absl::ToUnixSeconds(absl::Now());
  const int64_t start_s = now_s - 15 * 60;
  const std::string job_id = "team-a/train-7";  // a Kubernetes job id holds a '/'
  ASSERT_NO_FATAL_FAILURE(RegisterJob(job_id, 2, start_s));
  ASSERT_NO_FATAL_FAILURE(PushSamples(job_id, 2, start_s, now_s - 60));

  const std::string path = absl::StrCat("/api/jobs/", kCluster, "/team-a%2Ftrain-7");
  Json page;
  ASSERT_TRUE(PollUntil(
      [&] {
        auto [status, body] = Get(path);
        page = body;
        return status == 200 && body["ofu"].value("available", false) &&
               body["ofu"]["windows"].size() >= 12;
      },
      absl::Seconds(30), absl::Milliseconds(200)))
      << page.dump(1).substr(0, 3000);
  EXPECT_EQ(page["job"]["job_id"], job_id);
  EXPECT_EQ(page["job"]["scheduler"], "kubernetes");
  ASSERT_EQ(page["ofu"]["gpus"].size(), 2u);
  EXPECT_EQ(page["ofu"]["gpus"][0]["points"].size(), page["ofu"]["windows"].size());
  EXPECT_TRUE(page["summary"]["available"].get<bool>());
  EXPECT_GT(page["summary"]["gpu_hours"].get<double>(), 0);
  // OFU of GPU 1 (tensor 0.55) is above GPU 0's (0.5) at the same clock.
  EXPECT_GT(page["ofu"]["gpus"][1]["points"][3]["ofu"].get<double>(),
            page["ofu"]["gpus"][0]["points"][3]["ofu"].get<double>());

  // Reconciliation and alerts mirror their services: "not built" exactly while the RPC
  // answers UNIMPLEMENTED.
  v1::GetReconciliationRequest rec_request;
  rec_request.mutable_job()->set_cluster(kCluster);
  rec_request.mutable_job()->set_job_id(job_id);
  v1::GetReconciliationResponse rec;
  grpc::Status rec_status =
      v1::MfuService::NewStub(mfu_->Channel())->GetReconciliation(Ctx().get(), rec_request, &rec);
  if (rec_status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    EXPECT_FALSE(page["reconciliation"]["available"].get<bool>());
    EXPECT_TRUE(page["reconciliation"]["not_built"].get<bool>());
    EXPECT_EQ(page["reconciliation"]["message"], rec_status.error_message());
  } else if (rec_status.ok()) {
    EXPECT_TRUE(page["reconciliation"]["available"].get<bool>());
  }
  v1::ListAlertsRequest alert_request;
  v1::ListAlertsResponse alerts;
  grpc::Status alert_status = v1::AlertService::NewStub(alerting_->Channel())
                                  ->ListAlerts(Ctx().get(), alert_request, &alerts);
  EXPECT_EQ(page["alerts"]["not_built"].is_boolean() && page["alerts"]["not_built"].get<bool>(),
            alert_status.error_code() == grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(page["alerts"]["available"].get<bool>(), alert_status.ok());

  auto [alerts_status, fleet_alerts] = Get("/api/alerts?range_h=1");
  ASSERT_EQ(alerts_status, 200);
  EXPECT_EQ(fleet_alerts["available"].get<bool>(), alert_status.ok()) << fleet_alerts.dump();
  EXPECT_TRUE(fleet_alerts["items"].is_array());
  EXPECT_EQ(Get("/api/alerts?range_h=0").first, 400);

  // The listing and the job page read the same job summary. Windows may still be closing
  // while the two are fetched, so they must agree once the job's windows have settled.
  Json jobs;
  ASSERT_TRUE(PollUntil(
      [&] {
        auto [jobs_status, listed] = Get("/api/jobs?range_h=1");
        auto [page_status, again] = Get(path);
        jobs = listed;
        page = again;
        return jobs_status == 200 && page_status == 200 && listed["jobs"].size() == 1u &&
               page["summary"].value("available", false) &&
               std::abs(listed["jobs"][0]["ofu"].get<double>() -
                        page["summary"]["ofu"].get<double>()) <= 1e-9;
      },
      absl::Seconds(30), absl::Milliseconds(200)))
      << jobs.dump().substr(0, 2000) << "\n"
      << page["summary"].dump();
  EXPECT_EQ(jobs["jobs"][0]["job_id"], job_id);
  EXPECT_GT(jobs["jobs"][0]["ofu"].get<double>(), 0.0);
  EXPECT_FALSE(jobs["jobs"][0]["latest_ofu"].is_null());

  auto [fleet_status, fleet] = Get("/api/fleet?range_h=1");
  ASSERT_EQ(fleet_status, 200);
  ASSERT_TRUE(fleet["available"].get<bool>()) << fleet.dump();
  EXPECT_EQ(fleet["total"]["job_count"], 1);
  EXPECT_EQ(fleet["total"]["gpu_hours_by_ofu_decile"].size(), 10u);
  ASSERT_EQ(fleet["by_cluster"].size(), 1u);
  EXPECT_EQ(fleet["by_cluster"][0]["cluster"], kCluster);

  // Filters: by user and by team (the job's `team` label, as it has no team field), a custom
  // range; users and teams ranked by wasted GPU-hours.
  auto [alice_status, alice] = Get("/api/fleet?range_h=1&user=alice");
  ASSERT_EQ(alice_status, 200);
  EXPECT_EQ(alice["total"]["job_count"], 1) << alice.dump();
  EXPECT_EQ(alice["filters"]["user"], "alice");
  ASSERT_EQ(alice["by_user"].size(), 1u) << alice.dump();
  EXPECT_EQ(alice["by_user"][0]["user"], "alice");
  EXPECT_GT(alice["by_user"][0]["wasted_gpu_hours"].get<double>(), 0);
  ASSERT_EQ(alice["by_team"].size(), 1u) << alice.dump();
  EXPECT_EQ(alice["by_team"][0]["team"], "vision");
  EXPECT_EQ(Get("/api/fleet?range_h=1&user=bob").second["total"]["job_count"], 0);
  EXPECT_EQ(Get("/api/fleet?range_h=1&team=vision").second["total"]["job_count"], 1);
  auto [alice_jobs_status, alice_jobs] = Get("/api/jobs?range_h=1&user=alice");
  ASSERT_EQ(alice_jobs_status, 200);
  EXPECT_EQ(alice_jobs["jobs"].size(), 1u);
  EXPECT_EQ(Get("/api/jobs?range_h=1&user=bob").second["jobs"].size(), 0u);
  const int64_t to_ms = (now_s + 60) * 1000;
  auto [custom_status, custom] =
      Get(absl::StrCat("/api/fleet?from_ms=", start_s * 1000, "&to_ms=", to_ms));
  ASSERT_EQ(custom_status, 200);
  EXPECT_EQ(custom["start_ms"], start_s * 1000);
  EXPECT_EQ(custom["total"]["job_count"], 1);
  auto [backwards_status, backwards] =
      Get(absl::StrCat("/api/fleet?from_ms=", to_ms, "&to_ms=", start_s * 1000));
  EXPECT_EQ(backwards_status, 400);
  EXPECT_TRUE(absl::StrContains(backwards.value("error", ""), "to_ms=")) << backwards.dump();

  // A running job has no job-end report yet: the page says why.
  EXPECT_FALSE(page["report"]["available"].get<bool>()) << page["report"].dump();
  EXPECT_TRUE(
      absl::StrContains(page["report"].value("message", ""), "reports are written when a job ends"))
      << page["report"].dump();

  auto [unknown_status, unknown] = Get(absl::StrCat("/api/jobs/", kCluster, "/no-such-job"));
  EXPECT_EQ(unknown_status, 404);
  EXPECT_TRUE(absl::StrContains(unknown.value("error", ""), "no-such-job")) << unknown.dump();
  auto [bad_status, bad] = Get("/api/fleet?range_h=lots");
  EXPECT_EQ(bad_status, 400);
  EXPECT_TRUE(absl::StrContains(bad.value("error", ""), "range_h=lots")) << bad.dump();

  httplib::Client client("127.0.0.1", port_);
  // Alerts link to <dashboard>/jobs/<cluster>/<job id>: that leads to the job's page.
  httplib::Result link = client.Get(absl::StrCat("/jobs/", kCluster, "/team-a/train-7"));
  ASSERT_TRUE(link);
  EXPECT_EQ(link->status, 302);
  // (httplib's client hands out Location percent-decoded; the gateway sends team-a%2Ftrain-7.)
  EXPECT_EQ(link->get_header_value("Location"),
            absl::StrCat("/#/job/", kCluster, "/team-a/train-7"));
  httplib::Result index = client.Get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_TRUE(absl::StrContains(index->body, "<title>goodput</title>"));
}

TEST_F(DashboardApi, TheLiveStreamSendsAnEventWhenAJobWindowCloses) {
  const int64_t now_s = absl::ToUnixSeconds(absl::Now());
  const int64_t start_s = now_s - 20 * 60;
  ASSERT_NO_FATAL_FAILURE(RegisterJob("live-1", 1, start_s));

  absl::Mutex mu;
  std::string received;
  std::atomic<bool> done{false};
  httplib::Client client("127.0.0.1", port_);
  client.set_read_timeout(60, 0);
  std::thread reader([&] {
    client.Get(absl::StrCat("/api/events?cluster=", kCluster, "&job=live-1"),
               [&](const char* data, size_t size) {
                 absl::MutexLock lock(&mu);
                 received.append(data, size);
                 return !done.load();
               });
  });
  auto seen = [&](absl::string_view text) {
    absl::MutexLock lock(&mu);
    return absl::StrContains(received, text);
  };
  // The stream is open (the gateway greets at once) before any window exists.
  ASSERT_TRUE(PollUntil([&] { return seen(": connected"); }, absl::Seconds(20)));
  EXPECT_FALSE(seen("event: ofu"));
  ASSERT_NO_FATAL_FAILURE(PushSamples("live-1", 1, start_s, now_s - 5 * 60));
  bool got = PollUntil([&] { return seen("event: ofu"); }, absl::Seconds(30));
  done = true;
  client.stop();  // the stream would otherwise stay open until its next keep-alive
  reader.join();
  ASSERT_TRUE(got) << received << "\n" << dashboard_->LogTail();
  // Each event is a single JSON data line with the window's OFU.
  size_t at = received.find("event: ofu\ndata: ");
  std::string line = received.substr(at + 17, received.find('\n', at + 17) - at - 17);
  Json window = Json::parse(line, nullptr, false);
  ASSERT_FALSE(window.is_discarded()) << line;
  EXPECT_NEAR(window["ofu"].get<double>(), 0.5 * 1500 / 1830, 0.01) << line;

  // SIGTERM ends the gateway cleanly while a live stream is still open on its side.
  ExitStatus exit = dashboard_->Terminate(absl::Seconds(20));
  EXPECT_TRUE(exit.Success()) << exit.ToString() << "\n" << dashboard_->LogTail();
}

// The fleet's totals are polled once for every open fleet page: when windows close, each
// page's stream gets a "fleet" event with the new totals, and a job page's stream none.
TEST_F(DashboardApi, EveryOpenFleetPageHearsWhenTheFleetGrows) {
  const int64_t now_s = absl::ToUnixSeconds(absl::Now());
  const int64_t start_s = now_s - 20 * 60;
  ASSERT_NO_FATAL_FAILURE(RegisterJob("fleet-1", 2, start_s));

  struct Stream {
    std::string path;
    absl::Mutex mu;
    std::string received;
    std::unique_ptr<httplib::Client> client;
    std::thread reader;
  };
  std::atomic<bool> done{false};
  std::vector<std::unique_ptr<Stream>> streams;
  for (const std::string& path :
       std::vector<std::string>{"/api/events", absl::StrCat("/api/events?cluster=", kCluster),
                                absl::StrCat("/api/events?cluster=", kCluster, "&job=fleet-1")}) {
    auto s = std::make_unique<Stream>();
    s->path = path;
    s->client = std::make_unique<httplib::Client>("127.0.0.1", port_);
    s->client->set_read_timeout(60, 0);
    Stream* raw = s.get();
    s->reader = std::thread([raw, &done] {
      raw->client->Get(raw->path, [raw, &done](const char* data, size_t size) {
        absl::MutexLock lock(&raw->mu);
        raw->received.append(data, size);
        return !done.load();
      });
    });
    streams.push_back(std::move(s));
  }
  auto seen = [](Stream& s, absl::string_view text) {
    absl::MutexLock lock(&s.mu);
    return absl::StrContains(s.received, text);
  };
  for (auto& s : streams) {
    ASSERT_TRUE(PollUntil([&] { return seen(*s, ": connected"); }, absl::Seconds(20))) << s->path;
  }
  // Let the first poll (every 5 s) see the fleet without windows, then close some.
  absl::SleepFor(absl::Seconds(6));
  ASSERT_NO_FATAL_FAILURE(PushSamples("fleet-1", 2, start_s, now_s - 5 * 60));
  const bool got = PollUntil(
      [&] { return seen(*streams[0], "event: fleet") && seen(*streams[1], "event: fleet"); },
      absl::Seconds(40));
  absl::SleepFor(absl::Seconds(1));
  done = true;
  for (auto& s : streams) {
    s->client->stop();
    s->reader.join();
  }
  ASSERT_TRUE(got) << streams[0]->received << "\n---\n"
                   << streams[1]->received << "\n"
                   << dashboard_->LogTail();
  for (size_t i = 0; i < 2; ++i) {
    const std::string& received = streams[i]->received;
    const size_t at = received.find("event: fleet\ndata: ");
    const std::string line = received.substr(at + 19, received.find('\n', at + 19) - at - 19);
    Json fleet = Json::parse(line, nullptr, false);
    ASSERT_FALSE(fleet.is_discarded()) << line;
    EXPECT_EQ(fleet["job_count"].get<int64_t>(), 1) << line;
    EXPECT_GT(fleet["gpu_hours"].get<double>(), 0) << line;
  }
  EXPECT_FALSE(seen(*streams[2], "event: fleet")) << streams[2]->received;
}

}  // namespace
}  // namespace goodput::testing
