// The Helm chart, checked as far as a machine without Kubernetes or `helm` allows, with
// charts/render_chart.py (an interpreter of Go templates and Helm's and Sprig's functions):
// - the chart against its golden manifests (charts/golden.py): the default render, the
//   render with ci/test-values.yaml (every optional feature on), and what each value path,
//   changed alone (ci/value-cases.yaml), changes in the default render; a value path without
//   a case or a case that changes nothing fails;
// - the invariants an operator relies on, asserted: the default values render four services
//   with probes and shards, token secrets, external PostgreSQL and Redis, auth on; every pod
//   runs non-root on a read-only root with a writable /tmp and the recommended labels;
// - values outside values.schema.json and contradictory values are refused with a reason;
// - the rendered service configurations are accepted by the real binaries started against a
//   real PostgreSQL and Redis, with the tokens from the rendered secret enforced;
// - the renderer's template functions behave as Helm's and Sprig's documentation says, and
//   its checks (undefined values, unknown overrides, duplicate keys, kubeVersion) refuse.
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
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
using ::testing::Not;

const std::vector<std::string> kServices = {"ingest", "ofu", "mfu", "alerting"};
// Everything that runs a pod: the four services, the dashboard and the migration Job.
const std::vector<std::string> kPodOwners = {"ingest",   "ofu",       "mfu",
                                             "alerting", "dashboard", "migrate"};

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The value at a JSON pointer ("/spec/replicas"), null when there is none.
Json At(const Json& j, const std::string& pointer) {
  Json::json_pointer p(pointer);
  return j.contains(p) ? j.at(p) : Json();
}

struct Rendered {
  ProgramResult result;  // of the render_chart.py run
  fs::path dir;
  Json manifest = Json::array();  // [{"template": ..., "object": {...}}]
  std::string notes;              // NOTES.txt
  std::string errors;             // errors.txt: empty when everything rendered

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
  std::vector<const Json*> All(const std::string& kind) const {
    std::vector<const Json*> out;
    for (const Json& entry : manifest) {
      if (entry["object"]["kind"] == kind) out.push_back(&entry["object"]);
    }
    return out;
  }
  std::string Config(const std::string& service) const {
    return ReadFile(dir / "config" / (service + ".yaml"));
  }
  // Everything rendered, to tell whether two renders differ.
  std::string Text() const {
    std::string text = manifest.dump() + notes;
    for (const std::string& service : kServices) text += Config(service);
    return text;
  }
};

Rendered Load(const fs::path& dir) {
  Rendered r;
  r.dir = dir;
  if (fs::exists(dir / "manifest.json")) {
    r.manifest = Json::parse(ReadFile(dir / "manifest.json"), nullptr, false);
    EXPECT_FALSE(r.manifest.is_discarded()) << dir;
  }
  r.notes = ReadFile(dir / "NOTES.txt");
  r.errors = ReadFile(dir / "errors.txt");
  return r;
}

