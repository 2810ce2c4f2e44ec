#include "services/platform/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/platform/auth.h"
#include "services/platform/test_pki.h"

namespace goodput::platform {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Polls `done` until it holds or `timeout` passes.
bool PollUntil(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(30)) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return done();
}

// A blocking TCP connection to 127.0.0.1:`port`; -1 on failure.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Waits until `fd` has one of `events`; false after `timeout`.
bool WaitFor(int fd, short events, absl::Duration timeout) {
  pollfd p{.fd = fd, .events = events, .revents = 0};
  return poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) > 0;
}

// Sends all of `data` unless the peer answers or closes first; false then.
bool SendUnlessAnswered(int fd, absl::string_view data) {
  while (!data.empty()) {
    pollfd p{.fd = fd, .events = POLLIN | POLLOUT, .revents = 0};
    if (poll(&p, 1, 30'000) <= 0 || (p.revents & POLLIN) != 0) return false;
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// Reads one response (headers and a Content-Length body), or what came before the peer
// closed or 30 s passed.
std::string ReadResponse(int fd) {
  std::string in;
  char buffer[4096];
  size_t want = std::string::npos;
  while (in.size() < want && WaitFor(fd, POLLIN, absl::Seconds(30))) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    in.append(buffer, static_cast<size_t>(n));
    const size_t end = in.find("\r\n\r\n");
    if (want == std::string::npos && end != std::string::npos) {
      std::smatch m;
      static const std::regex kLength("[Cc]ontent-[Ll]ength: ([0-9]+)");
      const std::string head = in.substr(0, end);
      size_t length = 0;
      if (std::regex_search(head, m, kLength)) length = std::stoul(m[1]);
      want = end + 4 + length;
    }
  }
  return in;
}

// Sends `request` on a new connection and reads the response.
std::string Exchange(int port, absl::string_view request) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  SendUnlessAnswered(fd, request);  // a refusal may come before all of it is sent
  std::string response = ReadResponse(fd);
  close(fd);
  return response;
}

// This process's resident memory.
int64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// The most resident memory seen while it lives, sampled on a thread of its own.
class PeakRss {
 public:
  PeakRss()
      : peak_(RssBytes()), thread_([this] {
          while (!done_) {
            peak_ = std::max<int64_t>(peak_, RssBytes());
            absl::SleepFor(absl::Milliseconds(1));
          }
        }) {}
  ~PeakRss() { Stop(); }
  int64_t Stop() {
    done_ = true;
    if (thread_.joinable()) thread_.join();
    return peak_;
  }

 private:
  std::atomic<bool> done_{false};
  std::atomic<int64_t> peak_;
  std::thread thread_;
};

constexpr int64_t kMiB = 1 << 20;
// 400 MiB, generated 64 KiB at a time.
constexpr int64_t kHugeBody = 400 * kMiB;

// Sends `total` bytes of 'x' (in chunked framing when `chunked`) until the server answers;
// returns its answer.
std::string PostHugeBody(int port, bool chunked, int64_t total) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  const std::string head =
      chunked
          ? "POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
          : absl::StrCat("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: ", total, "\r\n\r\n");
  const std::string piece(64 << 10, 'x');
  const std::string frame = chunked ? absl::StrCat("10000\r\n", piece, "\r\n") : piece;
  bool sending = SendUnlessAnswered(fd, head);
  for (int64_t sent = 0; sending && sent < total; sent += static_cast<int64_t>(piece.size())) {
    sending = SendUnlessAnswered(fd, frame);
  }
  if (sending && chunked) SendUnlessAnswered(fd, "0\r\n\r\n");
  std::string response = ReadResponse(fd);
  close(fd);
  return response;
}

HttpServerOptions Loopback(HttpLimits limits = {}) {
  return {.host = "127.0.0.1", .port = 0, .limits = limits};
}

// Checks `text` against the Prometheus text format 0.0.4: every line is a HELP/TYPE comment or
// a sample of the family declared by the latest TYPE line, with a parseable value. Returns the
// samples (series text -> value) or fails the test.
std::map<std::string, double> ParsePrometheusText(const std::string& text) {
  static const std::regex kType(
      R"(# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped))");
  static const std::regex kHelp(R"(# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .*)");
  static const std::regex kSample(
      R"(([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")*\})? (\S+)( -?[0-9]+)?)");
  std::map<std::string, double> samples;
  std::string family, type;
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  for (absl::string_view line_view : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::string line(line_view);
    std::smatch match;
    if (std::regex_match(line, match, kType)) {
      family = match[1];
      type = match[2];
      continue;
    }
    if (std::regex_match(line, match, kHelp)) continue;
    if (!std::regex_match(line, match, kSample)) {
      ADD_FAILURE() << "not a valid exposition line: " << line;
      continue;
    }
    std::string name = match[1];
    bool belongs = name == family ||
                   (type == "histogram" && (name == family + "_bucket" || name == family + "_sum" ||
                                            name == family + "_count"));
    EXPECT_TRUE(belongs) << "sample " << name << " outside its TYPE block (" << family << ")";
    std::string value_text = match[3];
    double value = 0;
    bool ok = value_text == "+Inf" || value_text == "-Inf" || value_text == "NaN" ||
              absl::SimpleAtod(value_text, &value);
    EXPECT_TRUE(ok) << "bad value in: " << line;
    samples[name + std::string(match[2])] = value;
  }
  return samples;
}

