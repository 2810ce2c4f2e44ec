#include "services/platform/grpc_server.h"

#include <csignal>
#include <optional>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "services/platform/test_pki.h"
#include "services/platform/tls.h"

namespace goodput::platform {
namespace {

using ::testing::HasSubstr;

constexpr char kEcho[] = "/goodput.test.Echo/Call";
constexpr char kSlow[] = "/goodput.test.Slow/Call";
constexpr char kHealthCheck[] = "/grpc.health.v1.Health/Check";
constexpr int kServing = 1;
constexpr int kNotServing = 2;

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& slice : slices) {
    out.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return out;
}

// Holds the slow method's call until the test releases it.
class Gate {
 public:
  class Reactor;
  void Arrive(Reactor* reactor) {
    absl::MutexLock lock(&mu_);
    waiting_ = reactor;
  }
  Reactor* AwaitArrival() {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](Reactor** r) { return *r != nullptr; }, &waiting_),
                         absl::Seconds(60));
    return waiting_;
  }

 private:
  absl::Mutex mu_;
  Reactor* waiting_ = nullptr;
};

// Echoes one message back; with a gate, only when the test releases it.
class Gate::Reactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  explicit Reactor(Gate* gate) : gate_(gate) { StartRead(&message_); }
  void Release() { StartWriteAndFinish(&message_, grpc::WriteOptions(), grpc::Status::OK); }

  // grpc::ServerBidiReactor
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
    } else if (gate_ != nullptr) {
      gate_->Arrive(this);
    } else {
      Release();
    }
  }
  void OnDone() override { delete this; }

 private:
  Gate* gate_;
  grpc::ByteBuffer message_;
};

class Unimplemented final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  Unimplemented() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no such method")); }
  void OnDone() override { delete this; }
};

class TestService final : public grpc::CallbackGenericService {
 public:
  Gate gate;

  // grpc::CallbackGenericService
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* CreateReactor(
      grpc::GenericCallbackServerContext* context) override {
    if (context->method() == kEcho) return new Gate::Reactor(nullptr);
    if (context->method() == kSlow) return new Gate::Reactor(&gate);
    return new Unimplemented();
  }
};

struct CallResult {
  grpc::Status status;
  std::string body;
};

CallResult Call(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                const std::string& body, std::optional<std::string> token = std::nullopt) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  if (token.has_value()) context.AddMetadata("authorization", "Bearer " + *token);
  grpc::Slice slice(body);
  grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  absl::Mutex mu;
  std::optional<grpc::Status> status;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    absl::MutexLock lock(&mu);
    status = std::move(s);
  });
  absl::MutexLock lock(&mu);
  mu.Await(absl::Condition(
      +[](std::optional<grpc::Status>* s) { return s->has_value(); }, &status));
  return CallResult{*status, status->ok() ? ToString(response) : std::string()};
}

// grpc.health.v1.HealthCheckRequest{service} and the status of a HealthCheckResponse, encoded
// by hand (field 1, length-delimited / varint) to avoid a test-only proto.
std::string HealthRequest(const std::string& service) {
  std::string out;
  if (service.empty()) return out;
  out.push_back(0x0a);
  out.push_back(static_cast<char>(service.size()));
  return out + service;
}

CallResult CheckHealth(const std::shared_ptr<grpc::Channel>& channel, const std::string& service,
                       int* serving_status) {
  CallResult result = Call(channel, kHealthCheck, HealthRequest(service));
  *serving_status = 0;
  if (result.body.size() == 2 && result.body[0] == 0x08) *serving_status = result.body[1];
  return result;
}

std::shared_ptr<grpc::Channel> Connect(int port) {
  return grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                             grpc::InsecureChannelCredentials());
}

GrpcServerOptions LocalOptions() {
  GrpcServerOptions options;
  options.host = "127.0.0.1";
  options.port = 0;
  options.handle_signals = false;
  options.drain_timeout = absl::Seconds(60);
  return options;
}

// A service with no methods, registered only for its health-checking name.
class PlaceholderService final : public grpc::Service {};

