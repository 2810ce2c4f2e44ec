// The policy stage (services/alerting/policy_stage.h) against a real one-node Slurm (munge,
// slurmctld, slurmd, real sbatch jobs) and a real PostgreSQL: a faulty GPU's alert drains its
// node and requeues its job; an idle job is warned on its stderr (through the outbox and the
// Slurm target), then cancelled once its grace ended; an exempt account is only warned; the
// drain limits hold; a dry run changes nothing in Slurm but records the command; undo resumes
// the node; a replica that stops between the warning and the action leaves it to another,
// which acts exactly once; and a straggler found by the alert engine's own detector drains its
// node end to end.
//
// Findings of the kinds whose detectors are built elsewhere (gpu_fault, job_idle, hung) are
// written into the alert store as the engine writes them (an `alerts` row with its Alert).
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "goodput/v1/alert.pb.h"
#include "services/alerting/alert_engine.h"
#include "services/alerting/policy_stage.h"
#include "services/alerting/targets/slurm_target.h"
#include "services/api/api_convert.h"
#include "tests/alerting_delivery_fixture.h"
#include "tests/support/service_process.h"
#include "tests/support/slurm_cluster.h"

namespace goodput::alerting {
namespace {

constexpr char kMarkerSecret[] = "policy-test-marker-secret";

std::string ReadWhole(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class PolicySlurmTest : public DeliveryTest {
 protected:
  void SetUp() override {
    DeliveryTest::SetUp();
    auto slurm = testing::SlurmCluster::Create();
    ASSERT_TRUE(slurm.ok()) << slurm.status();
    slurm_ = *std::move(slurm);
    actuator_ = std::make_unique<PolicyActuator>(
        std::map<std::string, SlurmAccess>{
            {"eos", SlurmAccess{.slurm_conf = slurm_->slurm_conf().string()}}},
        std::map<std::string, OsmoTargetConfig>{});
  }

  // A rule acting for real (not a dry run) after a five-minute grace.
  static PolicyRule Rule(std::string name, std::vector<Kind> kinds,
                         std::vector<PolicyAction> actions) {
    return PolicyRule{.name = std::move(name),
                      .kinds = std::move(kinds),
                      .actions = std::move(actions),
                      .notify = {"slurm-eos"},
                      .grace = absl::Minutes(5),
                      .min_job_age = absl::Minutes(30),
                      .dry_run = false};
  }

  static PolicyConfig Config(std::vector<PolicyRule> rules) {
    return PolicyConfig{.enabled = true,
                        .audit_targets = {"hook"},
                        .exempt = {.accounts = {"prod"}},
                        .rules = std::move(rules),
                        .default_limits = {.max_drains_per_hour = 5, .max_drained_share = 1.0}};
  }

  std::unique_ptr<PolicyStage> Stage(PolicyConfig config, const std::string& replica = "r1") {
    return std::make_unique<PolicyStage>(
        pool_.get(), actuator_.get(),
        PolicyStageOptions{
            .config = std::move(config), .replica = replica, .clock = clock_.AsFunction()},
        platform::Logger());
  }

  PolicyStepResult PassOrDie(PolicyStage& stage) {
    absl::StatusOr<PolicyStepResult> r = stage.Step();
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : PolicyStepResult{};
  }

  std::string RunningJob() {
    absl::StatusOr<std::string> job = slurm_->SubmitSleepJob({});
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return "";
    absl::Status s = slurm_->WaitForJobState(*job, "RUNNING", absl::Seconds(60));
    EXPECT_TRUE(s.ok()) << s;
    return *job;
  }

  // Registers the job as the prolog does (partition and QOS among its labels), started two
  // hours before the test's clock.
  void RegisterJob(const std::string& job, const std::string& team = "ml") {
    ASSERT_TRUE(pg_->Execute("goodput",
                             absl::StrCat("INSERT INTO jobs (cluster, job_id, scheduler, team, "
                                          "user_name, state, start_time, labels) VALUES ('eos', '",
                                          job, "', 'slurm', '", team, "', 'alice', 'running', ",
                                          "to_timestamp(", absl::ToUnixSeconds(clock_.Now()) - 7200,
                                          "), '{\"partition\": \"debug\", \"qos\": \"normal\"}')"))
                    .ok());
  }

  // A firing alert of `kind` on `job` (naming GPU 3 of `host` when set), as the engine stores
  // it; returns its id.
  int64_t AddAlert(Kind kind, const std::string& job, const std::string& summary,
                   const std::string& team = "ml", const std::string& host = "") {
    v1::Alert a;
    a.set_kind(KindToProtoForTest(kind));
    a.set_state(v1::ALERT_STATE_FIRING);
    a.mutable_job()->set_cluster("eos");
    a.mutable_job()->set_job_id(job);
    a.set_summary(summary);
    a.set_description("what the detector saw");
    if (!host.empty()) {
      v1::GpuRef* g = a.add_gpus();
      g->set_host(host);
      g->set_gpu_index(3);
    }
    for (const auto& [k, v] :
         std::map<std::string, std::string>{{"cluster", "eos"},
                                            {"job_id", job},
                                            {"scheduler", "slurm"},
                                            {"team", team},
                                            {"user", "alice"},
                                            {"kind", std::string(KindName(kind))},
                                            {"severity", "critical"},
                                            {"partition", "debug"},
                                            {"qos", "normal"}}) {
      (*a.mutable_labels())[k] = v;
    }
    *a.mutable_start_time() = api::UnixMsToTimestamp(absl::ToUnixMillis(clock_.Now()));
    const std::string fp = Fingerprint(kind, "eos", job, host);
    const std::string id = Query(absl::StrCat(
        "INSERT INTO alerts (fingerprint, kind, state, severity, cluster, job_id, labels, "
        "alert_pb, start_time, update_time) VALUES ('",
        fp, "', '", KindName(kind), "', 'firing', 'critical', 'eos', '", job, "', '{}', decode('",
        absl::Base64Escape(a.SerializeAsString()), "', 'base64'), now(), now()) RETURNING id"));
    return std::stoll(id);
  }

  static v1::AlertKind KindToProtoForTest(Kind kind) {
    switch (kind) {
      case Kind::kGpuFault:
        return v1::ALERT_KIND_GPU_FAULT;
      case Kind::kJobIdle:
        return v1::ALERT_KIND_JOB_IDLE;
      case Kind::kHung:
        return v1::ALERT_KIND_HUNG;
      case Kind::kStraggler:
        return v1::ALERT_KIND_STRAGGLER;
      default:
        return v1::ALERT_KIND_UNSPECIFIED;
    }
  }

  // The node's state and reason as sinfo prints them.
  std::pair<std::string, std::string> NodeState() {
    absl::StatusOr<std::string> out =
        slurm_->Run({"sinfo", "--noheader", "--Node", "--nodes=gpnode", "--format=%t|%E"});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return {};
    std::vector<std::string> f =
        absl::StrSplit(absl::StripAsciiWhitespace(*out), absl::MaxSplits('|', 1));
    if (f.size() != 2) return {*out, ""};
    return {f[0], f[1]};
  }
  bool NodeDrainedNow() {
    const std::string s = NodeState().first;
    return absl::StartsWith(s, "drain") || s == "drng";
  }

  std::string JobState(const std::string& job) {
    absl::StatusOr<std::string> out = slurm_->Run(
        {"squeue", "--noheader", "--states=all", absl::StrCat("--jobs=", job), "--format=%T"});
    return out.ok() ? std::string(absl::StripAsciiWhitespace(*out)) : "";
  }

  std::vector<v1::PolicyAction> Actions(PolicyStage& stage, const std::string& job = "") {
    v1::ListPolicyActionsRequest req;
    if (!job.empty()) {
      req.mutable_job()->set_cluster("eos");
      req.mutable_job()->set_job_id(job);
    }
    absl::StatusOr<v1::ListPolicyActionsResponse> r = stage.List(req);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::vector<v1::PolicyAction>(r->actions().begin(), r->actions().end())
                  : std::vector<v1::PolicyAction>{};
  }

  int64_t PolicyRows(const std::string& target, const std::string& like = "%") {
    return std::stoll(
        Query(absl::StrCat("SELECT count(*) FROM alert_outbox WHERE kind = 'policy' AND target = '",
                           target, "' AND payload->>'summary' LIKE '", like, "'")));
  }

  std::unique_ptr<DeliveryWorker> SlurmWorker() {
    std::vector<std::unique_ptr<Target>> targets;
    targets.push_back(std::make_unique<SlurmTarget>(
        SlurmTargetConfig{.name = "slurm-eos",
                          .cluster = "eos",
                          .marker_secret = kMarkerSecret,
                          .slurm_conf = slurm_->slurm_conf().string()}));
    return MakeWorker(std::move(targets));
  }

  std::unique_ptr<testing::SlurmCluster> slurm_;
  std::unique_ptr<PolicyActuator> actuator_;
};

TEST_F(PolicySlurmTest, AFaultyGpuDrainsItsNodeAndRequeuesTheJobAndUndoResumesTheNode) {
  const std::string job = RunningJob();
  ASSERT_FALSE(job.empty());
  RegisterJob(job);
  const int64_t alert =
      AddAlert(Kind::kGpuFault, job, "XID 79 (fallen off the bus) on GPU 3", "ml", "gpnode");
  auto stage = Stage(
      Config({Rule("faults", {Kind::kGpuFault}, {PolicyAction::kRequeue, PolicyAction::kDrain})}));

  // Warned: two actions recorded, the owner's warning queued once; nothing done yet.
  EXPECT_EQ(PassOrDie(*stage).recorded, 2);
  EXPECT_EQ(PolicyRows("slurm-eos", "goodput will drain node gpnode and requeue the job after%"),
            1);
  EXPECT_FALSE(NodeDrainedNow());
  EXPECT_EQ(JobState(job), "RUNNING");
  EXPECT_EQ(PassOrDie(*stage).recorded, 0);  // seen again: nothing new

  clock_.Advance(absl::Minutes(5) + absl::Seconds(1));
  EXPECT_EQ(PassOrDie(*stage).acted, 2);
  const auto [state, reason] = NodeState();
  EXPECT_TRUE(absl::StartsWith(state, "drain") || state == "drng") << state;
  EXPECT_EQ(reason, absl::StrCat("goodput: XID 79 (fallen off the bus) on GPU 3, job ", job));
  ASSERT_TRUE(slurm_->WaitForJobState(job, "PENDING", absl::Seconds(30)).ok()) << JobState(job);

  std::vector<v1::PolicyAction> actions = Actions(*stage, job);
  ASSERT_EQ(actions.size(), 2u);
  const v1::PolicyAction& requeue = actions[0];  // newest first; the drain ran first
  const v1::PolicyAction& drain = actions[1];
  EXPECT_EQ(drain.action(), "drain");
  EXPECT_EQ(drain.status(), "done") << drain.outcome();
  EXPECT_EQ(drain.node(), "gpnode");
  EXPECT_EQ(drain.alert_id(), absl::StrCat(alert));
  EXPECT_EQ(drain.finding_summary(), "XID 79 (fallen off the bus) on GPU 3");
  EXPECT_TRUE(absl::StrContains(drain.command(),
                                "scontrol -- update NodeName=gpnode State=DRAIN \"Reason=goodput: "
                                "XID 79"))
      << drain.command();
  EXPECT_EQ(requeue.action(), "requeue");
  EXPECT_EQ(requeue.status(), "done") << requeue.outcome();
  EXPECT_EQ(requeue.outcome(), "requeued");
  EXPECT_EQ(requeue.attempts(), 1);
  // Operators heard of both outcomes.
  EXPECT_EQ(PolicyRows("hook", "goodput drained node gpnode%"), 1);
  EXPECT_EQ(PolicyRows("hook", "goodput requeued the job%"), 1);

  // Nothing happens twice.
  EXPECT_EQ(PassOrDie(*stage).acted, 0);

  // A requeue cannot be undone; the drain can: the node resumes, once.
  v1::UndoPolicyActionRequest undo;
  undo.set_action_id(requeue.action_id());
  undo.set_by("oncall");
  EXPECT_EQ(stage->Undo(undo).status().code(), absl::StatusCode::kFailedPrecondition);
  undo.set_action_id(drain.action_id());
  undo.set_comment("GPU reseated");
  absl::StatusOr<v1::PolicyAction> undone = stage->Undo(undo);
  ASSERT_TRUE(undone.ok()) << undone.status();
  EXPECT_EQ(undone->status(), "undone");
  EXPECT_EQ(undone->undone_by(), "oncall");
  EXPECT_TRUE(absl::StrContains(undone->undo_outcome(), "State=RESUME")) << undone->undo_outcome();
  EXPECT_TRUE(absl::StrContains(undone->undo_outcome(), "GPU reseated"));
  EXPECT_FALSE(NodeDrainedNow()) << NodeState().first;
  absl::StatusOr<v1::PolicyAction> again = stage->Undo(undo);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->undone_time().seconds(), undone->undone_time().seconds());
}

TEST_F(PolicySlurmTest, AnIdleJobIsWarnedOnItsStderrThenCancelledAfterItsGrace) {
  const std::string job = RunningJob();
  ASSERT_FALSE(job.empty());
  RegisterJob(job);
  AddAlert(Kind::kJobIdle, job, "Job idle since 13:40: every GPU at 0% for 45 minutes");
  auto stage =
      Stage(Config({Rule("idle", {Kind::kJobIdle, Kind::kHung}, {PolicyAction::kCancel})}));
  auto worker = SlurmWorker();

  EXPECT_EQ(PassOrDie(*stage).recorded, 1);
  EXPECT_EQ(StepOrDie(*worker, "slurm-eos").delivered, 1);
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        return absl::StrContains(ReadWhole(slurm_->JobStderrPath(job)),
                                 "goodput warning: goodput will cancel the job after");
      },
      absl::Seconds(20)))
      << ReadWhole(slurm_->JobStderrPath(job));

  // Within the grace nothing happens.
  clock_.Advance(absl::Minutes(4));
  EXPECT_EQ(PassOrDie(*stage).acted, 0);
  EXPECT_EQ(JobState(job), "RUNNING");

  clock_.Advance(absl::Minutes(1) + absl::Seconds(1));
  EXPECT_EQ(PassOrDie(*stage).acted, 1);
  ASSERT_TRUE(slurm_->WaitForJobState(job, "CANCELLED", absl::Seconds(30)).ok()) << JobState(job);
  std::vector<v1::PolicyAction> actions = Actions(*stage, job);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), "done");
  EXPECT_EQ(actions[0].command(), "scancel -- " + job);
  EXPECT_EQ(actions[0].outcome(), "cancelled (was RUNNING)");
}