TEST(HttpServer, ServesMetricsInPrometheusTextFormat) {
  MetricsRegistry registry;
  registry.AddCounter("goodput_test_requests_total", "Requests.", {"method", "code"})
      .WithLabels({"/a.B/C", "OK"})
      .Increment(7);
  registry.AddGauge("goodput_test_up", "Up.").WithLabels({}).Set(1);
  registry.AddHistogram("goodput_test_seconds", "Latency \"quoted\".", {"method"})
      .WithLabels({"/a.B/C"})
      .Observe(0.2);
  HttpServer server({.host = "127.0.0.1", .port = 0}, &registry, nullptr);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.port(), 0);

  httplib::Client client("127.0.0.1", server.port());
  httplib::Result result = client.Get("/metrics");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  EXPECT_THAT(result->get_header_value("Content-Type"), ::testing::HasSubstr("version=0.0.4"));
  std::map<std::string, double> samples = ParsePrometheusText(result->body);
  EXPECT_EQ(samples["goodput_test_requests_total{method=\"/a.B/C\",code=\"OK\"}"], 7);
  EXPECT_EQ(samples["goodput_test_up"], 1);
  EXPECT_EQ(samples["goodput_test_seconds_count{method=\"/a.B/C\"}"], 1);
}

TEST(HttpServer, HealthzReflectsTheHealthCheck) {
  std::atomic<bool> healthy{true};
  HttpServer server({.host = "127.0.0.1", .port = 0}, nullptr, [&]() -> absl::Status {
    if (healthy) return absl::OkStatus();
    return absl::UnavailableError("postgres unreachable");
  });
  ASSERT_TRUE(server.Start().ok());
  httplib::Client client("127.0.0.1", server.port());

  httplib::Result ok = client.Get("/healthz");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "ok\n");

  healthy = false;
  httplib::Result bad = client.Get("/healthz");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 503);
  EXPECT_EQ(bad->body, "postgres unreachable\n");
}

TEST(HttpServer, ServesRoutesRegisteredByTheService) {
  HttpServer server({.host = "127.0.0.1", .port = 0}, nullptr, nullptr);
  server.Post("/api/v1/write", [](const httplib::Request& request, httplib::Response& response) {
    response.status = 204;
    response.set_header("X-Body-Bytes", std::to_string(request.body.size()));
  });
  ASSERT_TRUE(server.Start().ok());
  httplib::Client client("127.0.0.1", server.port());
  httplib::Result result = client.Post("/api/v1/write", "abc", "application/x-protobuf");
  ASSERT_TRUE(result);
  EXPECT_EQ(result->status, 204);
  EXPECT_EQ(result->get_header_value("X-Body-Bytes"), "3");
}

