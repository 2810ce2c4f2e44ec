// goodput-ingest under abuse, within its configured bounds: thousands of PushSamples streams
// opened at once and abandoned (no message, no half-close), and slow HTTP clients that send
// part of their headers and then nothing (slowloris). Whatever the abuse, the service keeps
// answering health checks SERVING, a normal PushSamples is stored, and its thread count and
// resident memory (/proc) stay under what its configuration allows. Bounds are asserted,
// never durations.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"

namespace goodput::testing {
namespace {

// The configured bounds the tests hold ingest to.
constexpr int kMaxStreams = 256;
constexpr int kMaxStreamsPerConnection = 64;
constexpr int kGrpcMaxThreads = 32;
constexpr int64_t kGrpcMaxMemoryBytes = 64 << 20;
constexpr int kHttpThreads = 4;
constexpr int kHttpMaxQueued = 8;

// A value of /proc/PID/status ("Threads", "VmRSS" in kB).
int64_t ProcStatus(pid_t pid, const std::string& field) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::string value = line.substr(field.size() + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    value = value.substr(0, value.find(' '));
    int64_t n = 0;
    if (absl::SimpleAtoi(value, &n)) return n;
  }
  return -1;
}

std::string Health(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service("goodput.v1.IngestService");
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status s = stub->Check(&ctx, request, &response);
  if (!s.ok()) return absl::StrCat("error ", s.error_code(), ": ", s.error_message());
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
}

// One PushSamples of one batch on a fresh connection: the status and what was stored.
grpc::Status PushOneBatch(const std::string& address, const std::string& batch_id,
                          int64_t* stored) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = v1::IngestService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  v1::PushSamplesRequest request;
  request.set_batch_id(batch_id);
  request.set_cluster("abuse");
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  for (int gpu = 0; gpu < 8; ++gpu) {
    v1::GpuSample* s = request.add_samples();
    s->mutable_gpu()->set_host("node-1");
    s->mutable_gpu()->set_gpu_index(gpu);
    s->set_time_unix_ms(now_ms);
    s->set_gpu_model("NVIDIA H100 80GB HBM3");
    s->set_tensor_active(0.4);
    s->set_sm_clock_mhz(1500);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::PushSamplesResponse response;
  auto writer = stub->PushSamples(&ctx, &response);
  writer->Write(request);
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  *stored = response.stored_count();
  return s;
}

class IngestAbuse : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartPostgres(&pg_));
    absl::StatusOr<int> probe = FreePort();
    ASSERT_TRUE(probe.ok()) << probe.status();
    probe_port_ = *probe;
    ASSERT_NO_FATAL_FAILURE(StartService(
        {.binary = BuiltBinary("services/ingest/goodput-ingest"),
         .config_yaml = absl::StrCat(
             PostgresConfigYaml(*pg_), "http:\n  threads: ", kHttpThreads,
             "\n  max_queued_connections: ", kHttpMaxQueued,
             "\n  read_timeout_s: 300\n  request_timeout_s: 300\n  probe_port: ", probe_port_,
             "\ningest:\n  grpc:\n    max_streams: ", kMaxStreams,
             "\n    max_streams_per_connection: ", kMaxStreamsPerConnection,
             "\n    evict_idle_after_s: 2\n    max_threads: ", kGrpcMaxThreads,
             "\n    max_memory_bytes: ", kGrpcMaxMemoryBytes, "\n"),
         .extra_args = MigrateArgs()},
        &ingest_));
    pid_ = ingest_->process().pid();
    // Warm: the first calls start gRPC's and PostgreSQL's threads and connections.
    int64_t stored = 0;
    ASSERT_TRUE(PushOneBatch(ingest_->grpc_address(), "warm-up", &stored).ok());
    ASSERT_EQ(Health(ingest_->Channel()), "SERVING");
    threads_before_ = ProcStatus(pid_, "Threads");
    rss_kb_before_ = ProcStatus(pid_, "VmRSS");
    ASSERT_GT(threads_before_, 0);
    ASSERT_GT(rss_kb_before_, 0);
  }

  // Healthy and within bounds: SERVING, a batch stored, threads and RSS under the limits.
  void ExpectHealthyWithinBounds(int64_t allowed_extra_threads, int64_t allowed_extra_rss_kb,
                                 const std::string& batch_id) {
    EXPECT_EQ(Health(ingest_->Channel()), "SERVING");
    // While every stream slot is held by an abandoned stream younger than
    // evict_idle_after_s, a new stream is refused with a retry hint; once they are older, it
    // takes the slot of the one idle longest.
    int64_t stored = 0;
    grpc::Status pushed;
    EXPECT_TRUE(PollUntil(
        [&] {
          pushed = PushOneBatch(ingest_->grpc_address(), batch_id, &stored);
          return pushed.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED;
        },
        absl::Seconds(60), absl::Milliseconds(500)));
    EXPECT_TRUE(pushed.ok()) << pushed.error_message();
    EXPECT_EQ(stored, 8);
    const int64_t threads = ProcStatus(pid_, "Threads");
    const int64_t rss_kb = ProcStatus(pid_, "VmRSS");
    EXPECT_LE(threads, threads_before_ + allowed_extra_threads)
        << "threads before the abuse: " << threads_before_;
    EXPECT_LE(rss_kb, rss_kb_before_ + allowed_extra_rss_kb)
        << "RSS before the abuse: " << rss_kb_before_ << " kB";
  }

  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<ServiceProcess> ingest_;
  int probe_port_ = 0;
  pid_t pid_ = 0;
  int64_t threads_before_ = 0;
  int64_t rss_kb_before_ = 0;
};