TEST_F(PolicySlurmTest, AFindingThatClearsWithinTheGraceStopsTheLadder) {
  const std::string job = RunningJob();
  ASSERT_FALSE(job.empty());
  RegisterJob(job);
  const int64_t alert = AddAlert(Kind::kHung, job, "Hung in a collective for 12 minutes");
  auto stage =
      Stage(Config({Rule("idle", {Kind::kJobIdle, Kind::kHung}, {PolicyAction::kCancel})}));
  EXPECT_EQ(PassOrDie(*stage).recorded, 1);
  ASSERT_TRUE(pg_->Execute("goodput", absl::StrCat("UPDATE alerts SET state = 'resolved', "
                                                   "end_time = now() WHERE id = ",
                                                   alert))
                  .ok());
  clock_.Advance(absl::Minutes(6));
  EXPECT_EQ(PassOrDie(*stage).acted, 1);
  EXPECT_EQ(JobState(job), "RUNNING");
  std::vector<v1::PolicyAction> actions = Actions(*stage, job);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), "cleared");
  EXPECT_EQ(actions[0].outcome(), "the finding is resolved: nothing done");
}

TEST_F(PolicySlurmTest, AnExemptAccountIsOnlyWarned) {
  const std::string job = RunningJob();
  ASSERT_FALSE(job.empty());
  RegisterJob(job, "prod");
  AddAlert(Kind::kJobIdle, job, "Job idle since 13:40", "prod");
  auto stage = Stage(Config({Rule("idle", {Kind::kJobIdle}, {PolicyAction::kCancel})}));

  EXPECT_EQ(PassOrDie(*stage).recorded, 1);
  EXPECT_EQ(PolicyRows("slurm-eos", "goodput would cancel the job (account prod is exempt)%"), 1);
  clock_.Advance(absl::Minutes(6));
  EXPECT_EQ(PassOrDie(*stage).acted, 1);
  std::vector<v1::PolicyAction> actions = Actions(*stage, job);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), "exempt");
  EXPECT_EQ(actions[0].outcome(), "account prod is exempt: warned only");
  EXPECT_EQ(JobState(job), "RUNNING");
}

