// The digest scheduler: when a digest period has closed (plus `settle` for late job
// reports), reads the reports of the jobs that ended in it (alerting's own job-end reports,
// report_service.h, in process),
// assembles the per-user and per-team digests (digest.h) and enqueues one outbox row per
// (user or team, period, target) (outbox.h EnqueueDigest). Delivery then sends them like
// alert notifications.
//
// Exactly once: the period is recorded in `alert_digest_periods` in the transaction that
// enqueues its rows, so a restarted replica skips it; two replicas racing on it add nothing
// twice (the record's primary key and the outbox's idempotency keys). Only the holder of a
// Redis lease runs it (main.cc), so replicas do not repeat the reads.
//
// A period whose jobs do not all have a report yet waits for them, up to `report_wait` after
// its settle time; then it goes out with the reports there are.
//
//   DigestScheduler s(pool, &report_service, config, [&] { worker.Wake(); }, logger);
//   s.Start(may_run);   ...   s.Stop();
//   // tests: s.RunOnce() with an injected clock
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "services/alerting/digest.h"
#include "services/alerting/report_service.h"
#include "services/platform/config.h"
#include "services/platform/logging.h"
#include "services/platform/pg_pool.h"

namespace goodput::alerting {

// `alerting.digests.*` (README.md, "Digests").
struct DigestConfig {
  bool enabled = false;
  DigestPeriod period = {};
  std::vector<DigestGroup> groups = {DigestGroup::kUser, DigestGroup::kTeam};
  DigestOptions options = {};
  std::vector<std::string> targets = {};
  std::set<std::string> mail_targets = {};  // those of kind smtp (main.cc fills it in)
  DigestRecipients recipients = {};
  absl::Duration settle = absl::Hours(1);
  absl::Duration report_wait = absl::Hours(6);
  int catch_up_periods = 1;  // closed periods looked at, newest last
  absl::Duration check_interval = absl::Seconds(60);
  std::string dashboard_url = {};  // alerting.dashboard_url: links to the jobs' pages
};

// Reads alerting.digests.* (and alerting.dashboard_url). Disabled: only `enabled` is read.
// INVALID_ARGUMENT naming the key and value for anything wrong.
absl::StatusOr<DigestConfig> LoadDigestConfig(const platform::ConfigTree& tree);

class DigestScheduler {
 public:
  // `on_enqueued` is called after a commit that added rows (wake the delivery worker).
  DigestScheduler(
      platform::PgPool* pool, ReportServiceImpl* reports, DigestConfig config,
      std::function<void()> on_enqueued, platform::Logger logger,
      std::function<absl::Time()> clock = [] { return absl::Now(); });
  ~DigestScheduler();

  // A thread that calls RunOnce every check_interval while `may_run()` (empty: always).
  void Start(std::function<bool()> may_run);
  void Stop();

  // Looks at the closed periods once and enqueues the digests of each that is due and not
  // done yet. Returns the outbox rows added; UNAVAILABLE when PostgreSQL is down (the periods
  // are looked at again next time).
  absl::StatusOr<int> RunOnce();

 private:
  struct PeriodJobs {
    std::vector<DigestJob> jobs;
    int pending_reports = 0;
  };
  absl::StatusOr<PeriodJobs> ReadJobs(const PeriodRange& period);
  absl::Status FillTopJob(DigestJob* job);
  absl::StatusOr<std::vector<int64_t>> DoneStarts(DigestGroup group, absl::Time from);
  absl::StatusOr<int> Commit(DigestGroup group, const PeriodRange& period,
                             const std::vector<Digest>& digests);
  void Run(std::function<bool()> may_run);

  platform::PgPool* pool_;
  ReportServiceImpl* reports_;
  DigestConfig config_;
  std::function<void()> on_enqueued_;
  platform::Logger logger_;
  std::function<absl::Time()> clock_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ = {};
};

}  // namespace goodput::alerting
