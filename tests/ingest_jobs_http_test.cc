// goodput-ingest's HTTP/JSON job endpoints (POST /api/v1/jobs:register, /api/v1/jobs:end),
// which the Slurm prolog and epilog call with curl: a job registered and ended through them
// is the job gRPC sees; malformed or invalid JSON is refused with 400 naming the field; with
// auth on they take the tokens the gRPC JobService takes, and no others.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "goodput/v1/job.grpc.pb.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput {
namespace {

using ::goodput::testing::PostgresServer;
using ::goodput::testing::ServiceProcess;
using ::testing::HasSubstr;

constexpr char kRegisterBody[] = R"({"job": {
  "key": {"cluster": "eos", "jobId": "777"}, "scheduler": "SCHEDULER_KIND_SLURM",
  "user": "alice", "team": "m1234", "name": "llama \"pretrain\"\nv2",
  "state": "JOB_STATE_RUNNING", "startTime": "2026-01-05T10:00:00Z",
  "allocations": [
    {"gpu": {"host": "gpu-node-1", "gpuIndex": 0,
             "uuid": "GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77"},
     "startTime": "2026-01-05T10:00:00Z"},
    {"gpu": {"host": "gpu-node-1", "gpuIndex": 3}, "startTime": "2026-01-05T10:00:00Z"}],
  "labels": {"partition": "gpu"}}})";
constexpr char kEndBody[] =
    R"({"key": {"cluster": "eos", "jobId": "777"}, "endTime": "2026-01-05T11:00:00Z",
        "finalState": "JOB_STATE_TIMED_OUT"})";

class IngestJobsHttp : public ::testing::Test {
 protected:
  void Start(bool auth_on) {
    ASSERT_NO_FATAL_FAILURE(testing::StartPostgres(&pg_));
    std::string config = absl::StrCat(testing::PostgresConfigYaml(*pg_), "redis:\n  host: \"\"\n",
                                      "ingest:\n  maintenance_interval_s: 3600\n");
    if (auth_on) {
      absl::StrAppend(&config, "auth:\n  enabled: true\n  tokens:\n",
                      "    telemetry: [telemetry-token-1]\n    scheduler: [scheduler-token-1]\n",
                      "    operator: [operator-token-1]\n");
    }
    ASSERT_NO_FATAL_FAILURE(
        testing::StartService({.binary = testing::BuiltBinary("services/ingest/goodput-ingest"),
                               .config_yaml = config,
                               .extra_args = testing::MigrateArgs()},
                              &ingest_));
  }

  httplib::Result Post(const std::string& path, const std::string& body,
                       const std::string& token = "") {
    httplib::Client client("127.0.0.1", ingest_->http_port());
    client.set_read_timeout(30, 0);
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", absl::StrCat("Bearer ", token));
    return client.Post(path.c_str(), headers, body, "application/json");
  }

  absl::StatusOr<v1::Job> GetJob(const std::string& token = "") {
    auto stub = v1::JobService::NewStub(ingest_->Channel());
    grpc::ClientContext ctx;
    if (!token.empty()) ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    v1::GetJobRequest request;
    request.mutable_key()->set_cluster("eos");
    request.mutable_key()->set_job_id("777");
    v1::GetJobResponse response;
    grpc::Status status = stub->GetJob(&ctx, request, &response);
    if (!status.ok()) return absl::UnknownError(status.error_message());
    return response.job();
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<ServiceProcess> ingest_;
};

TEST_F(IngestJobsHttp, RegistersAndEndsAJobAsGrpcWould) {
  ASSERT_NO_FATAL_FAILURE(Start(/*auth_on=*/false));
  httplib::Result r = Post("/api/v1/jobs:register", kRegisterBody);
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_THAT(r->get_header_value("Content-Type"), HasSubstr("application/json"));
  nlohmann::json registered = nlohmann::json::parse(r->body);
  EXPECT_EQ(registered["created"], true);
  EXPECT_EQ(registered["job"]["key"]["jobId"], "777");

  // Another node's prolog, a retry: merged, not created again.
  r = Post("/api/v1/jobs:register", kRegisterBody);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_FALSE(nlohmann::json::parse(r->body).value("created", false));

  absl::StatusOr<v1::Job> job = GetJob();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->user(), "alice");
  EXPECT_EQ(job->team(), "m1234");
  EXPECT_EQ(job->name(), "llama \"pretrain\"\nv2");
  EXPECT_EQ(job->scheduler(), v1::SCHEDULER_KIND_SLURM);
  ASSERT_EQ(job->allocations_size(), 2);
  EXPECT_EQ(job->allocations(0).gpu().host(), "gpu-node-1");
  EXPECT_EQ(job->labels().at("partition"), "gpu");

  r = Post("/api/v1/jobs:end", kEndBody);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body)["job"]["state"], "JOB_STATE_TIMED_OUT");
  job = GetJob();
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_TIMED_OUT);
  EXPECT_EQ(job->end_time().seconds(), job->start_time().seconds() + 3600);
}

