// Scale-out on one machine (docs/scaling.md): the same simulated fleet, sent through the real
// APIs, once to one replica of each service and once to two replicas of each against one
// PostgreSQL and one Redis — ingest behind a load balancer, ofu as two shards, mfu and
// alerting as two interchangeable replicas — must give the same job-level OFU windows, job
// summaries, MFU verdicts, alerts and notifications, each notification delivered once. A
// second two-replica run kills one replica of every service with SIGKILL midway; the
// survivors carry on and the restarted replicas catch up to the same results.
//
// Peers are addressed as a deployment addresses a Kubernetes Service: one channel per
// client, whose connection lands on one replica and moves to another when that one is gone.
// Here that is gRPC's `ipv4:` list of every replica's address (pick_first: the first that
// answers); each client lists the replicas in its own order, so the load is spread.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "goodput/v1/alert.grpc.pb.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "goodput/v1/ofu.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "sdk/cpp/reporter.h"
#include "services/platform/migrations.h"
#include "tests/support/free_port.h"
#include "tests/support/postgres_server.h"
#include "tests/support/redis_server.h"
#include "tests/support/service_process.h"
#include "tests/support/test_steps.h"
#include "tests/support/webhook_receiver.h"
#include "tools/fleetsim/fleet_proto.h"
#include "tools/fleetsim/fleet_sim.h"
#include "tools/fleetsim/platform_sink.h"

namespace goodput::testing {
namespace {

namespace v1 = ::goodput::v1;

constexpr char kCluster[] = "scale";
constexpr char kServices[4][10] = {"ingest", "ofu", "mfu", "alerting"};
constexpr absl::Duration kSettleTimeout = absl::Seconds(150);

std::unique_ptr<grpc::ClientContext> Ctx(int seconds = 30) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  return ctx;
}

google::protobuf::Timestamp At(int64_t unix_s) {
  google::protobuf::Timestamp ts;
  ts.set_seconds(unix_s);
  return ts;
}

// A small fleet that ends just before `end_unix_s`, with at least two injected in-job drops
// and two FLOPs miscounts, so that alerts, verdicts and notifications have something to agree
// on: three workloads of two or three 8-GPU jobs of 75 to 120 minutes each.
absl::StatusOr<sim::FleetConfig> PlanFleet(int64_t end_unix_s) {
  sim::FleetConfig c = sim::SmallFleetConfig(1);
  c.workloads = 3;
  c.jobs_per_workload_min = 2;
  c.jobs_per_workload_max = 3;
  c.workload_start_spread_s = 1800;
  c.gap_between_jobs_max_s = 600;
  c.job_duration_min_s = 75 * 60;
  c.job_duration_max_s = 120 * 60;
  c.gpu_counts = {{8, 1}};
  c.models.resize(1);
  c.in_job_regression_probability = 0.5;
  c.regression_factor_min = 2.0;
  c.regression_min_s = 1200;
  c.miscount_moe_probability = 0.3;
  c.miscount_recompute_probability = 0.2;
  c.mfu_report_probability = 1;
  c.straggler_job_probability = 0.3;
  for (uint64_t seed = 1; seed < 500; ++seed) {
    c.seed = seed;
    absl::StatusOr<std::unique_ptr<sim::FleetSimulator>> fleet = sim::FleetSimulator::Create(c);
    if (!fleet.ok()) return fleet.status();
    int drops = 0, miscounts = 0;
    for (const sim::JobTruth& job : (*fleet)->jobs()) {
      drops += job.drops.empty() ? 0 : 1;
      miscounts += job.miscount == sim::Miscount::kNone ? 0 : 1;
    }
    if (drops >= 2 && miscounts >= 2) {
      c.start_unix_s = end_unix_s - ((*fleet)->end_s() - c.start_unix_s) - 60;
      return c;
    }
  }
  return absl::NotFoundError("no seed below 500 gives two drops and two miscounts");
}

// What a run leaves, in terms that do not depend on how many replicas made it.
struct Outcome {
  // "job start" -> job-level OFU of the window (all digits), its samples and GPUs.
  std::map<std::string, std::string> windows;
  std::map<std::string, std::string> summaries;  // job -> JobOfuSummary
  std::map<std::string, std::string> verdicts;   // job -> job-level Divergence
  std::vector<std::string> alerts;               // "kind job onset state", sorted
  std::vector<std::string> notifications;        // "kind job onset target state", sorted
  std::vector<std::string> repeated_posts;       // idempotency keys posted more than once
  std::string fleet_ofu;                         // GetFleetSummary by workload
  std::string fleet_mfu;                         // GetFleetReport with its jobs
};

// One PostgreSQL, one Redis, a webhook receiver and `replicas` of each service wired as a
// deployment wires them.
class Platform {
 public:
  explicit Platform(int replicas) : replicas_(replicas) {}