TEST(HttpServer, ServesHttpsAndARotatedCertificateWithoutARestart) {
  absl::StatusOr<TestPki> pki = TestPki::Create();
  ASSERT_TRUE(pki.ok()) << pki.status();
  ASSERT_TRUE(pki->MakeCa("ca").ok());
  ASSERT_TRUE(pki->MakeCa("next-ca").ok());
  ASSERT_TRUE(pki->Issue("ca", "server").ok());
  HttpServer server({.host = "127.0.0.1",
                     .port = 0,
                     .probe_port = 0,
                     .tls = {.cert_file = pki->crt("server"), .key_file = pki->key("server")}},
                    nullptr, nullptr);
  server.Post("/api/v1/write", [](const httplib::Request& request, httplib::Response& response) {
    response.status = 204;
    response.set_header("X-Body-Bytes", std::to_string(request.body.size()));
  });
  ASSERT_TRUE(server.Start().ok());
  EXPECT_TRUE(server.serves_tls());
  auto get = [&](const std::string& ca, int port, const std::string& path) {
    httplib::SSLClient client("127.0.0.1", port);
    client.set_ca_cert_path(pki->crt(ca));
    client.enable_server_certificate_verification(true);
    return client.Get(path.c_str());
  };
  httplib::SSLClient client("127.0.0.1", server.port());
  client.set_ca_cert_path(pki->crt("ca"));
  client.enable_server_certificate_verification(true);
  httplib::Result posted = client.Post("/api/v1/write", std::string(100000, 'x'), "text/plain");
  ASSERT_TRUE(posted) << httplib::to_string(posted.error());
  EXPECT_EQ(posted->status, 204);
  EXPECT_EQ(posted->get_header_value("X-Body-Bytes"), "100000");
  httplib::Result probe = get("ca", server.probe_port(), "/healthz");
  ASSERT_TRUE(probe) << httplib::to_string(probe.error());
  EXPECT_EQ(probe->status, 200);
  // A plaintext request gets no answer, and a client that does not trust the CA none either.
  httplib::Client plain("127.0.0.1", server.port());
  httplib::Result plain_result = plain.Get("/healthz");
  EXPECT_TRUE(!plain_result || plain_result->status != 200);
  EXPECT_FALSE(get("next-ca", server.port(), "/healthz"));

  ASSERT_TRUE(pki->Issue("next-ca", "server").ok());
  httplib::Result renewed = get("next-ca", server.port(), "/healthz");
  ASSERT_TRUE(renewed) << httplib::to_string(renewed.error());
  EXPECT_EQ(renewed->status, 200);
  EXPECT_FALSE(get("ca", server.port(), "/healthz"));
}

TEST(HttpServer, MetricsNeedAKnownTokenWhenConfiguredWhileHealthzStaysOpen) {
  absl::StatusOr<std::unique_ptr<AuthPolicy>> policy = AuthPolicy::Create({{"any-token", "sdk"}});
  ASSERT_TRUE(policy.ok()) << policy.status();
  MetricsRegistry metrics;
  HttpServer server(
      {.host = "127.0.0.1", .port = 0, .probe_port = 0, .metrics_auth = policy->get()}, &metrics,
      nullptr);
  ASSERT_TRUE(server.Start().ok());
  for (int port : {server.port(), server.probe_port()}) {
    httplib::Client client("127.0.0.1", port);
    httplib::Result refused = client.Get("/metrics");
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 401);
    EXPECT_EQ(refused->get_header_value("WWW-Authenticate"), "Bearer");
    httplib::Result unknown = client.Get("/metrics", {{"Authorization", "Bearer wrong"}});
    ASSERT_TRUE(unknown);
    EXPECT_EQ(unknown->status, 401);
    EXPECT_THAT(unknown->body, ::testing::Not(HasSubstr("wrong")));
    httplib::Result served = client.Get("/metrics", {{"Authorization", "Bearer any-token"}});
    ASSERT_TRUE(served);
    EXPECT_EQ(served->status, 200);
    httplib::Result health = client.Get("/healthz");
    ASSERT_TRUE(health);
    EXPECT_EQ(health->status, 200);
  }
}

TEST(HttpServer, ARequestGuardAnswersBeforeAnyRoute) {
  HttpServer server({.host = "127.0.0.1", .port = 0}, nullptr, nullptr);
  server.Get("/api/things", [](const httplib::Request&, httplib::Response& response) {
    response.set_content("things", "text/plain");
  });
  server.SetRequestGuard([](const httplib::Request& request, httplib::Response& response) {
    if (request.has_header("X-Let-In")) return false;
    response.status = 401;
    return true;
  });
  ASSERT_TRUE(server.Start().ok());
  httplib::Client client("127.0.0.1", server.port());
  httplib::Result refused = client.Get("/api/things");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  httplib::Result served = client.Get("/api/things", {{"X-Let-In", "1"}});
  ASSERT_TRUE(served);
  EXPECT_EQ(served->body, "things");
}

TEST(HttpServer, ListsItsRoutes) {
  HttpServer server({.host = "127.0.0.1", .port = 0}, nullptr, nullptr);
  server.Post("/api/v1/write", [](const httplib::Request&, httplib::Response&) {});
  server.Get("/api/things", [](const httplib::Request&, httplib::Response&) {});
  EXPECT_THAT(server.routes(), ::testing::ElementsAre("GET /metrics", "GET /healthz",
                                                      "POST /api/v1/write", "GET /api/things"));
}

TEST(HttpServer, StopsRightAfterStart) {
  HttpServer server({.host = "127.0.0.1", .port = 0}, nullptr, nullptr);
  ASSERT_TRUE(server.Start().ok());
  server.Stop();
  server.Stop();
}