Rendered Render(const TempDir& tmp, const std::string& name, std::vector<std::string> extra,
                const fs::path& chart = SourceDir() / "charts/goodput") {
  std::vector<std::string> argv = {"python3", (SourceDir() / "charts/render_chart.py").string(),
                                   chart.string(), (tmp.path() / name).string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  absl::StatusOr<ProgramResult> result = RunProgram(argv, {}, absl::Seconds(300));
  EXPECT_TRUE(result.ok()) << result.status();
  Rendered r = Load(tmp.path() / name);
  if (result.ok()) r.result = *result;
  return r;
}

TempDir MakeTemp() {
  absl::StatusOr<TempDir> dir = TempDir::Create("chart");
  EXPECT_TRUE(dir.ok()) << dir.status();
  return *std::move(dir);
}

fs::path WriteFile(const TempDir& tmp, const std::string& name, const std::string& text) {
  fs::path path = tmp.path() / name;
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
  return path;
}

// The object running `owner`'s pods: a Deployment, the ofu StatefulSet, the migration Job.
const Json* Workload(const Rendered& r, const std::string& owner) {
  if (owner == "ofu") return r.Find("StatefulSet", "-ofu");
  if (owner == "migrate") return r.Find("Job", "-migrate");
  return r.Find("Deployment", "-" + owner);
}

struct Pod {
  std::string owner;
  const Json* workload;
  const Json& Spec() const { return workload->at("spec")["template"]["spec"]; }
  const Json& Meta() const { return workload->at("spec")["template"]["metadata"]; }
  const Json& Container() const { return Spec()["containers"][0]; }
};

// The pods the render has (the dashboard and Job only when enabled).
std::vector<Pod> Pods(const Rendered& r) {
  std::vector<Pod> pods;
  for (const std::string& owner : kPodOwners) {
    if (const Json* w = Workload(r, owner)) pods.push_back({owner, w});
  }
  return pods;
}

const Json* EnvVar(const Json& container, const std::string& name) {
  for (const Json& e : container["env"]) {
    if (e["name"] == name) return &e;
  }
  return nullptr;
}

Json Volume(const Json& spec, const std::string& name) {
  for (const Json& v : spec["volumes"]) {
    if (v["name"] == name) return v;
  }
  return Json();
}

bool HasMountAt(const Json& container, const std::string& path) {
  for (const Json& m : container["volumeMounts"]) {
    if (m["mountPath"] == path) return true;
  }
  return false;
}

Json Port(const Json& ports, const std::string& name) {
  for (const Json& p : ports) {
    if (p["name"] == name) return p;
  }
  return Json();
}

// The Kubernetes recommended labels and the chart label, on every object.
void ExpectRecommendedLabels(const Json& object, const std::string& release) {
  SCOPED_TRACE(object["kind"].get<std::string>() + "/" +
               object["metadata"]["name"].get<std::string>());
  const Json& labels = object["metadata"]["labels"];
  EXPECT_EQ(labels.value("app.kubernetes.io/name", ""), "goodput");
  EXPECT_EQ(labels.value("app.kubernetes.io/instance", ""), release);
  EXPECT_EQ(labels.value("app.kubernetes.io/version", ""), "0.1.0");
  EXPECT_EQ(labels.value("app.kubernetes.io/managed-by", ""), "Helm");
  EXPECT_EQ(labels.value("app.kubernetes.io/part-of", ""), "goodput");
  EXPECT_THAT(labels.value("helm.sh/chart", ""), ::testing::StartsWith("goodput-"));
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
    // The probe listener is exposed for the ServiceMonitor as the port "metrics".
    EXPECT_EQ(Port(svc->at("spec")["ports"], "metrics")["targetPort"], "probe");
    const Json* workload = Workload(r, service);
    ASSERT_NE(workload, nullptr);
    EXPECT_GE(workload->at("spec")["replicas"].get<int>(), 1);
    const Json& container = workload->at("spec")["template"]["spec"]["containers"][0];
    EXPECT_EQ(container["command"][0], "goodput-" + service);
    EXPECT_EQ(container["image"], "goodput:0.1.0") << "the tag defaults to the appVersion";
    EXPECT_TRUE(container["readinessProbe"].contains("grpc")) << container.dump();
    EXPECT_TRUE(container["livenessProbe"].is_object());
    // Probes go to the listener of their own, which the main port's clients cannot fill.
    EXPECT_EQ(container["livenessProbe"]["httpGet"]["port"], "probe") << container.dump();
    EXPECT_THAT(r.Config(service), HasSubstr("probe_port: "));
    EXPECT_TRUE(container["resources"]["requests"].contains("memory"));
    EXPECT_NE(EnvVar(container, "PGPASSWORD"), nullptr);
    EXPECT_EQ(EnvVar(container, "GOODPUT_POSTGRES__DSN"), nullptr)
        << "the DSN is in the config file unless it is kept in a secret";
    // Annotated for Prometheus's pod discovery, on the probe port.
    const Json& annotations = workload->at("spec")["template"]["metadata"]["annotations"];
    EXPECT_EQ(annotations.value("prometheus.io/scrape", ""), "true");
    EXPECT_EQ(annotations.value("prometheus.io/port", ""),
              absl::StrCat(Port(container["ports"], "probe")["containerPort"].get<int>()));
    EXPECT_TRUE(annotations.contains("checksum/config"));

    const std::string config = r.Config(service);
    EXPECT_THAT(config, HasSubstr("enabled: true")) << "auth must be on in a cluster";
    EXPECT_THAT(config, HasSubstr("token_files:"));
    EXPECT_THAT(config, HasSubstr("postgres.example.internal"));
  }
  EXPECT_FALSE(dashboard->at("spec")["template"]["metadata"].contains("annotations"))
      << "the dashboard has no /metrics to scrape";
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
  // The hook runs before the release's ordinary objects exist: the database password and the
  // ServiceAccount it uses must themselves be hooks, created first.
  const int job_weight =
      std::stoi(migrate->at("metadata")["annotations"].value("helm.sh/hook-weight", "0"));
  const Json* pg_secret = r.Find("Secret", "-postgres");
  ASSERT_NE(pg_secret, nullptr);
  EXPECT_EQ(pg_secret->at("metadata")["annotations"]["helm.sh/hook"], "pre-install,pre-upgrade");
  EXPECT_LT(
      std::stoi(pg_secret->at("metadata")["annotations"]["helm.sh/hook-weight"].get<std::string>()),
      job_weight);
  const Json* migrate_sa = r.Find("ServiceAccount", "goodput-migrate");
  ASSERT_NE(migrate_sa, nullptr);
  EXPECT_EQ(migrate->at("spec")["template"]["spec"]["serviceAccountName"], "goodput-migrate");
  EXPECT_EQ(migrate_sa->at("metadata")["annotations"]["helm.sh/hook"], "pre-install,pre-upgrade");
  EXPECT_LT(
      std::stoi(
          migrate_sa->at("metadata")["annotations"]["helm.sh/hook-weight"].get<std::string>()),
      job_weight);

  // NOTES.txt tells how to reach what was installed, and that tokens are still missing.
  EXPECT_THAT(r.notes, HasSubstr("goodput-ingest.default.svc:7101"));
  EXPECT_THAT(r.notes, HasSubstr("export GOODPUT_INGEST_ADDR="));
  EXPECT_THAT(r.notes, HasSubstr("http://goodput-ingest.default.svc:7201/api/v1/write"));
  EXPECT_THAT(r.notes,
              HasSubstr("kubectl -n default port-forward svc/goodput-dashboard 7300:7300"));
  EXPECT_THAT(r.notes, HasSubstr("WARNING: no tokens for scheduler, telemetry, sdk, operator"));
  EXPECT_THAT(r.notes, Not(HasSubstr("ServiceMonitor")));

  // The probe port is kept from workload traffic: the four services' pods admit every peer on
  // gRPC and HTTP and only their node (the kubelet) on the probe port.
  const Json* probe_policy = r.Find("NetworkPolicy", "goodput-probe-port");
  ASSERT_NE(probe_policy, nullptr);
  EXPECT_EQ(At(*probe_policy, "/spec/podSelector/matchExpressions/0/values"),
            Json::parse(R"(["ingest", "ofu", "mfu", "alerting"])"));
  EXPECT_EQ(At(*probe_policy, "/spec/policyTypes"), Json::parse(R"(["Ingress"])"));
  EXPECT_EQ(At(*probe_policy, "/spec/ingress"),
            Json::parse(R"([{"ports": [{"port": "grpc"}, {"port": "http"}]}])"));
  for (const std::string& service : kServices) {
    const Json* workload = Workload(r, service);
    ASSERT_NE(workload, nullptr);
    EXPECT_EQ(At(*workload, "/spec/template/spec/containers/0/livenessProbe/httpGet/port"),
              "probe");
  }
  EXPECT_THAT(r.notes, HasSubstr("NetworkPolicy goodput-probe-port admits only the pods' nodes"));
  EXPECT_THAT(r.notes, HasSubstr("WARNING: networkPolicy.metrics.from is empty: Prometheus "
                                 "cannot scrape /metrics on the probe port"));
}