  void Start() {
    ASSERT_NO_FATAL_FAILURE(StartPostgres(&pg_));
    ASSERT_NO_FATAL_FAILURE(StartRedis(&redis_));
    absl::StatusOr<platform::MigrationReport> migrated =
        platform::ApplyMigrations(pg_->Dsn(kDatabase), SourceDir() / "migrations");
    ASSERT_TRUE(migrated.ok()) << migrated.status();
    absl::StatusOr<int> hook_port = FreePort();
    ASSERT_TRUE(hook_port.ok());
    hooks_ = std::make_unique<testing::WebhookReceiver>(*hook_port);
    ASSERT_TRUE(hooks_->ok());
    hook_url_ = absl::StrCat("http://127.0.0.1:", *hook_port, "/hook");
    for (int s = 0; s < 4; ++s) {
      for (int r = 0; r < replicas_; ++r) {
        absl::StatusOr<int> port = FreePort();
        ASSERT_TRUE(port.ok());
        ports_[s].push_back(*port);
      }
    }
    processes_.resize(4);
    for (int s = 0; s < 4; ++s) {
      processes_[s].resize(replicas_);
      for (int r = 0; r < replicas_; ++r) ASSERT_NO_FATAL_FAILURE(StartReplica(s, r));
    }
  }

  // Service `s` (index into kServices), replica `r`.
  void StartReplica(int s, int r) {
    StartService(
        {.binary = BuiltBinary(absl::StrCat("services/", kServices[s], "/goodput-", kServices[s])),
         .config_yaml = ConfigOf(s, r)},
        &processes_[s][r]);
  }

  void Kill(int s, int r) {
    ASSERT_TRUE(processes_[s][r]->process().Signal(SIGKILL).ok());
    (void)processes_[s][r]->process().Wait(absl::Seconds(30));
  }

  // A channel as a client `r` of service `s` would get through its Service address: every
  // replica, starting at `r`'s.
  std::shared_ptr<grpc::Channel> Channel(int s, int r) const {
    return grpc::CreateChannel(Target(s, r), grpc::InsecureChannelCredentials());
  }

  // `ipv4:` target of every replica of service `s`, starting at replica `first`.
  std::string Target(int s, int first) const {
    std::vector<std::string> addresses;
    for (int i = 0; i < replicas_; ++i) {
      addresses.push_back(absl::StrCat("127.0.0.1:", ports_[s][(first + i) % replicas_]));
    }
    return absl::StrCat("ipv4:", absl::StrJoin(addresses, ","));
  }

  PostgresServer& pg() { return *pg_; }
  testing::WebhookReceiver& hooks() { return *hooks_; }
  int replicas() const { return replicas_; }
  std::string LogTails() {
    std::string out;
    for (int s = 0; s < 4; ++s) {
      for (int r = 0; r < replicas_; ++r) {
        if (processes_[s][r] == nullptr) continue;
        absl::StrAppend(&out, "--- goodput-", kServices[s], " ", r, "\n",
                        processes_[s][r]->process().LogTail(), "\n");
      }
    }
    return out;
  }

