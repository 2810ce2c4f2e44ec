#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "services/platform/http_server.h"
#include "services/platform/test_pki.h"
#include "tools/dashboard/events.h"
#include "tools/dashboard/gateway.h"
#include "tools/dashboard/options.h"
#include "tools/dashboard/routes.h"
#include "tools/dashboard/signin.h"
#include "tools/dashboard/views.h"

namespace goodput::dashboard {
namespace {

// Polls `condition` every 20 ms until it holds or `timeout` passes.
bool PollUntil(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!condition()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

google::protobuf::Timestamp At(int64_t unix_s) {
  google::protobuf::Timestamp t;
  t.set_seconds(unix_s);
  return t;
}

TEST(Views, ShortensEnumNamesToLowerCase) {
  EXPECT_EQ(EnumShortName("ALERT_KIND_REGRESSION_IN_JOB", "ALERT_KIND_"), "regression_in_job");
  EXPECT_EQ(EnumShortName("VERDICT_APP_FLOPS_OVERCOUNT", "VERDICT_"), "app_flops_overcount");
}

TEST(Views, LabelsGpusByHostAndIndexOrUuid) {
  v1::GpuRef gpu;
  gpu.set_host("node7");
  gpu.set_uuid("GPU-1234");
  EXPECT_EQ(GpuLabel(gpu), "node7:GPU-1234");
  gpu.set_gpu_index(3);
  EXPECT_EQ(GpuLabel(gpu), "node7:3");
  gpu.mutable_mig()->set_gpu_instance_id(2);
  EXPECT_EQ(GpuLabel(gpu), "node7:3/mig2");
}

TEST(Views, UnsetTimesAreNullAndSetOnesMilliseconds) {
  EXPECT_TRUE(TimeMs(google::protobuf::Timestamp()).is_null());
  EXPECT_EQ(TimeMs(At(1767225600)).get<int64_t>(), 1767225600000);
}

TEST(Views, AnUnbuiltRpcIsMarkedNotBuiltWithTheServiceMessage) {
  Json section = UnavailableSection(
      grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "ListAlerts is not built yet"));
  EXPECT_FALSE(section["available"].get<bool>());
  EXPECT_TRUE(section["not_built"].get<bool>());
  EXPECT_EQ(section["message"], "ListAlerts is not built yet");
  EXPECT_FALSE(UnavailableSection(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down"))["not_built"]
                   .get<bool>());
}

TEST(Views, FleetGroupsCountWastedGpuHoursAndAlwaysTenDeciles) {
  v1::FleetGroup group;
  group.set_cluster("eos");
  group.set_gpu_hours(100);
  group.set_effective_gpu_hours(35);
  group.set_ofu_mean(0.35);
  group.add_gpu_hours_by_ofu_decile(60);
  Json json = FleetGroupJson(group);
  EXPECT_DOUBLE_EQ(json["wasted_gpu_hours"].get<double>(), 65);
  EXPECT_EQ(json["gpu_hours_by_ofu_decile"].size(), 10u);
  EXPECT_EQ(json["cluster"], "eos");
}

TEST(Views, JobReportCarriesTheTextGoodputctlPrintsAndTheReport) {
  v1::JobReport report;
  v1::ReportSummary* s = report.mutable_summary();
  s->set_version(1);
  s->mutable_job()->set_cluster("eos");
  s->mutable_job()->set_job_id("42");
  s->set_user("alice");
  s->set_ofu(0.31);
  s->add_advice(v1::ADVICE_KIND_WELL_USED);
  report.add_advice()->set_text("Nothing to change: the job kept its GPUs busy.");
  report.set_final(true);
  Json json = JobReportJson(report);
  EXPECT_TRUE(json["available"].get<bool>());
  const std::string text = json["text"].get<std::string>();
  EXPECT_TRUE(absl::StartsWith(text, "goodput report: eos/42 (revision 0)")) << text;
  EXPECT_TRUE(absl::StrContains(text, "31.0%")) << text;
  EXPECT_EQ(json["report"]["summary"]["user"], "alice");
  EXPECT_TRUE(json["report"]["final"].get<bool>());
  EXPECT_EQ(json["report"]["advice"][0]["text"], "Nothing to change: the job kept its GPUs busy.");
}

TEST(Views, FleetGroupsCarryUserAndTeam) {
  v1::FleetGroup group;
  group.set_user("alice");
  group.set_team("vision");
  Json json = FleetGroupJson(group);
  EXPECT_EQ(json["user"], "alice");
  EXPECT_EQ(json["team"], "vision");
}

TEST(Views, PerGpuWindowsBecomeOneSeriesPerGpuInTimeOrder) {
  v1::GetJobOfuResponse response;
  response.set_effective_window_s(60);
  for (int t = 0; t < 3; ++t) {
    v1::OfuWindow* job = response.add_windows();
    *job->mutable_start_time() = At(1000 + 60 * t);
    *job->mutable_end_time() = At(1060 + 60 * t);
    job->set_ofu(0.4);
    for (int g = 0; g < 2; ++g) {
      v1::OfuWindow* w = response.add_gpu_windows();
      w->mutable_gpu()->set_host("h");
      w->mutable_gpu()->set_gpu_index(g);
      *w->mutable_start_time() = At(1000 + 60 * t);
      *w->mutable_end_time() = At(1060 + 60 * t);
      w->set_ofu(0.1 * (g + 1) + 0.01 * t);
    }
  }
  Json json = JobOfuJson(response);
  ASSERT_EQ(json["windows"].size(), 3u);
  ASSERT_EQ(json["gpus"].size(), 2u);
  EXPECT_EQ(json["gpus"][1]["gpu"], "h:1");
  ASSERT_EQ(json["gpus"][1]["points"].size(), 3u);
  EXPECT_DOUBLE_EQ(json["gpus"][1]["points"][2]["ofu"].get<double>(), 0.22);
  EXPECT_EQ(json["gpus"][0]["points"][0]["start_ms"].get<int64_t>(), 1000000);
}

TEST(Views, AlertsCarryTheirEvidenceAndDeliveries) {
  v1::Alert alert;
  alert.set_alert_id("a1");
  alert.set_kind(v1::ALERT_KIND_REGRESSION_IN_JOB);
  alert.set_state(v1::ALERT_STATE_FIRING);
  alert.set_severity(v1::SEVERITY_CRITICAL);
  alert.mutable_job()->set_cluster("eos");
  alert.mutable_job()->set_job_id("42");
  alert.set_summary("OFU fell 2.5x");
  alert.mutable_evidence()->set_before_ofu(0.45);
  alert.mutable_evidence()->set_after_ofu(0.18);
  alert.mutable_evidence()->set_factor(2.5);
  alert.add_deliveries()->set_state(v1::DELIVERY_STATE_DELIVERED);
  alert.add_deliveries()->set_state(v1::DELIVERY_STATE_RETRYING);
  Json json = AlertJson(alert);
  EXPECT_EQ(json["kind"], "regression_in_job");
  EXPECT_EQ(json["state"], "firing");
  EXPECT_EQ(json["severity"], "critical");
  EXPECT_DOUBLE_EQ(json["before_ofu"].get<double>(), 0.45);
  EXPECT_TRUE(json["baseline_ofu"].is_null());
  EXPECT_EQ(json["deliveries"], 2);
  EXPECT_EQ(json["delivered"], 1);
}

TEST(Views, AnEventIsOneDataLineEvenWhenTextHoldsNewlinesOrBadBytes) {
  std::string message = SseMessage("alert", Json{{"summary", "line one\nline two \xff"}});
  EXPECT_EQ(message.rfind("event: alert\ndata: {", 0), 0u) << message;
  EXPECT_EQ(message.substr(message.size() - 2), "\n\n");
  // One newline before the final blank line: the one after the event name.
  EXPECT_EQ(std::count(message.begin(), message.end() - 2, '\n'), 1) << message;
}

std::function<const char*(const char*)> Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(Options, DefaultsMatchTheLocalStack) {
  absl::StatusOr<DashboardOptions> o = ParseOptions({}, Env({}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->port, 7300);
  EXPECT_EQ(o->listen_host, "127.0.0.1");
  EXPECT_EQ(o->ingest, "127.0.0.1:7101");
  EXPECT_EQ(o->alerting, "127.0.0.1:7104");
}

TEST(Options, FlagsWinOverTheEnvironment) {
  absl::StatusOr<DashboardOptions> o =
      ParseOptions({"--ofu", "10.0.0.2:9000", "--port=0", "--token", "t0k"},
                   Env({{"GOODPUT_OFU_ADDR", "10.0.0.1:1"},
                        {"GOODPUT_MFU_ADDR", "mfu:7103"},
                        {"GOODPUT_DASHBOARD_PORT", "8000"}}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->ofu, "10.0.0.2:9000");
  EXPECT_EQ(o->mfu, "mfu:7103");
  EXPECT_EQ(o->port, 0);
  EXPECT_EQ(o->token, "t0k");
}

TEST(Options, ABadValueIsRefusedNamingWhereItCameFromAndTheValue) {
  absl::StatusOr<DashboardOptions> o =
      ParseOptions({}, Env({{"GOODPUT_DASHBOARD_PORT", "seventy"}}));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("$GOODPUT_DASHBOARD_PORT"), std::string::npos);
  EXPECT_NE(o.status().message().find("seventy"), std::string::npos);

  o = ParseOptions({"--alerting", "nowhere"}, Env({}));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--alerting"), std::string::npos) << o.status();
  EXPECT_NE(o.status().message().find("nowhere"), std::string::npos) << o.status();

  o = ParseOptions({"--colour", "blue"}, Env({}));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--colour"), std::string::npos);
  EXPECT_FALSE(ParseOptions({"--port"}, Env({})).ok());
}

TEST(Routes, MapStatusCodesToHttp) {
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kUnimplemented), 501);
  EXPECT_EQ(HttpStatusFor(absl::StatusCode::kInternal), 502);  // a gateway's upstream failed
}

TEST(Options, LiveStreamLimitsComeFromFlagsOrTheEnvironment) {
  absl::StatusOr<DashboardOptions> o = ParseOptions({}, Env({}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_streams, 64);
  EXPECT_EQ(o->max_streams_per_client, 8);
  o = ParseOptions({"--max-streams=200"}, Env({{"GOODPUT_DASHBOARD_MAX_STREAMS_PER_CLIENT", "3"}}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->max_streams, 200);
  EXPECT_EQ(o->max_streams_per_client, 3);
  o = ParseOptions({"--max-streams-per-client", "0"}, Env({}));
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().message().find("--max-streams-per-client: \"0\""), std::string::npos)
      << o.status();
}

// A gateway whose services are not there: live streams report them unavailable and retry.
std::unique_ptr<Gateway> GatewayToNowhere() {
  auto nowhere = grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials());
  return std::make_unique<Gateway>(
      Backends{.ingest = nowhere, .ofu = nowhere, .mfu = nowhere, .alerting = nowhere},
      GatewayOptions{});
}

TEST(EventHub, CapsSessionsPerClientAndInAll) {
  std::unique_ptr<Gateway> gateway = GatewayToNowhere();
  EventHub hub(gateway.get(), {}, {.max_sessions = 3, .max_sessions_per_client = 2});
  absl::StatusOr<std::shared_ptr<EventSession>> a1 = hub.Open({}, "10.0.0.1");
  absl::StatusOr<std::shared_ptr<EventSession>> a2 = hub.Open({}, "10.0.0.1");
  ASSERT_TRUE(a1.ok() && a2.ok());
  absl::StatusOr<std::shared_ptr<EventSession>> a3 = hub.Open({}, "10.0.0.1");
  ASSERT_EQ(a3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(a3.status().message(), ::testing::HasSubstr("10.0.0.1 has 2 live streams open"));
  EXPECT_THAT(a3.status().message(), ::testing::HasSubstr("--max-streams-per-client"));

  absl::StatusOr<std::shared_ptr<EventSession>> b1 = hub.Open({}, "10.0.0.2");
  ASSERT_TRUE(b1.ok());
  absl::StatusOr<std::shared_ptr<EventSession>> c1 = hub.Open({}, "10.0.0.3");
  ASSERT_EQ(c1.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(c1.status().message(), ::testing::HasSubstr("--max-streams"));

  // A closed stream frees its client's place (and one in all).
  hub.Close(*a1);
  EXPECT_TRUE(hub.Open({}, "10.0.0.1").ok());
  hub.StopAll();
}

// The dashboard's routes on a real HTTP server, with services that are not there.
class DashboardRoutes : public ::testing::Test {
 protected:
  void Start(SessionLimits limits, std::string static_dir = "") {
    gateway_ = GatewayToNowhere();
    hub_ = std::make_unique<EventHub>(gateway_.get(), EventOptions{}, limits);
    http_ = std::make_unique<platform::HttpServer>(
        platform::HttpServerOptions{.host = "127.0.0.1", .port = 0}, nullptr, nullptr);
    RegisterRoutes(http_->native(), gateway_.get(), hub_.get(), {.static_dir = static_dir});
    ASSERT_TRUE(http_->Start().ok());
  }

  void TearDown() override {
    if (hub_ != nullptr) hub_->StopAll();  // ends the streams' handlers
    for (std::thread& t : readers_) t.join();
    if (http_ != nullptr) http_->Stop();
  }

  // Opens a live stream on a thread of its own; true once the dashboard greeted it.
  bool OpenStream() {
    auto greeted = std::make_shared<std::atomic<bool>>(false);
    readers_.emplace_back([this, greeted] {
      httplib::Client client("127.0.0.1", http_->port());
      client.set_read_timeout(60, 0);
      client.Get("/api/events", [&](const char* data, size_t size) {
        if (absl::StrContains(absl::string_view(data, size), ": connected")) *greeted = true;
        return true;
      });
    });
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!*greeted && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
    return *greeted;
  }

  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<EventHub> hub_;
  std::unique_ptr<platform::HttpServer> http_;
  std::vector<std::thread> readers_;
};

TEST_F(DashboardRoutes, ALiveStreamBeyondTheClientsCapIsAnswered429WithRetryAfter) {
  ASSERT_NO_FATAL_FAILURE(Start({.max_sessions = 64, .max_sessions_per_client = 2}));
  ASSERT_TRUE(OpenStream());
  ASSERT_TRUE(OpenStream());
  httplib::Client client("127.0.0.1", http_->port());
  httplib::Result refused = client.Get("/api/events");
  ASSERT_TRUE(refused) << httplib::to_string(refused.error());
  EXPECT_EQ(refused->status, 429);
  EXPECT_EQ(refused->get_header_value("Retry-After"), "10");
  EXPECT_THAT(refused->body, ::testing::HasSubstr("127.0.0.1 has 2 live streams open"));
  // The same client's other requests are served.
  httplib::Result health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
}

TEST_F(DashboardRoutes, AStaticPathWithANulOrDotDotIsRefusedNotServed) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "dashboard-www";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "index.html") << "<!doctype html><title>goodput</title>";
  ASSERT_NO_FATAL_FAILURE(Start({}, dir.string()));
  httplib::Client client("127.0.0.1", http_->port());
  for (const char* path : {"/index.html%00.js", "/assets/..%2F..%2Findex.html"}) {
    httplib::Result refused = client.Get(path);
    ASSERT_TRUE(refused) << path;
    EXPECT_EQ(refused->status, 400) << path;
    EXPECT_THAT(refused->get_header_value("Content-Type"),
                ::testing::Not(::testing::HasSubstr("javascript")));
    EXPECT_THAT(refused->body, ::testing::Not(::testing::HasSubstr("<title>"))) << path;
  }
  httplib::Result index = client.Get("/index.html");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_THAT(index->body, ::testing::HasSubstr("<title>goodput</title>"));
}

TEST_F(DashboardRoutes, StaticFilesNeverComeFromOutsideTheFrontEndFolder) {
  const std::filesystem::path root = std::filesystem::path(::testing::TempDir()) / "dashboard-tr";
  const std::filesystem::path dir = root / "www";
  std::filesystem::create_directories(dir / "assets");
  std::ofstream(dir / "index.html") << "<!doctype html><title>goodput</title>";
  std::ofstream(dir / "assets" / "app.js") << "console.log(1)";
  std::ofstream(root / "secret.txt") << "top-secret-token";
  ASSERT_NO_FATAL_FAILURE(Start({}, dir.string()));
  const std::string secret_abs = (root / "secret.txt").string();
  for (const std::string& path :
       {std::string("/../secret.txt"), std::string("/assets/../../secret.txt"),
        std::string("/%2e%2e/secret.txt"), std::string("/%2E%2E/secret.txt"),
        std::string("/assets/%2e%2e/%2e%2e/secret.txt"), std::string("/..%2fsecret.txt"),
        std::string("/assets/..%5c..%5csecret.txt"), std::string("//") + secret_abs,
        "/" + secret_abs, std::string("/%2f") + secret_abs.substr(1),
        std::string("/assets/%2e%2e%2f%2e%2e%2fsecret.txt")}) {
    httplib::Client client("127.0.0.1", http_->port());
    httplib::Result r = client.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_TRUE(r->status == 400 || r->status == 404) << path << " answered " << r->status;
    EXPECT_THAT(r->body, ::testing::Not(::testing::HasSubstr("top-secret-token"))) << path;
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff") << path;
  }
  httplib::Client client("127.0.0.1", http_->port());
  httplib::Result js = client.Get("/assets/app.js");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->body, "console.log(1)");
}

TEST_F(DashboardRoutes, EveryResponseCarriesTheSecurityHeaders) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "dashboard-hd";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "index.html") << "<!doctype html><title>goodput</title>";
  ASSERT_NO_FATAL_FAILURE(Start({}, dir.string()));
  httplib::Client client("127.0.0.1", http_->port());
  // A page, a static file that is not there, an API error, a refused path, a redirect.
  for (const char* path : {"/", "/index.html", "/nope.js", "/api/jobs?limit=0",
                           "/index.html%00.js", "/jobs/eos/42", "/api/fleet?range_h=x"}) {
    httplib::Result r = client.Get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->get_header_value("Content-Security-Policy"), kContentSecurityPolicy) << path;
    EXPECT_THAT(r->get_header_value("Content-Security-Policy"),
                ::testing::Not(::testing::HasSubstr("unsafe-inline")));
    EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff") << path;
    EXPECT_EQ(r->get_header_value("Referrer-Policy"), "no-referrer") << path;
    EXPECT_EQ(r->get_header_value("X-Frame-Options"), "DENY") << path;
    EXPECT_EQ(r->get_header_value_count("Content-Security-Policy"), 1u) << path;
  }
}

