#include "services/platform/http_server.h"

#include <atomic>
#include <map>
#include <regex>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace goodput::platform {
namespace {

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

}  // namespace
}  // namespace goodput::platform