TEST(HelmChart, EveryPodRunsAsNonRootOnAReadOnlyRootWithAWritableTmpAndTheRecommendedLabels) {
  TempDir tmp = MakeTemp();
  Rendered r = Render(tmp, "default", {});
  ASSERT_TRUE(r.result.exit.Success()) << r.result.output;

  std::vector<Pod> pods = Pods(r);
  ASSERT_EQ(pods.size(), kPodOwners.size());
  for (const Pod& pod : pods) {
    SCOPED_TRACE(pod.owner);
    const Json& spec = pod.Spec();
    EXPECT_EQ(At(spec, "/securityContext/runAsNonRoot"), true);
    EXPECT_EQ(At(spec, "/securityContext/runAsUser"), 65532);
    EXPECT_EQ(At(spec, "/securityContext/runAsGroup"), 65532);
    EXPECT_EQ(At(spec, "/securityContext/fsGroup"), 65532);
    EXPECT_EQ(At(spec, "/securityContext/seccompProfile/type"), "RuntimeDefault");
    EXPECT_EQ(spec["automountServiceAccountToken"], false);
    EXPECT_EQ(spec["serviceAccountName"], pod.owner == "migrate" ? "goodput-migrate" : "goodput");
    for (const char* key : {"imagePullSecrets", "nodeSelector", "tolerations", "affinity",
                            "topologySpreadConstraints", "priorityClassName"}) {
      EXPECT_FALSE(spec.contains(key)) << key << " is not set by default";
    }
    ASSERT_EQ(spec["containers"].size(), 1u);
    const Json& container = pod.Container();
    EXPECT_EQ(At(container, "/securityContext/allowPrivilegeEscalation"), false);
    EXPECT_EQ(At(container, "/securityContext/readOnlyRootFilesystem"), true);
    EXPECT_EQ(At(container, "/securityContext/privileged"), false);
    EXPECT_EQ(At(container, "/securityContext/capabilities/drop"), Json::parse(R"(["ALL"])"));
    // The root filesystem is read-only: scratch files go to an emptyDir at /tmp.
    EXPECT_EQ(At(Volume(spec, "tmp"), "/emptyDir/sizeLimit"), "64Mi");
    EXPECT_TRUE(HasMountAt(container, "/tmp")) << container.dump();
    EXPECT_TRUE(container.contains("resources"));
    // The pod template carries the selector's labels.
    if (pod.owner != "migrate") {
      for (const auto& [key, value] : pod.workload->at("spec")["selector"]["matchLabels"].items()) {
        EXPECT_EQ(pod.Meta()["labels"].value(key, ""), value) << key;
      }
      EXPECT_EQ(pod.workload->at("spec")["selector"]["matchLabels"].value(
                    "app.kubernetes.io/component", ""),
                pod.owner);
    }
  }
  const Json* sa = r.Find("ServiceAccount", "goodput");
  ASSERT_NE(sa, nullptr);
  EXPECT_EQ(sa->at("automountServiceAccountToken"), false);
  for (const Json& entry : r.manifest) {
    ExpectRecommendedLabels(entry["object"], "goodput");
    EXPECT_EQ(entry["object"]["metadata"].value("namespace", ""), "default");
  }
  // Optional objects are off by default.
  EXPECT_TRUE(r.All("PodDisruptionBudget").empty());
  ASSERT_EQ(r.All("NetworkPolicy").size(), 1u) << "the probe port's only";
  EXPECT_THAT(r.All("NetworkPolicy")[0]->at("metadata")["name"].get<std::string>(),
              ::testing::EndsWith("-probe-port"));
  EXPECT_TRUE(r.All("ServiceMonitor").empty());
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
  // Where this test's PostgreSQL and Redis are (the secret's DSN), and free ports instead of
  // the chart's.
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
  // Job-end reports read ofu's and mfu's Services.
  EXPECT_THAT(r.Config("alerting"), HasSubstr("ofu_address: prod-goodput-ofu:7102"));
  EXPECT_THAT(r.Config("alerting"), HasSubstr("mfu_address: prod-goodput-mfu:7103"));
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
  // Its sign-in reads the token files the services read (mounted from the same secret).
  for (const Json& arg : dash_container["command"]) {
    dash_argv.push_back(absl::StrReplaceAll(
        arg.get<std::string>(),
        {{"/etc/goodput/tokens/", (tmp.path() / "tokens-ingest").string() + "/"}}));
  }
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
  // Auth is on: the dashboard wants a sign-in, which an operator token gives.
  httplib::Result refused = http.Get("/api/jobs");
  ASSERT_TRUE(refused) << "dashboard did not answer";
  EXPECT_EQ(refused->status, 401) << refused->body;
  const std::string operator_token = tokens->at("stringData")["dashboard-token"];
  httplib::Result jobs_page =
      http.Get("/api/jobs", {{"Authorization", absl::StrCat("Bearer ", operator_token)}});
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

// Values the schema or the templates refuse, and the reason each must give.
struct RefusedCase {
  std::string name;
  std::string yaml;
  std::string reason;
};

std::vector<RefusedCase> RefusedCases() {
  return {
      // values.schema.json
      {"pull-policy", "image: {pullPolicy: Sometimes}\n",
       "image.pullPolicy: 'Sometimes' is not one of"},
      {"replicas-text", "ofu: {replicas: \"4\"}\n", "ofu.replicas: '4' is not of type 'integer'"},
      {"no-shards", "ofu: {replicas: 0}\n", "ofu.replicas: 0 is less than the minimum of 1"},
      {"node-selector-number", "nodeSelector: {zone: 1}\n",
       "nodeSelector.zone: 1 is not of type 'string'"},
      {"pull-secret-name", "imagePullSecrets: [{secret: regcred}]\n",
       "'name' is a required property"},
      {"interval", "serviceMonitor: {interval: soon}\n",
       "serviceMonitor.interval: 'soon' does not match"},
      {"budget-text", "podDisruptionBudget: {maxUnavailable: half}\n",
       "podDisruptionBudget.maxUnavailable: 'half' is not valid"},
      {"tmp-medium", "tmpVolume: {medium: Disk}\n", "tmpVolume.medium: 'Disk' is not one of"},
      {"root-user", "podSecurityContext: {runAsUser: -1}\n",
       "podSecurityContext.runAsUser: -1 is less than the minimum of 0"},
      {"budget-without-enabled", "ingest: {podDisruptionBudget: {minAvailable: 1}}\n",
       "ingest.podDisruptionBudget: {'minAvailable': 1} is not valid"},
      {"token-with-space", "auth: {tokens: {sdk: [\"two words\"]}}\n",
       "auth.tokens.sdk.0: 'two words' does not match"},
      {"empty-peer", "networkPolicy: {ingress: {from: [{}]}}\n",
       "networkPolicy.ingress.from.0: {}"},  // jsonschema words minProperties differently by
                                             // version
      {"log-level", "log: {level: verbose}\n", "log.level: 'verbose' is not one of"},
      {"digest", "image: {digest: latest}\n", "image.digest: 'latest' does not match"},
      {"tmp-size", "tmpVolume: {sizeLimit: big}\n", "tmpVolume.sizeLimit: 'big' does not match"},
      {"unknown-key", "serviceAccount: {automountToken: true}\n",
       "serviceAccount.automountToken is not a value of the chart"},
      // The templates: contradictions fail with the reason.
      {"budget-both", "podDisruptionBudget: {enabled: true, minAvailable: 1, maxUnavailable: 1}\n",
       "podDisruptionBudget of ingest: give minAvailable or maxUnavailable, not both"},
      {"budget-neither", "podDisruptionBudget: {enabled: true, maxUnavailable: null}\n",
       "podDisruptionBudget of ingest: give minAvailable or maxUnavailable"},
      {"dsn-key-without-secret", "postgres: {secretKeys: {dsn: dsn}}\n",
       "postgres.secretKeys.dsn reads the DSN from postgres.existingSecret: set "
       "postgres.existingSecret too"},
      {"no-dsn", "postgres: {dsn: \"\"}\n", "postgres.dsn is empty"},
  };
}

// Renders the chart once with each override as a variant (one run of the renderer).
Rendered RenderVariants(const TempDir& tmp,
                        const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> args;
  for (const auto& [name, yaml] : overrides) {
    args.push_back("--variant");
    args.push_back(name + "=" + WriteFile(tmp, name + ".yaml", yaml).string());
  }
  return Render(tmp, "out", args);
}

// The chart against its golden manifests (charts/goodput/ci/golden/, written by
// charts/golden.py --update): the default render, the render with ci/test-values.yaml, and the
// diff each value path's case in ci/value-cases.yaml makes to the default render. A change to
// a template, a default or the schema shows in the golden files' diff of its commit; a value
// path without a case, a case that changes nothing, and a render with errors fail.
TEST(HelmChart, RendersItsGoldenManifestsAndEveryValuePathHasItsEffect) {
  absl::StatusOr<ProgramResult> r =
      RunProgram({"python3", (SourceDir() / "charts/golden.py").string(),
                  (SourceDir() / "charts/goodput").string()},
                 {}, absl::Seconds(600));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->exit.Success()) << r->output;
  EXPECT_THAT(r->output, HasSubstr("chart matches its 3 golden files"));
}