// A folder of this test's own: ctest runs the tests of this binary in parallel processes,
// and a token file one test rewrites must not be one another test reads.
std::string OwnTempDir() {
  std::string pattern = ::testing::TempDir() + "/goodput-dashboard-test-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) return ::testing::TempDir();
  return pattern;
}

// Sign-in in front of a route that answers whose jobs the viewer may see.
class DashboardSignIn : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = OwnTempDir();
    tokens_ = dir_ + "/dashboard.tokens";
    operators_ = dir_ + "/operator.tokens";
    std::ofstream(tokens_)
        << "alice-token scheduler user=alice\nsched-token scheduler\nml-token sdk team=ml\n";
    std::ofstream(operators_) << "op-token\n";
    absl::StatusOr<std::unique_ptr<SignIn>> signin =
        SignIn::Create({.token_file = tokens_ + ",operator:" + operators_,
                        .trusted_proxy = "127.0.0.1",
                        .operator_users = {"root"},
                        .allowed_hosts = DefaultAllowedHosts("127.0.0.1")});
    ASSERT_TRUE(signin.ok()) << signin.status();
    signin_ = *std::move(signin);
    http_ = std::make_unique<platform::HttpServer>(
        platform::HttpServerOptions{.host = "127.0.0.1", .port = 0}, nullptr, nullptr);
    signin_->Install(*http_);
    http_->Get("/api/scope", [](const httplib::Request&, httplib::Response& res) {
      std::optional<platform::Identity> scope = ViewerScope();
      const std::string team = scope && scope->TeamScope() ? "team " + *scope->TeamScope() : "*";
      res.set_content(ViewerUserScope().value_or(team), "text/plain");
    });
    ASSERT_TRUE(http_->Start().ok());
  }

  httplib::Result Get(const std::string& path, httplib::Headers headers = {}) {
    httplib::Client client("127.0.0.1", http_->port());
    return client.Get(path.c_str(), headers);
  }

  // Replaces the token file as a secret volume or an editor does: a new file renamed over it.
  void RewriteTokens(const std::string& text) {
    std::ofstream(tokens_ + ".new") << text;
    std::filesystem::rename(tokens_ + ".new", tokens_);
  }

  // POST /login from the dashboard's own page, or with `headers` instead.
  httplib::Result Login(const std::string& token, httplib::Headers headers = {}) {
    httplib::Client client("127.0.0.1", http_->port());
    return client.Post("/login", headers, "token=" + token, "application/x-www-form-urlencoded");
  }

  std::string Session(const httplib::Result& login) {
    const std::string cookie = login->get_header_value("Set-Cookie");
    return cookie.substr(0, cookie.find(';'));
  }

  void TearDown() override {
    if (http_ != nullptr) http_->Stop();
    std::filesystem::remove_all(dir_);
  }

  std::string dir_, tokens_, operators_;
  std::unique_ptr<SignIn> signin_;
  std::unique_ptr<platform::HttpServer> http_;
};