TEST(HttpServer, ReportsAPortThatCannotBeBound) {
  HttpServer first({.host = "127.0.0.1", .port = 0}, nullptr, nullptr);
  ASSERT_TRUE(first.Start().ok());
  HttpServer second({.host = "127.0.0.1", .port = first.port()}, nullptr, nullptr);
  absl::Status status = second.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), ::testing::HasSubstr(std::to_string(first.port())));
}

// A server that takes bodies of up to 1 MiB on /upload, counting the requests its handler
// sees.
class HttpServerBodyLimit : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Post("/upload", [this](const httplib::Request&, httplib::Response&) { ++handled_; });
    ASSERT_TRUE(server_.Start().ok());
  }

  // Sends a 400 MiB body and expects it refused 413 without reaching the handler and with
  // resident memory grown by less than 8 MiB meanwhile. Returns the answer.
  std::string ExpectHugeBodyRefused(bool chunked) {
    const int64_t before = RssBytes();
    PeakRss peak;
    std::string response = PostHugeBody(server_.port(), chunked, kHugeBody);
    const int64_t growth = peak.Stop() - before;
    EXPECT_THAT(response, HasSubstr("HTTP/1.1 413"));
    EXPECT_EQ(handled_, 0);
    EXPECT_LT(growth, 8 * kMiB) << "resident memory grew by " << growth / kMiB << " MiB";
    return response;
  }

  std::atomic<int> handled_{0};
  HttpServer server_{Loopback({.max_body_bytes = kMiB}), nullptr, nullptr};
};

TEST_F(HttpServerBodyLimit, RefusesABodyAboveTheLimitByItsContentLengthWithoutReadingIt) {
  const std::string response = ExpectHugeBodyRefused(/*chunked=*/false);
  EXPECT_THAT(response, HasSubstr("the body is 419430400 bytes; the limit is 1048576 bytes "
                                  "(http.max_body_bytes)"));
  EXPECT_THAT(response, HasSubstr("Connection: close"));

  // The server serves the next client as before.
  httplib::Client client("127.0.0.1", server_.port());
  httplib::Result small = client.Post("/upload", std::string(1000, 'y'), "text/plain");
  ASSERT_TRUE(small) << httplib::to_string(small.error());
  EXPECT_EQ(small->status, 200);
  EXPECT_EQ(handled_, 1);
}

TEST_F(HttpServerBodyLimit, CutsOffAChunkedBodyAtTheLimit) {
  EXPECT_THAT(ExpectHugeBodyRefused(/*chunked=*/true),
              HasSubstr("the body is more than 1048576 bytes; the limit is 1048576 bytes "
                        "(http.max_body_bytes)"));

  // A chunked body under the limit is read whole.
  httplib::Client client("127.0.0.1", server_.port());
  const std::string body(300 << 10, 'z');
  httplib::Result ok = client.Post(
      "/upload",
      [&](size_t offset, httplib::DataSink& sink) {
        if (offset < body.size()) {
          sink.write(body.data() + offset, std::min<size_t>(body.size() - offset, 50 << 10));
        } else {
          sink.done();
        }
        return true;
      },
      "text/plain");
  ASSERT_TRUE(ok) << httplib::to_string(ok.error());
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(handled_, 1);
}

TEST(HttpServer, ARouteMayTakeALargerBodyNamingItsOwnSetting) {
  HttpServer server(Loopback({.max_body_bytes = 1000}), nullptr, nullptr);
  server.Post("/api/v1/write",
              [](const httplib::Request& request, httplib::Response& response) {
                response.set_content(std::to_string(request.body.size()), "text/plain");
              },
              {.max_bytes = 5000, .config_key = "ingest.remote_write.max_body_bytes"});
  server.Post("/other", [](const httplib::Request&, httplib::Response&) {});
  ASSERT_TRUE(server.Start().ok());
  httplib::Client client("127.0.0.1", server.port());

  httplib::Result fits = client.Post("/api/v1/write", std::string(4000, 'a'), "text/plain");
  ASSERT_TRUE(fits);
  EXPECT_EQ(fits->status, 200);
  EXPECT_EQ(fits->body, "4000");

  httplib::Result above = client.Post("/api/v1/write", std::string(6000, 'a'), "text/plain");
  ASSERT_TRUE(above) << httplib::to_string(above.error());
  EXPECT_EQ(above->status, 413);
  EXPECT_THAT(above->body,
              HasSubstr("the limit is 5000 bytes (ingest.remote_write.max_body_bytes)"));

  httplib::Result other = client.Post("/other", std::string(4000, 'a'), "text/plain");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 413);
  EXPECT_THAT(other->body, HasSubstr("the limit is 1000 bytes (http.max_body_bytes)"));
}