TEST(HelmChartValues, ValuesOutsideTheSchemaOrContradictoryAreRefusedWithTheReason) {
  TempDir tmp = MakeTemp();
  std::vector<std::pair<std::string, std::string>> overrides;
  for (const RefusedCase& c : RefusedCases()) overrides.emplace_back(c.name, c.yaml);
  Rendered base = RenderVariants(tmp, overrides);
  ASSERT_EQ(base.errors, "") << base.result.output;
  EXPECT_EQ(base.result.exit.exit_code, 1) << "a refused variant fails the run";
  for (const RefusedCase& c : RefusedCases()) {
    SCOPED_TRACE(c.name + ": " + c.yaml);
    Rendered r = Load(base.dir / "variants" / c.name);
    EXPECT_THAT(r.errors, HasSubstr(c.reason));
  }
}

TEST(HelmChart, RenderCheckRefusesUndefinedValuesUnknownOverridesAndBrokenOutput) {
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

  // A key given twice: which one Kubernetes keeps is not for a template to leave open.
  std::ofstream(chart / "templates/extra.yaml")
      << "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  name: y\n";
  Rendered twice = Render(tmp, "twice", {}, chart);
  EXPECT_EQ(twice.result.exit.exit_code, 1) << twice.result.output;
  EXPECT_THAT(twice.result.output, HasSubstr("found duplicate key 'name'"));
  fs::remove(chart / "templates/extra.yaml");

  // A value in values.yaml that the schema does not describe.
  std::ofstream(chart / "values.yaml", std::ios::app) << "surprise: 1\n";
  Rendered undescribed = Render(tmp, "undescribed", {}, chart);
  EXPECT_EQ(undescribed.result.exit.exit_code, 1) << undescribed.result.output;
  EXPECT_THAT(undescribed.result.output,
              HasSubstr("values.yaml: surprise is not described in values.schema.json"));

  // Chart.yaml's kubeVersion, as Helm checks it against the cluster.
  Rendered old = Render(tmp, "old", {"--kube-version", "v1.27.9"});
  EXPECT_EQ(old.result.exit.exit_code, 1) << old.result.output;
  EXPECT_THAT(old.result.output,
              HasSubstr("chart requires kubeVersion: >=1.28.0-0 which is incompatible with "
                        "Kubernetes v1.27.9"));
  Rendered newer = Render(tmp, "newer", {"--kube-version", "v1.31.2-gke.1000"});
  EXPECT_TRUE(newer.result.exit.Success())
      << "a vendor's prerelease build counts: " << newer.result.output;
}

