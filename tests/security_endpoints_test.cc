// A deployment with everything on: mTLS for gRPC (client certificates from a client CA),
// HTTPS, scoped tokens from a token file, /metrics behind a token, and the dashboard behind
// sign-in. Every endpoint the four services and the dashboard serve is enumerated from the
// running processes — gRPC services by reflection and their methods from the descriptors,
// HTTP routes from the list each process writes in its ready file — and an unauthenticated
// request to each is refused. Documented exceptions: gRPC health checking and reflection,
// GET /healthz, and the dashboard's sign-in pages themselves.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "goodput/v1/alert.pb.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "goodput/v1/mfu.pb.h"
#include "goodput/v1/ofu.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/generic/generic_stub.h"
#include "httplib.h"
#include "services/platform/test_pki.h"
#include "services/platform/tls.h"
#include "tests/support/child_process.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput {
namespace {

using ::goodput::platform::ClientTls;
using ::goodput::platform::TestPki;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::RedisServer;
using ::goodput::testing::ServiceProcess;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTokenFile[] =
    "# the deployment's tokens\n"
    "op-token operator\n"
    "sched-a scheduler clusters=a\n"
    "tele-a telemetry clusters=a\n"
    "alice-token scheduler user=alice\n"
    "svc-token service\n";

// One raw call of `method` carrying `request` (encoded bytes), written once and half-closed:
// on the wire the same for unary and streaming methods. The status it ended with.
grpc::Status RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                     const std::string& request, const std::string& token = "",
                     std::vector<std::string>* replies = nullptr) {
  class Reactor final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    explicit Reactor(const std::string& body) {
      grpc::Slice slice(body);
      request_ = grpc::ByteBuffer(&slice, 1);
    }
    void Go() {
      StartWriteLast(&request_, grpc::WriteOptions());
      StartRead(&reply_);
      StartCall();
    }
    void OnReadDone(bool ok) override {
      if (!ok) return;
      std::vector<grpc::Slice> slices;
      std::string text;
      if (reply_.Dump(&slices).ok()) {
        for (const grpc::Slice& s : slices)
          text.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
      replies.push_back(std::move(text));
      StartRead(&reply_);
    }
    void OnDone(const grpc::Status& s) override {
      status = s;
      done.Notify();
    }
    grpc::ByteBuffer request_, reply_;
    std::vector<std::string> replies;
    grpc::Status status;
    absl::Notification done;
  };
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(testing::Deadline(absl::Seconds(30)));
  if (!token.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
  Reactor reactor(request);
  stub.PrepareBidiStreamingCall(&context, method, grpc::StubOptions(), &reactor);
  reactor.Go();
  reactor.done.WaitForNotification();
  if (replies != nullptr) *replies = reactor.replies;
  return reactor.status;
}

// The services a server lists through gRPC reflection (ServerReflectionRequest.list_services,
// field 7; the answer's list_services_response, field 6, holds ServiceResponse{name = 1}),
// decoded by hand to need no reflection proto.
std::vector<std::string> ReflectedServices(const std::shared_ptr<grpc::Channel>& channel) {
  std::vector<std::string> replies;
  grpc::Status status =
      RawCall(channel, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
              std::string("\x3a\x00", 2), "", &replies);
  EXPECT_TRUE(status.ok()) << status.error_message();
  std::vector<std::string> names;
  for (const std::string& reply : replies) {
    google::protobuf::UnknownFieldSet response;
    if (!response.ParseFromString(reply)) continue;
    for (int i = 0; i < response.field_count(); ++i) {
      if (response.field(i).number() != 6) continue;
      google::protobuf::UnknownFieldSet list;
      if (!list.ParseFromString(response.field(i).length_delimited())) continue;
      for (int j = 0; j < list.field_count(); ++j) {
        google::protobuf::UnknownFieldSet service;
        if (list.field(j).number() != 1 ||
            !service.ParseFromString(list.field(j).length_delimited())) {
          continue;
        }
        for (int k = 0; k < service.field_count(); ++k) {
          if (service.field(k).number() == 1) names.push_back(service.field(k).length_delimited());
        }
      }
    }
  }
  return names;
}

// The `http_routes=` line of a ready file: "GET /metrics", "POST /api/v1/write", ...
std::vector<std::string> ReadyFileRoutes(const std::filesystem::path& ready) {
  std::ifstream in(ready);
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view text = line;
    if (absl::ConsumePrefix(&text, "http_routes=")) {
      return absl::StrSplit(text, ',', absl::SkipEmpty());
    }
  }
  return {};
}