TEST(HttpServer, RefusesCompressedBodiesThatWouldBeInflatedPastTheLimit) {
  HttpServer server(Loopback(), nullptr, nullptr);
  server.Post("/upload", [](const httplib::Request&, httplib::Response&) {});
  ASSERT_TRUE(server.Start().ok());
  const std::string response =
      Exchange(server.port(),
               "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Encoding: gzip\r\n"
               "Content-Length: 4\r\n\r\nabcd");
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 415"));
  EXPECT_THAT(response, HasSubstr("Content-Encoding \"gzip\" is not accepted"));
}

// A TCP connection from `source` (a loopback address: all of 127/8 is local) to
// 127.0.0.1:`port` that has sent `bytes`, non-blocking; -1 on failure.
int SlowClient(const char* source, int port, absl::string_view bytes) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(from)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0 ||
      send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(bytes.size())) {
    close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

// Whether the server closed `fd` (or answered on it), without waiting.
bool ServerLetGo(int fd) {
  char buffer[4096];
  const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_PEEK | MSG_DONTWAIT);
  return n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

// Lets this process hold `n` more descriptors (both ends of every test connection live here).
void AllowDescriptors(rlim_t n) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur < n && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = std::min(n, limit.rlim_max);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
  }
  // A machine that cannot hold the test's connections fails it rather than passing it unrun.
  ASSERT_GE(limit.rlim_cur, n) << "the open-file limit (hard limit " << limit.rlim_max
                               << ") is below the " << n << " descriptors this test needs";
}

TEST(HttpServer, SlowClientsCostNoThreadAndTheMainAndProbePortsServeMeanwhile) {
  MetricsRegistry registry;
  registry.AddGauge("goodput_test_up", "Up.").WithLabels({}).Set(1);
  // The header deadline is out of the way: what is tested is that the slow clients are held
  // without holding a thread.
  HttpServerOptions options =
      Loopback({.threads = 4, .max_queued_connections = 8, .header_timeout = absl::Seconds(600)});
  options.probe_port = 0;
  HttpServer server(options, &registry, nullptr);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.probe_port(), 0);
  ASSERT_NE(server.probe_port(), server.port());

  // 200 clients (from 8 addresses, under the per-client limit) that open a request and never
  // finish it: 16 times the threads and the queue together.
  std::vector<int> slow;
  for (int i = 0; i < 200; ++i) {
    const std::string source = absl::StrCat("127.0.1.", 1 + i % 8);
    const int fd =
        SlowClient(source.c_str(), server.port(), "GET /healthz HTTP/1.1\r\nHost: t\r\n");
    ASSERT_GE(fd, 0) << "connection " << i;
    slow.push_back(fd);
  }

  httplib::Client client("127.0.0.1", server.port());
  httplib::Client probe("127.0.0.1", server.probe_port());
  for (int round = 0; round < 3; ++round) {
    httplib::Result main = client.Get("/healthz");
    ASSERT_TRUE(main) << httplib::to_string(main.error());
    EXPECT_EQ(main->status, 200) << main->body;
    httplib::Result health = probe.Get("/healthz");
    ASSERT_TRUE(health) << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
    httplib::Result metrics = probe.Get("/metrics");
    ASSERT_TRUE(metrics) << httplib::to_string(metrics.error());
    EXPECT_EQ(metrics->status, 200);
    EXPECT_THAT(metrics->body, HasSubstr("goodput_test_up 1"));
  }
  // The server still holds every slow client: none was refused to make room.
  int let_go = 0;
  for (int fd : slow) let_go += ServerLetGo(fd) ? 1 : 0;
  EXPECT_EQ(let_go, 0);
  for (int fd : slow) close(fd);
}

TEST(HttpServer, AThousandSlowClientsDoNotFailTheProbe) {
  ASSERT_NO_FATAL_FAILURE(AllowDescriptors(4096));
  HttpServerOptions options = Loopback({.header_timeout = absl::Seconds(600)});
  options.probe_port = 0;
  HttpServer server(options, nullptr, nullptr);
  ASSERT_TRUE(server.Start().ok());
  // 1,000 connections to the probe port from 10 addresses, each with half a request line.
  std::vector<int> slow;
  for (int i = 0; i < 1000; ++i) {
    const std::string source = absl::StrCat("127.0.2.", 1 + i % 10);
    const int fd = SlowClient(source.c_str(), server.probe_port(), "GET /heal");
    ASSERT_GE(fd, 0) << "connection " << i;
    slow.push_back(fd);
  }
  // Trickle: one more byte each.
  for (int fd : slow) (void)send(fd, "t", 1, MSG_NOSIGNAL);
  // A liveness probe (a new connection each time, as the kubelet's) passes three times in a
  // row.
  for (int round = 0; round < 3; ++round) {
    httplib::Client probe("127.0.0.1", server.probe_port());
    httplib::Result health = probe.Get("/healthz");
    ASSERT_TRUE(health) << "round " << round << ": " << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
  }
  int let_go = 0;
  for (int fd : slow) let_go += ServerLetGo(fd) ? 1 : 0;
  EXPECT_EQ(let_go, 0) << "the probe port let slow clients go to serve the probe";
  for (int fd : slow) close(fd);
}