TEST_F(DashboardSignIn, RefusesUnsignedRequestsAndRedirectsPagesToTheLogin) {
  httplib::Result api = Get("/api/scope");
  ASSERT_TRUE(api);
  EXPECT_EQ(api->status, 401);
  EXPECT_EQ(api->get_header_value("WWW-Authenticate"), "Bearer");
  httplib::Result page = Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 303);
  EXPECT_EQ(page->get_header_value("Location"), "/login");
  httplib::Result metrics = Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 303);
  EXPECT_EQ(Get("/healthz")->status, 200);
  EXPECT_EQ(Get("/login")->status, 200);
  httplib::Result unknown = Get("/api/scope", {{"Authorization", "Bearer guess"}});
  ASSERT_TRUE(unknown);
  EXPECT_EQ(unknown->status, 401);
  EXPECT_THAT(unknown->body, ::testing::Not(::testing::HasSubstr("guess")));
  // A token with neither the operator role nor a user cannot sign in.
  httplib::Result unscoped = Get("/api/scope", {{"Authorization", "Bearer sched-token"}});
  ASSERT_TRUE(unscoped);
  EXPECT_EQ(unscoped->status, 403);
}

TEST_F(DashboardSignIn, ATokenEnteredOnceGivesAStrictHttpOnlySessionCookie) {
  httplib::Client client("127.0.0.1", http_->port());
  httplib::Result login =
      client.Post("/login", "token=alice-token", "application/x-www-form-urlencoded");
  ASSERT_TRUE(login);
  ASSERT_EQ(login->status, 303);
  const std::string cookie = login->get_header_value("Set-Cookie");
  EXPECT_THAT(cookie, ::testing::HasSubstr("HttpOnly"));
  EXPECT_THAT(cookie, ::testing::HasSubstr("SameSite=Strict"));
  EXPECT_THAT(cookie, ::testing::Not(::testing::HasSubstr("Secure")));  // plain HTTP here
  const std::string session = cookie.substr(0, cookie.find(';'));
  httplib::Result scoped = Get("/api/scope", {{"Cookie", session}});
  ASSERT_TRUE(scoped);
  EXPECT_EQ(scoped->status, 200);
  EXPECT_EQ(scoped->body, "alice");
  httplib::Result op = Get("/api/scope", {{"Authorization", "Bearer op-token"}});
  ASSERT_TRUE(op);
  EXPECT_EQ(op->body, "*");
  // A team's token signs in too (it sees that team's jobs).
  httplib::Result team = Get("/api/scope", {{"Authorization", "Bearer ml-token"}});
  ASSERT_TRUE(team);
  EXPECT_EQ(team->status, 200);
  EXPECT_EQ(team->body, "team ml");
  // Signing out ends the session.
  ASSERT_TRUE(client.Post("/logout", {{"Cookie", session}}, "", "text/plain"));
  EXPECT_EQ(Get("/api/scope", {{"Cookie", session}})->status, 401);
  httplib::Result wrong =
      client.Post("/login", "token=nope%21", "application/x-www-form-urlencoded");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  EXPECT_THAT(wrong->body, ::testing::Not(::testing::HasSubstr("nope")));
}

