// The Helm chart, checked as far as a machine without Kubernetes or `helm` allows: every
// template renders (charts/render_chart.py, an interpreter of the template subset the chart
// uses) with the default values and with a sample override, the output parses as YAML, every
// `.Values` path a template names is defined in values.yaml, the objects an operator relies on
// are there (four services, probes, resources, replicas, ofu shards, token secrets, external
// PostgreSQL and Redis, auth on), and the rendered service configurations are accepted by the
// real binaries started against a real PostgreSQL and Redis, with the tokens from the rendered
// secret enforced.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "goodput/v1/job.grpc.pb.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "tests/support/child_process.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/temp_dir.h"

namespace goodput::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using ::testing::HasSubstr;

const std::vector<std::string> kServices = {"ingest", "ofu", "mfu", "alerting"};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct Rendered {
  ProgramResult result;
  fs::path dir;
  Json manifest;  // [{"template": ..., "object": {...}}]

  // The one object of `kind` whose name ends in `suffix`; null if none.
  const Json* Find(const std::string& kind, const std::string& suffix) const {
    for (const Json& entry : manifest) {
      const Json& o = entry["object"];
      if (o["kind"] == kind && absl::EndsWith(o["metadata"]["name"].get<std::string>(), suffix)) {
        return &o;
      }
    }
    return nullptr;
  }
  std::string Config(const std::string& service) const {
    return ReadFile(dir / "config" / (service + ".yaml"));
  }
};