// ---------------------------------------------------------------------------------------------
// The renderer's template language, case by case, against what Helm and Sprig document.

struct FunctionCase {
  std::string tmpl;      // a template action (or a few)
  std::string expected;  // what Helm prints for it
};

// The values the cases read. Numbers are float64 in Helm, as they are read through JSON.
constexpr char kFunctionValues[] = R"(str: hello
num: 1000000
small: 42
half: 0.5
flag: true
empty: ""
zero: 0
nil: null
list: [b, a, c, a]
emptyList: []
map: {b: 2, a: 1}
nested: {inner: {k: v}}
tplText: "{{ .Values.str }}-{{ .Release.Name }}"
case: none
)";

std::vector<FunctionCase> FunctionCases() {
  return {
      // Strings
      {R"({{ quote "a\"b" }})", R"("a\"b")"},
      {R"({{ .Values.nil | quote }})", ""},  // Sprig's quote leaves nil out
      {R"({{ quote .Values.small }})", R"("42")"},
      {R"({{ squote "x" }})", "'x'"},
      {R"({{ upper "abc" }}|{{ lower "ABC" }})", "ABC|abc"},
      {R"({{ trim "  x  " }})", "x"},
      {R"({{ trimSuffix "-" "a-" }}|{{ trimPrefix "a" "ab" }})", "a|b"},
      {R"({{ trunc 3 "abcdef" }}|{{ trunc -2 "abcdef" }}|{{ trunc 9 "ab" }})", "abc|ef|ab"},
      {R"({{ replace "+" "_" "1.2.3+b" }})", "1.2.3_b"},
      {R"({{ contains "ell" .Values.str }})", "true"},
      {R"({{ hasPrefix "he" .Values.str }})", "true"},
      {R"({{ hasSuffix "lo" .Values.str }})", "true"},
      {R"({{ indent 2 "a\nb" }})", "  a\n  b"},
      {R"([{{ nindent 2 "a\nb" }}])", "[\n  a\n  b]"},
      {R"({{ printf "%s-%d-%v-%q" "a" 3 .Values.num "q" }})", R"(a-3-1e+06-"q")"},
      {R"({{ printf "%d" .Values.small }})", "%!d(float64=42)"},  // values are float64
      {R"({{ printf "%-6s|%05d|%.2f|%t" "ab" 42 .Values.half true }})", "ab    |00042|0.50|true"},
      {R"({{ print "a" 1 2 "b" }})", "a1 2b"},
      {R"({{ toString .Values.num }}|{{ .Values.num }}|{{ .Values.small }}|{{ .Values.half }})",
       "1e+06|1e+06|42|0.5"},
      {R"({{ toString .Values.nil }}|{{ .Values.nil }}|)", "<nil>||"},
      {R"({{ splitList "," "a,b" | toJson }})", R"(["a","b"])"},
      {R"({{ join "," .Values.list }})", "b,a,c,a"},
      {R"({{ regexMatch "^[a-z]+$" "abc" }}|{{ regexMatch "^[a-z]+$" "a1" }})", "true|false"},
      {R"({{ b64enc "goodput" }}|{{ b64dec "Z29vZHB1dA==" }})", "Z29vZHB1dA==|goodput"},
      {R"({{ sha256sum "abc" }})",
       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      // Conversions and types
      {R"({{ int "42" }}|{{ int .Values.half }}|{{ int64 "0x10" }})", "42|0|16"},
      {R"({{ toYaml .Values.map }})", "a: 1\nb: 2"},
      {R"({{ toYaml .Values.nil }})", "null"},
      {R"({{ get (fromYaml "a: [1, 2]") "a" | toJson }})", "[1,2]"},
      {R"({{ toJson .Values.map }}|{{ toJson "<&>" }})", R"({"a":1,"b":2}|"\u003c\u0026\u003e")"},
      {R"({{ get (fromJson "{\"a\": \"b\"}") "a" }})", "b"},
      {R"({{ kindOf .Values.num }})", "float64"},
      {R"({{ kindOf .Values.list }})", "slice"},
      {R"({{ kindOf .Values.map }})", "map"},
      {R"({{ kindOf .Values.str }})", "string"},
      {R"({{ kindIs "invalid" .Values.nil }}|{{ kindIs "bool" .Values.flag }})", "true|true"},
      {R"({{ typeOf .Values.map }}|{{ typeOf 1 }}|{{ typeOf .Values.small }})",
       "map[string]interface {}|int|float64"},
      // Logic
      {R"({{ not .Values.empty }}|{{ not .Values.str }})", "true|false"},
      {R"([{{ and 1 "" 3 }}]|{{ or 0 "" "x" }}|{{ and true "y" }})", "[]|x|y"},
      {R"([{{ and .Values.empty (fail "evaluated") }}]|{{ or .Values.str (fail "evaluated") }})",
       "[]|hello"},  // and/or stop at the first deciding argument
      {R"({{ eq .Values.str "x" "hello" }})", "true"},
      {R"({{ eq .Values.nil "x" }})", "false"},
      {R"({{ ne 1 2 }})", "true"},
      {R"({{ eq .Values.small 42.0 }})", "true"},
      {R"({{ lt 1 2 }}|{{ le 2 2 }}|{{ gt "b" "a" }}|{{ ge .Values.num 1.0 }})",
       "true|true|true|true"},
      {R"({{ empty .Values.zero }}|{{ empty .Values.map }}|{{ empty .Values.emptyList }})",
       "true|false|true"},
      {R"({{ default "d" .Values.empty }})", "d"},
      {R"({{ .Values.zero | default 7 }})", "7"},
      {R"({{ default "d" .Values.flag }})", "true"},
      {R"({{ default "d" }})", "d"},
      {R"({{ coalesce .Values.empty .Values.zero "c" }})", "c"},
      {R"({{ ternary "y" "n" true }}|{{ false | ternary "y" "n" }})", "y|n"},
      {R"({{ semverCompare ">=1.28.0-0" "v1.29.3" }})", "true"},
      {R"({{ semverCompare ">=1.28.0" "1.29.0-rc.1" }})", "false"},
      {R"({{ semverCompare ">=1.28.0-0" "1.29.0-rc.1" }})", "true"},
      {R"({{ semverCompare "^1.2.0" "1.9.0" }})", "true"},
      {R"({{ semverCompare "^1.2.0" "2.0.0" }})", "false"},
      {R"({{ semverCompare "^0.2.3" "0.3.0" }})", "false"},
      {R"({{ semverCompare "~1.2.3" "1.2.9" }})", "true"},
      {R"({{ semverCompare "~1.2.3" "1.3.0" }})", "false"},
      {R"({{ semverCompare "1.2.x" "1.2.7" }})", "true"},
      {R"({{ semverCompare "1.2 - 1.4.5" "1.4.5" }})", "true"},
      {R"({{ semverCompare "<1.0 || >=2.1" "2.0.5" }})", "false"},
      {R"({{ semverCompare ">1.2, <1.4" "1.3.1" }})", "true"},
      {R"({{ semverCompare "!=1.2.3" "1.2.3" }})", "false"},
      // Lists
      {R"({{ list 1 "a" | toJson }})", R"([1,"a"])"},
      {R"({{ first .Values.list }})", "b"},
      {R"({{ last .Values.list }})", "a"},
      {R"({{ len .Values.list }})", "4"},
      {R"({{ append .Values.list "z" | toJson }}|{{ has "c" .Values.list }})",
       R"(["b","a","c","a","z"]|true)"},
      {R"({{ compact (list "a" "" 0 "b") | toJson }})", R"(["a","b"])"},
      {R"({{ uniq .Values.list | toJson }})", R"(["b","a","c"])"},
      {R"({{ sortAlpha .Values.list | toJson }})", R"(["a","a","b","c"])"},
      {R"({{ index .Values.list 1 }})", "a"},
      {R"({{ index .Values.map "b" }})", "2"},
      {R"({{ index .Values "nested" "inner" "k" }})", "v"},
      // Dicts
      {R"({{ get (dict "a" 1) "a" }}|{{ get (dict "a" 1) "z" }}|)", "1||"},
      {R"({{ $d := dict }}{{ $_ := set $d "k" "v" }}{{ toJson $d }})"
       R"({{ $_ := unset $d "k" }}{{ toJson $d }})",
       R"({"k":"v"}{})"},
      {R"({{ hasKey .Values.map "a" }})", "true"},
      {R"({{ hasKey .Values.map "z" }})", "false"},
      {R"({{ keys .Values.map | sortAlpha | toJson }})", R"(["a","b"])"},
      {R"({{ pick .Values.map "a" | toJson }}|{{ omit .Values.map "a" | toJson }})",
       R"({"a":1}|{"b":2})"},
      {R"({{ merge (dict "k" "dst") (dict "k" "src" "n" "new") | toJson }})",
       R"({"k":"dst","n":"new"})"},  // the destination wins
      {R"({{ merge (dict "m" (dict "a" 1)) (dict "m" (dict "a" 2 "b" 3)) | toJson }})",
       R"({"m":{"a":1,"b":3}})"},  // and the merge is deep
      {R"({{ mergeOverwrite (dict "k" "dst" "t" true) (dict "k" "src" "t" false) | toJson }})",
       R"({"k":"src","t":false})"},
      {R"({{ $c := deepCopy .Values.nested }}{{ $_ := set $c "inner" "changed" }})"
       R"({{ .Values.nested.inner.k }}|{{ $c.inner }})",
       "v|changed"},
      // Math: Sprig converts to int64
      {R"({{ add 1 2 3 }})", "6"},
      {R"({{ add .Values.num 1 }})", "1000001"},
      {R"({{ add1 .Values.small }})", "43"},
      {R"({{ sub 5 3 }})", "2"},
      {R"({{ mul 2 3 4 }})", "24"},
      {R"({{ div 7 2 }}|{{ mod 7 2 }}|{{ max 1 5 3 }}|{{ min 4 2 9 }})", "3|1|5|2"},
      // Helm: include, template, tpl, required, the built-in objects
      {R"({{ include "t.greet" "x" }}|{{ template "t.greet" "y" }})", "hi x|hi y"},
      {R"({{ include "t.greet" "x" | upper }})", "HI X"},
      {R"({{ tpl .Values.tplText . }})", "hello-rel"},
      {R"({{ tpl "{{ include \"t.greet\" .Values.str }}" . }})", "hi hello"},
      {R"({{ required "need str" .Values.str }}|{{ required "need zero" .Values.zero }})",
       "hello|0"},  // 0 is a value; only nil and "" are missing
      {R"({{ .Release.Name }})", "rel"},
      {R"({{ .Release.Namespace }})", "ns"},
      {R"({{ .Chart.Name }})", "t"},
      {R"({{ .Chart.Version }})", "1.2.3+build.5"},
      {R"({{ .Chart.AppVersion }})", "9.9"},
      {R"({{ .Capabilities.KubeVersion.Version }})", "v1.29.0"},
      {R"({{ .Template.Name }}|{{ .Template.BasePath }})", "t/templates/NOTES.txt|t/templates"},
      // Control structures
      {R"({{ range $k, $v := .Values.map }}{{ $k }}={{ $v }};{{ end }})", "a=1;b=2;"},
      {R"({{ range $i, $v := .Values.list }}{{ $i }}{{ $v }}{{ end }})", "0b1a2c3a"},
      {R"({{ range .Values.emptyList }}x{{ else }}none{{ end }}|{{ range 3 }}{{ . }}{{ end }})",
       "none|012"},
      {R"({{ range .Values.list }}{{ if eq . "c" }}{{ break }}{{ end }})"
       R"({{ if eq . "a" }}{{ continue }}{{ end }}{{ . }}{{ end }})",
       "b"},
      {R"({{ with .Values.empty }}set{{ else }}unset{{ end }})", "unset"},
      {R"({{ with .Values.str }}{{ . }}{{ end }})", "hello"},
      {R"({{ with .Values.empty }}a{{ else with .Values.str }}{{ . }}{{ else }}c{{ end }})",
       "hello"},
      {R"({{ if .Values.zero }}a{{ else if .Values.flag }}b{{ else }}c{{ end }})", "b"},
      {R"({{ $x := 1 }}{{ range list 1 2 }}{{ $x = add $x . }}{{ end }}{{ $x }})", "4"},
      {R"(a {{- "b" -}} c)", "abc"},
      {R"(x{{/* gone */}}y{{- /* trimmed */ -}} z)", "xyz"},
      {R"({{ "}}" }}|{{ `raw "x"` }})", R"(}}|raw "x")"},
      {R"({{ block "t.blk" "z" }}[{{ . }}]{{ end }})", "[z]"},
  };
}