TEST_F(DashboardSignIn, TheTrustedProxysUserHeaderSignsIn) {
  httplib::Result user = Get("/api/scope", {{"X-Forwarded-User", "bob"}});
  ASSERT_TRUE(user);
  EXPECT_EQ(user->status, 200);
  EXPECT_EQ(user->body, "bob");
  httplib::Result op = Get("/api/scope", {{"X-Forwarded-User", "root"}});
  ASSERT_TRUE(op);
  EXPECT_EQ(op->body, "*");
}

TEST_F(DashboardSignIn, ASessionEndsWhenItsTokenIsRemovedOrRotated) {
  httplib::Result login = Login("alice-token");
  ASSERT_TRUE(login);
  ASSERT_EQ(login->status, 303);
  const std::string session = Session(login);
  ASSERT_EQ(Get("/api/scope", {{"Cookie", session}})->status, 200);

  // The token leaves the file: the session, opened for 12 hours, ends with the reload (the
  // token files are looked at again at most once a second).
  RewriteTokens("sched-token scheduler\n");
  EXPECT_TRUE(PollUntil(
      [&] {
        return Get("/api/scope", {{"Cookie", session}})->status == 401;
      },
      absl::Seconds(20)));
  EXPECT_EQ(Get("/api/scope", {{"Cookie", session}})->status, 401);

  // Rotated: a session of the old token ends, one of the new token works.
  RewriteTokens("alice-token scheduler user=alice\n");
  ASSERT_TRUE(PollUntil([&] { return Login("alice-token")->status == 303; }, absl::Seconds(20)));
  const std::string old_session = Session(Login("alice-token"));
  RewriteTokens("alice-token-2 scheduler user=alice\n");
  EXPECT_TRUE(PollUntil(
      [&] {
        return Get("/api/scope", {{"Cookie", old_session}})->status == 401;
      },
      absl::Seconds(20)));
  httplib::Result rotated = Login("alice-token-2");
  ASSERT_EQ(rotated->status, 303);
  httplib::Result scoped = Get("/api/scope", {{"Cookie", Session(rotated)}});
  EXPECT_EQ(scoped->status, 200);
  EXPECT_EQ(scoped->body, "alice");
}