// A concrete path for a route pattern: parameters and regex groups become "a" or "1".
std::string ConcretePath(std::string pattern) {
  pattern = absl::StrReplaceAll(pattern, {{"<cluster>", "a"}, {"<job>", "1"}});
  return std::regex_replace(pattern, std::regex(R"(\([^)]*\))"), "a");
}

class SecureDeployment : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TestPki> pki = TestPki::Create();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_.emplace(*std::move(pki));
    for (const char* ca : {"ca", "client-ca"}) ASSERT_TRUE(pki_->MakeCa(ca).ok());
    ASSERT_TRUE(pki_->Issue("ca", "server").ok());
    ASSERT_TRUE(pki_->Issue("client-ca", "client").ok());
    tokens_ = pki_->dir() + "/goodput.tokens";
    std::ofstream(tokens_) << kTokenFile;

    ASSERT_NO_FATAL_FAILURE(testing::StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(testing::StartRedis(&redis_));
    const std::string common = absl::StrCat(
        testing::PostgresConfigYaml(*pg_), testing::RedisConfigYaml(*redis_),
        "auth:\n  enabled: true\n  metrics: true\n  token_file: ", tokens_, "\n",
        "tls:\n  cert_file: ", pki_->crt("server"), "\n  key_file: ", pki_->key("server"),
        "\n  client_ca_file: ", pki_->crt("client-ca"), "\n  ca_file: ", pki_->crt("ca"),
        "\n  client_cert_file: ", pki_->crt("client"), "\n  client_key_file: ", pki_->key("client"),
        "\n");
    for (const char* name : {"ingest", "ofu", "mfu", "alerting"}) {
      std::unique_ptr<ServiceProcess> service;
      ASSERT_NO_FATAL_FAILURE(testing::StartService(
          {.binary = testing::BuiltBinary(absl::StrCat("services/", name, "/goodput-", name)),
           .config_yaml = common,
           .extra_args =
               std::string(name) == "ingest" ? testing::MigrateArgs() : std::vector<std::string>{}},
          &service));
      services_.emplace(name, std::move(service));
    }
  }

  // Starts the dashboard with sign-in and HTTPS, calling the services over mTLS.
  void StartDashboard() {
    absl::StatusOr<int> port = testing::FreePort();
    ASSERT_TRUE(port.ok()) << port.status();
    dashboard_port_ = *port;
    dashboard_ready_ = pki_->dir() + "/dashboard.ready";
    std::vector<std::string> argv = {
        testing::BuiltBinary("tools/dashboard/goodput-dashboard").string(),
        "--port",
        absl::StrCat(*port),
        "--ingest",
        services_["ingest"]->grpc_address(),
        "--ofu",
        services_["ofu"]->grpc_address(),
        "--mfu",
        services_["mfu"]->grpc_address(),
        "--alerting",
        services_["alerting"]->grpc_address(),
        "--token",
        "op-token",
        "--tls-cert",
        pki_->crt("server"),
        "--tls-key",
        pki_->key("server"),
        "--token-file",
        tokens_,
        "--ready-file",
        dashboard_ready_};
    absl::StatusOr<std::unique_ptr<testing::ChildProcess>> child =
        testing::ChildProcess::Start({.argv = argv,
                                      .env = {{"GOODPUT_TLS_CA", pki_->crt("ca")},
                                              {"GOODPUT_TLS_CERT", pki_->crt("client")},
                                              {"GOODPUT_TLS_KEY", pki_->key("client")}},
                                      .log_path = pki_->dir() + "/dashboard.log"});
    ASSERT_TRUE(child.ok()) << child.status();
    dashboard_ = *std::move(child);
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (ReadyFileRoutes(dashboard_ready_).empty() && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    ASSERT_FALSE(ReadyFileRoutes(dashboard_ready_).empty()) << dashboard_->LogTail();
  }

  // An mTLS channel (client certificate from the client CA) to `service`.
  std::shared_ptr<grpc::Channel> Channel(const std::string& service, bool with_cert = true) {
    ClientTls tls{.ca_file = pki_->crt("ca")};
    if (with_cert) {
      tls.cert_file = pki_->crt("client");
      tls.key_file = pki_->key("client");
    }
    return platform::MakeChannel(services_[service]->grpc_address(), tls);
  }

  httplib::Result Https(int port, const std::string& method, const std::string& path,
                        const std::string& token = "", const std::string& body = "") {
    httplib::SSLClient client("127.0.0.1", port);
    client.set_ca_cert_path(pki_->crt("ca"));
    client.enable_server_certificate_verification(true);
    client.set_read_timeout(30, 0);
    httplib::Headers headers;
    if (!token.empty()) headers.emplace("Authorization", absl::StrCat("Bearer ", token));
    if (method == "POST") return client.Post(path.c_str(), headers, body, "application/json");
    return client.Get(path.c_str(), headers);
  }

  std::optional<TestPki> pki_;
  std::string tokens_;
  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<RedisServer> redis_;
  std::map<std::string, std::unique_ptr<ServiceProcess>> services_;
  std::unique_ptr<testing::ChildProcess> dashboard_;
  int dashboard_port_ = 0;
  std::string dashboard_ready_;
};