// Evaluation errors, each reached by a values file that picks its branch.
struct ErrorCase {
  std::string name;
  std::string tmpl;
  std::string reason;
};

std::vector<ErrorCase> ErrorCases() {
  return {
      {"required", R"({{ required "a database DSN is required" .Values.empty }})",
       "a database DSN is required"},
      {"required-nil", R"({{ required "give nil a value" .Values.nil }})", "give nil a value"},
      {"fail", R"({{ fail "stop here" }})", "stop here"},
      {"eq-types", R"({{ eq .Values.small "42" }})", "incompatible types for comparison"},
      {"unknown-function", R"({{ lookup "v1" "Secret" "ns" "x" }})",
       "function 'lookup' is outside the supported subset"},
      {"method-call", R"({{ .Capabilities.APIVersions.Has "x" }})", "method calls are outside"},
      {"nil-field", R"({{ $n := .Values.nil }}{{ $n.x }})",
       "nil pointer evaluating interface {}.x"},
      {"missing-key", R"({{ index .Values "nope" }})", "index: key 'nope' is not defined"},
      {"bad-semver", R"({{ semverCompare ">=1.0" "not-a-version" }})",
       "invalid semantic version 'not-a-version'"},
      {"len-nil", R"({{ len .Values.nil }})", "len of nil pointer"},
      {"range-text", R"({{ range .Values.str }}{{ end }})", "range can't iterate over hello"},
      {"no-template", R"({{ include "t.missing" . }})", "no template named 't.missing'"},
      // Go templates do not convert arguments: values.yaml numbers are float64.
      {"string-param", R"({{ upper .Values.num }})",
       "upper: wrong type for value; expected string; got float64"},
      {"int-param", R"({{ indent .Values.small "x" }})",
       "indent: wrong type for value; expected int; got float64"},
      {"bool-param", R"({{ ternary "y" "n" "true" }})",
       "ternary: wrong type for value; expected bool; got string"},
  };
}