TEST_F(PolicySlurmTest, TheDrainLimitsHold) {
  PolicyConfig config = Config({Rule("faults", {Kind::kGpuFault}, {PolicyAction::kDrain})});
  config.default_limits.max_drains_per_hour = 1;
  auto stage = Stage(config);
  const std::string first = RunningJob();
  ASSERT_FALSE(first.empty());
  RegisterJob(first);
  AddAlert(Kind::kGpuFault, first, "XID 79 on GPU 3", "ml", "gpnode");
  EXPECT_EQ(PassOrDie(*stage).recorded, 1);
  clock_.Advance(absl::Minutes(6));
  EXPECT_EQ(PassOrDie(*stage).acted, 1);
  ASSERT_TRUE(NodeDrainedNow());
  std::vector<v1::PolicyAction> actions = Actions(*stage);
  ASSERT_EQ(actions.size(), 1u);
  v1::UndoPolicyActionRequest undo;
  undo.set_action_id(actions[0].action_id());
  undo.set_by("oncall");
  ASSERT_TRUE(stage->Undo(undo).ok());
  ASSERT_FALSE(NodeDrainedNow());

  // A second fault within the hour: the drain waits, the node stays up.
  AddAlert(Kind::kGpuFault, "4242", "XID 48 on GPU 3", "ml", "gpnode");
  EXPECT_EQ(PassOrDie(*stage).recorded, 1);
  clock_.Advance(absl::Minutes(6));
  PolicyStepResult r = PassOrDie(*stage);
  EXPECT_EQ(r.acted, 0);
  EXPECT_EQ(r.held, 1);
  EXPECT_FALSE(NodeDrainedNow());
  actions = Actions(*stage, "4242");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), "waiting");
  EXPECT_EQ(actions[0].note(),
            "rate limit: 1 drain in the last hour on this cluster (max_drains_per_hour 1)");

  // The share of the cluster's nodes: draining its one node would leave 1 of 1 drained.
  PolicyConfig shared = config;
  shared.default_limits = {.max_drains_per_hour = 10, .max_drained_share = 0.5};
  auto other = Stage(shared, "r2");
  clock_.Advance(absl::Minutes(2));
  r = PassOrDie(*other);
  EXPECT_EQ(r.held, 1);
  EXPECT_FALSE(NodeDrainedNow());
  actions = Actions(*other, "4242");
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].note(),
            "rate limit: draining would leave 1 of 1 nodes drained or down (max_drained_share "
            "0.5)");
}

