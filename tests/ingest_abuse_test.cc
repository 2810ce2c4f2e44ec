// goodput-ingest under abuse, within its configured bounds: thousands of PushSamples streams
// opened at once and abandoned (no message, no half-close); hundreds of slow HTTP clients
// that send part of their headers and then trickle or nothing (slowloris), on the main port
// and a thousand on the probe port; unauthenticated clients sending 16 MiB bodies at once.
// Whatever the abuse, the service keeps answering health checks SERVING, a normal
// PushSamples is stored, remote_write and job registration from well-behaved clients
// succeed, and its thread count, descriptors and resident memory (/proc) stay under what its
// configuration allows. Bounds are asserted, never durations.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
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
#include "prometheus/remote.pb.h"
#include "snappy.h"
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

// Descriptors open in process `pid`.
int64_t OpenDescriptors(pid_t pid) {
  DIR* dir = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (dir == nullptr) return -1;
  int64_t n = 0;
  while (const dirent* entry = readdir(dir)) n += entry->d_name[0] == '.' ? 0 : 1;
  closedir(dir);
  return n;
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
grpc::Status PushOneBatch(const std::string& address, const std::string& batch_id, int64_t* stored,
                          const std::string& token = "") {
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
  if (!token.empty()) ctx.AddMetadata("authorization", absl::StrCat("Bearer ", token));
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
  // More configuration (top-level keys).
  virtual std::string ExtraYaml() const { return ""; }

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
             "\n  read_timeout_s: 300\n  request_timeout_s: 300\n  header_timeout_s: 300",
             "\n  probe_port: ", probe_port_, "\n", ExtraYaml(),
             "ingest:\n  remote_write:\n    cluster: abuse\n  grpc:\n    max_streams: ",
             kMaxStreams, "\n    max_streams_per_connection: ", kMaxStreamsPerConnection,
             "\n    evict_idle_after_s: 2\n    max_threads: ", kGrpcMaxThreads,
             "\n    max_memory_bytes: ", kGrpcMaxMemoryBytes, "\n"),
         .extra_args = MigrateArgs()},
        &ingest_));
    pid_ = ingest_->process().pid();
    // Warm: the first calls start gRPC's and PostgreSQL's threads and connections.
    int64_t stored = 0;
    ASSERT_TRUE(PushOneBatch(ingest_->grpc_address(), "warm-up", &stored, token_).ok());
    ASSERT_EQ(Health(ingest_->Channel()), "SERVING");
    threads_before_ = ProcStatus(pid_, "Threads");
    rss_kb_before_ = ProcStatus(pid_, "VmRSS");
    fds_before_ = OpenDescriptors(pid_);
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
          pushed = PushOneBatch(ingest_->grpc_address(), batch_id, &stored, token_);
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
  int64_t fds_before_ = 0;
  std::string token_;  // for PushSamples, with auth on
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

// A raw TCP connection from `source` (a loopback address: all of 127/8 is local) that sends
// `bytes` and then nothing; non-blocking; -1 on failure.
int SlowClient(int port, const std::string& bytes, const char* source = "127.0.0.1") {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// Reads what comes on `fd` until the peer closes or a whole response with its
// Content-Length body is in (or 30 s pass: a bound on waiting, not an expectation).
std::string ReadAnswer(int fd) {
  std::string in;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    const size_t end = in.find("\r\n\r\n");
    if (end != std::string::npos) {
      if (in.rfind("HTTP/1.1 1", 0) == 0) break;  // an interim answer: nothing follows yet
      const size_t at = in.find("Content-Length: ");
      if (at != std::string::npos && at < end) {
        size_t length = 0;
        if (absl::SimpleAtoi(in.substr(at + 16, in.find("\r\n", at) - at - 16), &length) &&
            in.size() >= end + 4 + length) {
          break;
        }
      }
    }
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    if (n > 0) in.append(buf, static_cast<size_t>(n));
  }
  return in;
}

constexpr char kTelemetryToken[] = "telemetry-abuse-token";
constexpr char kSchedulerToken[] = "scheduler-abuse-token";
constexpr int64_t kRemoteWriteBody = 16 << 20;  // ingest.remote_write.max_body_bytes' default