Rendered Render(const TempDir& tmp, const std::string& name, std::vector<std::string> extra,
                const fs::path& chart = SourceDir() / "charts/goodput") {
  Rendered r;
  r.dir = tmp.path() / name;
  std::vector<std::string> argv = {"python3", (SourceDir() / "charts/render_chart.py").string(),
                                   chart.string(), r.dir.string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  absl::StatusOr<ProgramResult> result = RunProgram(argv);
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return r;
  r.result = *result;
  if (r.result.exit.Success()) {
    r.manifest = Json::parse(ReadFile(r.dir / "manifest.json"), nullptr, false);
    EXPECT_FALSE(r.manifest.is_discarded());
  }
  return r;
}

TempDir MakeTemp() {
  absl::StatusOr<TempDir> dir = TempDir::Create("chart");
  EXPECT_TRUE(dir.ok()) << dir.status();
  return *std::move(dir);
}

// The workload of `service`: a Deployment, or the StatefulSet for ofu.
const Json* Workload(const Rendered& r, const std::string& service) {
  return r.Find(service == "ofu" ? "StatefulSet" : "Deployment", "-" + service);
}

const Json* EnvVar(const Json& container, const std::string& name) {
  for (const Json& e : container["env"]) {
    if (e["name"] == name) return &e;
  }
  return nullptr;
}

TEST(HelmChart, DefaultValuesRenderTheFourServicesWithProbesShardsSecretsAndAuthOn) {
  TempDir tmp = MakeTemp();
  Rendered r = Render(tmp, "default", {});
  ASSERT_TRUE(r.result.exit.Success()) << r.result.output;

  // External PostgreSQL and Redis by default: the chart runs neither.
  for (const Json& entry : r.manifest) {
    std::string name = entry["object"]["metadata"]["name"];
    EXPECT_FALSE(absl::StrContains(name, "postgres") && entry["object"]["kind"] != "Secret")
        << name;
    EXPECT_FALSE(absl::StrContains(name, "redis") && entry["object"]["kind"] != "Secret") << name;
  }
  const Json* dashboard = r.Find("Deployment", "-dashboard");
  ASSERT_NE(dashboard, nullptr) << "the web dashboard is part of the platform";
  EXPECT_NE(r.Find("Service", "-dashboard"), nullptr);
  for (const std::string& service : kServices) {
    SCOPED_TRACE(service);
    const Json* svc = r.Find("Service", "-" + service);
    ASSERT_NE(svc, nullptr);
    EXPECT_EQ(svc->at("spec")["ports"][0]["appProtocol"], "grpc");
    const Json* workload = Workload(r, service);
    ASSERT_NE(workload, nullptr);
    EXPECT_GE(workload->at("spec")["replicas"].get<int>(), 1);
    const Json& container = workload->at("spec")["template"]["spec"]["containers"][0];
    EXPECT_EQ(container["command"][0], "goodput-" + service);
    EXPECT_TRUE(container["readinessProbe"].contains("grpc")) << container.dump();
    EXPECT_TRUE(container["livenessProbe"].is_object());
    // Probes go to the listener of their own, which the main port's clients cannot fill.
    EXPECT_EQ(container["livenessProbe"]["httpGet"]["port"], "probe") << container.dump();
    EXPECT_THAT(r.Config(service), HasSubstr("probe_port: "));
    EXPECT_TRUE(container["resources"]["requests"].contains("memory"));
    EXPECT_NE(EnvVar(container, "PGPASSWORD"), nullptr);

    const std::string config = r.Config(service);
    EXPECT_THAT(config, HasSubstr("enabled: true")) << "auth must be on in a cluster";
    EXPECT_THAT(config, HasSubstr("token_files:"));
    EXPECT_THAT(config, HasSubstr("postgres.example.internal"));
  }
  // ofu: the StatefulSet ordinal is the shard index, the replica count the shard count.
  const Json* ofu = Workload(r, "ofu");
  ASSERT_NE(ofu, nullptr);
  const Json& ofu_container = ofu->at("spec")["template"]["spec"]["containers"][0];
  const Json* shard = EnvVar(ofu_container, "GOODPUT_OFU__SHARD_INDEX");
  ASSERT_NE(shard, nullptr);
  EXPECT_EQ((*shard)["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.labels['apps.kubernetes.io/pod-index']");
  EXPECT_THAT(r.Config("ofu"),
              HasSubstr(absl::StrCat("shard_count: ", ofu->at("spec")["replicas"].get<int>())));
  EXPECT_THAT(r.Config("ofu"), HasSubstr("mfu_address: goodput-mfu:7103"));
  EXPECT_THAT(r.Config("ofu"), HasSubstr("alerting_address: goodput-alerting:7104"));
  EXPECT_THAT(r.Config("mfu"), HasSubstr("alerting_address: goodput-alerting:7104"));
  EXPECT_NE(EnvVar(ofu_container, "GOODPUT_OFU__FORWARD__TOKEN"), nullptr);
  // Token secret with one key per role, and the migration hook.
  const Json* tokens = r.Find("Secret", "-tokens");
  ASSERT_NE(tokens, nullptr);
  for (const char* role : {"scheduler", "telemetry", "sdk", "operator", "service", "client-token",
                           "dashboard-token"}) {
    EXPECT_TRUE(tokens->at("stringData").contains(role)) << role;
  }
  const Json* migrate = r.Find("Job", "-migrate");
  ASSERT_NE(migrate, nullptr);
  EXPECT_EQ(migrate->at("metadata")["annotations"]["helm.sh/hook"], "pre-install,pre-upgrade");
  // The hook runs before the release's ordinary objects exist: the database password it
  // reads must itself be a hook, created first.
  const Json* pg_secret = r.Find("Secret", "-postgres");
  ASSERT_NE(pg_secret, nullptr);
  EXPECT_EQ(pg_secret->at("metadata")["annotations"]["helm.sh/hook"], "pre-install,pre-upgrade");
  EXPECT_LT(
      std::stoi(pg_secret->at("metadata")["annotations"]["helm.sh/hook-weight"].get<std::string>()),
      std::stoi(migrate->at("metadata")["annotations"].value("helm.sh/hook-weight", "0")));
}

// The rendered files, materialized as Kubernetes would mount them: each role's tokens in a
// file, and the environment a pod gets (fixed values, the shard index, the client token).
struct Mounted {
  std::vector<std::pair<std::string, std::string>> env;
};

Mounted Mount(const Rendered& r, const TempDir& tmp, const std::string& service,
              const PostgresServer& pg, const RedisServer& redis) {
  Mounted m;
  const Json* tokens = r.Find("Secret", "-tokens");
  fs::path dir = tmp.path() / ("tokens-" + service);
  fs::create_directories(dir);
  for (const char* role : {"scheduler", "telemetry", "sdk", "operator", "service"}) {
    std::ofstream(dir / role) << (tokens ? tokens->at("stringData")[role].get<std::string>() : "");
    m.env.emplace_back(absl::StrCat("GOODPUT_AUTH__TOKEN_FILES__", absl::AsciiStrToUpper(role)),
                       (dir / role).string());
  }
  const Json& container = Workload(r, service)->at("spec")["template"]["spec"]["containers"][0];
  for (const Json& e : container["env"]) {
    std::string name = e["name"];
    if (e.contains("value")) {
      m.env.emplace_back(name, e["value"].get<std::string>());
    } else if (name == "GOODPUT_OFU__SHARD_INDEX") {
      // The last pod of the StatefulSet.
      m.env.emplace_back(name,
                         absl::StrCat(Workload(r, "ofu")->at("spec")["replicas"].get<int>() - 1));
    } else if (absl::EndsWith(name, "__FORWARD__TOKEN") && tokens) {
      m.env.emplace_back(name, tokens->at("stringData")["client-token"].get<std::string>());
    }
  }
  // Where this test's PostgreSQL and Redis are, and free ports instead of the chart's.
  m.env.emplace_back("GOODPUT_POSTGRES__DSN", pg.Dsn("goodput"));
  m.env.emplace_back("GOODPUT_REDIS__HOST", redis.host());
  m.env.emplace_back("GOODPUT_REDIS__PORT", absl::StrCat(redis.port()));
  m.env.emplace_back("GOODPUT_GRPC__PORT", "0");
  m.env.emplace_back("GOODPUT_HTTP__PORT", "0");
  m.env.emplace_back("GOODPUT_HTTP__PROBE_PORT", "0");
  return m;
}

TEST(HelmChart, SampleOverrideRendersConfigsTheRealServicesAcceptWithTheirTokens) {
  TempDir tmp = MakeTemp();
  Rendered r = Render(
      tmp, "override",
      {"-f", (SourceDir() / "charts/goodput/ci/test-values.yaml").string(), "--release", "prod"});
  ASSERT_TRUE(r.result.exit.Success()) << r.result.output;
  EXPECT_EQ(Workload(r, "ofu")->at("spec")["replicas"], 4);
  EXPECT_THAT(r.Config("ofu"), HasSubstr("shard_count: 4"));
  EXPECT_THAT(r.Config("ofu"), HasSubstr("window_s: 30"));
  EXPECT_THAT(r.Config("ingest"), HasSubstr("cluster: eos"));
  EXPECT_THAT(r.Config("ingest"), HasSubstr("silent_after_s: 43200"));
  EXPECT_THAT(r.Config("alerting"), HasSubstr("kind: alertmanager"));
  EXPECT_EQ(r.Find("Secret", "-postgres"), nullptr) << "existingSecret given: none rendered";

  absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Create();
  ASSERT_TRUE(pg.ok()) << pg.status();
  ASSERT_TRUE((*pg)->CreateDatabase("goodput").ok());
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Create();
  ASSERT_TRUE(redis.ok()) << redis.status();

  // The migration hook's command, against this database.
  const Json* migrate = r.Find("Job", "-migrate");
  ASSERT_NE(migrate, nullptr);
  Json command = migrate->at("spec")["template"]["spec"]["containers"][0]["command"];
  ASSERT_EQ(command[0], "goodputctl");
  std::vector<std::string> argv = {BuiltBinary("tools/goodputctl/goodputctl").string()};
  for (size_t i = 1; i < command.size(); ++i) {
    std::string arg = command[i];
    // The image keeps the migrations in /usr/share/goodput; this checkout keeps them here.
    argv.push_back(arg == "/usr/share/goodput/migrations" ? (SourceDir() / "migrations").string()
                                                          : arg);
  }
  absl::StatusOr<ProgramResult> migrated =
      RunProgram(argv, {{"GOODPUT_POSTGRES__DSN", (*pg)->Dsn("goodput")}});
  ASSERT_TRUE(migrated.ok()) << migrated.status();
  ASSERT_TRUE(migrated->exit.Success()) << migrated->output;

  std::map<std::string, std::unique_ptr<ServiceProcess>> running;
  for (const std::string& service : kServices) {
    SCOPED_TRACE(service);
    Mounted m = Mount(r, tmp, service, **pg, **redis);
    absl::StatusOr<std::unique_ptr<ServiceProcess>> process = ServiceProcess::Start(
        {.binary = BuiltBinary(absl::StrCat("services/", service, "/goodput-", service)),
         .config_yaml = r.Config(service),
         .env = m.env});
    ASSERT_TRUE(process.ok()) << "the rendered configuration was refused: " << process.status();
    running[service] = *std::move(process);
  }

  // Auth is on with the rendered tokens: none is refused, a scheduler token is admitted.
  auto jobs = goodput::v1::JobService::NewStub(running["ingest"]->Channel());
  {
    grpc::ClientContext ctx;
    goodput::v1::ListJobsResponse response;
    grpc::Status status = jobs->ListJobs(&ctx, goodput::v1::ListJobsRequest(), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer sched-token-2");
    goodput::v1::ListJobsResponse response;
    grpc::Status status = jobs->ListJobs(&ctx, goodput::v1::ListJobsRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  // The dashboard as rendered (its command line, its token from the secret), with this test's
  // addresses in place of the cluster's Services: it reads the services with its token.
  const Json* dash = r.Find("Deployment", "-dashboard");
  ASSERT_NE(dash, nullptr);
  const Json& dash_container = dash->at("spec")["template"]["spec"]["containers"][0];
  EXPECT_TRUE(dash_container["readinessProbe"].is_object());
  std::vector<std::string> dash_argv;
  for (const Json& arg : dash_container["command"]) dash_argv.push_back(arg);
  ASSERT_EQ(dash_argv[0], "goodput-dashboard");
  dash_argv[0] = BuiltBinary("tools/dashboard/goodput-dashboard").string();
  const fs::path ready = tmp.path() / "dashboard.ready";
  for (const std::string& service : kServices) {
    dash_argv.push_back(absl::StrCat("--", service, "=", running[service]->grpc_address()));
  }
  dash_argv.insert(dash_argv.end(), {"--listen=127.0.0.1", "--port=0",
                                     absl::StrCat("--ready-file=", ready.string())});
  const Json* tokens = r.Find("Secret", "-tokens");
  ASSERT_NE(tokens, nullptr);
  ASSERT_EQ(dash_container["env"][0]["valueFrom"]["secretKeyRef"]["key"], "dashboard-token");
  absl::StatusOr<std::unique_ptr<ChildProcess>> dashboard = ChildProcess::Start(
      {.argv = dash_argv,
       .env = {{"GOODPUT_TOKEN", tokens->at("stringData")["dashboard-token"].get<std::string>()}},
       .log_path = tmp.path() / "dashboard.log"});
  ASSERT_TRUE(dashboard.ok()) << dashboard.status();
  int dash_port = 0;
  ASSERT_TRUE(PollUntil(
      [&] {
        std::ifstream in(ready);
        std::string line;
        return std::getline(in, line) && absl::StartsWith(line, "http_port=") &&
               absl::SimpleAtoi(line.substr(10), &dash_port) && dash_port > 0;
      },
      absl::Seconds(30)))
      << (*dashboard)->LogTail();
  httplib::Client http("127.0.0.1", dash_port);
  httplib::Result jobs_page = http.Get("/api/jobs");
  ASSERT_TRUE(jobs_page) << "dashboard did not answer";
  EXPECT_EQ(jobs_page->status, 200) << jobs_page->body;

  // goodputctl, as a scheduler runs it: the token from GOODPUT_TOKEN.
  const std::string ctl = BuiltBinary("tools/goodputctl/goodputctl").string();
  const std::string addr = running["ingest"]->grpc_address();
  absl::StatusOr<ProgramResult> with_token = RunProgram(
      {ctl, "jobs", "list"}, {{"GOODPUT_INGEST_ADDR", addr}, {"GOODPUT_TOKEN", "sched-token-1"}});
  ASSERT_TRUE(with_token.ok());
  EXPECT_EQ(with_token->exit.exit_code, 0) << with_token->output;
  absl::StatusOr<ProgramResult> without =
      RunProgram({ctl, "jobs", "list"}, {{"GOODPUT_INGEST_ADDR", addr}, {"GOODPUT_TOKEN", ""}});
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->exit.exit_code, 1) << without->output;
  EXPECT_THAT(without->output, HasSubstr("give a token with --token or GOODPUT_TOKEN"));
}

TEST(HelmChart, DefaultValuesNeedTokensBeforeTheServicesStart) {
  TempDir tmp = MakeTemp();
  Rendered r = Render(tmp, "default", {});
  ASSERT_TRUE(r.result.exit.Success()) << r.result.output;
  absl::StatusOr<std::unique_ptr<PostgresServer>> pg = PostgresServer::Create();
  ASSERT_TRUE(pg.ok()) << pg.status();
  absl::StatusOr<std::unique_ptr<RedisServer>> redis = RedisServer::Create();
  ASSERT_TRUE(redis.ok()) << redis.status();
  Mounted m = Mount(r, tmp, "ingest", **pg, **redis);
  fs::path config = tmp.path() / "ingest.yaml";
  std::ofstream(config) << r.Config("ingest");
  absl::StatusOr<ProgramResult> result = RunProgram(
      {BuiltBinary("services/ingest/goodput-ingest").string(), "--config", config.string()}, m.env);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit.exit_code, 2) << result->output;
  EXPECT_THAT(result->output, HasSubstr("no tokens are configured"));
}

TEST(HelmChart, RenderCheckRefusesUndefinedValuesAndUnknownOverrides) {
  TempDir tmp = MakeTemp();
  fs::path chart = tmp.path() / "chart";
  fs::copy(SourceDir() / "charts/goodput", chart, fs::copy_options::recursive);
  std::ofstream(chart / "templates/extra.yaml")
      << "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n"
         "  a: {{ .Values.ofu.shardz | quote }}\n";
  Rendered bad = Render(tmp, "bad", {}, chart);
  EXPECT_EQ(bad.result.exit.exit_code, 1) << bad.result.output;
  EXPECT_THAT(bad.result.output, HasSubstr(".Values.ofu.shardz is not defined in values.yaml"));

  fs::path typo = tmp.path() / "typo.yaml";
  std::ofstream(typo) << "ofu:\n  replica: 3\n";
  Rendered unknown = Render(tmp, "typo", {"-f", typo.string()});
  EXPECT_EQ(unknown.result.exit.exit_code, 1) << unknown.result.output;
  EXPECT_THAT(unknown.result.output, HasSubstr("ofu.replica is not a value of the chart"));

  std::ofstream(chart / "templates/extra.yaml") << "kind: [unclosed\n";
  Rendered broken = Render(tmp, "broken", {}, chart);
  EXPECT_EQ(broken.result.exit.exit_code, 1) << broken.result.output;
  EXPECT_THAT(broken.result.output, HasSubstr("not YAML"));
}

}  // namespace
}  // namespace goodput::testing