TEST_F(PolicySlurmTest, ADryRunChangesNothingInSlurmButRecordsTheWouldBeActions) {
  const std::string job = RunningJob();
  ASSERT_FALSE(job.empty());
  RegisterJob(job);
  AddAlert(Kind::kGpuFault, job, "XID 79 on GPU 3", "ml", "gpnode");
  AddAlert(Kind::kJobIdle, job, "Job idle since 13:40");
  PolicyRule faults =
      Rule("faults", {Kind::kGpuFault}, {PolicyAction::kDrain, PolicyAction::kRequeue});
  PolicyRule idle = Rule("idle", {Kind::kJobIdle}, {PolicyAction::kCancel});
  faults.dry_run.reset();  // the stage's default: dry run
  idle.dry_run.reset();
  PolicyConfig config = Config({faults, idle});
  ASSERT_TRUE(config.dry_run);
  auto stage = Stage(config);

  EXPECT_EQ(PassOrDie(*stage).recorded, 3);
  EXPECT_EQ(PolicyRows("slurm-eos"), 0);  // no owner is told of what will not happen
  clock_.Advance(absl::Minutes(6));
  EXPECT_EQ(PassOrDie(*stage).acted, 3);
  EXPECT_FALSE(NodeDrainedNow());
  EXPECT_EQ(JobState(job), "RUNNING");
  std::vector<v1::PolicyAction> actions = Actions(*stage, job);
  ASSERT_EQ(actions.size(), 3u);
  for (const v1::PolicyAction& a : actions) {
    EXPECT_TRUE(a.dry_run());
    EXPECT_EQ(a.status(), "dry_run");
    EXPECT_EQ(a.outcome(), "dry run: would run " + a.command());
    EXPECT_EQ(a.attempts(), 1);
  }
  std::set<std::string> commands;
  for (const v1::PolicyAction& a : actions) commands.insert(a.command());
  EXPECT_TRUE(commands.contains("scancel -- " + job));
  EXPECT_TRUE(commands.contains("scontrol -- requeue " + job));
  EXPECT_EQ(PolicyRows("hook", "[dry run] goodput would%"), 3);
  v1::UndoPolicyActionRequest undo;
  undo.set_action_id(actions[0].action_id());
  undo.set_by("oncall");
  EXPECT_EQ(stage->Undo(undo).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(PolicySlurmTest, AReplicaStoppedBetweenWarnedAndActLeavesItToAnotherThatActsOnce) {
  const std::string job = RunningJob();
  ASSERT_FALSE(job.empty());
  RegisterJob(job);
  AddAlert(Kind::kJobIdle, job, "Job idle since 13:40");
  const PolicyConfig config = Config({Rule("idle", {Kind::kJobIdle}, {PolicyAction::kCancel})});
  {
    auto first = Stage(config, "replica-a");
    EXPECT_EQ(PassOrDie(*first).recorded, 1);
  }  // replica-a is gone after warning

  clock_.Advance(absl::Minutes(6));
  auto b = Stage(config, "replica-b");
  auto c = Stage(config, "replica-c");
  PolicyStepResult rb, rc;
  std::thread tb([&] { rb = PassOrDie(*b); });
  std::thread tc([&] { rc = PassOrDie(*c); });
  tb.join();
  tc.join();
  EXPECT_EQ(rb.recorded + rc.recorded, 0);
  EXPECT_EQ(rb.acted + rc.acted, 1);
  ASSERT_TRUE(slurm_->WaitForJobState(job, "CANCELLED", absl::Seconds(30)).ok());
  std::vector<v1::PolicyAction> actions = Actions(*b, job);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].attempts(), 1);
  EXPECT_EQ(actions[0].outcome(), "cancelled (was RUNNING)");
  EXPECT_TRUE(actions[0].acted_by() == "replica-b" || actions[0].acted_by() == "replica-c")
      << actions[0].acted_by();
  EXPECT_EQ(PolicyRows("hook", "goodput cancelled the job%"), 1);
}