TEST_F(IngestAbuse, ThousandsOfAbandonedStreamsAreBoundedAndNormalPushesStillGoThrough) {
  constexpr int kConnections = 40;
  constexpr int kStreamsPerConnection = 50;  // under the per-connection bound: all reach ingest
  constexpr int kStreams = kConnections * kStreamsPerConnection;

  struct Abandoned {
    grpc::ClientContext ctx;
    v1::PushSamplesResponse response;
    std::unique_ptr<grpc::ClientAsyncWriter<v1::PushSamplesRequest>> call;
    grpc::Status status;
    bool ended = false;
  };
  // Tags: stream index * 4 + 0 (started), 1 (server answered or the call died), 2 (finished).
  grpc::CompletionQueue cq;
  std::vector<std::unique_ptr<Abandoned>> streams;
  std::vector<std::unique_ptr<v1::IngestService::Stub>> stubs;
  for (int c = 0; c < kConnections; ++c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
    stubs.push_back(v1::IngestService::NewStub(grpc::CreateCustomChannel(
        ingest_->grpc_address(), grpc::InsecureChannelCredentials(), args)));
  }
  for (int i = 0; i < kStreams; ++i) streams.push_back(std::make_unique<Abandoned>());
  absl::Mutex mu;
  int ended = 0;
  std::thread poller([&] {
    void* tag = nullptr;
    bool ok = false;
    while (cq.Next(&tag, &ok)) {
      const auto i = reinterpret_cast<intptr_t>(tag);
      Abandoned& a = *streams[i / 4];
      if (i % 4 == 1) {
        a.call->Finish(&a.status, reinterpret_cast<void*>(i - 1 + 2));
      } else if (i % 4 == 2) {
        absl::MutexLock lock(&mu);
        a.ended = true;
        ++ended;
      }
    }
  });
  // Opened at once: a call started and nothing sent, never half-closed.
  for (int i = 0; i < kStreams; ++i) {
    Abandoned& a = *streams[i];
    a.call = stubs[i % kConnections]->PrepareAsyncPushSamples(&a.ctx, &a.response, &cq);
    a.call->StartCall(reinterpret_cast<void*>(intptr_t{i} * 4));
    a.call->ReadInitialMetadata(reinterpret_cast<void*>(intptr_t{i} * 4 + 1));
  }

  // Ingest holds at most kMaxStreams of them; every other one is refused or evicted.
  EXPECT_TRUE(PollUntil(
      [&] {
        absl::MutexLock lock(&mu);
        return kStreams - ended <= kMaxStreams;
      },
      absl::Seconds(120), absl::Milliseconds(100)));
  ASSERT_NO_FATAL_FAILURE(
      ExpectHealthyWithinBounds(kGrpcMaxThreads, kGrpcMaxMemoryBytes / 1024, "after-streams"));
  {
    absl::MutexLock lock(&mu);
    int refused = 0;
    for (const auto& a : streams) {
      if (!a->ended) continue;
      const grpc::StatusCode code = a->status.error_code();
      EXPECT_TRUE(code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                  code == grpc::StatusCode::CANCELLED)
          << code << ": " << a->status.error_message();
      if (code == grpc::StatusCode::RESOURCE_EXHAUSTED) {
        ++refused;
        EXPECT_NE(a->status.error_message().find("ingest.grpc.max_streams"), std::string::npos)
            << a->status.error_message();
        EXPECT_EQ(a->ctx.GetServerTrailingMetadata().count("retry-after"), 1u);
      }
    }
    SCOPED_TRACE(absl::StrCat(refused, " refused"));
  }

  for (auto& a : streams) a->ctx.TryCancel();
  EXPECT_TRUE(PollUntil(
      [&] {
        absl::MutexLock lock(&mu);
        return ended == kStreams;
      },
      absl::Seconds(120)));
  cq.Shutdown();
  poller.join();
}