TEST(HelmChartRenderer, TemplateFunctionsBehaveAsHelmAndSprigDocumentThem) {
  TempDir tmp = MakeTemp();
  fs::path chart = tmp.path() / "t";
  WriteFile(tmp, "t/Chart.yaml",
            "apiVersion: v2\nname: t\nversion: 1.2.3+build.5\nappVersion: \"9.9\"\n");
  WriteFile(tmp, "t/values.yaml", kFunctionValues);
  WriteFile(tmp, "t/templates/_helpers.tpl", "{{- define \"t.greet\" -}}hi {{ . }}{{- end -}}\n");
  std::vector<FunctionCase> cases = FunctionCases();
  std::string notes;
  for (size_t i = 0; i < cases.size(); ++i) {
    absl::StrAppend(&notes, "[[", i, "]]", cases[i].tmpl, "[[/", i, "]]\n");
  }
  for (const ErrorCase& e : ErrorCases()) {
    absl::StrAppend(&notes, "{{- if eq .Values.case \"", e.name, "\" }}", e.tmpl, "{{ end }}\n");
  }
  WriteFile(tmp, "t/templates/NOTES.txt", notes);
  std::vector<std::string> args = {"--release", "rel", "--namespace", "ns"};
  for (const ErrorCase& e : ErrorCases()) {
    args.push_back("--variant");
    args.push_back(e.name + "=" +
                   WriteFile(tmp, e.name + ".yaml", "case: " + e.name + "\n").string());
  }
  Rendered r = Render(tmp, "out", args, chart);
  ASSERT_EQ(r.errors, "") << r.result.output;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].tmpl);
    const std::string open = absl::StrCat("[[", i, "]]"), close = absl::StrCat("[[/", i, "]]");
    size_t from = r.notes.find(open), to = r.notes.find(close);
    ASSERT_NE(from, std::string::npos);
    ASSERT_NE(to, std::string::npos);
    EXPECT_EQ(r.notes.substr(from + open.size(), to - from - open.size()), cases[i].expected);
  }
  for (const ErrorCase& e : ErrorCases()) {
    SCOPED_TRACE(e.tmpl);
    Rendered failed = Load(r.dir / "variants" / e.name);
    EXPECT_THAT(failed.errors, HasSubstr(e.reason));
    EXPECT_THAT(failed.errors, HasSubstr("t/templates/NOTES.txt")) << "the template is named";
  }
}

}  // namespace
}  // namespace goodput::testing
