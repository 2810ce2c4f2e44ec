// Osmo delivery against an HTTP server that implements the two endpoints of Osmo's workflow
// API goodput uses (no Osmo package exists to run a real one): a firing alert tags the job's
// workflow, its resolution removes the tag, a cancel is sent only when configured and severe
// enough, and a job without a workflow label fails at once with the labels named.
#include <set>
#include <thread>

#include "absl/strings/match.h"
#include "httplib.h"
#include "services/alerting/targets/osmo_target.h"
#include "tests/alerting_delivery_fixture.h"

namespace goodput::alerting {
namespace {

// Osmo's workflow tag and cancel endpoints over an in-memory set of workflows.
class FakeOsmoApi {
 public:
  struct Call {
    std::string method;
    std::string path;
    std::string query;
    std::string authorization;
  };

  FakeOsmoApi() {
    server_.Post(R"(/api/workflow/([^/]+)/tag)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   absl::MutexLock lock(&mu_);
                   Record(req);
                   const std::string name = req.matches[1];
                   if (!workflows_.count(name)) {
                     res.status = 404;
                     return;
                   }
                   if (req.has_param("add")) tags_[name].insert(req.get_param_value("add"));
                   if (req.has_param("remove")) tags_[name].erase(req.get_param_value("remove"));
                   res.status = 200;
                   res.set_content("{}", "application/json");
                 });
    server_.Post(R"(/api/workflow/([^/]+)/cancel)",
                 [this](const httplib::Request& req, httplib::Response& res) {
                   absl::MutexLock lock(&mu_);
                   Record(req);
                   cancelled_.insert(req.matches[1]);
                   res.status = 200;
                 });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::yield();
  }
  ~FakeOsmoApi() {
    server_.stop();
    thread_.join();
  }
  std::string Url() const { return absl::StrCat("http://127.0.0.1:", port_); }
  void AddWorkflow(const std::string& name) {
    absl::MutexLock lock(&mu_);
    workflows_.insert(name);
  }
  std::set<std::string> Tags(const std::string& name) {
    absl::MutexLock lock(&mu_);
    return tags_[name];
  }
  std::set<std::string> Cancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }
  std::vector<Call> Calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  void Record(const httplib::Request& req) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::string query;
    for (const auto& [k, v] : req.params)
      absl::StrAppend(&query, query.empty() ? "" : "&", k, "=", v);
    calls_.push_back({req.method, req.path, query, req.get_header_value("Authorization")});
  }

  absl::Mutex mu_;
  std::set<std::string> workflows_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::set<std::string>> tags_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> cancelled_ ABSL_GUARDED_BY(mu_);
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

class OsmoDeliveryTest : public DeliveryTest {
 protected:
  std::unique_ptr<DeliveryWorker> OsmoWorker(bool cancel) {
    std::vector<std::unique_ptr<Target>> targets;
    targets.push_back(std::make_unique<OsmoTarget>(
        OsmoTargetConfig{.name = "osmo",
                         .url = osmo_.Url(),
                         .headers = {{"Authorization", "Bearer osmo-token"}},
                         .cancel = cancel}));
    return MakeWorker(std::move(targets));
  }
  FakeOsmoApi osmo_;
};

TEST_F(OsmoDeliveryTest, FiringTagsTheWorkflowAndResolutionRemovesTheTag) {
  osmo_.AddWorkflow("llama-pretrain-7");
  auto worker = OsmoWorker(/*cancel=*/false);
  EnqueueOrDie(TestNotification(5, "firing"), {"osmo"});
  EXPECT_EQ(StepOrDie(*worker, "osmo").delivered, 1);
  EXPECT_EQ(osmo_.Tags("llama-pretrain-7"), std::set<std::string>{"goodput-regression-in-job"});
  std::vector<FakeOsmoApi::Call> calls = osmo_.Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].method, "POST");
  EXPECT_EQ(calls[0].path, "/api/workflow/llama-pretrain-7/tag");
  EXPECT_EQ(calls[0].query, "add=goodput-regression-in-job");
  EXPECT_EQ(calls[0].authorization, "Bearer osmo-token");
  EXPECT_TRUE(osmo_.Cancelled().empty());

  EnqueueOrDie(TestNotification(5, "resolved"), {"osmo"});
  EXPECT_EQ(StepOrDie(*worker, "osmo").delivered, 1);
  EXPECT_TRUE(osmo_.Tags("llama-pretrain-7").empty());
  calls = osmo_.Calls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1].query, "remove=goodput-regression-in-job");
}

