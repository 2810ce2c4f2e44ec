#include "services/ingest/jobs_http.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace goodput::ingest {
namespace {

using ::testing::HasSubstr;

// A JobService that answers every call with `status`, recording what it got.
class FakeJobService : public v1::JobService::Service {
 public:
  grpc::Status RegisterJob(grpc::ServerContext*, const v1::RegisterJobRequest* request,
                           v1::RegisterJobResponse* response) override {
    registered = *request;
    if (status.ok()) {
      *response->mutable_job() = request->job();
      response->set_created(true);
    }
    return status;
  }
  grpc::Status EndJob(grpc::ServerContext*, const v1::EndJobRequest* request,
                      v1::EndJobResponse*) override {
    ended = *request;
    return status;
  }

  grpc::Status status = grpc::Status::OK;
  v1::RegisterJobRequest registered;
  v1::EndJobRequest ended;
};

TEST(JobsHttp, PassesTheParsedRequestAndAnswersTheResponseInJson) {
  FakeJobService service;
  JobsHttp http(&service, nullptr);
  JsonHttpReply reply = http.Handle(JobsHttp::Method::kRegister, "",
                                    R"({"job": {"key": {"cluster": "eos", "job_id": "7"},
                                                "name": "a\"b\nc"}})");
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(service.registered.job().key().job_id(), "7");
  EXPECT_EQ(service.registered.job().name(), "a\"b\nc");
  nlohmann::json answer = nlohmann::json::parse(reply.body);
  EXPECT_EQ(answer["created"], true);
  EXPECT_EQ(answer["job"]["key"]["jobId"], "7");

  reply = http.Handle(JobsHttp::Method::kEnd, "",
                      R"({"key": {"cluster": "eos", "jobId": "7"},
                          "endTime": "2026-01-05T11:00:00Z", "finalState": "JOB_STATE_FAILED"})");
  EXPECT_EQ(reply.status, 200) << reply.body;
  EXPECT_EQ(service.ended.final_state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(service.ended.end_time().seconds(), 1767610800);
}

TEST(JobsHttp, RefusesUnknownFieldsAndBadJsonNamingThem) {
  FakeJobService service;
  JobsHttp http(&service, nullptr);
  JsonHttpReply reply =
      http.Handle(JobsHttp::Method::kEnd, "", R"({"key": {"cluster": "eos"}, "state": "X"})");
  EXPECT_EQ(reply.status, 400);
  nlohmann::json error = nlohmann::json::parse(reply.body);
  EXPECT_EQ(error["error"]["code"], 400);
  EXPECT_EQ(error["error"]["status"], "INVALID_ARGUMENT");
  EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr("state"));
  EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr("goodput.v1.EndJobRequest"));

  reply = http.Handle(JobsHttp::Method::kRegister, "", "not json");
  EXPECT_EQ(reply.status, 400);
  EXPECT_NO_THROW(nlohmann::json::parse(reply.body));
}

TEST(JobsHttp, MapsServiceStatusesToHttp) {
  FakeJobService service;
  JobsHttp http(&service, nullptr);
  const std::string body = R"({"key": {"cluster": "eos", "jobId": "7"}})";
  struct Case {
    grpc::StatusCode code;
    int http_status;
  };
  for (const Case& c :
       {Case{grpc::StatusCode::INVALID_ARGUMENT, 400}, Case{grpc::StatusCode::NOT_FOUND, 404},
        Case{grpc::StatusCode::ALREADY_EXISTS, 409},
        Case{grpc::StatusCode::FAILED_PRECONDITION, 409},
        Case{grpc::StatusCode::RESOURCE_EXHAUSTED, 429}, Case{grpc::StatusCode::UNAVAILABLE, 503},
        Case{grpc::StatusCode::INTERNAL, 500}}) {
    service.status = grpc::Status(c.code, "job.key.cluster=\"eos\" says no");
    JsonHttpReply reply = http.Handle(JobsHttp::Method::kEnd, "", body);
    EXPECT_EQ(reply.status, c.http_status) << reply.body;
    EXPECT_EQ(reply.retry_after_s > 0, c.http_status == 503 || c.http_status == 429);
    EXPECT_EQ(nlohmann::json::parse(reply.body)["error"]["message"],
              "job.key.cluster=\"eos\" says no");
  }
}

TEST(JobsHttp, AuthorizesAsTheGrpcMethod) {
  absl::StatusOr<std::unique_ptr<platform::AuthPolicy>> policy = platform::AuthPolicy::Create(
      {{"sched", "scheduler"}, {"tele", "telemetry"}, {"op", "operator"}});
  ASSERT_TRUE(policy.ok()) << policy.status();
  (*policy)->AllowMethod("/goodput.v1.JobService/EndJob", {platform::Role::kScheduler});
  FakeJobService service;
  JobsHttp http(&service, policy->get());
  const std::string body = R"({"key": {"cluster": "eos", "jobId": "7"}})";
  JsonHttpReply reply = http.Handle(JobsHttp::Method::kEnd, "", body);
  EXPECT_EQ(reply.status, 401);
  EXPECT_TRUE(reply.www_authenticate);
  EXPECT_THAT(reply.body, HasSubstr("/api/v1/jobs:end"));
  reply = http.Handle(JobsHttp::Method::kEnd, "Bearer tele", body);
  EXPECT_EQ(reply.status, 403) << reply.body;
  EXPECT_FALSE(reply.www_authenticate);
  EXPECT_THAT(reply.body, HasSubstr("telemetry"));
  EXPECT_EQ(http.Handle(JobsHttp::Method::kEnd, "Bearer sched", body).status, 200);
  EXPECT_EQ(http.Handle(JobsHttp::Method::kEnd, "Bearer op", body).status, 200);
  // RegisterJob was not opened to the scheduler role here: its own entry decides.
  EXPECT_EQ(http.Handle(JobsHttp::Method::kRegister, "Bearer sched", R"({"job": {}})").status, 403);
}

}  // namespace
}  // namespace goodput::ingest