TEST_F(SecureDeployment, EveryEndpointRefusesAnUnauthenticatedRequest) {
  ASSERT_NO_FATAL_FAILURE(StartDashboard());
  // The API's descriptors, which name every method of every service (linked in through one
  // message of each file).
  for (const google::protobuf::Descriptor* d :
       {v1::ListAlertsRequest::descriptor(), v1::GetJobSummaryRequest::descriptor(),
        v1::GetReconciliationRequest::descriptor(), v1::GetJobRequest::descriptor(),
        v1::PushSamplesRequest::descriptor()}) {
    ASSERT_NE(d, nullptr);
  }
  const google::protobuf::DescriptorPool* pool = google::protobuf::DescriptorPool::generated_pool();
  int grpc_methods = 0;
  int http_routes = 0;
  for (auto& [name, service] : services_) {
    SCOPED_TRACE(name);
    std::shared_ptr<grpc::Channel> channel = Channel(name);
    // Without a client certificate the connection itself is refused.
    EXPECT_EQ(RawCall(Channel(name, /*with_cert=*/false), "/grpc.health.v1.Health/Check", "")
                  .error_code(),
              grpc::StatusCode::UNAVAILABLE);
    // Health checking is open (probes carry no token).
    EXPECT_TRUE(RawCall(channel, "/grpc.health.v1.Health/Check", "").ok());
    std::vector<std::string> reflected = ReflectedServices(channel);
    EXPECT_THAT(reflected, ::testing::Contains(::testing::StartsWith("goodput.v1.")));
    for (const std::string& full_name : reflected) {
      if (absl::StartsWith(full_name, "grpc.")) continue;  // health, reflection: open
      const google::protobuf::ServiceDescriptor* descriptor = pool->FindServiceByName(full_name);
      ASSERT_NE(descriptor, nullptr) << full_name;
      for (int m = 0; m < descriptor->method_count(); ++m) {
        const std::string method = absl::StrCat("/", full_name, "/", descriptor->method(m)->name());
        grpc::Status status = RawCall(channel, method, "");
        EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
            << method << ": " << status.error_message();
        ++grpc_methods;
      }
    }
    for (const std::string& route : ReadyFileRoutes(service->dir() / "ready")) {
      std::pair<std::string, std::string> method_path = absl::StrSplit(route, ' ');
      httplib::Result result =
          Https(service->http_port(), method_path.first, ConcretePath(method_path.second));
      ASSERT_TRUE(result) << route << ": " << httplib::to_string(result.error());
      ++http_routes;
      if (route == "GET /healthz") {
        EXPECT_EQ(result->status, 200) << route;
        continue;
      }
      EXPECT_EQ(result->status, 401) << route << ": " << result->body;
    }
  }
  for (const std::string& route : ReadyFileRoutes(dashboard_ready_)) {
    std::pair<std::string, std::string> method_path = absl::StrSplit(route, ' ');
    httplib::Result result =
        Https(dashboard_port_, method_path.first, ConcretePath(method_path.second));
    ASSERT_TRUE(result) << route << ": " << httplib::to_string(result.error());
    ++http_routes;
    if (route == "GET /healthz" || route == "GET /login") {
      EXPECT_EQ(result->status, 200) << route;
    } else if (route == "POST /logout") {
      EXPECT_EQ(result->status, 303) << route;  // ends a session; reveals nothing
    } else if (absl::StrContains(route, "/api/") || route == "POST /login") {
      EXPECT_EQ(result->status, 401) << route << ": " << result->body;
    } else {
      EXPECT_EQ(result->status, 303) << route;
      EXPECT_EQ(result->get_header_value("Location"), "/login") << route;
    }
  }
  // Enough to be a real enumeration: every service's API and both sides of every server.
  EXPECT_GE(grpc_methods, 20);
  EXPECT_GE(http_routes, 15);
  std::cout << "refused unauthenticated: " << grpc_methods << " gRPC methods, " << http_routes
            << " HTTP routes\n";

  // The same requests with a token are let through (the refusals above were the token's doing).
  httplib::Result metrics = Https(services_["ofu"]->http_port(), "GET", "/metrics", "svc-token");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  httplib::Result jobs = Https(dashboard_port_, "GET", "/api/jobs", "op-token");
  ASSERT_TRUE(jobs);
  EXPECT_EQ(jobs->status, 200) << jobs->body;
}