TEST_F(PolicySlurmTest, AReplicaThatDiedDuringARequeueIsNotFollowedByASecondRequeue) {
  const std::string job = RunningJob();
  ASSERT_FALSE(job.empty());
  RegisterJob(job);
  AddAlert(Kind::kGpuFault, job, "XID 79 on GPU 3", "ml", "gpnode");
  const PolicyConfig config = Config({Rule("faults", {Kind::kGpuFault}, {PolicyAction::kRequeue})});
  auto a = Stage(config, "replica-a");
  EXPECT_EQ(PassOrDie(*a).recorded, 1);
  // replica-a claimed the action, noted the job's start, ran the requeue and died before
  // recording it: its lease ends.
  absl::StatusOr<std::string> start =
      slurm_->Run({"squeue", "--noheader", absl::StrCat("--jobs=", job), "--format=%S"});
  ASSERT_TRUE(start.ok());
  ASSERT_TRUE(
      pg_->Execute("goodput",
                   absl::StrCat("UPDATE policy_actions SET status = 'acting', attempts = 1, "
                                "acted_by = 'replica-a', peer_before = '",
                                absl::StripAsciiWhitespace(*start),
                                "', claimed_until = now() - interval '1 second'"))
          .ok());
  ASSERT_TRUE(slurm_->Run({"scontrol", "requeue", job}).ok());
  ASSERT_TRUE(slurm_->WaitForJobState(job, "PENDING", absl::Seconds(30)).ok());

  clock_.Advance(absl::Minutes(6));
  auto b = Stage(config, "replica-b");
  EXPECT_EQ(PassOrDie(*b).acted, 1);
  std::vector<v1::PolicyAction> actions = Actions(*b, job);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].status(), "done");
  EXPECT_EQ(actions[0].attempts(), 2);
  EXPECT_EQ(actions[0].acted_by(), "replica-b");
  // PENDING again, or running again with a new start time: either way not requeued twice.
  EXPECT_TRUE(absl::StartsWith(actions[0].outcome(), "job already")) << actions[0].outcome();
}