// The same ingest with auth on.
class IngestAbuseWithAuth : public IngestAbuse {
 protected:
  std::string ExtraYaml() const override {
    return absl::StrCat("auth:\n  enabled: true\n  tokens:\n    telemetry: [", kTelemetryToken,
                        "]\n    scheduler: [", kSchedulerToken, "]\n");
  }
  void SetUp() override {
    token_ = kTelemetryToken;
    IngestAbuse::SetUp();
  }

  // A well-behaved remote_write of one sample: its status (0 when no answer came).
  int RemoteWrite(int gpu) {
    prometheus::WriteRequest request;
    prometheus::TimeSeries* series = request.add_timeseries();
    const std::pair<std::string, std::string> labels[] = {
        {"Hostname", "node-1"},
        {"__name__", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"},
        {"gpu", absl::StrCat(gpu)},
        {"modelName", "NVIDIA H100 80GB HBM3"}};
    for (const auto& [name, value] : labels) {
      auto* label = series->add_labels();
      label->set_name(name);
      label->set_value(value);
    }
    auto* sample = series->add_samples();
    sample->set_value(0.4);
    sample->set_timestamp(absl::ToUnixMillis(absl::Now()) - 2000);
    const std::string raw = request.SerializeAsString();
    std::string body;
    snappy::Compress(raw.data(), raw.size(), &body);
    httplib::Client client("127.0.0.1", ingest_->http_port());
    client.set_read_timeout(30, 0);
    httplib::Result r = client.Post("/api/v1/write",
                                    {{"Content-Encoding", "snappy"},
                                     {"X-Prometheus-Remote-Write-Version", "0.1.0"},
                                     {"Authorization", absl::StrCat("Bearer ", kTelemetryToken)}},
                                    body, "application/x-protobuf");
    if (!r) return 0;
    EXPECT_EQ(r->status, 200) << r->body;
    return r->status;
  }

  // A well-behaved job registration over HTTP: its status (0 when no answer came).
  int RegisterJob(const std::string& job_id) {
    const std::string body = absl::StrCat(
        R"({"job": {"key": {"cluster": "abuse", "jobId": ")", job_id,
        R"("}, "scheduler": "SCHEDULER_KIND_SLURM", "user": "alice", "state": "JOB_STATE_RUNNING",)",
        R"( "startTime": "2026-01-05T10:00:00Z", "allocations": [{"gpu": {"host": "job-node-)",
        job_id, R"(",)",
        R"( "gpuIndex": 0}, "startTime": "2026-01-05T10:00:00Z"}]}})");
    httplib::Client client("127.0.0.1", ingest_->http_port());
    client.set_read_timeout(30, 0);
    httplib::Result r = client.Post("/api/v1/jobs:register",
                                    {{"Authorization", absl::StrCat("Bearer ", kSchedulerToken)}},
                                    body, "application/json");
    if (!r) return 0;
    EXPECT_EQ(r->status, 200) << r->body;
    return r->status;
  }
};

TEST_F(IngestAbuseWithAuth, AnUnauthenticatedLargeRequestIsAnsweredFromItsHeadersWithoutContinue) {
  // Headers only, announcing 16 MiB and waiting for "100 Continue": the answer comes without
  // a byte of body, and it is the refusal.
  auto head = [](const std::string& path, const std::string& token) {
    return absl::StrCat(
        "POST ", path, " HTTP/1.1\r\nHost: ingest\r\nContent-Length: ", kRemoteWriteBody,
        "\r\nExpect: 100-continue\r\n",
        token.empty() ? "" : absl::StrCat("Authorization: Bearer ", token, "\r\n"), "\r\n");
  };
  struct Case {
    std::string path, token;
    int status;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"/api/v1/write", "", 401, "needs an \"Authorization: Bearer <token>\" header"},
           {"/api/v1/write", "not-a-token", 401, "not a known token"},
           {"/api/v1/write", kSchedulerToken, 403, "not allowed for role scheduler"},
           {"/api/v1/jobs:register", "", 401, "UNAUTHENTICATED"},
           {"/api/v1/jobs:end", kTelemetryToken, 403, "PERMISSION_DENIED"}}) {
    SCOPED_TRACE(c.path + " with token \"" + c.token + "\"");
    const int fd = SlowClient(ingest_->http_port(), head(c.path, c.token));
    ASSERT_GE(fd, 0);
    const std::string answer = ReadAnswer(fd);
    close(fd);
    EXPECT_EQ(answer.rfind(absl::StrCat("HTTP/1.1 ", c.status), 0), 0u) << answer;
    EXPECT_EQ(answer.find("100 Continue"), std::string::npos) << answer;
    EXPECT_NE(answer.find(c.says), std::string::npos) << answer;
    if (c.status == 401) {
      EXPECT_NE(answer.find("WWW-Authenticate: Bearer"), std::string::npos);
    }
    EXPECT_EQ(answer.find("not-a-token"), std::string::npos);
  }
  // The right token is told to send its body.
  const int fd = SlowClient(ingest_->http_port(), head("/api/v1/write", kTelemetryToken));
  ASSERT_GE(fd, 0);
  const std::string answer = ReadAnswer(fd);
  close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.1 100 Continue", 0), 0u) << answer;
}