v1::RegisterJobRequest JobIn(const std::string& cluster, const std::string& job_id,
                             const std::string& user) {
  v1::RegisterJobRequest request;
  v1::Job* job = request.mutable_job();
  job->mutable_key()->set_cluster(cluster);
  job->mutable_key()->set_job_id(job_id);
  job->set_user(user);
  job->set_scheduler(v1::SCHEDULER_KIND_SLURM);
  job->set_state(v1::JOB_STATE_RUNNING);
  job->mutable_start_time()->set_seconds(1767607200);
  v1::GpuAllocation* a = job->add_allocations();
  a->mutable_gpu()->set_host("gpu-node-1");
  a->mutable_gpu()->set_gpu_index(std::stoi(job_id));  // one GPU per job
  a->mutable_start_time()->set_seconds(1767607200);
  return request;
}

TEST_F(SecureDeployment, ScopedTokensActOnlyOnTheirClustersAndUsers) {
  auto jobs = v1::JobService::NewStub(Channel("ingest"));
  auto call = [&](const std::string& token, const v1::RegisterJobRequest& request) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    v1::RegisterJobResponse response;
    return jobs->RegisterJob(&ctx, request, &response);
  };
  // A scheduler token of cluster a registers there, and not in cluster b.
  for (auto [token, request] : {std::pair{"sched-a", JobIn("a", "1", "alice")},
                                std::pair{"op-token", JobIn("b", "2", "bob")},
                                std::pair{"op-token", JobIn("a", "3", "bob")}}) {
    grpc::Status status = call(token, request);
    ASSERT_TRUE(status.ok()) << token << ": " << status.error_message();
  }
  grpc::Status refused = call("sched-a", JobIn("b", "4", "alice"));
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr("limited to cluster a"));
  EXPECT_THAT(refused.error_message(), Not(HasSubstr("sched-a")));
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer sched-a");
    v1::EndJobRequest end;
    end.mutable_key()->set_cluster("b");
    end.mutable_key()->set_job_id("2");
    end.set_final_state(v1::JOB_STATE_COMPLETED);
    v1::EndJobResponse response;
    EXPECT_EQ(jobs->EndJob(&ctx, end, &response).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  // The HTTP job endpoints apply the same scope.
  httplib::Result http =
      Https(services_["ingest"]->http_port(), "POST", "/api/v1/jobs:end", "sched-a",
            R"({"key": {"cluster": "b", "jobId": "2"}, "finalState": "JOB_STATE_COMPLETED"})");
  ASSERT_TRUE(http);
  EXPECT_EQ(http->status, 403) << http->body;
  EXPECT_THAT(http->body, HasSubstr("limited to cluster a"));

  // A telemetry token of cluster a cannot push samples for cluster b.
  {
    auto ingest = v1::IngestService::NewStub(Channel("ingest"));
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer tele-a");
    v1::PushSamplesResponse response;
    auto writer = ingest->PushSamples(&ctx, &response);
    v1::PushSamplesRequest batch;
    batch.set_batch_id("scope-test-1");
    batch.set_cluster("b");
    writer->Write(batch);
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(status.error_message(), HasSubstr("cluster \"b\""));
  }

  // A user token lists only its user's jobs, and cannot read another user's job.
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer alice-token");
    v1::ListJobsResponse listed;
    ASSERT_TRUE(jobs->ListJobs(&ctx, v1::ListJobsRequest(), &listed).ok());
    ASSERT_EQ(listed.jobs_size(), 1);
    EXPECT_EQ(listed.jobs(0).user(), "alice");
    grpc::ClientContext get_ctx;
    get_ctx.AddMetadata("authorization", "Bearer alice-token");
    v1::GetJobRequest get;
    get.mutable_key()->set_cluster("b");
    get.mutable_key()->set_job_id("2");
    v1::GetJobResponse got;
    grpc::Status status = jobs->GetJob(&get_ctx, get, &got);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(status.error_message(), HasSubstr("user alice"));
  }

  // The dashboard: a user signs in with its token and sees its own jobs only.
  ASSERT_NO_FATAL_FAILURE(StartDashboard());
  httplib::SSLClient browser("127.0.0.1", dashboard_port_);
  browser.set_ca_cert_path(pki_->crt("ca"));
  browser.enable_server_certificate_verification(true);
  httplib::Result login =
      browser.Post("/login", "token=alice-token", "application/x-www-form-urlencoded");
  ASSERT_TRUE(login);
  ASSERT_EQ(login->status, 303) << login->body;
  const std::string cookie = login->get_header_value("Set-Cookie");
  EXPECT_THAT(cookie, HasSubstr("HttpOnly"));
  EXPECT_THAT(cookie, HasSubstr("SameSite=Strict"));
  EXPECT_THAT(cookie, HasSubstr("Secure"));
  const std::string session = cookie.substr(0, cookie.find(';'));
  httplib::Result mine = browser.Get("/api/jobs", {{"Cookie", session}});
  ASSERT_TRUE(mine);
  ASSERT_EQ(mine->status, 200) << mine->body;
  EXPECT_THAT(mine->body, HasSubstr("\"alice\""));
  EXPECT_THAT(mine->body, Not(HasSubstr("\"bob\"")));
  httplib::Result other = browser.Get("/api/jobs/b/2", {{"Cookie", session}});
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 403) << other->body;
  httplib::Result wrong =
      browser.Post("/login", "token=not-a-token", "application/x-www-form-urlencoded");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_THAT(wrong->body, Not(HasSubstr("not-a-token")));
}

}  // namespace
}  // namespace goodput