TEST(HttpServer, TlsClientsThatNeverFinishTheirHandshakeCostNoThread) {
  absl::StatusOr<TestPki> pki = TestPki::Create();
  ASSERT_TRUE(pki.ok()) << pki.status();
  ASSERT_TRUE(pki->MakeCa("ca").ok());
  ASSERT_TRUE(pki->Issue("ca", "server").ok());
  HttpServer server(
      {.host = "127.0.0.1",
       .port = 0,
       .limits = {.threads = 2, .max_queued_connections = 2, .header_timeout = absl::Seconds(600)},
       .tls = {.cert_file = pki->crt("server"), .key_file = pki->key("server")}},
      nullptr, nullptr);
  ASSERT_TRUE(server.Start().ok());
  // 50 connections (from 5 addresses) that send half a ClientHello and then nothing.
  const std::string half_hello("\x16\x03\x01\x00\xc8\x01\x00\x00", 8);
  std::vector<int> slow;
  for (int i = 0; i < 50; ++i) {
    const std::string source = absl::StrCat("127.0.4.", 1 + i % 5);
    const int fd = SlowClient(source.c_str(), server.port(), half_hello);
    ASSERT_GE(fd, 0) << "connection " << i;
    slow.push_back(fd);
  }
  for (int round = 0; round < 3; ++round) {
    httplib::SSLClient client("127.0.0.1", server.port());
    client.set_ca_cert_path(pki->crt("ca"));
    client.enable_server_certificate_verification(true);
    httplib::Result health = client.Get("/healthz");
    ASSERT_TRUE(health) << httplib::to_string(health.error());
    EXPECT_EQ(health->status, 200);
  }
  int let_go = 0;
  for (int fd : slow) let_go += ServerLetGo(fd) ? 1 : 0;
  EXPECT_EQ(let_go, 0);
  for (int fd : slow) close(fd);
}