TEST_F(OsmoDeliveryTest, CancelsOnlyWhenConfiguredAndUnknownWorkflowsFail) {
  osmo_.AddWorkflow("llama-pretrain-7");
  auto worker = OsmoWorker(/*cancel=*/true);
  Notification warning = TestNotification(1, "firing");
  warning.severity = "warning";  // below cancel_min_severity (critical)
  EnqueueOrDie(warning, {"osmo"});
  EXPECT_EQ(StepOrDie(*worker, "osmo").delivered, 1);
  EXPECT_TRUE(osmo_.Cancelled().empty());
  EnqueueOrDie(TestNotification(2, "firing"), {"osmo"});
  EXPECT_EQ(StepOrDie(*worker, "osmo").delivered, 1);
  EXPECT_EQ(osmo_.Cancelled(), std::set<std::string>{"llama-pretrain-7"});

  // The workflow name may also come from the `workflow` label.
  Notification other = TestNotification(3, "firing", "77");
  other.labels = {{"workflow", "gone-workflow"}};
  EnqueueOrDie(other, {"osmo"});
  EXPECT_EQ(StepOrDie(*worker, "osmo").failed, 1);
  std::vector<DeliveryRecord> d = Deliveries(3);
  EXPECT_TRUE(absl::StrContains(d[0].last_error, "NOT_FOUND")) << d[0].last_error;

  Notification unlabeled = TestNotification(4, "firing", "78");
  unlabeled.labels.clear();
  EnqueueOrDie(unlabeled, {"osmo"});
  EXPECT_EQ(StepOrDie(*worker, "osmo").failed, 1);
  d = Deliveries(4);
  EXPECT_EQ(d[0].status, "failed");
  EXPECT_EQ(d[0].last_error,
            "INVALID_ARGUMENT: job eos/78 has none of the labels osmo.workflow_id, workflow that "
            "name its Osmo workflow");
}

TEST_F(OsmoDeliveryTest, AWorkflowNameIsOnePathSegmentWhateverItHolds) {
  // Shell text, quotes and a leading '-' are only a name: escaped into one segment.
  const std::string odd = R"(-wf $(id) `id` 'q' "qq";x?add=y#z)";
  osmo_.AddWorkflow(odd);
  auto worker = OsmoWorker(/*cancel=*/false);
  Notification n = TestNotification(6, "firing", "79");
  n.labels = {{"osmo.workflow_id", odd}};
  EnqueueOrDie(n, {"osmo"});
  EXPECT_EQ(StepOrDie(*worker, "osmo").delivered, 1) << Deliveries(6)[0].last_error;
  EXPECT_EQ(osmo_.Tags(odd), std::set<std::string>{"goodput-regression-in-job"});
  std::vector<FakeOsmoApi::Call> calls = osmo_.Calls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].query, "add=goodput-regression-in-job");

  // "." and ".." would name the folder above once the URL is resolved: refused, nothing sent.
  int64_t alert_id = 7;
  for (const char* dots : {".", ".."}) {
    Notification up = TestNotification(alert_id, "firing", "80");
    up.labels = {{"osmo.workflow_id", dots}};
    EnqueueOrDie(up, {"osmo"});
    EXPECT_EQ(StepOrDie(*worker, "osmo").failed, 1) << dots;
    std::vector<DeliveryRecord> d = Deliveries(alert_id++);
    EXPECT_EQ(d[0].last_error, absl::StrCat("INVALID_ARGUMENT: job eos/80: workflow \"", dots,
                                            "\" is not an Osmo workflow name"));
  }
  EXPECT_EQ(osmo_.Calls().size(), 1u);
}

}  // namespace
}  // namespace goodput::alerting
