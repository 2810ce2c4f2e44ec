#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "services/alerting/targets/admin_comment_target.h"
#include "services/alerting/targets/alertmanager_target.h"
#include "services/alerting/targets/http_client.h"
#include "services/alerting/targets/osmo_target.h"
#include "services/alerting/targets/render.h"
#include "services/alerting/targets/slurm_target.h"
#include "services/alerting/targets/targets_config.h"
#include "services/alerting/targets/webhook_target.h"
#include "services/platform/command.h"

namespace goodput::alerting {

using platform::CommandResult;
using platform::RunCommand;
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

TEST(HumanMessage, TurnsEveryControlCharacterIntoASpaceAndKeepsShellTextVerbatim) {
  Notification n = Firing();
  n.summary = "a\nb\r\x1b[2Jc\x07" "d\x7f-h \"q\" '$(id)' `id`";
  n.description.clear();
  n.dashboard_url.clear();
  EXPECT_EQ(HumanMessage(n, 1000), "goodput critical: a b [2Jc d -h \"q\" '$(id)' `id`");
}

constexpr char kMarker17[] = "[goodput 17:slurm:firing 95c1cd600a49829ccfa82e9dd68b3e20]";

TEST(SlurmCommentMarker, IsTheKeyAndAMacOfClusterJobAndKey) {
  // printf 'goodput slurm comment marker\n3:eos4:424215:17:slurm:firing' |
  //   openssl dgst -sha256 -hmac s3cret   (first 32 hex digits)
  EXPECT_EQ(SlurmCommentMarker("s3cret", "eos", "4242").For("17:slurm:firing"), kMarker17);
}

TEST(SlurmCommentMarker, KeepsTheUsersCommentAndReplacesTheEarlierGoodputPart) {
  const SlurmCommentMarker marker("s3cret", "eos", "4242");
  const std::string first =
      marker.Comment("ablation run 3", "17:slurm:firing", "goodput critical: x");
  EXPECT_EQ(first, absl::StrCat("ablation run 3 ", kMarker17, " goodput critical: x"));
  EXPECT_TRUE(marker.IsIn(first, "17:slurm:firing"));
  EXPECT_EQ(
      marker.Comment(first, "17:slurm:resolved", "goodput resolved: x"),
      absl::StrCat("ablation run 3 ", marker.For("17:slurm:resolved"), " goodput resolved: x"));
  EXPECT_EQ(marker.Comment("", "17:slurm:firing", "m"), absl::StrCat(kMarker17, " m"));
}

TEST(SlurmCommentMarker, AMarkerTheJobsOwnerWroteIsNeitherRecognisedNorReplaced) {
  const SlurmCommentMarker marker("s3cret", "eos", "4242");
  const std::vector<std::string> forged = {
      "[goodput 17:slurm:firing]",  // the marker before it carried a MAC
      "[goodput 17:slurm:firing 00000000000000000000000000000000]",
      SlurmCommentMarker("s3cret", "eos", "4243").For("17:slurm:firing"),  // another job's
      SlurmCommentMarker("s3cret", "atlas", "4242").For("17:slurm:firing"),
      SlurmCommentMarker("guess", "eos", "4242").For("17:slurm:firing"),
  };
  for (const std::string& f : forged) {
    const std::string comment = absl::StrCat("run ", f, " tail");
    EXPECT_FALSE(marker.IsIn(comment, "17:slurm:firing")) << comment;
    EXPECT_EQ(marker.Comment(comment, "17:slurm:firing", "m"),
              absl::StrCat(comment, " ", kMarker17, " m"));
  }
}

TEST(IsSlurmJobId, AcceptsPlainArrayAndHetIds) {
  EXPECT_TRUE(IsSlurmJobId("4242"));
  EXPECT_TRUE(IsSlurmJobId("4242_7"));
  EXPECT_TRUE(IsSlurmJobId("4242+1"));
  EXPECT_FALSE(IsSlurmJobId(""));
  EXPECT_FALSE(IsSlurmJobId("4242; rm -rf /"));
  EXPECT_FALSE(IsSlurmJobId("job-12"));
  EXPECT_FALSE(IsSlurmJobId("-4242"));
  EXPECT_FALSE(IsSlurmJobId("--help"));
  EXPECT_FALSE(IsSlurmJobId("4242 -h"));
  for (const char* odd : {"$(id)", "`id`", "4242'", "\"4242\"", "4242\n1", "4242;id", "4242|id",
                          "4242_", "_7", "4242+"}) {
    EXPECT_FALSE(IsSlurmJobId(odd)) << odd;
  }
}

// What squeue prints for one job with SqueueJobFormat(token).
std::string SqueueRecord(const std::string& token, const std::string& id,
                         const std::string& array_id, const std::string& state,
                         const std::string& comment) {
  std::string record = SqueueJobFormat(token);
  for (auto [field, value] : {std::pair{"%A", id}, std::pair{"%i", array_id},
                              std::pair{"%T", state}, std::pair{"%k", comment}}) {
    record.replace(record.find(field), 2, value);
  }
  return record + "\n";
}

TEST(ParseSqueueJob, ReadsStateAndCommentWhateverTheCommentHolds) {
  const std::string token = "3f9a";
  const std::string comment = absl::StrCat(
      "x JobState=COMPLETED\nComment=", SqueueRecord("3f9b", "4242", "4242", "COMPLETED", "y"),
      " |3f9|%T");
  absl::StatusOr<SlurmJobView> job = ParseSqueueJob(
      absl::StrCat("squeue: warning: x\n", SqueueRecord(token, "4242", "4242", "RUNNING", comment)),
      token, "4242");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state, "RUNNING");
  EXPECT_EQ(job->comment, comment);
  job = ParseSqueueJob(SqueueRecord(token, "4242", "4242", "PENDING", "(null)"), token, "4242");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->comment, "");
}