 private:
  std::string ConfigOf(int s, int r) const {
    std::string yaml = absl::StrCat(PostgresConfigYaml(*pg_), RedisConfigYaml(*redis_),
                                    "grpc:\n  port: ", ports_[s][r], "\n");
    const std::string service = kServices[s];
    if (service == "ingest") {
      // The fleet is replayed: its running jobs' samples are hours old.
      absl::StrAppend(&yaml, "ingest:\n  jobs:\n    silent_after_s: 172800\n");
    } else if (service == "ofu") {
      absl::StrAppend(&yaml, "ofu:\n  shard_index: ", r, "\n  shard_count: ", replicas_,
                      "\n  poll_interval_s: 0.2\n  idle_flush_s: 5\n"
                      "  forward:\n    mfu_address: \"",
                      Target(2, r), "\"\n    alerting_address: \"", Target(3, r),
                      "\"\n    timeout_s: 5\n");
    } else if (service == "mfu") {
      // Every replica has the same configuration, as pods of one Deployment do.
      absl::StrAppend(&yaml, "mfu:\n  reconcile: {poll_interval_s: 0.2}\n  forward:\n",
                      "    alerting_address: \"", Target(3, r), "\"\n    timeout_s: 5\n",
                      "    retry_backoff_s: 1\n");
    } else {
      absl::StrAppend(&yaml,
                      "alerting:\n  sweep_interval_s: 1\n  settle_s: 10\n"
                      "  telemetry_stopped_after_s: 172800\n"
                      "  default_targets: [hook]\n  delivery: {poll_interval_s: 0.2}\n"
                      "  targets:\n    - {name: hook, kind: webhook, url: \"",
                      hook_url_, "\", secret: s3cret}\n");
    }
    return yaml;
  }

  int replicas_;
  std::unique_ptr<PostgresServer> pg_;
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<testing::WebhookReceiver> hooks_;
  std::string hook_url_;
  std::vector<int> ports_[4];
  std::vector<std::vector<std::unique_ptr<ServiceProcess>>> processes_;
};

// The fleet through the platform's APIs as goodput-demo sends it (sim::PlatformSink): batch k
// (and the calls after it) to ingest client k mod replicas, a call refused while a replica is
// down retried, as a node agent behind a load balancer does; job i's MFU reporter on mfu
// client i mod replicas. EndJob is sent by EndJobs, once the platform has caught up.
sim::PlatformSinkOptions SinkOptions(Platform* platform) {
  sim::PlatformSinkOptions sink{.cluster = kCluster,
                                .source = "scale-out-test",
                                .batch_id_prefix = "scale-",
                                .reporter_max_backoff = absl::Seconds(1),
                                .reporter_close_timeout = absl::Seconds(60),
                                .retries = 100,
                                .retry_pause = absl::Milliseconds(200),
                                .on_error = [](const std::string& e) { ADD_FAILURE() << e; }};
  for (int r = 0; r < platform->replicas(); ++r) {
    sink.ingest.push_back(platform->Channel(0, r));
    sink.mfu_endpoints.push_back(platform->Target(2, r));
    sink.mfu_channels.push_back(platform->Channel(2, r));
  }
  return sink;
}

// Reads what the platform made of the fleet, through the APIs of replica 0 of each service
// (every replica answers from PostgreSQL) and the webhook's log.
class Reader {
 public:
  explicit Reader(Platform* platform)
      : platform_(platform),
        ofu_(v1::OfuService::NewStub(platform->Channel(1, 0))),
        mfu_(v1::MfuService::NewStub(platform->Channel(2, 0))),
        alerting_(v1::AlertService::NewStub(platform->Channel(3, 0))) {}

