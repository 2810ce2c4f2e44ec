#include "services/alerting/policy_rules.h"

#include "gtest/gtest.h"
#include "services/alerting/policy_config.h"

namespace goodput::alerting {
namespace {

PolicySubject Subject() {
  return SubjectFromLabels({{"cluster", "eos"},
                            {"team", "ml"},
                            {"user", "alice"},
                            {"scheduler", "slurm"},
                            {"partition", "gpu"},
                            {"qos", "normal"},
                            {"project", "p7"}});
}

absl::StatusOr<PolicySettings> Load(const std::string& yaml) {
  absl::StatusOr<platform::ConfigTree> tree = platform::ConfigTree::LoadString(yaml);
  if (!tree.ok()) return tree.status();
  return LoadPolicySettings(*tree);
}

TEST(PolicyRules, SubjectTakesPartitionAndQosFromTheJobsLabels) {
  const PolicySubject s = Subject();
  EXPECT_EQ(s.account, "ml");
  EXPECT_EQ(s.partition, "gpu");
  EXPECT_EQ(s.qos, "normal");
  EXPECT_EQ(s.labels.at("project"), "p7");
}

TEST(PolicyRules, ARuleMatchesItsKindsAndEverySelectorItNames) {
  PolicyRule rule{.name = "idle", .kinds = {Kind::kJobIdle, Kind::kHung}};
  EXPECT_TRUE(RuleMatches(rule, Kind::kJobIdle, Subject()));
  EXPECT_TRUE(RuleMatches(rule, Kind::kHung, Subject()));
  EXPECT_FALSE(RuleMatches(rule, Kind::kGpuFault, Subject()));

  rule.clusters = {"eos", "west"};
  rule.partitions = {"gpu"};
  rule.accounts = {"ml"};
  rule.users = {"alice", "bob"};
  rule.qos = {"normal"};
  rule.labels = {{"project", "p7"}};
  EXPECT_TRUE(RuleMatches(rule, Kind::kJobIdle, Subject()));
  for (auto change : std::vector<std::function<void(PolicyRule&)>>{
           [](PolicyRule& r) { r.clusters = {"west"}; },
           [](PolicyRule& r) { r.partitions = {"debug"}; },
           [](PolicyRule& r) { r.accounts = {"vision"}; }, [](PolicyRule& r) { r.users = {"bob"}; },
           [](PolicyRule& r) { r.qos = {"high"}; },
           [](PolicyRule& r) {
             r.labels = {{"project", "p8"}};
           },
           [](PolicyRule& r) {
             r.labels = {{"missing", ""}};
           }}) {
    PolicyRule other = rule;
    change(other);
    EXPECT_FALSE(RuleMatches(other, Kind::kJobIdle, Subject()));
  }
  PolicyConfig config{.rules = {rule, PolicyRule{.name = "faults", .kinds = {Kind::kGpuFault}}}};
  std::vector<const PolicyRule*> m = MatchingRules(config, Kind::kJobIdle, Subject());
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0]->name, "idle");
}

TEST(PolicyRules, ExemptionsNameWhatExemptsTheJob) {
  EXPECT_EQ(ExemptionOf({.accounts = {"ml"}}, Subject()), "account ml is exempt");
  EXPECT_EQ(ExemptionOf({.users = {"alice"}}, Subject()), "user alice is exempt");
  EXPECT_EQ(ExemptionOf({.qos = {"normal"}}, Subject()), "QOS normal is exempt");
  EXPECT_EQ(ExemptionOf({.labels = {{"project", "p7"}}}, Subject()), "label project=p7 is exempt");
  EXPECT_EQ(ExemptionOf({.accounts = {"prod"}, .partitions = {"debug"}}, Subject()), "");
}