TEST(HttpServer, AClientBeyondItsConnectionLimitTakesThePlaceOfItsOldestWaitingOne) {
  HttpServer server(
      Loopback({.header_timeout = absl::Seconds(600), .max_connections_per_client = 8}), nullptr,
      nullptr);
  ASSERT_TRUE(server.Start().ok());
  std::vector<int> slow;
  for (int i = 0; i < 20; ++i) {
    const int fd = SlowClient("127.0.3.1", server.port(), "GET /healthz HTTP/1.1\r\n");
    ASSERT_GE(fd, 0);
    slow.push_back(fd);
  }
  // The 12 oldest are answered 503 and closed as the newer ones arrive; 8 stay.
  std::vector<std::string> answers(slow.size());
  EXPECT_TRUE(PollUntil([&] {
    int let_go = 0;
    for (int fd : slow) let_go += ServerLetGo(fd) ? 1 : 0;
    return let_go >= 12;
  }));
  for (size_t i = 0; i < 12; ++i) {
    answers[i] = ReadResponse(slow[i]);
    EXPECT_THAT(answers[i], HasSubstr("HTTP/1.1 503")) << i;
    EXPECT_THAT(answers[i], HasSubstr("(http.max_connections_per_client)")) << i;
  }
  for (size_t i = 12; i < slow.size(); ++i) EXPECT_FALSE(ServerLetGo(slow[i])) << i;
  // The same client's new request is served: it takes the place of the oldest waiting one.
  const int fd = SlowClient("127.0.3.1", server.port(),
                            "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
  ASSERT_GE(fd, 0);
  EXPECT_THAT(ReadResponse(fd), HasSubstr("HTTP/1.1 200"));
  close(fd);
  EXPECT_TRUE(ServerLetGo(slow[12]));
  for (int fd : slow) close(fd);
}

TEST(HttpServer, AnswersHeadersThatStopArriving408AndCloses) {
  HttpServer server(Loopback({.header_timeout = absl::Milliseconds(200)}), nullptr, nullptr);
  ASSERT_TRUE(server.Start().ok());
  const int fd = Connect(server.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendUnlessAnswered(fd, "GET /healthz HTTP/1.1\r\nHost: t\r\n"));
  const std::string response = ReadResponse(fd);
  close(fd);
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 408"));
  EXPECT_THAT(response, HasSubstr("(http.header_timeout_s)"));
}

TEST(HttpServer, AnswersABodyThatStopsArriving408AndCloses) {
  HttpServer server(Loopback({.read_timeout = absl::Milliseconds(200)}), nullptr, nullptr);
  server.Post("/upload", [](const httplib::Request&, httplib::Response&) {});
  ASSERT_TRUE(server.Start().ok());
  const int fd = Connect(server.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendUnlessAnswered(
      fd, "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\nhalf"));
  const std::string response = ReadResponse(fd);
  close(fd);
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 408"));
  EXPECT_THAT(response, HasSubstr("(http.read_timeout_s)"));
}

// A server whose /api/v1/write takes telemetry tokens (by its route name in the policy) and
// /jobs a gRPC method's roles (RequireToken), with 16 MiB bodies; it counts what its
// handlers see.
class HttpServerTokens : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<AuthPolicy>> policy =
        AuthPolicy::Create({{"telemetry-token", "telemetry"}, {"scheduler-token", "scheduler"}});
    ASSERT_TRUE(policy.ok()) << policy.status();
    policy_ = *std::move(policy);
    policy_->AllowMethod("POST /api/v1/write", {Role::kTelemetry});
    policy_->AllowMethod("/goodput.v1.JobService/RegisterJob", {Role::kScheduler});
    HttpServerOptions options = Loopback();
    options.auth = policy_.get();
    server_ = std::make_unique<HttpServer>(options, nullptr, nullptr);
    for (const char* path : {"/api/v1/write", "/jobs"}) {
      server_->Post(path,
                    [this](const httplib::Request& request, httplib::Response& response) {
                      ++handled_;
                      response.set_content(std::to_string(request.body.size()), "text/plain");
                    },
                    {.max_bytes = 16 * kMiB, .config_key = "test.max_body_bytes"});
    }
    server_->RequireToken("POST", "/jobs",
                          {.policy_route = "/goodput.v1.JobService/RegisterJob",
                           .answer = [](const HttpRefusal& refusal, httplib::Response& response) {
                             response.status = refusal.status;
                             response.set_content(absl::StrCat("{\"error\": ", refusal.status, "}"),
                                                  "application/json");
                           }});
    ASSERT_TRUE(server_->Start().ok());
  }

  std::unique_ptr<AuthPolicy> policy_;
  std::unique_ptr<HttpServer> server_;
  std::atomic<int> handled_{0};
};

TEST_F(HttpServerTokens, ARequestWithoutAValidTokenIsAnsweredFromItsHeadersWithoutContinue) {
  auto head = [](const std::string& path, const std::string& token) {
    return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: t\r\nContent-Length: ", 16 * kMiB,
                        "\r\nExpect: 100-continue\r\n",
                        token.empty() ? "" : absl::StrCat("Authorization: Bearer ", token, "\r\n"),
                        "\r\n");
  };
  // Headers only: the answer comes without a byte of the 16 MiB body.
  std::string response = Exchange(server_->port(), head("/api/v1/write", ""));
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 401")) << response;
  EXPECT_THAT(response, Not(HasSubstr("100 Continue")));
  EXPECT_THAT(response, HasSubstr("WWW-Authenticate: Bearer"));
  EXPECT_THAT(response, HasSubstr("Connection: close"));
  EXPECT_THAT(response, HasSubstr("POST /api/v1/write needs an \"Authorization: Bearer <token>\""));

  response = Exchange(server_->port(), head("/api/v1/write", "not-a-token"));
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 401")) << response;
  EXPECT_THAT(response, Not(HasSubstr("not-a-token")));
  response = Exchange(server_->port(), head("/api/v1/write", "scheduler-token"));
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 403")) << response;
  EXPECT_THAT(response, Not(HasSubstr("100 Continue")));

  // A route checked under a gRPC method's name answers in its own format.
  response = Exchange(server_->port(), head("/jobs", "telemetry-token"));
  EXPECT_TRUE(absl::StartsWith(response, "HTTP/1.1 403")) << response;
  EXPECT_THAT(response, HasSubstr("{\"error\": 403}"));
  EXPECT_EQ(handled_, 0);

  // With the right token the client is told to go on.
  const int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendUnlessAnswered(fd, head("/api/v1/write", "telemetry-token")));
  ASSERT_TRUE(WaitFor(fd, POLLIN, absl::Seconds(30)));
  char buffer[256];
  const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
  close(fd);
  ASSERT_GT(n, 0);
  EXPECT_TRUE(
      absl::StartsWith(absl::string_view(buffer, static_cast<size_t>(n)), "HTTP/1.1 100 Continue"));
}