  // Job-level windows of `job_id`: "start" -> the window.
  std::map<int64_t, v1::OfuWindow> Windows(const std::string& job_id) {
    std::map<int64_t, v1::OfuWindow> out;
    v1::GetJobOfuRequest request;
    request.mutable_job()->set_cluster(kCluster);
    request.mutable_job()->set_job_id(job_id);
    request.set_page_size(1000);
    while (true) {
      v1::GetJobOfuResponse page;
      grpc::Status status = ofu_->GetJobOfu(Ctx().get(), request, &page);
      if (!status.ok()) return {};
      for (const v1::OfuWindow& w : page.windows()) out[w.start_time().seconds()] = w;
      if (page.next_page_token().empty()) return out;
      request.set_page_token(page.next_page_token());
    }
  }

  std::vector<v1::Alert> Alerts() {
    std::vector<v1::Alert> all;
    v1::ListAlertsRequest request;
    request.set_cluster(kCluster);
    request.set_page_size(1000);
    while (true) {
      v1::ListAlertsResponse page;
      grpc::Status status = alerting_->ListAlerts(Ctx().get(), request, &page);
      EXPECT_TRUE(status.ok()) << status.error_message();
      if (!status.ok()) return all;
      all.insert(all.end(), page.alerts().begin(), page.alerts().end());
      if (page.next_page_token().empty()) return all;
      request.set_page_token(page.next_page_token());
    }
  }

  int64_t Value(const std::string& sql) {
    absl::StatusOr<std::string> v = platform_->pg().QueryValue(kDatabase, sql);
    return v.ok() && !v->empty() ? std::stoll(*v) : -1;
  }

  // True once every pushed sample is in ofu's windows, every job-level window (as its
  // latest revision) has reached mfu and alerting, mfu has reconciled everything and sent
  // every divergence event, and alerting has evaluated every window. With `ended`, also every
  // window final, no alert open and every notification delivered.
  bool CaughtUp(const std::map<std::string, int64_t>& pushed, bool ended, std::string* why) {
    std::set<std::string> ofu_windows;
    for (const auto& [job_id, count] : pushed) {
      v1::GetJobSummaryRequest request;
      request.mutable_job()->set_cluster(kCluster);
      request.mutable_job()->set_job_id(job_id);
      v1::GetJobSummaryResponse response;
      grpc::Status status = ofu_->GetJobSummary(Ctx().get(), request, &response);
      if (!status.ok() || response.summary().sample_count() < count) {
        *why = absl::StrCat("ofu has not counted every sample of ", job_id);
        return false;
      }
      for (const auto& [start, w] : Windows(job_id)) {
        if (ended && !w.finalized()) {
          *why = absl::StrCat("window ", start, " of ", job_id, " is not final");
          return false;
        }
        ofu_windows.insert(absl::StrCat(job_id, " ", start, " ", w.revision()));
      }
    }
    for (const char* table : {"mfu_ofu_windows", "alert_windows"}) {
      absl::StatusOr<std::string> received = platform_->pg().QueryValue(
          kDatabase, absl::StrCat("SELECT coalesce(string_agg(job_id || ' ' || "
                                  "extract(epoch FROM start_time)::bigint || ' ' || revision, "
                                  "'|' ORDER BY 1), '') FROM ",
                                  table, " WHERE cluster = '", kCluster, "'"));
      std::vector<std::string> rows = received.ok()
                                          ? absl::StrSplit(*received, '|', absl::SkipEmpty())
                                          : std::vector<std::string>{};
      if (std::set<std::string>(rows.begin(), rows.end()) != ofu_windows) {
        *why = absl::StrCat(table, " differs from ofu's windows (", rows.size(), " vs ",
                            ofu_windows.size(), ")");
        return false;
      }
    }
    if (Value("SELECT count(*) FROM mfu_reconcile_pending") != 0) {
      *why = "mfu has jobs to reconcile";
      return false;
    }
    if (Value("SELECT count(*) FROM mfu_event_producers p LEFT JOIN mfu_forward_state f ON "
              "f.producer = p.producer AND f.target = 'alerting' WHERE coalesce(f.acked_seq, 0) "
              "< (SELECT coalesce(max(sequence), 0) FROM mfu_divergence_events e "
              "WHERE e.producer = p.producer)") != 0) {
      *why = "mfu has divergence events alerting has not acknowledged";
      return false;
    }
    if (Value("SELECT count(*) FROM alert_job_state WHERE evaluated_end IS NULL OR "
              "evaluated_end < last_window_end") != 0) {
      *why = "alerting has windows to evaluate";
      return false;
    }
    if (!ended) return true;
    if (Value("SELECT count(*) FROM alerts WHERE state <> 'resolved'") != 0) {
      *why = "alerts are still open";
      return false;
    }
    const int64_t undelivered =
        Value("SELECT count(*) FROM alert_outbox WHERE status <> 'delivered'");
    if (undelivered != 0) {
      *why = absl::StrCat(undelivered, " notifications are not delivered");
      return false;
    }
    if (static_cast<int64_t>(platform_->hooks().keys().size()) <
        Value("SELECT count(*) FROM alert_outbox")) {
      *why = "the webhook has not received every delivered notification";
      return false;
    }
    return true;
  }