TEST_F(DashboardSignIn, SignInFromAnotherSiteIsRefused403) {
  const std::string own = absl::StrCat("http://127.0.0.1:", http_->port());
  for (const httplib::Headers& cross :
       {httplib::Headers{{"Origin", "https://evil.example"}}, httplib::Headers{{"Origin", "null"}},
        httplib::Headers{{"Origin", absl::StrCat("http://127.0.0.1:", http_->port() + 1)}},
        httplib::Headers{{"Origin", own}, {"Sec-Fetch-Site", "cross-site"}},
        httplib::Headers{{"Sec-Fetch-Site", "same-site"}}}) {
    httplib::Result refused = Login("alice-token", cross);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 403) << cross.begin()->second;
    EXPECT_FALSE(refused->has_header("Set-Cookie"));
    EXPECT_THAT(refused->body, ::testing::HasSubstr("sign-in from another site is refused"));
  }
  // The dashboard's own login page, a typed-in request and a client without either header.
  for (const httplib::Headers& same :
       {httplib::Headers{{"Origin", own}, {"Sec-Fetch-Site", "same-origin"}},
        httplib::Headers{{"Origin", absl::StrCat("http://LOCALHOST:", http_->port())},
                         {"Host", absl::StrCat("localhost:", http_->port())}},
        httplib::Headers{{"Sec-Fetch-Site", "none"}}, httplib::Headers{}}) {
    httplib::Result login = Login("alice-token", same);
    ASSERT_TRUE(login);
    EXPECT_EQ(login->status, 303);
  }
}