TEST_F(IngestAbuseWithAuth, ParallelUnauthenticatedLargeBodiesKeepMemoryBounded) {
  constexpr int kClients = 48;
  // Peak resident memory while the clients send, sampled every few milliseconds.
  std::atomic<bool> sending{true};
  std::atomic<int64_t> peak_kb{rss_kb_before_};
  std::thread sampler([&] {
    while (sending) {
      peak_kb = std::max<int64_t>(peak_kb, ProcStatus(pid_, "VmRSS"));
      absl::SleepFor(absl::Milliseconds(2));
    }
  });
  // Each sends its headers and its whole 16 MiB at once, not waiting for an answer.
  std::vector<std::string> answers(kClients);
  std::vector<std::thread> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.emplace_back([this, &answers, i] {
      const int fd = SlowClient(
          ingest_->http_port(),
          absl::StrCat("POST /api/v1/write HTTP/1.1\r\nHost: ingest\r\nContent-Encoding: snappy\r\n"
                       "Content-Type: application/x-protobuf\r\nContent-Length: ",
                       kRemoteWriteBody, "\r\n\r\n"));
      if (fd < 0) return;
      const std::string piece(64 << 10, 'x');
      for (int64_t sent = 0; sent < kRemoteWriteBody;) {
        pollfd p{.fd = fd, .events = POLLIN | POLLOUT, .revents = 0};
        if (poll(&p, 1, 30'000) <= 0 || (p.revents & (POLLIN | POLLERR | POLLHUP)) != 0) break;
        const ssize_t n = send(fd, piece.data(), piece.size(), MSG_NOSIGNAL);
        if (n <= 0 && errno != EAGAIN) break;
        if (n > 0) sent += n;
      }
      answers[static_cast<size_t>(i)] = ReadAnswer(fd);
      close(fd);
    });
  }
  for (std::thread& client : clients) client.join();
  sending = false;
  sampler.join();
  const int64_t rss_kb_after = ProcStatus(pid_, "VmRSS");
  int refused_unread = 0;
  for (const std::string& answer : answers) {
    // 401 from the headers; a client beyond the connection threads and their queue is
    // answered 503 from its headers too. Never a body read (413, 400) or stored.
    const bool refused =
        answer.rfind("HTTP/1.1 401", 0) == 0 || answer.rfind("HTTP/1.1 503", 0) == 0;
    EXPECT_TRUE(refused) << answer.substr(0, 200);
    refused_unread += answer.rfind("HTTP/1.1 401", 0) == 0 ? 1 : 0;
  }
  EXPECT_GT(refused_unread, 0);
  std::cout << "[figures] " << kClients << " unauthenticated 16 MiB bodies at once: RSS before "
            << rss_kb_before_ << " kB, peak " << peak_kb << " kB, after " << rss_kb_after << " kB; "
            << refused_unread << " answered 401 from their headers\n";
  // Reading even two of the bodies would hold 32 MiB: a server that reads none holds its
  // per-connection buffers only (16 KiB each).
  EXPECT_LT(peak_kb - rss_kb_before_, 32 << 10)
      << "peak RSS " << peak_kb << " kB, before " << rss_kb_before_ << " kB";
  ASSERT_NO_FATAL_FAILURE(ExpectHealthyWithinBounds(4, 32 << 10, "after-large-bodies"));
}

TEST_F(IngestAbuseWithAuth, SlowClientsLeaveRemoteWriteJobRegistrationAndTheProbeReachable) {
  constexpr int kSlow = 300;
  constexpr int kPerClient = 128;  // http.max_connections_per_client's default
  // Headers begun, never finished: each would hold a connection thread while it waits.
  const std::string partial =
      "POST /api/v1/write HTTP/1.1\r\nHost: ingest\r\nContent-Type: application/x-protobuf\r\n";
  // 300 from one address, which ingest holds up to its per-client limit...
  std::vector<int> fds;
  for (int i = 0; i < kSlow; ++i) {
    const int fd = SlowClient(ingest_->http_port(), partial, "127.0.4.1");
    ASSERT_GE(fd, 0) << "connection " << i;
    fds.push_back(fd);
  }
  // ...and 300 from 10 more addresses, all of which it holds.
  for (int i = 0; i < kSlow; ++i) {
    const std::string source = absl::StrCat("127.0.5.", 1 + i % 10);
    const int fd = SlowClient(ingest_->http_port(), partial, source.c_str());
    ASSERT_GE(fd, 0) << "connection " << i;
    fds.push_back(fd);
  }
  const int64_t expected_held = kPerClient + kSlow;
  EXPECT_TRUE(PollUntil([&] { return OpenDescriptors(pid_) >= fds_before_ + expected_held; },
                        absl::Seconds(60), absl::Milliseconds(100)));
  // Trickle: one more byte each.
  for (int fd : fds) (void)send(fd, "X", 1, MSG_NOSIGNAL);

  // Well-behaved clients meanwhile.
  EXPECT_EQ(RemoteWrite(0), 200);
  EXPECT_EQ(RegisterJob("9001"), 200);
  EXPECT_EQ(RemoteWrite(1), 200);
  EXPECT_EQ(RegisterJob("9002"), 200);

  // A thousand slow clients on the probe port (from 10 addresses): the liveness probe passes
  // three times in a row.
  std::vector<int> probe_fds;
  for (int i = 0; i < 1000; ++i) {
    const std::string source = absl::StrCat("127.0.6.", 1 + i % 10);
    const int fd = SlowClient(probe_port_, "GET /heal", source.c_str());
    ASSERT_GE(fd, 0) << "probe connection " << i;
    probe_fds.push_back(fd);
  }
  for (int fd : probe_fds) (void)send(fd, "t", 1, MSG_NOSIGNAL);
  for (int round = 0; round < 3; ++round) {
    httplib::Client probe("127.0.0.1", probe_port_);
    probe.set_read_timeout(30);
    httplib::Result healthz = probe.Get("/healthz");
    ASSERT_TRUE(healthz) << "round " << round << ": " << httplib::to_string(healthz.error());
    EXPECT_EQ(healthz->status, 200);
  }
  const int64_t fds_held = OpenDescriptors(pid_);
  // Still reachable with all of them held.
  EXPECT_EQ(RemoteWrite(2), 200);
  EXPECT_EQ(RegisterJob("9003"), 200);
  std::cout << "[figures] " << 2 * kSlow << " slow clients on the HTTP port and 1000 on the "
            << "probe port: ingest's descriptors " << fds_before_ << " before, " << fds_held
            << " while held; threads " << threads_before_ << " before, "
            << ProcStatus(pid_, "Threads") << " while held; RSS " << rss_kb_before_
            << " kB before, " << ProcStatus(pid_, "VmRSS") << " kB while held; remote_write, "
            << "job registration and /healthz answered\n";
  // A descriptor per connection and no more (the evicted ones may still be draining).
  EXPECT_LE(fds_held, fds_before_ + 2 * kSlow + 1000 + 16);
  // No thread per slow client: the HTTP pool is fixed; memory grows by buffers only.
  ASSERT_NO_FATAL_FAILURE(ExpectHealthyWithinBounds(4, 32 << 10, "after-slow-clients"));
  for (int fd : fds) close(fd);
  for (int fd : probe_fds) close(fd);
}

}  // namespace
}  // namespace goodput::testing