  // `span`: the fleet's time range, for the fleet figures.
  Outcome Read(const std::map<std::string, int64_t>& pushed, const v1::TimeRange& span) {
    Outcome out;
    {
      v1::GetFleetSummaryRequest request;
      *request.mutable_time_range() = span;
      request.set_cluster(kCluster);
      request.add_group_by(v1::FLEET_GROUP_BY_WORKLOAD);
      v1::GetFleetSummaryResponse response;
      grpc::Status status = ofu_->GetFleetSummary(Ctx().get(), request, &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      out.fleet_ofu = response.ShortDebugString();
    }
    {
      v1::GetFleetReportRequest request;
      *request.mutable_time_range() = span;
      request.set_cluster(kCluster);
      request.set_include_jobs(true);
      request.set_page_size(1000);
      v1::GetFleetReportResponse response;
      grpc::Status status = mfu_->GetFleetReport(Ctx().get(), request, &response);
      EXPECT_TRUE(status.ok()) << status.error_message();
      out.fleet_mfu = response.ShortDebugString();
    }
    for (const auto& [job_id, count] : pushed) {
      for (const auto& [start, w] : Windows(job_id)) {
        out.windows[absl::StrCat(job_id, " ", start)] = absl::StrFormat(
            "ofu=%.17g samples=%d gpus=%d", w.ofu(), w.sample_count(), w.gpus_reporting());
      }
      v1::GetJobSummaryRequest summary_request;
      summary_request.mutable_job()->set_cluster(kCluster);
      summary_request.mutable_job()->set_job_id(job_id);
      v1::GetJobSummaryResponse summary;
      grpc::Status status = ofu_->GetJobSummary(Ctx().get(), summary_request, &summary);
      EXPECT_TRUE(status.ok()) << job_id << ": " << status.error_message();
      out.summaries[job_id] = summary.summary().ShortDebugString();
      v1::GetReconciliationRequest reconcile_request;
      reconcile_request.mutable_job()->set_cluster(kCluster);
      reconcile_request.mutable_job()->set_job_id(job_id);
      v1::GetReconciliationResponse reconciliation;
      status = mfu_->GetReconciliation(Ctx().get(), reconcile_request, &reconciliation);
      EXPECT_TRUE(status.ok()) << job_id << ": " << status.error_message();
      out.verdicts[job_id] = reconciliation.verdict().ShortDebugString();
    }
    std::map<std::string, std::string> alert_names;  // alert id -> "kind job onset"
    for (const v1::Alert& a : Alerts()) {
      const std::string name = absl::StrCat(
          v1::AlertKind_Name(a.kind()), " ", a.job().job_id(), " ",
          a.evidence().onset_time().seconds(),
          a.gpus().empty() ? "" : absl::StrCat(" ", a.gpus(0).host(), "/", a.gpus(0).gpu_index()));
      alert_names[a.alert_id()] = name;
      out.alerts.push_back(absl::StrCat(name, " ", v1::AlertState_Name(a.state()),
                                        a.found_after_job_end() ? " after-end" : ""));
    }
    std::map<std::string, int> posts;
    for (const std::string& key : platform_->hooks().keys()) ++posts[key];
    for (const auto& [key, n] : posts) {
      if (n > 1) out.repeated_posts.push_back(key);
      std::vector<std::string> parts = absl::StrSplit(key, ':');
      if (parts.size() != 3 || !alert_names.contains(parts[0])) {
        out.notifications.push_back(absl::StrCat("unknown ", key));
        continue;
      }
      out.notifications.push_back(
          absl::StrCat(alert_names[parts[0]], " ", parts[1], " ", parts[2]));
    }
    std::sort(out.alerts.begin(), out.alerts.end());
    std::sort(out.notifications.begin(), out.notifications.end());
    return out;
  }

 private:
  Platform* platform_;
  std::unique_ptr<v1::OfuService::Stub> ofu_;
  std::unique_ptr<v1::MfuService::Stub> mfu_;
  std::unique_ptr<v1::AlertService::Stub> alerting_;
};

struct RunOptions {
  int replicas = 1;
  // Kill one replica of every service (SIGKILL) a third of the way through the fleet and
  // restart them at two thirds.
  bool kill_midway = false;
};

// Sends the fleet planned for `config` to a fresh platform and reads the outcome.
void RunFleet(const sim::FleetConfig& config, RunOptions options, Outcome* outcome) {
  const bool failed_before = ::testing::Test::HasFailure();
  Platform platform(options.replicas);
  ASSERT_NO_FATAL_FAILURE(platform.Start());
  absl::StatusOr<std::unique_ptr<sim::FleetSimulator>> fleet = sim::FleetSimulator::Create(config);
  ASSERT_TRUE(fleet.ok()) << fleet.status();
  sim::PlatformSinkOptions sink_options = SinkOptions(&platform);
  bool restarted = false;
  if (options.kill_midway) {
    // About how many batches the fleet makes (8 GPUs a sample every sample_interval_s).
    int64_t samples = 0;
    for (const sim::JobTruth& job : (*fleet)->jobs()) {
      samples += int64_t{job.gpu_count} * (job.end_s - job.start_s) / config.sample_interval_s;
    }
    const int batches = static_cast<int>(samples / 2000);
    sink_options.after_batch = [&platform, &restarted, batches](int64_t done) {
      // Not the same replica index everywhere: ingest 0, ofu shard 1, mfu 0, alerting 1.
      if (done == batches / 3) {
        for (int s = 0; s < 4; ++s) ASSERT_NO_FATAL_FAILURE(platform.Kill(s, s % 2));
      } else if (done == 2 * batches / 3) {
        for (int s = 0; s < 4; ++s) ASSERT_NO_FATAL_FAILURE(platform.StartReplica(s, s % 2));
        restarted = true;
      }
    };
  }
  sim::PlatformSink sink(std::move(sink_options));
  while ((*fleet)->Step(sink)) {
  }
  sink.Flush();
  EXPECT_EQ(sink.refused(), 0) << absl::StrJoin(sink.refusal_examples(), "\n");
  EXPECT_EQ(sink.mfu_not_taken(), 0) << sink.mfu_error();
  EXPECT_EQ(sink.mfu_error(), "");
  ASSERT_EQ(restarted, options.kill_midway);
  ASSERT_FALSE(!failed_before && ::testing::Test::HasFailure()) << platform.LogTails();

  Reader reader(&platform);
  std::string why;
  ASSERT_TRUE(PollUntil([&] { return reader.CaughtUp(sink.pushed_per_job(), false, &why); },
                        kSettleTimeout))
      << why << "\n"
      << platform.LogTails();
  // Every shard consumed its part of the sample stream.
  EXPECT_EQ(reader.Value(absl::StrCat("SELECT count(*) FROM ofu_consumer_state WHERE "
                                      "shard_count = ",
                                      options.replicas, " AND samples_consumed > 0")),
            options.replicas);
  sink.EndJobs();
  ASSERT_TRUE(
      PollUntil([&] { return reader.CaughtUp(sink.pushed_per_job(), true, &why); }, kSettleTimeout))
      << why << "\n"
      << platform.LogTails();
  v1::TimeRange span;
  *span.mutable_start_time() = At(config.start_unix_s);
  *span.mutable_end_time() = At((*fleet)->end_s() + 3600);
  *outcome = reader.Read(sink.pushed_per_job(), span);
}

// The differences between two outcomes, one line each (empty when they agree).
template <typename Container>
std::vector<std::string> Differences(const Container& a, const Container& b) {
  std::vector<typename Container::value_type> only_a, only_b;
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(only_a));
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(only_b));
  auto text = [](const auto& item) {
    if constexpr (std::is_same_v<std::decay_t<decltype(item)>, std::string>) {
      return item;
    } else {
      return absl::StrCat(item.first, ": ", item.second);
    }
  };
  for (const auto& item : only_a) out.push_back("one replica only:  " + text(item));
  for (const auto& item : only_b) out.push_back("two replicas only: " + text(item));
  return out;
}