// The alert engine's own straggler detector, end to end: ofu's windows name GPU 3 of gpnode
// slow in every window; the engine fires a straggler alert; the stage drains the node.
TEST_F(PolicySlurmTest, AStragglerTheEngineFindsDrainsItsNode) {
  const std::string job = RunningJob();
  ASSERT_FALSE(job.empty());
  RegisterJob(job);
  EngineConfig engine_config;
  engine_config.routing.default_targets = {"hook"};
  AlertEngine engine(pool_.get(), engine_config, nullptr, platform::Logger(), clock_.AsFunction());
  const int64_t t0 = absl::ToUnixSeconds(clock_.Now()) - 3600;
  v1::PushWindowsRequest req;
  req.mutable_position()->set_producer_id("ofu-0-of-1");
  req.mutable_position()->set_sequence(1);
  req.mutable_position()->set_previous_sequence(0);
  for (int m = 0; m < 40; ++m) {
    v1::OfuWindow* w = req.add_windows();
    w->mutable_job()->set_cluster("eos");
    w->mutable_job()->set_job_id(job);
    *w->mutable_start_time() = api::UnixMsToTimestamp((t0 + m * 60) * 1000);
    *w->mutable_end_time() = api::UnixMsToTimestamp((t0 + m * 60 + 60) * 1000);
    w->set_window_s(60);
    w->set_gpu_model("NVIDIA H100 80GB HBM3");
    w->set_ofu(0.4 * (1.0 + 0.02 * std::sin(m * 1.3)));
    w->set_gpus_reporting(8);
    w->set_gpus_allocated(8);
    w->set_gpu_coverage(1.0);
    w->set_gpu_ofu_median(w->ofu());
    w->set_finalized(true);
    v1::Straggler* s = w->add_stragglers();
    s->mutable_gpu()->set_host("gpnode");
    s->mutable_gpu()->set_gpu_index(3);
    s->set_score(0.6);
    s->set_ofu(w->ofu() * 0.6);
  }
  absl::StatusOr<v1::DeliveryAck> ack = engine.PushWindows(req);
  ASSERT_TRUE(ack.ok()) << ack.status();
  ASSERT_EQ(Query("SELECT count(*) FROM alerts WHERE kind = 'straggler' AND state = 'firing'"),
            "1");

  PolicyRule rule = Rule("stragglers", {Kind::kStraggler}, {PolicyAction::kDrain});
  rule.notify = {};
  auto stage = Stage(Config({rule}));
  EXPECT_EQ(PassOrDie(*stage).recorded, 1);
  clock_.Advance(absl::Minutes(6));
  EXPECT_EQ(PassOrDie(*stage).acted, 1);
  EXPECT_TRUE(NodeDrainedNow()) << NodeState().first;
  EXPECT_TRUE(absl::StartsWith(NodeState().second, "goodput: ")) << NodeState().second;
  std::vector<v1::PolicyAction> actions = Actions(*stage, job);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(actions[0].kind(), v1::ALERT_KIND_STRAGGLER);
  EXPECT_EQ(actions[0].status(), "done") << actions[0].outcome();
}