TEST(GrpcServer, HealthTurnsServingOnceReady) {
  GrpcServerOptions options = LocalOptions();
  options.serving_on_start = false;
  GrpcServer server(options);
  PlaceholderService placeholder;
  TestService generic;
  server.AddService(&placeholder, "goodput.test.Placeholder");
  server.AddGenericService(&generic);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.port(), 0);
  auto channel = Connect(server.port());

  int status = 0;
  ASSERT_TRUE(CheckHealth(channel, "goodput.test.Placeholder", &status).status.ok());
  EXPECT_EQ(status, kNotServing);
  EXPECT_FALSE(server.serving());

  server.SetServing(true);
  ASSERT_TRUE(CheckHealth(channel, "goodput.test.Placeholder", &status).status.ok());
  EXPECT_EQ(status, kServing);
  ASSERT_TRUE(CheckHealth(channel, "", &status).status.ok());
  EXPECT_EQ(status, kServing);
  EXPECT_EQ(CheckHealth(channel, "goodput.test.Unknown", &status).status.error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(server.serving());
}

TEST(GrpcServer, ServesReflection) {
  GrpcServer server(LocalOptions());
  ASSERT_TRUE(server.Start().ok());
  // ServerReflectionRequest{list_services: ""} = field 7, empty string.
  std::string request("\x3a\x00", 2);
  grpc::GenericStub stub(Connect(server.port()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  grpc::CompletionQueue cq;
  auto stream = stub.PrepareCall(
      &context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  auto step = [&](int tag) {
    void* got = nullptr;
    bool ok = false;
    EXPECT_TRUE(cq.Next(&got, &ok));
    EXPECT_EQ(got, reinterpret_cast<void*>(static_cast<intptr_t>(tag)));
    return ok;
  };
  stream->StartCall(reinterpret_cast<void*>(1));
  ASSERT_TRUE(step(1));
  grpc::Slice slice(request);
  grpc::ByteBuffer message(&slice, 1);
  stream->Write(message, reinterpret_cast<void*>(2));
  ASSERT_TRUE(step(2));
  grpc::ByteBuffer response;
  stream->Read(&response, reinterpret_cast<void*>(3));
  ASSERT_TRUE(step(3));
  EXPECT_THAT(ToString(response), HasSubstr("grpc.health.v1.Health"));
  context.TryCancel();
  grpc::Status status;
  stream->Finish(&status, reinterpret_cast<void*>(4));
  step(4);
  cq.Shutdown();
  void* ignored_tag;
  bool ignored_ok;
  while (cq.Next(&ignored_tag, &ignored_ok)) {
  }
}

TEST(GrpcServer, SigtermDrainsInFlightCallThenReturns) {
  GrpcServerOptions options = LocalOptions();
  options.handle_signals = true;
  GrpcServer server(options);
  TestService generic;
  server.AddGenericService(&generic);
  ASSERT_TRUE(server.Start().ok());
  auto channel = Connect(server.port());

  std::optional<CallResult> slow_result;
  std::thread slow_call([&] { slow_result = Call(channel, kSlow, "payload"); });
  Gate::Reactor* in_flight = generic.gate.AwaitArrival();
  ASSERT_NE(in_flight, nullptr);

  absl::Mutex mu;
  bool returned = false;
  std::thread runner([&] {
    server.RunUntilShutdown();
    absl::MutexLock lock(&mu);
    returned = true;
  });
  ASSERT_EQ(std::raise(SIGTERM), 0);

  // Health goes NOT_SERVING while the call is still being drained.
  absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (server.serving() && absl::Now() < deadline) std::this_thread::yield();
  EXPECT_FALSE(server.serving());
  {
    absl::MutexLock lock(&mu);
    EXPECT_FALSE(returned) << "shutdown returned before the in-flight call finished";
  }

  in_flight->Release();
  slow_call.join();
  runner.join();
  ASSERT_TRUE(slow_result.has_value());
  EXPECT_TRUE(slow_result->status.ok()) << slow_result->status.error_message();
  EXPECT_EQ(slow_result->body, "payload");
  EXPECT_TRUE(returned);
}

TEST(GrpcServer, RequestShutdownEndsRunUntilShutdown) {
  GrpcServer server(LocalOptions());
  ASSERT_TRUE(server.Start().ok());
  server.RequestShutdown();
  server.RunUntilShutdown();
  EXPECT_FALSE(server.serving());
}

TEST(GrpcServer, ReportsAPortThatCannotBeBound) {
  GrpcServer first(LocalOptions());
  ASSERT_TRUE(first.Start().ok());
  GrpcServerOptions options = LocalOptions();
  options.port = first.port();
  GrpcServer second(options);
  absl::Status status = second.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr(std::to_string(first.port())));
}

class AuthServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<AuthPolicy>> policy = AuthPolicy::Create(
        {{"sched-token", "scheduler"}, {"tele-token", "telemetry"}, {"op-token", "operator"}});
    ASSERT_TRUE(policy.ok()) << policy.status();
    (*policy)->AllowMethod(kEcho, {Role::kTelemetry});
    GrpcServerOptions options = LocalOptions();
    options.auth = std::shared_ptr<const AuthPolicy>(std::move(*policy));
    options.metrics = &metrics_;
    server_ = std::make_unique<GrpcServer>(options);
    server_->AddGenericService(&generic_);
    ASSERT_TRUE(server_->Start().ok());
    channel_ = Connect(server_->port());
  }

  MetricsRegistry metrics_;
  TestService generic_;
  std::unique_ptr<GrpcServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(AuthServerTest, MissingTokenIsUnauthenticated) {
  CallResult result = Call(channel_, kEcho, "x");
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(result.status.error_message(), HasSubstr("authorization"));
  EXPECT_EQ(Call(channel_, kEcho, "x", "not-a-token").status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(AuthServerTest, WrongRoleIsPermissionDenied) {
  CallResult result = Call(channel_, kEcho, "x", "sched-token");
  EXPECT_EQ(result.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(result.status.error_message(), HasSubstr("scheduler"));
}

TEST_F(AuthServerTest, RightRoleAndOperatorAreServed) {
  CallResult result = Call(channel_, kEcho, "hello", "tele-token");
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(result.body, "hello");
  EXPECT_TRUE(Call(channel_, kEcho, "hello", "op-token").status.ok());
}

TEST_F(AuthServerTest, HealthIsOpenWithoutToken) {
  int status = 0;
  CallResult result = CheckHealth(channel_, "", &status);
  ASSERT_TRUE(result.status.ok()) << result.status.error_message();
  EXPECT_EQ(status, kServing);
}

TEST_F(AuthServerTest, CountsRequestsAndRefusals) {
  ASSERT_TRUE(Call(channel_, kEcho, "a", "tele-token").status.ok());
  ASSERT_FALSE(Call(channel_, kEcho, "a").status.ok());
  std::string text = metrics_.Exposition();
  EXPECT_THAT(text, HasSubstr("goodput_grpc_requests_total{method=\"/goodput.test.Echo/Call\","
                              "code=\"OK\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("goodput_grpc_request_duration_seconds_count{method=\"/goodput."
                              "test.Echo/Call\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("goodput_grpc_auth_refusals_total{code=\"UNAUTHENTICATED\"} 1\n"));
}

// TLS: a CA "ca" signing the server's certificate, a CA "client-ca" signing the client
// certificates a mutual-TLS server accepts, and a CA "other" that signs nothing trusted.
class TlsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<TestPki> pki = TestPki::Create();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_.emplace(*std::move(pki));
    for (const char* ca : {"ca", "client-ca", "other"}) ASSERT_TRUE(pki_->MakeCa(ca).ok());
    ASSERT_TRUE(pki_->Issue("ca", "server").ok());
    ASSERT_TRUE(pki_->Issue("client-ca", "client").ok());
    ASSERT_TRUE(pki_->Issue("other", "stranger").ok());
  }

  // A server with the tele-token policy of AuthServerTest over TLS (`mtls`: client
  // certificates from client-ca required).
  void StartServer(bool mtls) {
    absl::StatusOr<std::unique_ptr<AuthPolicy>> policy =
        AuthPolicy::Create({{"tele-token", "telemetry"}});
    ASSERT_TRUE(policy.ok()) << policy.status();
    (*policy)->AllowMethod(kEcho, {Role::kTelemetry});
    GrpcServerOptions options = LocalOptions();
    options.auth = std::shared_ptr<const AuthPolicy>(std::move(*policy));
    options.tls.cert_file = pki_->crt("server");
    options.tls.key_file = pki_->key("server");
    if (mtls) options.tls.client_ca_file = pki_->crt("client-ca");
    options.tls.reload_interval = absl::Seconds(1);
    ASSERT_TRUE(ValidateTlsFiles(options.tls).ok());
    server_ = std::make_unique<GrpcServer>(options);
    server_->AddGenericService(&generic_);
    ASSERT_TRUE(server_->Start().ok());
  }

  // A TLS channel trusting `ca`, presenting `identity`'s certificate when it is not empty.
  std::shared_ptr<grpc::Channel> Dial(const std::string& ca, const std::string& identity = "") {
    ClientTls tls{.ca_file = pki_->crt(ca)};
    if (!identity.empty()) {
      tls.cert_file = pki_->crt(identity);
      tls.key_file = pki_->key(identity);
    }
    return MakeChannel(absl::StrCat("127.0.0.1:", server_->port()), tls);
  }

  std::optional<TestPki> pki_;
  TestService generic_;
  std::unique_ptr<GrpcServer> server_;
};

TEST_F(TlsServerTest, ServesTlsAndChecksBearerTokensOverIt) {
  StartServer(/*mtls=*/false);
  std::shared_ptr<grpc::Channel> channel = Dial("ca");
  CallResult served = Call(channel, kEcho, "hello", "tele-token");
  ASSERT_TRUE(served.status.ok()) << served.status.error_message();
  EXPECT_EQ(served.body, "hello");
  EXPECT_EQ(Call(channel, kEcho, "x").status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  int health = 0;
  EXPECT_TRUE(CheckHealth(channel, "", &health).status.ok());
  EXPECT_EQ(health, kServing);
  // Neither a plaintext client nor one that does not trust the server's CA gets through.
  EXPECT_EQ(Call(Connect(server_->port()), kEcho, "x", "tele-token").status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Call(Dial("other"), kEcho, "x", "tele-token").status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(TlsServerTest, MutualTlsServesOnlyClientsWithACertificateFromTheClientCa) {
  StartServer(/*mtls=*/true);
  CallResult served = Call(Dial("ca", "client"), kEcho, "hello", "tele-token");
  ASSERT_TRUE(served.status.ok()) << served.status.error_message();
  EXPECT_EQ(served.body, "hello");
  EXPECT_EQ(Call(Dial("ca"), kEcho, "x", "tele-token").status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Call(Dial("ca", "stranger"), kEcho, "x", "tele-token").status.error_code(),
            grpc::StatusCode::UNAVAILABLE);
  // The certificate opens the connection; the token still decides what it may call.
  EXPECT_EQ(Call(Dial("ca", "client"), kEcho, "x").status.error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST_F(TlsServerTest, ServesARotatedCertificateWithoutARestart) {
  StartServer(/*mtls=*/false);
  ASSERT_TRUE(Call(Dial("ca"), kEcho, "x", "tele-token").status.ok());
  ASSERT_FALSE(Call(Dial("other"), kEcho, "x", "tele-token").status.ok());
  // The secret is renewed by another CA: once the server has re-read its files, clients that
  // trust only the new CA are served.
  ASSERT_TRUE(pki_->Issue("other", "server").ok());
  bool rotated = false;
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (!rotated && absl::Now() < give_up) {
    rotated = Call(Dial("other"), kEcho, "x", "tele-token").status.ok();
    if (!rotated) absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_TRUE(rotated) << "the server kept its old certificate";
}

TEST(Tls, RefusesAKeyThatDoesNotMatchTheCertificateNamingTheKey) {
  absl::StatusOr<TestPki> pki = TestPki::Create();
  ASSERT_TRUE(pki.ok()) << pki.status();
  ASSERT_TRUE(pki->MakeCa("ca").ok());
  ASSERT_TRUE(pki->Issue("ca", "a").ok());
  ASSERT_TRUE(pki->Issue("ca", "b").ok());
  TlsConfig tls{.cert_file = pki->crt("a"), .key_file = pki->key("b")};
  absl::Status s = ValidateTlsFiles(tls);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tls.key_file"));
  EXPECT_THAT(s.message(), HasSubstr(pki->key("b")));
  tls = TlsConfig{.ca_file = pki->key("a")};
  EXPECT_THAT(ValidateTlsFiles(tls).message(), HasSubstr("tls.ca_file"));
}

}  // namespace
}  // namespace goodput::platform