void ExpectSameOutcome(const Outcome& one, const Outcome& two) {
  EXPECT_EQ(one.windows.size(), two.windows.size());
  EXPECT_EQ(Differences(one.windows, two.windows), std::vector<std::string>{});
  EXPECT_EQ(Differences(one.summaries, two.summaries), std::vector<std::string>{});
  EXPECT_EQ(Differences(one.verdicts, two.verdicts), std::vector<std::string>{});
  EXPECT_EQ(Differences(one.alerts, two.alerts), std::vector<std::string>{});
  EXPECT_EQ(Differences(one.notifications, two.notifications), std::vector<std::string>{});
  EXPECT_EQ(two.repeated_posts, std::vector<std::string>{});
  EXPECT_EQ(one.fleet_ofu, two.fleet_ofu);
  EXPECT_EQ(one.fleet_mfu, two.fleet_mfu);
}

// One test, three runs of the same fleet on fresh databases: one replica of each service,
// two, and two with one of each killed midway.
TEST(ScaleOut, TwoReplicasOfEveryServiceGiveTheSameResultsAsOneEvenWhenOneOfEachIsKilled) {
  absl::StatusOr<sim::FleetConfig> config = PlanFleet(absl::ToUnixSeconds(absl::Now()));
  ASSERT_TRUE(config.ok()) << config.status();
  Outcome one;
  ASSERT_NO_FATAL_FAILURE(RunFleet(*config, {.replicas = 1}, &one));
  // The fleet gives the comparison something to compare.
  ASSERT_GT(one.windows.size(), 500u);
  ASSERT_FALSE(one.alerts.empty());
  ASSERT_FALSE(one.notifications.empty());
  EXPECT_EQ(one.repeated_posts, std::vector<std::string>{});
  int miscounts = 0;
  for (const auto& [job, verdict] : one.verdicts) {
    if (absl::StrContains(verdict, "OVERCOUNT") || absl::StrContains(verdict, "UNDERCOUNT")) {
      ++miscounts;
    }
  }
  EXPECT_GE(miscounts, 1);

  {
    SCOPED_TRACE("two replicas of each service");
    Outcome two;
    ASSERT_NO_FATAL_FAILURE(RunFleet(*config, {.replicas = 2}, &two));
    ExpectSameOutcome(one, two);
  }
  {
    SCOPED_TRACE("two replicas of each service, one of each killed midway and restarted");
    Outcome two;
    ASSERT_NO_FATAL_FAILURE(RunFleet(*config, {.replicas = 2, .kill_midway = true}, &two));
    ExpectSameOutcome(one, two);
  }
}

}  // namespace
}  // namespace goodput::testing