TEST_F(IngestJobsHttp, RefusesBadRequestsNamingTheProblem) {
  ASSERT_NO_FATAL_FAILURE(Start(/*auth_on=*/false));
  // An unknown field (a typo) is refused, not ignored.
  httplib::Result r = Post("/api/v1/jobs:register",
                           R"({"job": {"key": {"cluster": "eos", "jobId": "1"}, "usr": "bob"}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  nlohmann::json error = nlohmann::json::parse(r->body);
  EXPECT_EQ(error["error"]["status"], "INVALID_ARGUMENT");
  EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr("usr"));

  r = Post("/api/v1/jobs:register", "{\"job\": ");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_THAT(r->body, HasSubstr("RegisterJobRequest"));

  r = Post("/api/v1/jobs:end",
           R"({"key": {"cluster": "eos", "jobId": "1"}, "finalState": "JOB_STATE_EXPLODED"})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_THAT(r->body, HasSubstr("JOB_STATE_EXPLODED"));

  // JobService's own validation, as over gRPC: a job without a cluster, named.
  r = Post("/api/v1/jobs:register",
           R"({"job": {"key": {"cluster": "", "jobId": "2"},
               "scheduler": "SCHEDULER_KIND_SLURM", "startTime": "2026-01-05T10:00:00Z"}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_THAT(r->body, HasSubstr("job.key.cluster"));

  // Ending a job goodput never saw.
  r = Post("/api/v1/jobs:end", R"({"key": {"cluster": "eos", "jobId": "404"}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["status"], "NOT_FOUND");

  // A body above ingest.jobs.max_http_body_bytes is refused while it is read.
  r = Post("/api/v1/jobs:register", std::string(2 << 20, ' '));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
}

TEST_F(IngestJobsHttp, RefusesJobIdsAndHostsAShellWouldInterpretAndOversizedJobs) {
  ASSERT_NO_FATAL_FAILURE(Start(/*auth_on=*/false));
  // The message names the field and shows the value escaped (JSON-escaped once more here).
  httplib::Result r = Post("/api/v1/jobs:register",
                           R"js({"job": {"key": {"cluster": "eos", "jobId": "7$(reboot)"},
                               "startTime": "2026-01-05T10:00:00Z"}})js");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["message"],
            "job.key.job_id=\"7$(reboot)\" contains '$' at byte 1, not allowed in a job id "
            "(letters, digits and . _ - + : / @ = only)");

  r = Post("/api/v1/jobs:register",
           R"({"job": {"key": {"cluster": "eos", "jobId": "8\n9"},
               "startTime": "2026-01-05T10:00:00Z"}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(nlohmann::json::parse(r->body)["error"]["message"],
            "job.key.job_id=\"8\\x0a9\" contains the control character 0x0A at byte 1");

  r = Post("/api/v1/jobs:end", R"({"key": {"cluster": "eos", "jobId": "-1"}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_THAT(r->body, HasSubstr("key.job_id=\\\"-1\\\" starts with '-'"));

  r = Post("/api/v1/jobs:register",
           R"({"job": {"key": {"cluster": "eos", "jobId": "10"},
               "startTime": "2026-01-05T10:00:00Z",
               "allocations": [{"gpu": {"host": "node`id`", "gpuIndex": 0},
                                "startTime": "2026-01-05T10:00:00Z"}]}})");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_THAT(nlohmann::json::parse(r->body)["error"]["message"].get<std::string>(),
              HasSubstr("job.allocations[0].gpu.host=\"node`id`\" contains '`' at byte 4"));

  // Markup in free text is data: stored as sent, escaped where it is shown.
  r = Post("/api/v1/jobs:register",
           R"js({"job": {"key": {"cluster": "eos", "jobId": "11"},
               "name": "<img src=x onerror=alert(1)>", "startTime": "2026-01-05T10:00:00Z"}})js");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;

  // More labels than ingest.limits.max_job_labels (64).
  nlohmann::json many = {{"job",
                          {{"key", {{"cluster", "eos"}, {"jobId", "12"}}},
                           {"startTime", "2026-01-05T10:00:00Z"},
                           {"labels", nlohmann::json::object()}}}};
  for (int i = 0; i < 65; ++i) many["job"]["labels"][absl::StrCat("l", i)] = "v";
  r = Post("/api/v1/jobs:register", many.dump());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_THAT(r->body, HasSubstr("job.labels has 65 entries; the limit is 64 "
                                 "(ingest.limits.max_job_labels)"));
}

TEST_F(IngestJobsHttp, TakesTheTokensJobServiceTakes) {
  ASSERT_NO_FATAL_FAILURE(Start(/*auth_on=*/true));
  httplib::Result r = Post("/api/v1/jobs:register", kRegisterBody);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << r->body;
  EXPECT_EQ(r->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_THAT(r->body, HasSubstr("UNAUTHENTICATED"));

  r = Post("/api/v1/jobs:register", kRegisterBody, "not-a-token");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401) << r->body;
  EXPECT_THAT(r->body, ::testing::Not(HasSubstr("not-a-token")));

  r = Post("/api/v1/jobs:register", kRegisterBody, "telemetry-token-1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
  EXPECT_THAT(r->body, HasSubstr("telemetry"));

  r = Post("/api/v1/jobs:register", kRegisterBody, "scheduler-token-1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  r = Post("/api/v1/jobs:end", kEndBody, "operator-token-1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  absl::StatusOr<v1::Job> job = GetJob("scheduler-token-1");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_TIMED_OUT);
}

}  // namespace
}  // namespace goodput