// A raw TCP connection that sends `bytes` and then nothing.
int SlowClient(int port, const std::string& bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

TEST_F(IngestAbuse, SlowHttpClientsAreBoundedAndTheRestIsAnsweredWithRetryAfter) {
  constexpr int kClients = 300;
  // Headers begun, never finished: each would hold a connection thread until read_timeout_s.
  const std::string partial =
      "POST /api/v1/write HTTP/1.1\r\nHost: ingest\r\nContent-Type: application/x-protobuf\r\n";
  std::vector<int> fds;
  for (int i = 0; i < kClients; ++i) {
    const int fd = SlowClient(ingest_->http_port(), partial);
    ASSERT_GE(fd, 0) << "connection " << i;
    fds.push_back(fd);
  }
  // What each connection received so far; a connection the server holds receives nothing.
  std::vector<std::string> received(kClients);
  std::vector<bool> closed(kClients, false);
  auto answered = [&] {
    int n = 0;
    for (int i = 0; i < kClients; ++i) {
      char buf[4096];
      while (!closed[i]) {
        const ssize_t r = recv(fds[i], buf, sizeof(buf), 0);
        if (r > 0) {
          received[i].append(buf, static_cast<size_t>(r));
        } else {
          if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) closed[i] = true;
          break;
        }
      }
      if (!received[i].empty() || closed[i]) ++n;
    }
    return n;
  };
  // Ingest holds at most its connection threads plus its queue; the rest are answered at once.
  EXPECT_TRUE(PollUntil([&] { return answered() >= kClients - kHttpThreads - kHttpMaxQueued; },
                        absl::Seconds(120), absl::Milliseconds(100)));
  for (int i = 0; i < kClients; ++i) {
    if (received[i].empty()) continue;
    EXPECT_EQ(received[i].rfind("HTTP/1.1 503", 0), 0u) << received[i];
    EXPECT_NE(received[i].find("Retry-After:"), std::string::npos) << received[i];
  }
  // Probes are answered on their own listener meanwhile.
  httplib::Client probe("127.0.0.1", probe_port_);
  probe.set_read_timeout(30);
  httplib::Result healthz = probe.Get("/healthz");
  ASSERT_TRUE(healthz) << httplib::to_string(healthz.error());
  EXPECT_EQ(healthz->status, 200);
  // No thread per slow client: the HTTP pool is fixed (a thread or two for closing lingering
  // connections); memory grows by buffers only.
  ASSERT_NO_FATAL_FAILURE(ExpectHealthyWithinBounds(4, 32 << 10, "after-slow-clients"));
  for (int fd : fds) close(fd);
}

}  // namespace
}  // namespace goodput::testing
