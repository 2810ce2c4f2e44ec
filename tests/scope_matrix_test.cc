// Tenancy: every RPC of every service against every kind of token scope, on the real services
// with auth on. The methods are enumerated from the running processes (gRPC reflection, then
// the descriptors), each with the scope platform's table declares for it (scope.h,
// kScopeTable): a method without a declaration fails the test. Each method is called, for each
// scope kind (operator, role only, clusters=a, user=alice, team=ml), on three jobs: alice's in
// cluster a (team ml), bob's in cluster a (team other) and bob's in cluster b; what the call may
// reach follows from the declared scope alone, and a refusal is PERMISSION_DENIED naming the scope,
// never the token. Then the abuse cases a review found: a user token updating, giving away,
// registering and ending another user's jobs (gRPC and HTTP), a cluster token reading another
// cluster's jobs, windows and alerts, an SDK token reporting MFU on another cluster's job, and
// what the dashboard shows each viewer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "goodput/v1/common.pb.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "goodput/v1/report.grpc.pb.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/field_mask.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/generic/generic_stub.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "services/platform/scope.h"
#include "tests/support/child_process.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput {
namespace {

namespace pb = google::protobuf;
using ::goodput::platform::ScopeKind;
using ::goodput::testing::PostgresServer;
using ::goodput::testing::RedisServer;
using ::goodput::testing::ServiceProcess;
using ::testing::HasSubstr;
using ::testing::Not;

// Every role with every scope kind. Operator tokens carry no user or team (the token file
// refuses them).
constexpr char kTokenFile[] =
    "tok-op operator\n"
    "tok-op-a operator clusters=a\n"
    "tok-sched scheduler\n"
    "tok-sched-a scheduler clusters=a\n"
    "tok-sched-alice scheduler user=alice\n"
    "tok-sched-ml scheduler team=ml\n"
    "tok-sdk sdk\n"
    "tok-sdk-a sdk clusters=a\n"
    "tok-sdk-alice sdk user=alice\n"
    "tok-sdk-ml sdk team=ml\n"
    "tok-tele telemetry\n"
    "tok-tele-a telemetry clusters=a\n"
    "tok-tele-alice telemetry user=alice\n"
    "tok-tele-ml telemetry team=ml\n"
    "tok-svc service\n"
    "tok-svc-a service clusters=a\n"
    "tok-svc-alice service user=alice\n"
    "tok-svc-ml service team=ml\n";

enum class TokenKind { kOperator, kRoleOnly, kClusters, kUser, kTeam };
constexpr TokenKind kTokenKinds[] = {TokenKind::kOperator, TokenKind::kRoleOnly,
                                     TokenKind::kClusters, TokenKind::kUser, TokenKind::kTeam};

std::string KindName(TokenKind kind) {
  switch (kind) {
    case TokenKind::kOperator:
      return "operator";
    case TokenKind::kRoleOnly:
      return "role only";
    case TokenKind::kClusters:
      return "clusters=a";
    case TokenKind::kUser:
      return "user=alice";
    case TokenKind::kTeam:
      return "team=ml";
  }
  return "";
}

// A job the matrix acts on, and the alert the test gives it.
struct Target {
  std::string name;
  std::string cluster;
  std::string job_id;
  std::string user;
  std::string team;
  std::string alert_id = {};
};

// The role a method is called with: the first of its declared non-operator roles, else
// operator.
std::string RoleFor(const pb::MethodDescriptor* method) {
  std::set<int> roles;
  const pb::MethodOptions& options = method->options();
  for (int i = 0; i < options.ExtensionSize(v1::allowed_roles); ++i) {
    roles.insert(options.GetExtension(v1::allowed_roles, i));
  }
  const std::vector<std::pair<v1::Role, std::string>> preferred = {
      {v1::ROLE_SCHEDULER, "scheduler"},
      {v1::ROLE_SDK, "sdk"},
      {v1::ROLE_TELEMETRY, "telemetry"},
      {v1::ROLE_SERVICE, "service"}};
  for (const auto& [role, name] : preferred) {
    if (roles.contains(role)) return name;
  }
  return "operator";
}

// The token of `kind` for a method called with `role`. An operator-only method gets a
// scheduler's user and team tokens (operator tokens have neither), which its roles refuse.
std::string TokenFor(const std::string& role, TokenKind kind) {
  const std::map<std::string, std::string> kShort = {{"operator", "op"},
                                                     {"scheduler", "sched"},
                                                     {"sdk", "sdk"},
                                                     {"telemetry", "tele"},
                                                     {"service", "svc"}};
  const std::string base = "tok-" + kShort.at(role);
  const std::string owner_base = role == "operator" ? std::string("tok-sched") : base;
  switch (kind) {
    case TokenKind::kOperator:
      return "tok-op";
    case TokenKind::kRoleOnly:
      return base;
    case TokenKind::kClusters:
      return base + "-a";
    case TokenKind::kUser:
      return owner_base + "-alice";
    case TokenKind::kTeam:
      return owner_base + "-ml";
  }
  return "";
}

// Whether a call of a method declaring `scope`, by a token of `kind`, on `target` is let
// through: this is the table docs/security.md describes.
bool Reaches(ScopeKind scope, TokenKind kind, bool role_allowed, const Target& target) {
  if (!role_allowed) return false;
  const bool unscoped = kind == TokenKind::kOperator || kind == TokenKind::kRoleOnly;
  switch (scope) {
    case ScopeKind::kNone:
      return true;
    case ScopeKind::kFleet:
      return unscoped;
    case ScopeKind::kCluster:
      return unscoped || (kind == TokenKind::kClusters && target.cluster == "a");
    case ScopeKind::kJob:
    case ScopeKind::kFiltered:
      if (unscoped) return true;
      if (kind == TokenKind::kClusters) return target.cluster == "a";
      if (kind == TokenKind::kUser) return target.user == "alice";
      return target.team == "ml";
    default:
      return false;
  }
}

// Fills the fields a request names what it acts on with, by name and type: job keys, the
// cluster, user and team filters, a job to register or update, an MFU report, an alert id,
// time ranges that cover everything.
void FillRequest(pb::Message* message, const Target& target, int* serial) {
  const pb::Descriptor* d = message->GetDescriptor();
  const pb::Reflection* r = message->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const pb::FieldDescriptor* f = d->field(i);
    const std::string& name = f->name();
    if (f->type() == pb::FieldDescriptor::TYPE_STRING && !f->is_repeated()) {
      if (name == "cluster") r->SetString(message, f, target.cluster);
      if (name == "user") r->SetString(message, f, target.user);
      if (name == "team") r->SetString(message, f, target.team);
      if (name == "alert_id") r->SetString(message, f, target.alert_id);
      if (name == "batch_id" || name == "report_id") {
        r->SetString(message, f, absl::StrCat("matrix-", ++*serial));
      }
      continue;
    }
    if (f->type() != pb::FieldDescriptor::TYPE_MESSAGE) continue;
    const std::string& type = f->message_type()->full_name();
    if (type == "goodput.v1.JobKey") {
      v1::JobKey key;
      key.set_cluster(target.cluster);
      key.set_job_id(target.job_id);
      if (f->is_repeated()) {
        r->AddMessage(message, f)->CopyFrom(key);
      } else {
        r->MutableMessage(message, f)->CopyFrom(key);
      }
    } else if (type == "goodput.v1.Job") {
      v1::Job job;
      job.mutable_key()->set_cluster(target.cluster);
      job.mutable_key()->set_job_id(target.job_id);
      job.set_user(target.user);
      job.set_team(target.team);
      job.set_name("matrix");
      job.set_scheduler(v1::SCHEDULER_KIND_SLURM);
      job.set_state(v1::JOB_STATE_RUNNING);
      job.set_gpu_count(1);
      job.mutable_start_time()->set_seconds(1767607200);
      r->MutableMessage(message, f)->CopyFrom(job);
    } else if (type == "goodput.v1.MfuReport") {
      pb::Message* report =
          f->is_repeated() ? r->AddMessage(message, f) : r->MutableMessage(message, f);
      FillRequest(report, target, serial);
      auto* mfu = static_cast<v1::MfuReport*>(report);
      mfu->set_mfu(0.4);
      mfu->mutable_interval()->mutable_start_time()->set_seconds(1767607200);
      mfu->mutable_interval()->mutable_end_time()->set_seconds(1767607260);
    } else if (type == "google.protobuf.FieldMask") {
      static_cast<pb::FieldMask*>(r->MutableMessage(message, f))->add_paths("name");
    } else if (type == "goodput.v1.TimeRange" && !f->is_repeated()) {
      auto* range = static_cast<v1::TimeRange*>(r->MutableMessage(message, f));
      range->mutable_start_time()->set_seconds(1767600000);
      range->mutable_end_time()->set_seconds(1767700000);
    }
  }
}