TEST_F(HttpServerTokens, AnUnauthenticatedBodyIsNeverReadWhateverItsSize) {
  const int64_t before = RssBytes();
  PeakRss peak;
  // Eight clients at once that send their 16 MiB without waiting for an answer.
  std::vector<std::string> answers(8);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < answers.size(); ++i) {
    clients.emplace_back([this, &answers, i] {
      const int fd = Connect(server_->port());
      if (fd < 0) return;
      const std::string piece(64 << 10, 'x');
      bool sending = SendUnlessAnswered(
          fd, absl::StrCat("POST /api/v1/write HTTP/1.1\r\nHost: t\r\nContent-Length: ", 16 * kMiB,
                           "\r\n\r\n"));
      for (int64_t sent = 0; sending && sent < 16 * kMiB; sent += 64 << 10) {
        sending = SendUnlessAnswered(fd, piece);
      }
      answers[i] = ReadResponse(fd);
      close(fd);
    });
  }
  for (std::thread& client : clients) client.join();
  const int64_t growth = peak.Stop() - before;
  for (const std::string& answer : answers) {
    EXPECT_TRUE(absl::StartsWith(answer, "HTTP/1.1 401")) << answer;
  }
  EXPECT_EQ(handled_, 0);
  // One body read whole would be 16 MiB.
  EXPECT_LT(growth, 8 * kMiB) << "resident memory grew by " << growth / kMiB << " MiB";

  // An authenticated client's body is read.
  httplib::Client client("127.0.0.1", server_->port());
  httplib::Result r = client.Post("/api/v1/write", {{"Authorization", "Bearer telemetry-token"}},
                                  std::string(kMiB, 'y'), "application/x-protobuf");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, std::to_string(kMiB));
}

TEST(HttpServer, RefusesHeadersAboveTheirBudget) {
  HttpServer server(Loopback({.max_header_bytes = 4096}), nullptr, nullptr);
  ASSERT_TRUE(server.Start().ok());
  const std::string response =
      Exchange(server.port(),
               absl::StrCat("GET /healthz HTTP/1.1\r\nHost: t\r\nX-Big: ", std::string(1000, 'b'),
                            "\r\nX-Bigger: ", std::string(5000, 'b'), "\r\n\r\n"));
  EXPECT_THAT(response, HasSubstr("HTTP/1.1 431"));
  EXPECT_THAT(response, HasSubstr("above 4096 bytes (http.max_header_bytes)"));
}

TEST(HttpServer, RefusesControlCharactersAndDotDotSegmentsInPaths) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "http-static";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "index.html") << "<!doctype html>";
  HttpServer server(Loopback(), nullptr, nullptr);
  ASSERT_TRUE(server.native().set_mount_point("/", dir.string()));
  ASSERT_TRUE(server.Start().ok());

  const std::string nul = Exchange(server.port(), "GET /index.html%00.js HTTP/1.1\r\n\r\n");
  EXPECT_THAT(nul, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(nul, HasSubstr("control character %00"));
  EXPECT_THAT(nul, ::testing::Not(HasSubstr("javascript")));
  EXPECT_THAT(Exchange(server.port(), "GET /index.html%0a HTTP/1.1\r\n\r\n"),
              HasSubstr("HTTP/1.1 400"));
  const std::string up = Exchange(server.port(), "GET /a/..%2f..%2fetc/passwd HTTP/1.1\r\n\r\n");
  EXPECT_THAT(up, HasSubstr("HTTP/1.1 400"));
  EXPECT_THAT(up, HasSubstr("\"..\" segment"));

  const std::string index = Exchange(server.port(), "GET /index.html HTTP/1.1\r\n\r\n");
  EXPECT_THAT(index, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(index, HasSubstr("text/html"));
}

TEST(HttpServer, ServesSeveralRequestsOnOneKeptAliveConnection) {
  HttpServer server(Loopback(), nullptr, nullptr);
  server.Post("/echo", [](const httplib::Request& request, httplib::Response& response) {
    response.set_content(request.body, "text/plain");
  });
  ASSERT_TRUE(server.Start().ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_keep_alive(true);
  for (int i = 0; i < 5; ++i) {
    httplib::Result r = client.Post("/echo", absl::StrCat("body ", i), "text/plain");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->body, absl::StrCat("body ", i));
  }
}

TEST(HttpServer, ReportsAProbePortThatCannotBeBound) {
  HttpServer first(Loopback(), nullptr, nullptr);
  ASSERT_TRUE(first.Start().ok());
  HttpServerOptions options = Loopback();
  options.probe_port = first.port();
  HttpServer second(options, nullptr, nullptr);
  absl::Status status = second.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("http.probe_port"));
}

}  // namespace
}  // namespace goodput::platform
