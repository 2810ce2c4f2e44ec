#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "services/alerting/targets/alertmanager_target.h"
#include "services/alerting/targets/command.h"
#include "services/alerting/targets/http_client.h"
#include "services/alerting/targets/osmo_target.h"
#include "services/alerting/targets/render.h"
#include "services/alerting/targets/slurm_target.h"
#include "services/alerting/targets/targets_config.h"
#include "services/alerting/targets/webhook_target.h"

namespace goodput::alerting {
namespace {

Notification Firing() {
  Notification n;
  n.alert_id = 17;
  n.fingerprint = "fp-17";
  n.kind = "regression_in_job";
  n.severity = "critical";
  n.state = "firing";
  n.cluster = "eos";
  n.job_id = "4242";
  n.scheduler = "slurm";
  n.team = "llm";
  n.summary = "OFU fell 2.5x at 14:02 (58% -> 23%)";
  n.description = "Same workload ran at 55% last week.\nLook for debug settings.";
  n.factor = 2.5;
  n.dashboard_url = "https://goodput.example/jobs/eos/4242";
  n.start_time = absl::ToChronoTime(absl::FromUnixSeconds(1'800'000'000));
  return n;
}

TEST(WebhookSignature, IsHmacSha256OfTimestampDotBody) {
  // printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac s3cret
  EXPECT_EQ(WebhookSignature("s3cret", "1700000000", R"({"a":1})"),
            "sha256=1698a50bc74d1ff1db85c4e0a5297c2ad9fdba245d5737cdb789e4cc6e098940");
}

TEST(AlertmanagerBody, CarriesStableLabelsAnnotationsAndTimes) {
  const absl::Time now = absl::FromUnixSeconds(1'800'000'600);
  nlohmann::json firing =
      nlohmann::json::parse(AlertmanagerBody(Firing(), now, absl::Minutes(5)))[0];
  EXPECT_EQ(firing["labels"]["alertname"], "GoodputRegressionInJob");
  EXPECT_EQ(firing["labels"]["cluster"], "eos");
  EXPECT_EQ(firing["labels"]["job_id"], "4242");
  EXPECT_EQ(firing["labels"]["severity"], "critical");
  EXPECT_EQ(firing["labels"]["kind"], "regression_in_job");
  EXPECT_EQ(firing["annotations"]["factor"], "2.50");
  EXPECT_EQ(firing["annotations"]["dashboard_url"], "https://goodput.example/jobs/eos/4242");
  EXPECT_EQ(firing["startsAt"], "2027-01-15T08:00:00.000Z");
  EXPECT_EQ(firing["endsAt"], Rfc3339(now + absl::Minutes(20)));

  Notification resolved = Firing();
  resolved.state = "resolved";
  resolved.end_time = absl::ToChronoTime(absl::FromUnixSeconds(1'800'000'300));
  nlohmann::json r = nlohmann::json::parse(AlertmanagerBody(resolved, now, absl::Minutes(5)))[0];
  EXPECT_EQ(r["labels"], firing["labels"]);
  EXPECT_EQ(r["endsAt"], "2027-01-15T08:05:00.000Z");
}

TEST(HumanMessage, IsOneLineWithWhatToLookAt) {
  EXPECT_EQ(HumanMessage(Firing(), 1000),
            "goodput critical: OFU fell 2.5x at 14:02 (58% -> 23%) -- Same workload ran at 55% "
            "last week. Look for debug settings. https://goodput.example/jobs/eos/4242");
  Notification resolved = Firing();
  resolved.state = "resolved";
  EXPECT_EQ(HumanMessage(resolved, 1000), "goodput resolved: OFU fell 2.5x at 14:02 (58% -> 23%)");
  EXPECT_EQ(HumanMessage(Firing(), 20).size(), 20u);
}

TEST(SlurmComment, KeepsTheUsersCommentAndReplacesTheEarlierGoodputPart) {
  const std::string first =
      SlurmComment("ablation run 3", "17:slurm:firing", "goodput critical: x");
  EXPECT_EQ(first, "ablation run 3 [goodput 17:slurm:firing] goodput critical: x");
  EXPECT_EQ(SlurmComment(first, "17:slurm:resolved", "goodput resolved: x"),
            "ablation run 3 [goodput 17:slurm:resolved] goodput resolved: x");
  EXPECT_EQ(SlurmComment("", "1:s:firing", "m"), "[goodput 1:s:firing] m");
}

TEST(IsSlurmJobId, AcceptsPlainArrayAndHetIds) {
  EXPECT_TRUE(IsSlurmJobId("4242"));
  EXPECT_TRUE(IsSlurmJobId("4242_7"));
  EXPECT_TRUE(IsSlurmJobId("4242+1"));
  EXPECT_FALSE(IsSlurmJobId(""));
  EXPECT_FALSE(IsSlurmJobId("4242; rm -rf /"));
  EXPECT_FALSE(IsSlurmJobId("job-12"));
}

TEST(OsmoTag, IsPrefixPlusKindWithDashes) {
  EXPECT_EQ(OsmoTag("goodput-", "regression_in_job"), "goodput-regression-in-job");
}

TEST(HttpStatusToStatus, RetriesOutagesAndCredentialsAndRefusesBadRequests) {
  EXPECT_TRUE(HttpStatusToStatus({.status = 202}, "am").ok());
  EXPECT_EQ(HttpStatusToStatus({.status = 503}, "am").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpStatusToStatus({.status = 429}, "am").code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(HttpStatusToStatus({.status = 401}, "am").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(HttpStatusToStatus({.status = 404}, "am").code(), absl::StatusCode::kNotFound);
  const absl::Status bad = HttpStatusToStatus({.status = 400, .body = "bad\nlabels"}, "am x");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "am x answered HTTP 400: bad labels");
}

TEST(RunCommand, ReturnsOutputAndExitCodeAndStopsSlowCommands) {
  absl::StatusOr<CommandResult> ok =
      RunCommand({"sh", "-c", "echo out; echo err >&2; exit 3"}, {}, absl::Seconds(30));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->exit_code, 3);
  EXPECT_TRUE(absl::StrContains(ok->output, "out")) << ok->output;
  EXPECT_TRUE(absl::StrContains(ok->output, "err")) << ok->output;
  absl::StatusOr<CommandResult> env = RunCommand(
      {"sh", "-c", "echo $SLURM_CONF"}, {{"SLURM_CONF", "/x/slurm.conf"}}, absl::Seconds(30));
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->output, "/x/slurm.conf\n");
  EXPECT_EQ(RunCommand({"sleep", "600"}, {}, absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(RunCommand({"/nonexistent/scontrol"}, {}, absl::Seconds(5)).status().code(),
            absl::StatusCode::kNotFound);
}

absl::Status ParseError(const std::string& yaml) {
  absl::StatusOr<platform::ConfigTree> tree = platform::ConfigTree::LoadString(yaml);
  EXPECT_TRUE(tree.ok()) << tree.status();
  absl::StatusOr<std::vector<ConfiguredTarget>> targets = ParseTargets(*tree);
  return targets.status();
}

TEST(ParseTargets, BuildsEveryKind) {
  absl::StatusOr<platform::ConfigTree> tree = platform::ConfigTree::LoadString(R"(
alerting:
  targets:
    - {name: slurm-eos, kind: slurm, cluster: eos, slurm_conf: /etc/slurm/slurm.conf}
    - {name: slurm-rest, kind: slurm, mode: rest, url: "http://localhost", unix_socket: /run/s.sock}
    - {name: osmo, kind: osmo, url: "https://osmo.example/", cancel: true}
    - {name: am, kind: alertmanager, url: "http://am:9093", resend_interval_s: 60,
       rate_limit: {per_minute: 30, burst: 5}}
    - {name: hook, kind: webhook, url: "https://hooks.example/x", secret: abc}
)");
  ASSERT_TRUE(tree.ok()) << tree.status();
  absl::StatusOr<std::vector<ConfiguredTarget>> targets = ParseTargets(*tree);
  ASSERT_TRUE(targets.ok()) << targets.status();
  ASSERT_EQ(targets->size(), 5u);
  EXPECT_STREQ((*targets)[0].target->kind(), "slurm");
  EXPECT_STREQ((*targets)[2].target->kind(), "osmo");
  EXPECT_EQ((*targets)[3].target->resend_interval(), absl::Seconds(60));
  ASSERT_TRUE((*targets)[3].rate_limit.has_value());
  EXPECT_EQ((*targets)[3].rate_limit->per_minute, 30);
  EXPECT_FALSE((*targets)[4].rate_limit.has_value());
}

TEST(ParseTargets, RefusesBadEntriesNamingEntryKeyAndValue) {
  auto message = [](const std::string& yaml) { return std::string(ParseError(yaml).message()); };
  EXPECT_EQ(message("alerting: {targets: [{name: a, kind: smtp}]}"),
            "alerting.targets[0] (a).kind: \"smtp\" is not one of slurm, osmo, alertmanager, "
            "webhook");
  EXPECT_EQ(message("alerting: {targets: [{name: h, kind: webhook, url: 'http://x'}]}"),
            "alerting.targets[0] (h).secret: is required (or secret_file, secret_env)");
  EXPECT_EQ(message("alerting: {targets: [{name: h, kind: webhook, url: 'ftp://x', secret: s}]}"),
            "alerting.targets[0] (h).url: \"ftp://x\" is not an http:// or https:// URL");
  EXPECT_EQ(message("alerting: {targets: [{name: s, kind: slurm, requeu: true}]}"),
            "alerting.targets[0] (s).requeu: is not a known key for this kind of target");
  EXPECT_EQ(message("alerting: {targets: [{name: s, kind: slurm, hold: true}]}"),
            "alerting.targets[0] (s).hold: needs requeue: true (a running job is held by "
            "requeuing it held)");
  EXPECT_EQ(message("alerting: {targets: [{name: a, kind: alertmanager, url: 'http://a'}, "
                    "{name: a, kind: alertmanager, url: 'http://b'}]}"),
            "alerting.targets[1] (a).name: \"a\" is used by an earlier target");
  EXPECT_EQ(message("alerting: {targets: [{name: a, kind: alertmanager, url: 'http://a', "
                    "rate_limit: {per_minute: -1}}]}"),
            "alerting.targets[0] (a).rate_limit.per_minute: \"-1\" is not a number > 0");
  EXPECT_EQ(message("alerting: {targets: [{name: h, kind: webhook, url: 'http://x', "
                    "secret_file: /nonexistent/secret}]}"),
            "alerting.targets[0] (h).secret_file: \"/nonexistent/secret\" cannot be read");
}

}  // namespace
}  // namespace goodput::alerting
