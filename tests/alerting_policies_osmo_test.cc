// The policy stage cancelling Osmo workflows through Osmo's REST API, against an HTTP server
// with Osmo's workflow cancel endpoint (no Osmo package exists to run a real one) and a real
// PostgreSQL: a hung job's workflow is cancelled once after its grace, with the Osmo target's
// credentials; a workflow that already stopped (409) counts as done; a job without a workflow
// label fails naming the labels.
#include <set>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "goodput/v1/alert.pb.h"
#include "httplib.h"
#include "services/alerting/policy_stage.h"
#include "services/api/api_convert.h"
#include "tests/alerting_delivery_fixture.h"

namespace goodput::alerting {
namespace {

// Osmo's workflow cancel endpoint: 200 for a running workflow, 409 once it stopped.
class FakeOsmoCancel {
 public:
  FakeOsmoCancel() {
    server_.Post(R"(/api/workflow/([^/]+)/cancel)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   absl::MutexLock lock(&mu_);
                   const std::string name = req.matches[1];
                   calls_.push_back(absl::StrCat(name, " ", req.get_header_value("Authorization")));
                   res.status = stopped_.insert(name).second ? 200 : 409;
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
  }
  ~FakeOsmoCancel() {
    server_.stop();
    thread_.join();
  }
  std::string Url() const { return absl::StrCat("http://127.0.0.1:", port_); }
  void Stop(const std::string& name) {
    absl::MutexLock lock(&mu_);
    stopped_.insert(name);
  }
  std::vector<std::string> Calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  absl::Mutex mu_;
  std::set<std::string> stopped_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

class PolicyOsmoTest : public DeliveryTest {
 protected:
  void SetUp() override {
    DeliveryTest::SetUp();
    actuator_ = std::make_unique<PolicyActuator>(
        std::map<std::string, SlurmAccess>{},
        std::map<std::string, OsmoTargetConfig>{
            {"lepton", OsmoTargetConfig{.name = "osmo",
                                        .cluster = "lepton",
                                        .url = osmo_.Url(),
                                        .headers = {{"Authorization", "Bearer osmo-token"}}}}});
    PolicyRule rule{.name = "hung",
                    .kinds = {Kind::kHung},
                    .actions = {PolicyAction::kCancel},
                    .grace = absl::Minutes(10),
                    .min_job_age = absl::ZeroDuration(),
                    .dry_run = false};
    stage_ = std::make_unique<PolicyStage>(
        pool_.get(), actuator_.get(),
        PolicyStageOptions{.config = PolicyConfig{.enabled = true, .rules = {rule}},
                           .replica = "r1",
                           .clock = clock_.AsFunction()},
        platform::Logger());
  }

  // A firing hung alert of Osmo job `job` of cluster lepton with the job's labels `labels`.
  void AddAlert(const std::string& job, const std::map<std::string, std::string>& labels) {
    v1::Alert a;
    a.set_kind(v1::ALERT_KIND_HUNG);
    a.set_state(v1::ALERT_STATE_FIRING);
    a.mutable_job()->set_cluster("lepton");
    a.mutable_job()->set_job_id(job);
    a.set_summary("Hung in a collective for 14 minutes");
    std::map<std::string, std::string> all = {{"cluster", "lepton"}, {"job_id", job},
                                              {"scheduler", "osmo"}, {"team", "ml"},
                                              {"user", "alice"},     {"kind", "hung"}};
    all.insert(labels.begin(), labels.end());
    for (const auto& [k, v] : all) (*a.mutable_labels())[k] = v;
    *a.mutable_start_time() = api::UnixMsToTimestamp(absl::ToUnixMillis(clock_.Now()));
    Query(absl::StrCat(
        "INSERT INTO alerts (fingerprint, kind, state, severity, cluster, job_id, labels, "
        "alert_pb, start_time, update_time) VALUES ('",
        Fingerprint(Kind::kHung, "lepton", job), "', 'hung', 'firing', 'warning', 'lepton', '", job,
        "', '{}', decode('", absl::Base64Escape(a.SerializeAsString()),
        "', 'base64'), now(), now()) RETURNING id"));
  }

  std::map<std::string, v1::PolicyAction> ActionsByJob() {
    absl::StatusOr<v1::ListPolicyActionsResponse> r = stage_->List({});
    EXPECT_TRUE(r.ok()) << r.status();
    std::map<std::string, v1::PolicyAction> out;
    if (r.ok()) {
      for (const v1::PolicyAction& a : r->actions()) out[a.job().job_id()] = a;
    }
    return out;
  }

  FakeOsmoCancel osmo_;
  std::unique_ptr<PolicyActuator> actuator_;
  std::unique_ptr<PolicyStage> stage_;
};

TEST_F(PolicyOsmoTest, AHungJobsWorkflowIsCancelledOnceAfterItsGrace) {
  AddAlert("wf-run-1", {{"workflow", "llama pretrain $(id)"}});
  AddAlert("wf-run-2", {{"osmo.workflow_id", "stopped-wf"}});
  AddAlert("no-wf", {});
  osmo_.Stop("stopped-wf");
  absl::StatusOr<PolicyStepResult> r = stage_->Step();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->recorded, 3);
  EXPECT_TRUE(osmo_.Calls().empty());

  clock_.Advance(absl::Minutes(10) + absl::Seconds(1));
  r = stage_->Step();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->acted, 3);
  r = stage_->Step();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->acted, 0);

  // The name is one escaped path segment; the target's credentials go with it.
  EXPECT_EQ(osmo_.Calls(), (std::vector<std::string>{"llama pretrain $(id) Bearer osmo-token",
                                                     "stopped-wf Bearer osmo-token"}));
  std::map<std::string, v1::PolicyAction> actions = ActionsByJob();
  ASSERT_EQ(actions.size(), 3u);
  EXPECT_EQ(actions["wf-run-1"].status(), "done");
  EXPECT_EQ(actions["wf-run-1"].outcome(), "workflow cancelled");
  EXPECT_EQ(
      actions["wf-run-1"].command(),
      absl::StrCat("POST ", osmo_.Url(), "/api/workflow/llama%20pretrain%20%24%28id%29/cancel"));
  EXPECT_EQ(actions["wf-run-2"].status(), "done");
  EXPECT_EQ(actions["wf-run-2"].outcome(), "workflow already stopped");
  EXPECT_EQ(actions["no-wf"].status(), "failed");
  EXPECT_TRUE(absl::StrContains(actions["no-wf"].outcome(),
                                "none of the labels osmo.workflow_id, workflow"))
      << actions["no-wf"].outcome();
}

}  // namespace
}  // namespace goodput::alerting
