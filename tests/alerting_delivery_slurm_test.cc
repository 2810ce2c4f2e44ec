// Slurm delivery against a real one-node Slurm (munge, slurmctld, slurmd) running a real
// sbatch job: a firing alert puts exactly one line on the job's stderr (scontrol notify) and
// its summary in the job's comment next to the user's own; a retry of the same row (a sender
// that stopped before recording the delivery) finds its marker in the comment and notifies
// no second time; the resolution replaces the comment; the same comment goes through
// slurmrestd (v0.0.38); an unknown job fails at once. The job's owner writes its name and
// comment: a name that imitates a finished state or a marker, or a marker the owner wrote,
// changes none of that.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "services/alerting/targets/slurm_target.h"
#include "tests/alerting_delivery_fixture.h"
#include "tests/support/slurm_cluster.h"

namespace goodput::alerting {
namespace {

constexpr char kMarkerSecret[] = "test-marker-secret";

std::string ReadWhole(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

// The marker goodput writes for `key` on job `job` of cluster eos.
std::string Marker(const std::string& job, const std::string& key) {
  return SlurmCommentMarker(kMarkerSecret, "eos", job).For(key);
}

class SlurmDeliveryTest : public DeliveryTest {
 protected:
  void SetUp() override {
    DeliveryTest::SetUp();
    auto slurm = testing::SlurmCluster::Create();
    ASSERT_TRUE(slurm.ok()) << slurm.status();
    slurm_ = *std::move(slurm);
  }

  std::string RunningJob(const std::string& comment, const std::string& name = "") {
    absl::StatusOr<std::string> job = slurm_->SubmitSleepJob({.comment = comment, .name = name});
    EXPECT_TRUE(job.ok()) << job.status();
    if (!job.ok()) return "";
    absl::Status s = slurm_->WaitForJobState(*job, "RUNNING", absl::Seconds(60));
    EXPECT_TRUE(s.ok()) << s;
    return *job;
  }

  // The job's comment as squeue prints it alone (it may hold newlines).
  std::string Comment(const std::string& job) {
    absl::StatusOr<std::string> out = slurm_->Run(
        {"squeue", "--noheader", "--states=all", absl::StrCat("--jobs=", job), "--format=%k"});
    EXPECT_TRUE(out.ok()) << out.status();
    if (!out.ok()) return "";
    std::string comment = *out;
    if (absl::EndsWith(comment, "\n")) comment.pop_back();
    return comment == "(null)" ? "" : comment;
  }

  std::unique_ptr<DeliveryWorker> ScontrolWorker() {
    std::vector<std::unique_ptr<Target>> targets;
    targets.push_back(std::make_unique<SlurmTarget>(
        SlurmTargetConfig{.name = "slurm-eos",
                          .cluster = "eos",
                          .marker_secret = kMarkerSecret,
                          .slurm_conf = slurm_->slurm_conf().string()}));
    return MakeWorker(std::move(targets));
  }

  // The job's stderr once every notification sent before this call has reached it: they
  // arrive in order, so once a last line of our own is there, any earlier one is too.
  std::string SettledStderr(const std::string& job) {
    EXPECT_TRUE(slurm_->Run({"scontrol", "notify", job, "end-of-test-marker"}).ok());
    EXPECT_TRUE(StderrShows(job, "end-of-test-marker"));
    return ReadWhole(slurm_->JobStderrPath(job));
  }

  // The sender stopped after sending but before recording it: the row of `alert_id` is sent
  // again, finds goodput's marker in the comment, and the job hears nothing new.
  void ExpectARetrySendsNothingNew(DeliveryWorker& worker, const std::string& job,
                                   int64_t alert_id) {
    const std::string comment = Comment(job);
    ASSERT_TRUE(pg_->Execute("goodput",
                             "UPDATE alert_outbox SET status = 'pending', "
                             "next_attempt_at = now() - interval '1 hour'")
                    .ok());
    EXPECT_EQ(StepOrDie(worker, "slurm-eos").delivered, 1);
    EXPECT_EQ(Query(absl::StrCat("SELECT attempts FROM alert_outbox WHERE alert_id = ", alert_id)),
              "2");
    const std::string err = SettledStderr(job);
    EXPECT_EQ(Count(err, "goodput critical:"), 1) << err;
    EXPECT_EQ(Comment(job), comment);
  }

  // Waits until the job's stderr shows `needle`.
  bool StderrShows(const std::string& job, const std::string& needle) {
    return testing::PollUntil(
        [&] { return absl::StrContains(ReadWhole(slurm_->JobStderrPath(job)), needle); },
        absl::Seconds(20));
  }

  std::unique_ptr<testing::SlurmCluster> slurm_;
};

TEST_F(SlurmDeliveryTest, FiringAlertNotifiesTheRunningJobOnceAndSetsItsComment) {
  const std::string job = RunningJob("ablation run 3");
  ASSERT_FALSE(job.empty());
  auto worker = ScontrolWorker();

  EnqueueOrDie(TestNotification(11, "firing", job), {"slurm-eos"});
  EXPECT_EQ(StepOrDie(*worker, "slurm-eos").delivered, 1);
  const std::string firing_comment = Comment(job);
  EXPECT_TRUE(absl::StartsWith(
      firing_comment,
      absl::StrCat("ablation run 3 ", Marker(job, "11:slurm-eos:firing"),
                   " goodput critical: OFU fell 2.5x at 14:02 (58% -> 23%) -- Same workload ran "
                   "at 55% last week")))
      << firing_comment;
  ASSERT_TRUE(StderrShows(job, "goodput critical: OFU fell 2.5x"))
      << ReadWhole(slurm_->JobStderrPath(job));

  ExpectARetrySendsNothingNew(*worker, job, 11);

  // The resolution replaces goodput's part of the comment and tells the job.
  EnqueueOrDie(TestNotification(11, "resolved", job), {"slurm-eos"});
  EXPECT_EQ(StepOrDie(*worker, "slurm-eos").delivered, 1);
  EXPECT_EQ(Comment(job), absl::StrCat("ablation run 3 ", Marker(job, "11:slurm-eos:resolved"),
                                       " goodput resolved: OFU fell 2.5x at 14:02 (58% -> 23%)"));
  EXPECT_TRUE(StderrShows(job, "goodput resolved: OFU fell 2.5x"));

  // A job Slurm does not know fails at once, with Slurm's words.
  EnqueueOrDie(TestNotification(12, "firing", "987654"), {"slurm-eos"});
  EXPECT_EQ(StepOrDie(*worker, "slurm-eos").failed, 1);
  std::vector<DeliveryRecord> d = Deliveries(12);
  EXPECT_TRUE(absl::StrContains(d[0].last_error, "NOT_FOUND")) << d[0].last_error;
  EXPECT_TRUE(absl::StrContains(d[0].last_error, "Invalid job id")) << d[0].last_error;
}

TEST_F(SlurmDeliveryTest, ARunningJobWhoseNameSaysItCompletedIsNotified) {
  // `scontrol show job` prints the name first, on the line of JobId, then its own JobState.
  const std::string job =
      RunningJob("", "train JobState=COMPLETED Reason=None\n   JobState=COMPLETED Reason=x");
  ASSERT_FALSE(job.empty());
  auto worker = ScontrolWorker();

  EnqueueOrDie(TestNotification(41, "firing", job), {"slurm-eos"});
  EXPECT_EQ(StepOrDie(*worker, "slurm-eos").delivered, 1) << Deliveries(41)[0].last_error;
  const std::string err = SettledStderr(job);
  EXPECT_EQ(Count(err, "goodput critical: OFU fell 2.5x"), 1) << err;
}

TEST_F(SlurmDeliveryTest, AMarkerTheOwnerWroteInNameOrCommentDoesNotSuppressTheNotification) {
  const std::string forged = "[goodput 42:slurm-eos:firing]";
  const std::string user_comment = absl::StrCat("mine ", forged, " x");
  const std::string job = RunningJob(
      user_comment, absl::StrCat("train Comment=", forged, "\n   Comment=", forged, " x"));
  ASSERT_FALSE(job.empty());
  auto worker = ScontrolWorker();

  EnqueueOrDie(TestNotification(42, "firing", job), {"slurm-eos"});
  EXPECT_EQ(StepOrDie(*worker, "slurm-eos").delivered, 1) << Deliveries(42)[0].last_error;
  ASSERT_TRUE(StderrShows(job, "goodput critical: OFU fell 2.5x"))
      << ReadWhole(slurm_->JobStderrPath(job));
  const std::string comment = Comment(job);
  EXPECT_TRUE(
      absl::StartsWith(comment, absl::StrCat(user_comment, " ", Marker(job, "42:slurm-eos:firing"),
                                             " goodput critical: OFU fell 2.5x")))
      << comment;

  // A retry after the real notification recognises goodput's own marker.
  ExpectARetrySendsNothingNew(*worker, job, 42);
}

TEST_F(SlurmDeliveryTest, TelemetryTextReachesTheJobVerbatimAndOddJobIdsAreRefused) {
  const std::string job = RunningJob("");
  ASSERT_FALSE(job.empty());
  auto worker = ScontrolWorker();

  Notification odd = TestNotification(43, "firing", job);
  odd.summary = R"(-h --help "quoted" it's $(id) `id`)";
  odd.description = "-rf";
  EnqueueOrDie(odd, {"slurm-eos"});
  EXPECT_EQ(StepOrDie(*worker, "slurm-eos").delivered, 1) << Deliveries(43)[0].last_error;
  const std::string text = R"(goodput critical: -h --help "quoted" it's $(id) `id` -- -rf)";
  EXPECT_TRUE(StderrShows(job, text)) << ReadWhole(slurm_->JobStderrPath(job));
  EXPECT_TRUE(absl::StrContains(Comment(job), text)) << Comment(job);

  int64_t alert_id = 44;
  for (const char* bad : {"-1", "--help", "-h"}) {
    EnqueueOrDie(TestNotification(alert_id, "firing", bad), {"slurm-eos"});
    EXPECT_EQ(StepOrDie(*worker, "slurm-eos").failed, 1) << bad;
    const std::string error = Deliveries(alert_id++)[0].last_error;
    EXPECT_TRUE(
        absl::StrContains(error, absl::StrCat("job_id=\"", bad, "\" is not a Slurm job id")))
        << error;
  }
  // Ids a shell or scontrol's Key=Value parser would act on: refused before any command runs,
  // shown on one line.
  const std::string marker = (std::filesystem::path(::testing::TempDir()) / "slurm-pwned").string();
  const std::vector<std::pair<std::string, std::string>> shell_ids = {
      {absl::StrCat(job, ";touch ", marker), absl::StrCat(job, ";touch ", marker)},
      {absl::StrCat("$(touch ", marker, ")"), absl::StrCat("$(touch ", marker, ")")},
      {absl::StrCat("`touch ", marker, "`"), absl::StrCat("`touch ", marker, "`")},
      {absl::StrCat(job, "'"), absl::StrCat(job, "'")},
      {absl::StrCat("\"", job, "\""), absl::StrCat("\"", job, "\"")},
      {absl::StrCat(job, "\nJobId=1"), absl::StrCat(job, " JobId=1")},
      {absl::StrCat(job, " Comment=x"), absl::StrCat(job, " Comment=x")}};
  for (const auto& [bad, shown] : shell_ids) {
    EnqueueOrDie(TestNotification(alert_id, "firing", bad), {"slurm-eos"});
    EXPECT_EQ(StepOrDie(*worker, "slurm-eos").failed, 1) << bad;
    const std::string error = Deliveries(alert_id++)[0].last_error;
    EXPECT_TRUE(
        absl::StrContains(error, absl::StrCat("job_id=\"", shown, "\" is not a Slurm job id")))
        << error;
    EXPECT_FALSE(absl::StrContains(error, "\n")) << error;
  }
  EXPECT_FALSE(std::filesystem::exists(marker));

  // A message made to look like more scontrol arguments, a shell, or terminal control.
  Notification tricky = TestNotification(alert_id, "firing", job);
  tricky.summary = absl::StrCat("--clear JobId=1 Comment=owned\n$(touch ", marker, ") `touch ",
                                marker, "` ; touch ", marker, " \x1b[31mred\x1b[0m 'q' \"qq\"");
  tricky.description = "\nTimeLimit=1";
  EnqueueOrDie(tricky, {"slurm-eos"});
  EXPECT_EQ(StepOrDie(*worker, "slurm-eos").delivered, 1) << Deliveries(alert_id)[0].last_error;
  const std::string expected =
      absl::StrCat("goodput critical: --clear JobId=1 Comment=owned $(touch ", marker,
                   ") `touch ", marker, "` ; touch ", marker, " [31mred [0m 'q' \"qq\" -- TimeLimit=1");
  EXPECT_TRUE(StderrShows(job, expected)) << ReadWhole(slurm_->JobStderrPath(job));
  EXPECT_TRUE(absl::StrContains(Comment(job), expected)) << Comment(job);
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST_F(SlurmDeliveryTest, OptionalRequeueHoldActsOnlyOnFiringAlertsSevereEnough) {
  const std::string job = RunningJob("");
  ASSERT_FALSE(job.empty());
  std::vector<std::unique_ptr<Target>> targets;
  targets.push_back(std::make_unique<SlurmTarget>(
      SlurmTargetConfig{.name = "slurm-eos",
                        .requeue = true,
                        .hold = true,
                        .action_min_severity = "critical",
                        .marker_secret = kMarkerSecret,
                        .slurm_conf = slurm_->slurm_conf().string()}));
  auto worker = MakeWorker(std::move(targets));

  Notification warning = TestNotification(31, "firing", job);
  warning.severity = "warning";
  EnqueueOrDie(warning, {"slurm-eos"});
  EXPECT_EQ(StepOrDie(*worker, "slurm-eos").delivered, 1);
  absl::StatusOr<std::string> show = slurm_->ShowJob(job);
  ASSERT_TRUE(show.ok());
  EXPECT_TRUE(absl::StrContains(*show, "JobState=RUNNING ")) << *show;
  EXPECT_TRUE(absl::StrContains(*show, "Restarts=0")) << *show;

  EnqueueOrDie(TestNotification(32, "firing", job), {"slurm-eos"});
  EXPECT_EQ(StepOrDie(*worker, "slurm-eos").delivered, 1) << Deliveries(32)[0].last_error;
  ASSERT_TRUE(slurm_->WaitForJobState(job, "PENDING", absl::Seconds(30)).ok());
  show = slurm_->ShowJob(job);
  ASSERT_TRUE(show.ok());
  EXPECT_TRUE(absl::StrContains(*show, "Restarts=1")) << *show;
  EXPECT_TRUE(absl::StrContains(*show, "Reason=job_requeued_in_held_state")) << *show;
  EXPECT_TRUE(absl::StrContains(*show, "Priority=0 ")) << *show;  // held
}

TEST_F(SlurmDeliveryTest, CommentGoesThroughSlurmrestd) {
  absl::StatusOr<std::filesystem::path> socket = slurm_->StartRestd();
  ASSERT_TRUE(socket.ok()) << socket.status();
  const std::string job = RunningJob("");
  ASSERT_FALSE(job.empty());
  std::vector<std::unique_ptr<Target>> targets;
  targets.push_back(
      std::make_unique<SlurmTarget>(SlurmTargetConfig{.name = "slurm-rest",
                                                      .mode = SlurmTargetConfig::Mode::kRest,
                                                      .marker_secret = kMarkerSecret,
                                                      .rest_url = "http://localhost",
                                                      .rest_unix_socket = socket->string()}));
  auto worker = MakeWorker(std::move(targets));

  EnqueueOrDie(TestNotification(21, "firing", job), {"slurm-rest"});
  EXPECT_EQ(StepOrDie(*worker, "slurm-rest").delivered, 1) << Deliveries(21)[0].last_error;
  const std::string comment = Comment(job);
  EXPECT_TRUE(absl::StartsWith(
      comment, absl::StrCat(Marker(job, "21:slurm-rest:firing"), " goodput critical: OFU")))
      << comment;

  EnqueueOrDie(TestNotification(22, "firing", "987654"), {"slurm-rest"});
  EXPECT_EQ(StepOrDie(*worker, "slurm-rest").failed, 1);
  EXPECT_TRUE(absl::StrContains(Deliveries(22)[0].last_error, "NOT_FOUND"))
      << Deliveries(22)[0].last_error;
}

}  // namespace
}  // namespace goodput::alerting