TEST_F(DashboardSignIn, ARequestForAHostNotAllowedIsRefused421) {
  for (const char* path : {"/api/scope", "/login", "/"}) {
    httplib::Result r =
        Get(path, {{"Host", "rebind.evil.example"}, {"Authorization", "Bearer op-token"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 421) << path;
    EXPECT_THAT(r->body, ::testing::HasSubstr("rebind.evil.example"));
    EXPECT_THAT(r->body, ::testing::HasSubstr(
                             "is not a name this dashboard answers to (--allowed-hosts)"));
  }
  httplib::Result login = Login("alice-token", {{"Host", "rebind.evil.example"}});
  EXPECT_EQ(login->status, 421);
  // Probes name whatever address they use.
  EXPECT_EQ(Get("/healthz", {{"Host", "10.1.2.3:7300"}})->status, 200);
  for (const std::string& host : {absl::StrCat("localhost:", http_->port()), std::string("[::1]"),
                                  std::string("127.0.0.1")}) {
    httplib::Result r = Get("/api/scope", {{"Host", host}, {"Authorization", "Bearer op-token"}});
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << host;
  }
}

TEST(SignInOff, TheHostIsCheckedWithoutSignInToo) {
  absl::StatusOr<std::unique_ptr<SignIn>> signin =
      SignIn::Create({.allowed_hosts = {"dash.example.org"}});
  ASSERT_TRUE(signin.ok());
  platform::HttpServer http({.host = "127.0.0.1", .port = 0}, nullptr, nullptr);
  (*signin)->Install(http);
  http.Get("/api/scope", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok", "text/plain");
  });
  ASSERT_TRUE(http.Start().ok());
  httplib::Client client("127.0.0.1", http.port());
  EXPECT_EQ(client.Get("/api/scope")->status, 421);
  EXPECT_EQ(client.Get("/api/scope", {{"Host", "Dash.Example.Org.:443"}})->status, 200);
  http.Stop();
}

TEST(DashboardStream, ALiveStreamEndsWhenItsTokenIsRemoved) {
  const std::string tokens = OwnTempDir() + "/stream.tokens";
  std::ofstream(tokens) << "op-token operator\n";
  absl::StatusOr<std::unique_ptr<SignIn>> signin = SignIn::Create({.token_file = tokens});
  ASSERT_TRUE(signin.ok()) << signin.status();
  std::unique_ptr<Gateway> gateway = GatewayToNowhere();
  EventHub hub(gateway.get(), EventOptions{}, SessionLimits{});
  platform::HttpServer http({.host = "127.0.0.1", .port = 0}, nullptr, nullptr);
  (*signin)->Install(http);
  RegisterRoutes(http.native(), gateway.get(), &hub, {.keep_alive = absl::Milliseconds(100)});
  ASSERT_TRUE(http.Start().ok());
  std::atomic<bool> connected = false, ended = false;
  std::thread reader([&] {
    httplib::Client client("127.0.0.1", http.port());
    client.set_read_timeout(60, 0);
    client.Get("/api/events", {{"Authorization", "Bearer op-token"}},
               [&](const char* data, size_t size) {
                 if (absl::StrContains(absl::string_view(data, size), ": connected")) {
                   connected = true;
                 }
                 return true;
               });
    ended = true;
  });
  EXPECT_TRUE(PollUntil([&] { return connected.load(); }, absl::Seconds(30)));
  EXPECT_FALSE(ended);
  std::ofstream(tokens + ".new") << "other-token operator\n";
  std::filesystem::rename(tokens + ".new", tokens);
  EXPECT_TRUE(PollUntil([&] { return ended.load(); }, absl::Seconds(30)));
  hub.StopAll();
  reader.join();
  http.Stop();
}

TEST(DashboardTls, EveryResponseOverHttpsCarriesHsts) {
  absl::StatusOr<platform::TestPki> pki = platform::TestPki::Create();
  ASSERT_TRUE(pki.ok()) << pki.status();
  ASSERT_TRUE(pki->MakeCa("ca").ok());
  ASSERT_TRUE(pki->Issue("ca", "server").ok());
  std::unique_ptr<Gateway> gateway = GatewayToNowhere();
  EventHub hub(gateway.get(), EventOptions{}, SessionLimits{});
  platform::HttpServer https(
      {.host = "127.0.0.1",
       .port = 0,
       .tls = {.cert_file = pki->crt("server"), .key_file = pki->key("server")}},
      nullptr, nullptr);
  RegisterRoutes(https.native(), gateway.get(), &hub, {.hsts = true});
  ASSERT_TRUE(https.Start().ok());
  httplib::SSLClient client("127.0.0.1", https.port());
  client.set_ca_cert_path(pki->crt("ca"));
  client.enable_server_certificate_verification(true);
  for (const char* path : {"/", "/api/jobs?limit=0", "/nope.js", "/healthz"}) {
    httplib::Result r = client.Get(path);
    ASSERT_TRUE(r) << path << ": " << httplib::to_string(r.error());
    EXPECT_EQ(r->get_header_value("Strict-Transport-Security"), "max-age=31536000") << path;
  }
  hub.StopAll();
  https.Stop();

  // Over plain HTTP the header means nothing to a browser and is not sent.
  platform::HttpServer http({.host = "127.0.0.1", .port = 0}, nullptr, nullptr);
  EventHub plain_hub(gateway.get(), EventOptions{}, SessionLimits{});
  RegisterRoutes(http.native(), gateway.get(), &plain_hub, {});
  ASSERT_TRUE(http.Start().ok());
  httplib::Result r = httplib::Client("127.0.0.1", http.port()).Get("/");
  ASSERT_TRUE(r);
  EXPECT_FALSE(r->has_header("Strict-Transport-Security"));
  plain_hub.StopAll();
  http.Stop();
}

TEST(SignInOff, EveryRequestIsAnOperatorsWithoutATokenFile) {
  absl::StatusOr<std::unique_ptr<SignIn>> signin = SignIn::Create({});
  ASSERT_TRUE(signin.ok());
  EXPECT_FALSE((*signin)->enabled());
  EXPECT_EQ(ViewerUserScope(), std::nullopt);
}

}  // namespace
}  // namespace goodput::dashboard