// One call of `method` carrying `request`, written once and half-closed (the same on the
// wire for unary and streaming methods); a server stream that is let through runs until the
// deadline.
class RawCall final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
          const std::string& request, const std::string& token, absl::Duration deadline)
      : stub_(channel) {
    grpc::Slice slice(request);
    request_ = grpc::ByteBuffer(&slice, 1);
    context_.set_deadline(testing::Deadline(deadline));
    context_.AddMetadata("authorization", absl::StrCat("Bearer ", token));
    stub_.PrepareBidiStreamingCall(&context_, method, grpc::StubOptions(), this);
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&reply_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (ok) StartRead(&reply_);
  }
  void OnDone(const grpc::Status& s) override {
    status_ = s;
    done_.Notify();
  }
  grpc::Status Wait() {
    done_.WaitForNotification();
    return status_;
  }

 private:
  grpc::GenericStub stub_;
  grpc::ClientContext context_;
  grpc::ByteBuffer request_, reply_;
  grpc::Status status_;
  absl::Notification done_;
};

// The services a server lists through gRPC reflection (decoded by hand, as
// security_endpoints_test.cc does).
std::vector<std::string> ReflectedServices(const std::shared_ptr<grpc::Channel>& channel) {
  class Reflect final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    explicit Reflect(const std::shared_ptr<grpc::Channel>& channel) : stub_(channel) {
      grpc::Slice slice(std::string("\x3a\x00", 2));
      request_ = grpc::ByteBuffer(&slice, 1);
      context_.set_deadline(testing::Deadline(absl::Seconds(30)));
      stub_.PrepareBidiStreamingCall(
          &context_, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
          grpc::StubOptions(), this);
      StartWriteLast(&request_, grpc::WriteOptions());
      StartRead(&reply_);
      StartCall();
    }
    void OnReadDone(bool ok) override {
      if (!ok) return;
      std::vector<grpc::Slice> slices;
      std::string text;
      if (reply_.Dump(&slices).ok()) {
        for (const grpc::Slice& s : slices) {
          text.append(reinterpret_cast<const char*>(s.begin()), s.size());
        }
      }
      replies.push_back(std::move(text));
      StartRead(&reply_);
    }
    void OnDone(const grpc::Status&) override { done.Notify(); }
    grpc::GenericStub stub_;
    grpc::ClientContext context_;
    grpc::ByteBuffer request_, reply_;
    std::vector<std::string> replies;
    absl::Notification done;
  } call(channel);
  call.done.WaitForNotification();
  std::vector<std::string> names;
  for (const std::string& reply : call.replies) {
    pb::UnknownFieldSet response;
    if (!response.ParseFromString(reply)) continue;
    for (int i = 0; i < response.field_count(); ++i) {
      if (response.field(i).number() != 6) continue;
      pb::UnknownFieldSet list;
      if (!list.ParseFromString(response.field(i).length_delimited())) continue;
      for (int j = 0; j < list.field_count(); ++j) {
        pb::UnknownFieldSet service;
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

class ScopeMatrix : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_ = dir_ / "goodput.tokens";
    std::filesystem::create_directories(dir_);
    std::ofstream(tokens_) << kTokenFile;
    ASSERT_NO_FATAL_FAILURE(testing::StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(testing::StartRedis(&redis_));
    const std::string common =
        absl::StrCat(testing::PostgresConfigYaml(*pg_), testing::RedisConfigYaml(*redis_),
                     "auth:\n  enabled: true\n  token_file: ", tokens_.string(), "\n");
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
    // The three jobs, registered by an operator, each with one alert.
    for (Target* t : {&own_, &neighbor_, &foreign_}) {
      v1::RegisterJobRequest request;
      v1::Job* job = request.mutable_job();
      job->mutable_key()->set_cluster(t->cluster);
      job->mutable_key()->set_job_id(t->job_id);
      job->set_user(t->user);
      job->set_team(t->team);
      job->set_scheduler(v1::SCHEDULER_KIND_SLURM);
      job->set_state(v1::JOB_STATE_RUNNING);
      job->set_gpu_count(1);
      job->mutable_start_time()->set_seconds(1767607200);
      v1::RegisterJobResponse response;
      grpc::Status status = Jobs()->RegisterJob(Context("tok-op").get(), request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      v1::Alert alert;
      alert.mutable_job()->set_cluster(t->cluster);
      alert.mutable_job()->set_job_id(t->job_id);
      alert.set_kind(v1::ALERT_KIND_IDLE_GPUS);
      alert.set_summary("matrix");
      absl::StatusOr<std::string> id = pg_->QueryValue(
          testing::kDatabase,
          absl::StrCat("INSERT INTO alerts (fingerprint, kind, state, severity, cluster, job_id, "
                       "alert_pb, start_time, update_time) VALUES ('matrix-",
                       t->name, "', 'idle_gpus', 'firing', 'warning', '", t->cluster, "', '",
                       t->job_id, "', decode('", absl::Base64Escape(alert.SerializeAsString()),
                       "', 'base64'), now(), now()) RETURNING id"));
      ASSERT_TRUE(id.ok()) << id.status();
      t->alert_id = *id;
    }
  }

  std::unique_ptr<grpc::ClientContext> Context(const std::string& token) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
    context->set_deadline(testing::Deadline(absl::Seconds(30)));
    return context;
  }
  std::unique_ptr<v1::JobService::Stub> Jobs() {
    return v1::JobService::NewStub(services_["ingest"]->Channel());
  }

  // Starts the dashboard with sign-in from the token file, calling the services as operator.
  void StartDashboard() {
    absl::StatusOr<int> port = testing::FreePort();
    ASSERT_TRUE(port.ok()) << port.status();
    dashboard_port_ = *port;
    const std::filesystem::path ready = dir_ / "dashboard.ready";
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
        "tok-op",
        "--token-file",
        tokens_.string(),
        "--ready-file",
        ready.string()};
    absl::StatusOr<std::unique_ptr<testing::ChildProcess>> child =
        testing::ChildProcess::Start({.argv = argv, .log_path = (dir_ / "dashboard.log").string()});
    ASSERT_TRUE(child.ok()) << child.status();
    dashboard_ = *std::move(child);
    const absl::Time give_up = absl::Now() + absl::Seconds(60);
    while (!std::filesystem::exists(ready) && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(50));
    }
    ASSERT_TRUE(std::filesystem::exists(ready)) << dashboard_->LogTail();
  }

  // GET `path` of the dashboard as the viewer of `token`: status and JSON body.
  std::pair<int, nlohmann::json> Dashboard(const std::string& path, const std::string& token) {
    httplib::Client client("127.0.0.1", dashboard_port_);
    client.set_read_timeout(30, 0);
    httplib::Result result = client.Get(path.c_str(), {{"Authorization", "Bearer " + token}});
    if (!result) return {0, nlohmann::json()};
    return {result->status, nlohmann::json::parse(result->body, nullptr, false)};
  }

  // POST `body` to the ingest HTTP route `path` with `token`.
  httplib::Result IngestHttp(const std::string& path, const std::string& token,
                             const std::string& body) {
    httplib::Client client("127.0.0.1", services_["ingest"]->http_port());
    client.set_read_timeout(30, 0);
    return client.Post(path.c_str(), {{"Authorization", "Bearer " + token}}, body,
                       "application/json");
  }

  v1::Job GetAsOperator(const std::string& cluster, const std::string& job_id) {
    v1::GetJobRequest request;
    request.mutable_key()->set_cluster(cluster);
    request.mutable_key()->set_job_id(job_id);
    v1::GetJobResponse response;
    grpc::Status status = Jobs()->GetJob(Context("tok-op").get(), request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.job();
  }

  testing::TempDir tmp_ = *testing::TempDir::Create("scope-matrix");
  std::filesystem::path dir_ = tmp_.path();
  std::filesystem::path tokens_;
  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<RedisServer> redis_;
  std::map<std::string, std::unique_ptr<ServiceProcess>> services_;
  std::unique_ptr<testing::ChildProcess> dashboard_;
  int dashboard_port_ = 0;
  Target own_{"own", "a", "100", "alice", "ml"};
  Target neighbor_{"neighbor", "a", "300", "bob", "other"};
  Target foreign_{"foreign", "b", "200", "bob", "other"};
};

TEST_F(ScopeMatrix, EveryMethodHoldsEveryScopeKindToItsDeclaredScope) {
  // Linked in: one message of each API file, so every service's descriptor is in the pool.
  for (const pb::Descriptor* d :
       {v1::ListAlertsRequest::descriptor(), v1::GetJobSummaryRequest::descriptor(),
        v1::GetReconciliationRequest::descriptor(), v1::GetJobRequest::descriptor(),
        v1::PushSamplesRequest::descriptor(), v1::GetJobReportRequest::descriptor()}) {
    ASSERT_NE(d, nullptr);
  }
  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  int methods = 0, calls = 0, refused = 0;
  int serial = 0;
  for (auto& [name, service] : services_) {
    std::shared_ptr<grpc::Channel> channel = service->Channel();
    for (const std::string& full_name : ReflectedServices(channel)) {
      if (absl::StartsWith(full_name, "grpc.")) continue;  // health, reflection: open
      const pb::ServiceDescriptor* descriptor = pool->FindServiceByName(full_name);
      ASSERT_NE(descriptor, nullptr) << full_name;
      for (int m = 0; m < descriptor->method_count(); ++m) {
        const pb::MethodDescriptor* method = descriptor->method(m);
        const std::string path = absl::StrCat("/", full_name, "/", method->name());
        SCOPED_TRACE(path);
        const ScopeKind scope = platform::DeclaredScope(path);
        // A new RPC must say how its request names what it acts on.
        ASSERT_NE(scope, ScopeKind::kUndeclared)
            << path << " has no line in platform's scope table (scope.h, kScopeTable)";
        ++methods;
        const std::string role = RoleFor(method);
        struct Case {
          TokenKind kind;
          const Target* target;
          std::string token;
          bool expect_through;
          std::unique_ptr<RawCall> call;
        };
        std::vector<Case> cases;
        for (TokenKind kind : kTokenKinds) {
          const bool role_allowed = kind == TokenKind::kOperator || role != "operator" ||
                                    kind == TokenKind::kRoleOnly || kind == TokenKind::kClusters;
          for (const Target* target : {&own_, &neighbor_, &foreign_}) {
            std::unique_ptr<pb::Message> request(
                pb::MessageFactory::generated_factory()->GetPrototype(method->input_type())->New());
            FillRequest(request.get(), *target, &serial);
            Case c{kind, target, TokenFor(role, kind), Reaches(scope, kind, role_allowed, *target),
                   nullptr};
            // A server stream that is let through runs until its deadline; a refusal comes
            // at once.
            c.call = std::make_unique<RawCall>(
                channel, path, request->SerializeAsString(), c.token,
                method->server_streaming() ? absl::Seconds(8) : absl::Seconds(60));
            cases.push_back(std::move(c));
          }
        }
        for (Case& c : cases) {
          grpc::Status status = c.call->Wait();
          ++calls;
          const bool through = status.error_code() != grpc::StatusCode::PERMISSION_DENIED &&
                               status.error_code() != grpc::StatusCode::UNAUTHENTICATED;
          EXPECT_EQ(through, c.expect_through)
              << path << " (scope " << platform::kScopeKindNames[static_cast<size_t>(scope)]
              << ") by the " << KindName(c.kind) << " token " << c.token << " on " << c.target->name
              << " job " << c.target->cluster << "/" << c.target->job_id << ": "
              << status.error_code() << " " << status.error_message();
          if (!through) {
            ++refused;
            EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << path;
            EXPECT_THAT(status.error_message(), Not(HasSubstr("tok-"))) << path;
            if (c.kind != TokenKind::kRoleOnly && c.kind != TokenKind::kOperator &&
                !absl::StrContains(status.error_message(), "is not allowed for role")) {
              EXPECT_THAT(status.error_message(), HasSubstr("limited to")) << path;
            }
          }
        }
      }
    }
  }
  // Every service's API: ingest (JobService, IngestService), ofu (OfuService, ReportService),
  // mfu, alerting.
  EXPECT_GE(methods, 30);
  std::cout << "scope matrix: " << methods << " methods, " << calls << " calls, " << refused
            << " refused\n";
}

TEST_F(ScopeMatrix, AUserTokenNeverTouchesAnotherUsersJobs) {
  auto jobs = Jobs();
  // Updating bob's job, including handing it to alice: refused, the job unchanged.
  for (const char* path : {"name", "user"}) {
    v1::UpdateJobRequest update;
    v1::Job* job = update.mutable_job();
    job->mutable_key()->set_cluster("a");
    job->mutable_key()->set_job_id("300");
    job->set_user("alice");
    job->set_name("taken");
    update.mutable_update_mask()->add_paths(path);
    v1::UpdateJobResponse response;
    grpc::Status status = jobs->UpdateJob(Context("tok-sched-alice").get(), update, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << path;
    EXPECT_THAT(status.error_message(), HasSubstr("limited to user alice"));
    EXPECT_THAT(status.error_message(), Not(HasSubstr("tok-sched-alice")));
  }
  v1::Job bobs = GetAsOperator("a", "300");
  EXPECT_EQ(bobs.user(), "bob");
  EXPECT_NE(bobs.name(), "taken");

  // Alice may not give her own job away (user or team), but may update it otherwise.
  const std::vector<std::tuple<std::string, std::string, std::string>> give_aways = {
      {"user", "bob", "ml"}, {"team", "alice", "other"}};
  for (const auto& [path, user, team] : give_aways) {
    v1::UpdateJobRequest update;
    v1::Job* job = update.mutable_job();
    job->mutable_key()->set_cluster("a");
    job->mutable_key()->set_job_id("100");
    job->set_user(user);
    job->set_team(team);
    update.mutable_update_mask()->add_paths(path);
    v1::UpdateJobResponse response;
    grpc::Status status = jobs->UpdateJob(Context("tok-sched-alice").get(), update, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << path;
    EXPECT_THAT(status.error_message(), HasSubstr("may not change the owner"));
  }
  {
    v1::UpdateJobRequest update;
    update.mutable_job()->mutable_key()->set_cluster("a");
    update.mutable_job()->mutable_key()->set_job_id("100");
    update.mutable_job()->set_name("renamed");
    update.mutable_update_mask()->add_paths("name");
    v1::UpdateJobResponse response;
    grpc::Status status = jobs->UpdateJob(Context("tok-sched-alice").get(), update, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  v1::Job alices = GetAsOperator("a", "100");
  EXPECT_EQ(alices.user(), "alice");
  EXPECT_EQ(alices.team(), "ml");
  EXPECT_EQ(alices.name(), "renamed");

  // Registering as bob: refused. A job she registers without a user is hers.
  v1::RegisterJobRequest as_bob;
  v1::Job* job = as_bob.mutable_job();
  job->mutable_key()->set_cluster("a");
  job->mutable_key()->set_job_id("400");
  job->set_user("bob");
  job->set_scheduler(v1::SCHEDULER_KIND_SLURM);
  job->mutable_start_time()->set_seconds(1767607200);
  job->set_gpu_count(1);
  v1::RegisterJobResponse registered;
  grpc::Status status = jobs->RegisterJob(Context("tok-sched-alice").get(), as_bob, &registered);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("job.user=\"bob\""));
  job->clear_user();
  status = jobs->RegisterJob(Context("tok-sched-alice").get(), as_bob, &registered);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(registered.job().user(), "alice");
  // Re-registering bob's existing job (merging allocations into it) is refused too.
  v1::RegisterJobRequest into_bobs = as_bob;
  into_bobs.mutable_job()->mutable_key()->set_job_id("300");
  into_bobs.mutable_job()->set_user("alice");
  EXPECT_EQ(
      jobs->RegisterJob(Context("tok-sched-alice").get(), into_bobs, &registered).error_code(),
      grpc::StatusCode::PERMISSION_DENIED);

  // Ending bob's job: refused over gRPC and HTTP; registering as bob over HTTP too.
  v1::EndJobRequest end;
  end.mutable_key()->set_cluster("a");
  end.mutable_key()->set_job_id("300");
  end.set_final_state(v1::JOB_STATE_CANCELLED);
  v1::EndJobResponse ended;
  EXPECT_EQ(jobs->EndJob(Context("tok-sched-alice").get(), end, &ended).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  httplib::Result http = IngestHttp(
      "/api/v1/jobs:end", "tok-sched-alice",
      R"({"key": {"cluster": "a", "jobId": "300"}, "finalState": "JOB_STATE_CANCELLED"})");
  ASSERT_TRUE(http);
  EXPECT_EQ(http->status, 403) << http->body;
  EXPECT_THAT(http->body, HasSubstr("limited to user alice"));
  EXPECT_THAT(http->body, Not(HasSubstr("tok-sched-alice")));
  http = IngestHttp("/api/v1/jobs:register", "tok-sched-alice",
                    R"({"job": {"key": {"cluster": "a", "jobId": "401"}, "user": "bob",
                        "scheduler": "SCHEDULER_KIND_SLURM", "gpuCount": 1,
                        "startTime": "2026-01-05T10:00:00Z"}})");
  ASSERT_TRUE(http);
  EXPECT_EQ(http->status, 403) << http->body;
  http = IngestHttp("/api/v1/jobs:end", "tok-sched-ml",
                    R"({"key": {"cluster": "a", "jobId": "300"}})");
  ASSERT_TRUE(http);
  EXPECT_EQ(http->status, 403) << http->body;
  EXPECT_THAT(http->body, HasSubstr("limited to team ml"));
  // Her own job ends over HTTP.
  http = IngestHttp("/api/v1/jobs:end", "tok-sched-alice",
                    R"({"key": {"cluster": "a", "jobId": "400"}})");
  ASSERT_TRUE(http);
  EXPECT_EQ(http->status, 200) << http->body;
  EXPECT_FALSE(GetAsOperator("a", "300").has_end_time());

  // Her listing holds her jobs only; so does her dashboard.
  v1::ListJobsResponse listed;
  ASSERT_TRUE(
      jobs->ListJobs(Context("tok-sched-alice").get(), v1::ListJobsRequest(), &listed).ok());
  std::set<std::string> ids;
  for (const v1::Job& j : listed.jobs()) ids.insert(j.key().job_id());
  EXPECT_EQ(ids, (std::set<std::string>{"100", "400"}));
  ASSERT_NO_FATAL_FAILURE(StartDashboard());
  auto [code, page] = Dashboard("/api/jobs", "tok-sched-alice");
  ASSERT_EQ(code, 200) << page.dump();
  std::set<std::string> shown;
  for (const auto& row : page["jobs"]) shown.insert(row.value("job_id", ""));
  EXPECT_EQ(shown, (std::set<std::string>{"100", "400"})) << page.dump();
}

TEST_F(ScopeMatrix, AClusterTokenReadsAndReportsOnItsClusterOnly) {
  // Cluster b's job, windows, summary and alerts are refused to cluster a's tokens.
  {
    v1::GetJobRequest get;
    get.mutable_key()->set_cluster("b");
    get.mutable_key()->set_job_id("200");
    v1::GetJobResponse got;
    grpc::Status status = Jobs()->GetJob(Context("tok-sched-a").get(), get, &got);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_THAT(status.error_message(), HasSubstr("limited to cluster a"));
  }
  auto ofu = v1::OfuService::NewStub(services_["ofu"]->Channel());
  {
    v1::GetJobOfuRequest windows;
    windows.mutable_job()->set_cluster("b");
    windows.mutable_job()->set_job_id("200");
    v1::GetJobOfuResponse response;
    EXPECT_EQ(ofu->GetJobOfu(Context("tok-sched-a").get(), windows, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    v1::GetJobSummaryRequest summary;
    *summary.mutable_job() = windows.job();
    v1::GetJobSummaryResponse summarized;
    EXPECT_EQ(ofu->GetJobSummary(Context("tok-sdk-a").get(), summary, &summarized).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  auto alerts = v1::AlertService::NewStub(services_["alerting"]->Channel());
  {
    v1::ListAlertsRequest other;
    other.set_cluster("b");
    v1::ListAlertsResponse response;
    EXPECT_EQ(alerts->ListAlerts(Context("tok-sched-a").get(), other, &response).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    // Without a cluster the list is narrowed to its own.
    grpc::Status status =
        alerts->ListAlerts(Context("tok-sched-a").get(), v1::ListAlertsRequest(), &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    std::set<std::string> clusters;
    for (const v1::Alert& a : response.alerts()) clusters.insert(a.job().cluster());
    EXPECT_EQ(clusters, std::set<std::string>{"a"});
    v1::GetAlertRequest get;
    get.set_alert_id(foreign_.alert_id);
    v1::GetAlertResponse got;
    EXPECT_EQ(alerts->GetAlert(Context("tok-sched-a").get(), get, &got).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
    // A user token lists the alerts of one of its jobs.
    EXPECT_EQ(
        alerts->ListAlerts(Context("tok-sched-alice").get(), v1::ListAlertsRequest(), &response)
            .error_code(),
        grpc::StatusCode::PERMISSION_DENIED);
  }
  // An SDK token of cluster a cannot report MFU on cluster b's job, one report or a stream;
  // nothing is stored.
  auto mfu = v1::MfuService::NewStub(services_["mfu"]->Channel());
  v1::ReportMfuRequest report;
  report.mutable_report()->set_report_id("cross-cluster-1");
  report.mutable_report()->mutable_job()->set_cluster("b");
  report.mutable_report()->mutable_job()->set_job_id("200");
  report.mutable_report()->set_mfu(0.5);
  report.mutable_report()->mutable_interval()->mutable_start_time()->set_seconds(1767607200);
  report.mutable_report()->mutable_interval()->mutable_end_time()->set_seconds(1767607260);
  v1::ReportMfuResponse reported;
  grpc::Status status = mfu->ReportMfu(Context("tok-sdk-a").get(), report, &reported);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(status.error_message(), HasSubstr("limited to cluster a"));
  {
    auto context = Context("tok-sdk-a");
    v1::StreamMfuReportsResponse streamed;
    auto writer = mfu->StreamMfuReports(context.get(), &streamed);
    v1::StreamMfuReportsRequest batch;
    batch.set_batch_id("cross-cluster");
    *batch.add_reports() = report.report();
    batch.mutable_reports(0)->set_report_id("cross-cluster-2");
    writer->Write(batch);
    writer->WritesDone();
    EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  }
  // A user's SDK token reports on its own registered jobs only.
  report.mutable_report()->set_report_id("other-user-1");
  report.mutable_report()->mutable_job()->set_cluster("a");
  report.mutable_report()->mutable_job()->set_job_id("300");
  EXPECT_EQ(mfu->ReportMfu(Context("tok-sdk-alice").get(), report, &reported).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  report.mutable_report()->set_report_id("own-1");
  report.mutable_report()->mutable_job()->set_job_id("100");
  status = mfu->ReportMfu(Context("tok-sdk-alice").get(), report, &reported);
  EXPECT_TRUE(status.ok()) << status.error_message();
  absl::StatusOr<std::string> stored =
      pg_->QueryValue(testing::kDatabase,
                      "SELECT count(*) FROM mfu_reports WHERE report_id IN ('cross-cluster-1', "
                      "'cross-cluster-2', 'other-user-1')");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, "0");

  // The dashboard shows each viewer what its token reaches.
  ASSERT_NO_FATAL_FAILURE(StartDashboard());
  const std::vector<std::pair<std::string, std::set<std::string>>> viewers = {
      {"tok-op", {"100", "200", "300"}},
      {"tok-op-a", {"100", "300"}},
      {"tok-sched-alice", {"100"}},
      {"tok-sched-ml", {"100"}}};
  for (const auto& [token, visible] : viewers) {
    SCOPED_TRACE(token);
    auto [code, page] = Dashboard("/api/jobs", token);
    ASSERT_EQ(code, 200) << page.dump();
    std::set<std::string> shown;
    for (const auto& row : page["jobs"]) shown.insert(row.value("job_id", ""));
    EXPECT_EQ(shown, visible);
    for (const Target* t : {&own_, &neighbor_, &foreign_}) {
      auto [job_code, job] =
          Dashboard(absl::StrCat("/api/jobs/", t->cluster, "/", t->job_id), token);
      EXPECT_EQ(job_code, visible.contains(t->job_id) ? 200 : 403) << t->name << job.dump();
    }
    auto [fleet_code, fleet] = Dashboard("/api/fleet?range_h=1", token);
    EXPECT_EQ(fleet_code, 200) << fleet.dump();
    auto [alerts_code, alert_page] = Dashboard("/api/alerts", token);
    ASSERT_EQ(alerts_code, 200) << alert_page.dump();
    for (const auto& item : alert_page["items"]) {
      EXPECT_TRUE(visible.contains(item.value("job_id", ""))) << item.dump();
    }
  }
  // Another cluster's figures are refused to a cluster viewer.
  EXPECT_EQ(Dashboard("/api/fleet?range_h=1&cluster=b", "tok-op-a").first, 403);
  EXPECT_EQ(Dashboard("/api/jobs?cluster=b", "tok-op-a").first, 403);
  EXPECT_EQ(Dashboard("/api/jobs?user=bob", "tok-sched-alice").first, 403);
}

}  // namespace
}  // namespace goodput