TEST(PolicyRules, ActionWaitsForTheGraceAndTheJobsMinimumAge) {
  PolicyRule rule{.grace = absl::Minutes(30), .min_job_age = absl::Hours(2)};
  const absl::Time warned = absl::FromUnixSeconds(1'800'000'000);
  EXPECT_EQ(ActAfter(rule, warned, std::nullopt), warned + absl::Minutes(30));
  EXPECT_EQ(ActAfter(rule, warned, warned - absl::Hours(5)), warned + absl::Minutes(30));
  EXPECT_EQ(ActAfter(rule, warned, warned - absl::Minutes(10)),
            warned - absl::Minutes(10) + absl::Hours(2));
}

TEST(PolicyRules, DrainsAreHeldBackByTheHourlyLimitAndTheDrainedShare) {
  const PolicyClusterLimits limits{.max_drains_per_hour = 2, .max_drained_share = 0.1};
  EXPECT_EQ(DrainHeldBack(limits, 1, 0, 100), "");
  EXPECT_EQ(DrainHeldBack(limits, 2, 0, 100),
            "rate limit: 2 drains in the last hour on this cluster (max_drains_per_hour 2)");
  EXPECT_EQ(DrainHeldBack(limits, 0, 9, 100), "");
  EXPECT_EQ(DrainHeldBack(limits, 0, 10, 100),
            "rate limit: draining would leave 11 of 100 nodes drained or down "
            "(max_drained_share 0.1)");
  EXPECT_NE(DrainHeldBack(limits, 0, 0, 0), "");
}

TEST(PolicyRules, NodeNamesThatCouldBeOptionsAreRefused) {
  EXPECT_TRUE(IsSlurmNodeName("gpu-n017.eos"));
  EXPECT_FALSE(IsSlurmNodeName("-h"));
  EXPECT_FALSE(IsSlurmNodeName("n1 State=RESUME"));
  EXPECT_FALSE(IsSlurmNodeName(""));
}

TEST(PolicyConfig, OffAndDryRunByDefault) {
  absl::StatusOr<PolicySettings> s = Load("alerting: {}\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->config.enabled);
  EXPECT_TRUE(s->config.dry_run);
}

TEST(PolicyConfig, LoadsRulesClustersLimitsAndExemptions) {
  absl::StatusOr<PolicySettings> s = Load(R"(
alerting:
  policies:
    enabled: true
    interval_s: 5
    audit_targets: [am-prod]
    exempt: {accounts: [prod]}
    limits: {max_drains_per_hour: 3, max_drained_share: 0.2}
    clusters:
      eos: {slurm_conf: /etc/slurm/slurm.conf, timeout_s: 20, max_drains_per_hour: 1}
      lepton: {slurm: false, osmo_target: osmo}
    rules:
      - name: faults
        kinds: [gpu_fault, silent_gpu]
        match: {cluster: eos, partition: [gpu, gpu-long], labels: {project: p7}}
        actions: [requeue, drain]
        notify: [slurm-eos]
        grace_s: 0
        min_job_age_s: 0
        dry_run: false
      - name: idle
        kinds: job_idle
        actions: cancel
)");
  ASSERT_TRUE(s.ok()) << s.status();
  const PolicyConfig& c = s->config;
  EXPECT_TRUE(c.enabled);
  EXPECT_EQ(c.interval, absl::Seconds(5));
  ASSERT_EQ(c.rules.size(), 2u);
  // A node is drained before its job is requeued.
  EXPECT_EQ(c.rules[0].actions,
            (std::vector<PolicyAction>{PolicyAction::kDrain, PolicyAction::kRequeue}));
  EXPECT_EQ(c.rules[0].partitions, (std::vector<std::string>{"gpu", "gpu-long"}));
  EXPECT_EQ(c.rules[0].dry_run, std::optional<bool>(false));
  EXPECT_EQ(c.rules[1].grace, absl::Minutes(30));
  EXPECT_FALSE(c.rules[1].dry_run.has_value());
  EXPECT_EQ(LimitsFor(c, "eos").max_drains_per_hour, 1);
  EXPECT_EQ(LimitsFor(c, "eos").max_drained_share, 0.2);
  EXPECT_EQ(LimitsFor(c, "other").max_drains_per_hour, 3);
  EXPECT_EQ(s->slurm.at("eos").slurm_conf, "/etc/slurm/slurm.conf");
  EXPECT_EQ(s->slurm.at("eos").timeout, absl::Seconds(20));
  EXPECT_FALSE(s->slurm.contains("lepton"));
  EXPECT_EQ(s->osmo_targets.at("lepton"), "osmo");
  EXPECT_TRUE(c.exempt.accounts.contains("prod"));
}

TEST(PolicyConfig, BadConfigurationNamesTheFieldAndTheValue) {
  const std::string head = "alerting:\n  policies:\n    enabled: true\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"    colour: red\n", "alerting.policies.colour: unknown key"},
      {"    rules: []\n", "alerting.policies.rules: at least one rule"},
      {"    rules: [{name: a, kinds: [regression_in_job], actions: [cancel]}]\n",
       "alerting.policies.rules[0].kinds[0]: \"regression_in_job\" is not a kind a policy may act "
       "on"},
      {"    rules: [{name: a, kinds: [jobidle], actions: [cancel]}]\n",
       "alerting.policies.rules[0].kinds[0]: \"jobidle\" is not an alert kind"},
      {"    rules: [{name: a, kinds: [job_idle], actions: [cancel, reboot]}]\n",
       "alerting.policies.rules[0].actions[1]: \"reboot\" is not an action (cancel, requeue, "
       "drain)"},
      {"    rules: [{name: a, kinds: [job_idle], actions: [drain]}]\n",
       "alerting.policies.rules[0].actions[0]: drain needs findings that name their GPUs"},
      {"    rules: [{name: a, kinds: [hung], actions: [cancel, requeue]}]\n",
       "alerting.policies.rules[0].actions: cancel and requeue exclude each other"},
      {"    rules: [{name: a, kinds: [hung], actions: [cancel], grace_s: -5}]\n",
       "alerting.policies.rules[0].grace_s: -5 is outside [0, 2592000]"},
      {"    rules: [{name: a, kinds: [hung], actions: [cancel], dry_run: maybe}]\n",
       "alerting.policies.rules[0].dry_run: \"maybe\" is not true or false"},
      {"    rules: [{name: a, kinds: [hung], actions: [cancel], match: {account: [x], "
       "host: n1}}]\n",
       "alerting.policies.rules[0].match.host: unknown key"},
      {"    rules: [{name: a, kinds: [hung], actions: [cancel]}, {name: a, kinds: [hung], "
       "actions: [cancel]}]\n",
       "alerting.policies.rules[1].name: \"a\" is the name of an earlier rule"},
      {"    rules: [{name: \"a b\", kinds: [hung], actions: [cancel]}]\n",
       "alerting.policies.rules[0].name: \"a b\" may hold only"},
      {"    clusters: {eos: {max_drained_share: 1.5}}\n    rules: [{name: a, kinds: [hung], "
       "actions: [cancel]}]\n",
       "alerting.policies.clusters.eos.max_drained_share: 1.5 is outside [0, 1]"},
      {"    clusters: {eos: {scancel_path: \"\"}}\n    rules: [{name: a, kinds: [hung], "
       "actions: [cancel]}]\n",
       "alerting.policies.clusters.eos.scancel_path: must not be empty"},
  };
  for (const auto& [yaml, want] : cases) {
    absl::StatusOr<PolicySettings> s = Load(head + yaml);
    ASSERT_FALSE(s.ok()) << yaml;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << yaml;
    EXPECT_NE(s.status().message().find(want), std::string::npos)
        << yaml << " gave: " << s.status().message();
  }
}

}  // namespace
}  // namespace goodput::alerting