TEST(ParseSqueueJob, PicksTheRecordOfTheJobAmongAnArraysTasks) {
  const std::string token = "77";
  const std::string out = absl::StrCat(SqueueRecord(token, "4243", "4242_2", "PENDING", "b"),
                                       SqueueRecord(token, "4242", "4242_1", "RUNNING", "a"),
                                       SqueueRecord(token, "4244", "4242_3", "RUNNING", "c"));
  EXPECT_EQ(ParseSqueueJob(out, token, "4242")->comment, "a");
  EXPECT_EQ(ParseSqueueJob(out, token, "4242_3")->comment, "c");
  EXPECT_EQ(ParseSqueueJob(out, token, "4242+0")->comment, "b");  // none matches: the first
  EXPECT_EQ(ParseSqueueJob("", token, "4242").status().code(), absl::StatusCode::kNotFound);
}

// A directory with fake `squeue` and `scontrol`: squeue prints the job held in the files
// `state` and `comment`; scontrol logs its arguments, one call per line as [arg][arg]..., and
// `update` stores the new comment.
class FakeSlurm {
 public:
  FakeSlurm() {
    std::string dir = (std::filesystem::temp_directory_path() / "goodput-fake-slurm-XXXXXX");
    EXPECT_NE(mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    Write("squeue", R"sh(#!/bin/sh
d=$(dirname "$0")
for a; do case "$a" in --format=*) fmt=${a#--format=};; esac; done
printf '[%s]' "$@" >> "$d/squeue.log"; echo >> "$d/squeue.log"
head=${fmt%%\%A*}; tail=${fmt#*\%k}; sep=${fmt#*\%A}; sep=${sep%%\%i*}
printf '%s4242%s4242%s%s%s%s%s\n' "$head" "$sep" "$sep" "$(cat "$d/state")" "$sep" \
  "$(cat "$d/comment")" "$tail"
)sh");
    Write("scontrol", R"sh(#!/bin/sh
d=$(dirname "$0")
printf '[%s]' "$@" >> "$d/scontrol.log"; echo >> "$d/scontrol.log"
if [ "$2" = update ]; then printf '%s' "${4#Comment=}" > "$d/comment"; fi
)sh");
    for (const char* f : {"squeue", "scontrol"}) {
      std::filesystem::permissions(dir_ / f, std::filesystem::perms::owner_all);
    }
    Write("state", "RUNNING");
    Write("comment", "(null)");
  }
  ~FakeSlurm() { std::filesystem::remove_all(dir_); }

  void Write(const std::string& file, const std::string& text) {
    std::ofstream(dir_ / file) << text;
  }
  std::string Read(const std::string& file) const {
    std::ifstream in(dir_ / file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  SlurmTargetConfig Config() const {
    return {.name = "slurm",
            .marker_secret = "s3cret",
            .scontrol_path = (dir_ / "scontrol").string(),
            .squeue_path = (dir_ / "squeue").string()};
  }

 private:
  std::filesystem::path dir_;
};

absl::Status SendTo(SlurmTarget& target, const Notification& n) {
  return target.Send({.notification = &n, .idempotency_key = "17:slurm:firing"});
}

TEST(SlurmTarget, NotifiesAJobWhoseCommentHoldsAForgedMarkerOnceAndNotAgainOnRetry) {
  FakeSlurm slurm;
  slurm.Write("comment", "mine [goodput 17:slurm:firing]");
  SlurmTarget target(slurm.Config());
  ASSERT_TRUE(SendTo(target, Firing()).ok());
  const std::string message = HumanMessage(Firing(), 600);
  EXPECT_EQ(slurm.Read("scontrol.log"),
            absl::StrCat("[--][notify][4242][", message, "]\n",
                         "[--][update][JobId=4242][Comment=", "mine [goodput 17:slurm:firing] ",
                         kMarker17, " ", OneLine(message, 400), "]\n"));
  // The sender stopped before recording the delivery: the retry finds its marker.
  ASSERT_TRUE(SendTo(target, Firing()).ok());
  const std::vector<std::string> calls =
      absl::StrSplit(slurm.Read("scontrol.log"), '\n', absl::SkipEmpty());
  EXPECT_EQ(calls.size(), 2u) << slurm.Read("scontrol.log");
  const std::string squeue_args = slurm.Read("squeue.log");
  EXPECT_TRUE(absl::StartsWith(squeue_args, "[--noheader][--states=all][--jobs=4242][--format=<"))
      << squeue_args;
}

TEST(SlurmTarget, PassesTelemetryTextAsOneArgumentAfterTheEndOfOptions) {
  FakeSlurm slurm;
  SlurmTarget target(slurm.Config());
  Notification n = Firing();
  n.summary = R"(-h --help "quoted" 'single' $(touch x) `id`)";
  n.description = "-rf";
  ASSERT_TRUE(SendTo(target, n).ok());
  const std::string log = slurm.Read("scontrol.log");
  EXPECT_TRUE(absl::StartsWith(
      log,
      R"([--][notify][4242][goodput critical: -h --help "quoted" 'single' $(touch x) `id` -- -rf )"))
      << log;
}

TEST(SlurmTarget, RefusesJobIdsThatAreNotSlurmJobIdsWithoutRunningAnything) {
  FakeSlurm slurm;
  SlurmTarget target(slurm.Config());
  for (const char* job_id : {"-4242", "--help", "-h", "4242 --help", "4242\n-h"}) {
    Notification n = Firing();
    n.job_id = job_id;
    const absl::Status s = SendTo(target, n);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << job_id;
    // Shown on one line: a newline in an id never splits the delivery's error.
    EXPECT_TRUE(
        absl::StrContains(s.message(), absl::StrCat("job_id=\"", OneLine(job_id, 200), "\"")))
        << s;
    EXPECT_FALSE(absl::StrContains(s.message(), "\n")) << s;
  }
  EXPECT_EQ(slurm.Read("squeue.log"), "");
  EXPECT_EQ(slurm.Read("scontrol.log"), "");
}

TEST(SlurmTarget, RefusesToWriteAMarkerWithoutASecret) {
  FakeSlurm slurm;
  SlurmTargetConfig config = slurm.Config();
  config.marker_secret = "";
  SlurmTarget target(config);
  EXPECT_EQ(SendTo(target, Firing()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(slurm.Read("scontrol.log"), "");
}

// A sacctmgr that records its arguments, one bracketed argument each, and exits with the code
// in `exit` (printing `said`).
class FakeSacctmgr {
 public:
  FakeSacctmgr()
      : dir_(std::filesystem::temp_directory_path() / absl::StrCat("sacctmgr-", getpid())) {
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "sacctmgr") << R"sh(#!/bin/sh
d=$(dirname "$0")
printf '[%s]' "$@" >> "$d/log"; echo >> "$d/log"
cat "$d/said" 2>/dev/null
exit $(cat "$d/exit" 2>/dev/null || echo 0)
)sh";
    std::filesystem::permissions(dir_ / "sacctmgr", std::filesystem::perms::owner_all);
  }
  ~FakeSacctmgr() { std::filesystem::remove_all(dir_); }
  void Fail(int code, const std::string& said) {
    std::ofstream(dir_ / "exit") << code;
    std::ofstream(dir_ / "said") << said;
  }
  std::string Log() const {
    std::ifstream in(dir_ / "log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  AdminCommentTargetConfig Config() const {
    return {.name = "eos-ac", .cluster = "eos", .sacctmgr_path = (dir_ / "sacctmgr").string()};
  }

 private:
  std::filesystem::path dir_;
};

absl::Status SendComment(AdminCommentTarget& target, const std::string& cluster,
                         const std::string& job_id) {
  const AdminCommentPayload p{
      .cluster = cluster, .job_id = job_id, .revision = 1, .comment = "goodput1-b32:abc"};
  return target.SendAdminComment({.payload = &p, .idempotency_key = "k"});
}

TEST(AdminCommentTarget, WritesThroughSacctmgrWithOneArgumentPerValue) {
  FakeSacctmgr sacctmgr;
  AdminCommentTarget target(sacctmgr.Config());
  ASSERT_TRUE(SendComment(target, "eos", "4242_7").ok());
  EXPECT_EQ(sacctmgr.Log(),
            "[-i][update][job][where][jobid=4242_7][set][AdminComment=goodput1-b32:abc]\n");
  // slurmdbd down: retried by the outbox; finished in slurmctld: permanent.
  sacctmgr.Fail(1, "sacctmgr: error: Problem talking to the database: Connection refused");
  const absl::Status down = SendComment(target, "eos", "4242");
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << down;
  EXPECT_TRUE(absl::StrContains(down.message(), "sacctmgr update ... of job 4242 exited 1"))
      << down;
  sacctmgr.Fail(1, "Job has already finished");
  EXPECT_EQ(SendComment(target, "eos", "4242").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(AdminCommentTarget, RefusesJobsOfOtherClustersAndIdsThatAreNotSlurmJobIds) {
  FakeSacctmgr sacctmgr;
  AdminCommentTarget target(sacctmgr.Config());
  const absl::Status other = SendComment(target, "b", "777001");
  EXPECT_EQ(other.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(other.message(), "job b/777001 is not on cluster eos that target eos-ac serves");
  for (const char* job_id : {"-1", "job-7", "12 34", "1;id", "$(id)", "777001\n-h", ""}) {
    const absl::Status s = SendComment(target, "eos", job_id);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << job_id;
    EXPECT_TRUE(absl::StrContains(
        s.message(), absl::StrCat("job_id=\"", OneLine(job_id, 200), "\" is not a Slurm job id")))
        << s;
  }
  EXPECT_EQ(sacctmgr.Log(), "");  // nothing ran
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
    - {name: slurm-eos, kind: slurm, cluster: eos, slurm_conf: /etc/slurm/slurm.conf,
       squeue_path: /usr/bin/squeue, marker_secret: s3cret}
    - {name: slurm-rest, kind: slurm, cluster: eos, mode: rest, url: "http://localhost",
       unix_socket: /run/s.sock, marker_secret_env: HOME}
    - {name: osmo, kind: osmo, cluster: eos, url: "https://osmo.example/", cancel: true}
    - {name: am, kind: alertmanager, url: "http://am:9093", resend_interval_s: 60,
       rate_limit: {per_minute: 30, burst: 5}}
    - {name: hook, kind: webhook, url: "https://hooks.example/x", secret: abc}
    - {name: eos-admin-comment, kind: slurm_admin_comment, cluster: eos, slurm_conf: /etc/s.conf}
)");
  ASSERT_TRUE(tree.ok()) << tree.status();
  absl::StatusOr<std::vector<ConfiguredTarget>> targets = ParseTargets(*tree);
  ASSERT_TRUE(targets.ok()) << targets.status();
  ASSERT_EQ(targets->size(), 6u);
  EXPECT_STREQ((*targets)[0].target->kind(), "slurm");
  EXPECT_EQ((*targets)[0].target->cluster(), "eos");
  EXPECT_STREQ((*targets)[2].target->kind(), "osmo");
  EXPECT_EQ((*targets)[2].target->cluster(), "eos");
  EXPECT_EQ((*targets)[4].target->cluster(), "");  // webhooks take every cluster's rows
  EXPECT_STREQ((*targets)[5].target->kind(), "slurm_admin_comment");
  EXPECT_EQ((*targets)[5].target->cluster(), "eos");
  EXPECT_TRUE((*targets)[5].target->delivers_admin_comments());
  EXPECT_EQ((*targets)[3].target->resend_interval(), absl::Seconds(60));
  ASSERT_TRUE((*targets)[3].rate_limit.has_value());
  EXPECT_EQ((*targets)[3].rate_limit->per_minute, 30);
  EXPECT_FALSE((*targets)[4].rate_limit.has_value());
}

TEST(ParseTargets, RefusesBadEntriesNamingEntryKeyAndValue) {
  auto message = [](const std::string& yaml) { return std::string(ParseError(yaml).message()); };
  EXPECT_EQ(message("alerting: {targets: [{name: a, kind: pager}]}"),
            "alerting.targets[0] (a).kind: \"pager\" is not one of slurm, osmo, alertmanager, "
            "webhook, smtp, slurm_admin_comment");
  // Scheduler targets act on the jobs of one cluster: job 777001 of another is another job.
  EXPECT_EQ(message("alerting: {targets: [{name: s, kind: slurm, marker_secret: m}]}"),
            "alerting.targets[0] (s).cluster: is required");
  EXPECT_EQ(message("alerting: {targets: [{name: o, kind: osmo, url: 'https://o'}]}"),
            "alerting.targets[0] (o).cluster: is required");
  EXPECT_EQ(message("alerting: {targets: [{name: a, kind: slurm_admin_comment}]}"),
            "alerting.targets[0] (a).cluster: is required");
  EXPECT_EQ(message("alerting: {targets: [{name: a, kind: slurm_admin_comment, cluster: c, "
                    "mode: rest}]}"),
            "alerting.targets[0] (a).mode: \"rest\" is not sacctmgr or scontrol");
  EXPECT_EQ(message("alerting: {targets: [{name: m, kind: smtp, url: 'http://x', from: a@b}]}"),
            "alerting.targets[0] (m).url: \"http://x\" is not an smtp:// or smtps:// URL");
  EXPECT_EQ(message("alerting: {targets: [{name: m, kind: smtp, url: 'smtp://x'}]}"),
            "alerting.targets[0] (m).from: is required");
  EXPECT_EQ(message("alerting: {targets: [{name: m, kind: smtp, url: 'smtp://x', from: a@b, "
                    "starttls: maybe}]}"),
            "alerting.targets[0] (m).starttls: \"maybe\" is not required, opportunistic or "
            "none (off)");
  EXPECT_EQ(message("alerting: {targets: [{name: m, kind: smtp, url: 'smtp://x', from: a@b, "
                    "to: ['ops team@b']}]}"),
            "alerting.targets[0] (m).to[0]: \"ops team@b\" may hold only printable ASCII "
            "without spaces, quotes, brackets or commas");
  EXPECT_EQ(message("alerting: {targets: [{name: h, kind: webhook, url: 'http://x'}]}"),
            "alerting.targets[0] (h).secret: is required (or secret_file, secret_env)");
  EXPECT_EQ(message("alerting: {targets: [{name: h, kind: webhook, url: 'ftp://x', secret: s}]}"),
            "alerting.targets[0] (h).url: \"ftp://x\" is not an http:// or https:// URL");
  EXPECT_EQ(message("alerting: {targets: [{name: s, kind: slurm, cluster: c, marker_secret: m, "
                    "requeu: true}]}"),
            "alerting.targets[0] (s).requeu: is not a known key for this kind of target");
  EXPECT_EQ(message("alerting: {targets: [{name: s, kind: slurm, cluster: c, hold: true}]}"),
            "alerting.targets[0] (s).hold: needs requeue: true (a running job is held by "
            "requeuing it held)");
  EXPECT_EQ(message("alerting: {targets: [{name: s, kind: slurm, cluster: c}]}"),
            "alerting.targets[0] (s).marker_secret: is required (or marker_secret_file, "
            "marker_secret_env)");
  EXPECT_EQ(message("alerting: {targets: [{name: s, kind: slurm, cluster: c, mode: rest, "
                    "url: 'http://r'}]}"),
            "alerting.targets[0] (s).marker_secret: is required (or marker_secret_file, "
            "marker_secret_env)");
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