// The running service: goodput-alerting with policies on acts by itself (its own pass every
// second), and goodputctl lists, shows and undoes what it did; a bad rule stops it at start-up
// naming the field and the value.
TEST_F(PolicySlurmTest, GoodputctlListsShowsAndUndoesWhatTheRunningServiceDid) {
  const std::string job = RunningJob();
  ASSERT_FALSE(job.empty());
  RegisterJob(job);
  auto config = [&](const std::string& actions) {
    return absl::StrCat("postgres:\n  dsn: \"", pg_->Dsn("goodput"), "\"\nlog:\n  format: text\n",
                        "alerting:\n"
                        "  sweep_interval_s: 1\n"
                        "  targets:\n"
                        "    - {name: hook, kind: webhook, url: \"http://127.0.0.1:9/\", "
                        "secret: s}\n"
                        "  policies:\n"
                        "    enabled: true\n"
                        "    dry_run: false\n"
                        "    interval_s: 1\n"
                        "    audit_targets: [hook]\n"
                        "    limits: {max_drains_per_hour: 5, max_drained_share: 1}\n"
                        "    clusters:\n"
                        "      eos: {slurm_conf: \"",
                        slurm_->slurm_conf().string(),
                        "\"}\n"
                        "    rules:\n"
                        "      - {name: faults, kinds: [gpu_fault], actions: ",
                        actions, ", grace_s: 0, min_job_age_s: 0}\n");
  };
  absl::StatusOr<std::unique_ptr<testing::ServiceProcess>> bad = testing::ServiceProcess::Start(
      {.binary = testing::BuiltBinary("services/alerting/goodput-alerting"),
       .config_yaml = config("[drain, reboot]")});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(
      bad.status().message(), "alerting.policies.rules[0].actions[1]: \"reboot\" is not an action"))
      << bad.status();

  absl::StatusOr<std::unique_ptr<testing::ServiceProcess>> alerting =
      testing::ServiceProcess::Start(
          {.binary = testing::BuiltBinary("services/alerting/goodput-alerting"),
           .config_yaml = config("[drain]")});
  ASSERT_TRUE(alerting.ok()) << alerting.status();
  // XID 79 on GPU 3 of the job's node, as ingest stores it: the running engine's fault sweep
  // raises the gpu_fault alert (and would resolve one with no fault behind it), the policy
  // stage drains the node.
  ASSERT_TRUE(pg_->Execute("goodput",
                           absl::StrCat("INSERT INTO gpu_fault_events (cluster, host, gpu_index, "
                                        "job, event_time, signal, xid, value, count, batch_id, "
                                        "source) SELECT 'eos', 'gpnode', 3, id, now(), 'xid', 79, "
                                        "79, 1, 'policy-test', 'grpc' FROM jobs WHERE cluster = "
                                        "'eos' AND job_id = '",
                                        job, "'"))
                  .ok());
  ASSERT_TRUE(testing::PollUntil([&] { return NodeDrainedNow(); }, absl::Seconds(60)))
      << NodeState().first;

  auto ctl = [&](std::vector<std::string> args) {
    args.insert(args.begin(), testing::BuiltBinary("tools/goodputctl/goodputctl").string());
    absl::StatusOr<testing::ProgramResult> r = testing::RunProgram(
        args, {{"GOODPUT_TOKEN", ""}, {"GOODPUT_ALERTING_ADDR", (*alerting)->grpc_address()}});
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : testing::ProgramResult{};
  };
  testing::ProgramResult listed = ctl({"actions", "list"});
  ASSERT_EQ(listed.exit.exit_code, 0) << listed.output;
  EXPECT_TRUE(absl::StrContains(listed.output, "drain node gpnode")) << listed.output;
  EXPECT_TRUE(absl::StrContains(listed.output, "drained (was ")) << listed.output;
  std::vector<v1::PolicyAction> actions = Actions(*Stage(Config({})), job);
  ASSERT_EQ(actions.size(), 1u);
  const std::string id = actions[0].action_id();
  EXPECT_EQ(actions[0].status(), "done");
  EXPECT_TRUE(absl::StrContains(actions[0].acted_by(), "goodput-alerting/"))
      << actions[0].acted_by();

  testing::ProgramResult shown = ctl({"actions", "show", id});
  ASSERT_EQ(shown.exit.exit_code, 0) << shown.output;
  EXPECT_TRUE(absl::StrContains(shown.output, "rule         faults")) << shown.output;
  EXPECT_TRUE(absl::StrContains(shown.output, "finding      alert ")) << shown.output;
  EXPECT_TRUE(absl::StrContains(
      shown.output,
      absl::StrCat("command      scontrol -- update NodeName=gpnode State=DRAIN \"Reason=goodput: "
                   "XID 79 (GPU has fallen off the bus; hardware fault) on GPU gpnode/3, job ",
                   job, "\"")))
      << shown.output;

  testing::ProgramResult undone =
      ctl({"actions", "undo", id, "--by", "oncall", "--comment", "GPU reseated"});
  ASSERT_EQ(undone.exit.exit_code, 0) << undone.output;
  EXPECT_TRUE(absl::StrContains(undone.output,
                                absl::StrCat("undone ", id, " (drain node gpnode): resumed")))
      << undone.output;
  EXPECT_FALSE(NodeDrainedNow());
  testing::ProgramResult missing = ctl({"actions", "undo", "999999", "--by", "oncall"});
  EXPECT_EQ(missing.exit.exit_code, 1) << missing.output;
  EXPECT_TRUE(absl::StrContains(missing.output, "no policy action 999999")) << missing.output;
}

}  // namespace
}  // namespace goodput::alerting
