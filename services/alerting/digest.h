// Efficiency digests: for one user (or team) and one period, how many of their jobs ended,
// the GPU-hours allocated, effective and wasted, their OFU (GPU-hour weighted) and the most
// wasteful jobs with their advice. Pure: assembled from job-report figures the caller read
// (ofu's ReportService), periods computed from a time the caller passes in.
//
//   std::vector<Digest> d = AssembleDigests(jobs, DigestGroup::kUser, start, end,
//                                           {.top_jobs = 3, .min_gpu_hours = 10});
//   std::string text = DigestText(d[0]);
//
// The same JSON (DigestToJson) is the outbox payload and the webhook body's `digest`.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/core/ledger.h"

namespace goodput::alerting {

enum class DigestGroup { kUser, kTeam };

// "user" or "team".
const char* DigestGroupName(DigestGroup group);
// INVALID_ARGUMENT naming the value unless "user" or "team".
absl::StatusOr<DigestGroup> DigestGroupFromName(const std::string& name);

// One ended job as a digest sees it: the figures of its job report's summary.
struct DigestJob {
  std::string cluster = {};
  std::string job_id = {};
  std::string user = {};
  std::string team = {};
  std::string gpu_model = {};
  int gpus = 0;
  std::optional<double> ofu = {};  // unset when the report has none
  double gpu_hours = 0;            // allocated
  double effective_gpu_hours = 0;
  double wasted_gpu_hours = 0;
  int regressions = 0;             // regression alerts of the job
  int transient_slowdowns = 0;     // drops that recovered before they were confirmed
  std::optional<core::JobLedger> ledger = {};  // where its GPU-hours went; unset: no window
  std::string advice = {};         // the report's first advice, as a person reads it
  std::string dashboard_url = {};  // the job's page; empty when no dashboard is configured
};

struct Digest {
  DigestGroup group = DigestGroup::kUser;
  std::string name = {};  // the user or the team
  absl::Time period_start = {};
  absl::Time period_end = {};
  int jobs = 0;  // jobs that ended in the period
  double gpu_hours = 0;
  double effective_gpu_hours = 0;
  double wasted_gpu_hours = 0;
  std::optional<double> ofu = {};  // GPU-hour weighted over the jobs that have one
  int jobs_with_regressions = 0;
  // The jobs' ledgers summed (services/core/ledger.h), over `jobs_with_ledger` of them.
  core::JobLedger ledger = {};
  int jobs_with_ledger = 0;
  std::vector<DigestJob> top_jobs = {};  // most wasted GPU-hours first
};

struct DigestOptions {
  int top_jobs = 5;
  // A user (team) whose jobs held fewer allocated GPU-hours in the period gets no digest.
  double min_gpu_hours = 0;
};

// The digests of one grouping over the jobs that ended in [start, end): one per user (team)
// that has at least options.min_gpu_hours, ordered by name. Jobs without a user (team) are
// in no digest of that grouping. Top jobs: most wasted first, then cluster and job id.
std::vector<Digest> AssembleDigests(const std::vector<DigestJob>& jobs, DigestGroup group,
                                    absl::Time start, absl::Time end, const DigestOptions& options);

// How often digests go out. Periods are [anchor + k × length, anchor + (k+1) × length):
// weekly from Monday 00:00 UTC, daily from 00:00 UTC, or any number of seconds from the
// Unix epoch.
struct DigestPeriod {
  absl::Duration length = absl::Hours(24 * 7);
  absl::Time anchor = absl::FromUnixSeconds(4 * 86400);  // Monday 1970-01-05 00:00 UTC
};

// "weekly", "daily" or a whole number of seconds >= 1; INVALID_ARGUMENT naming the value.
absl::StatusOr<DigestPeriod> ParseDigestPeriod(const std::string& text);

struct PeriodRange {
  absl::Time start = {};
  absl::Time end = {};
};

// The last `count` periods that ended at or before `closed_by`, oldest first.
std::vector<PeriodRange> ClosedPeriods(const DigestPeriod& period, absl::Time closed_by, int count);

// Where a digest goes by e-mail: a fixed address per user (team), else a template in which
// {user} ({team}) is replaced by the name.
struct DigestRecipients {
  std::map<std::string, std::string> users = {};
  std::map<std::string, std::string> teams = {};
  std::string user_template = {};  // e.g. "{user}@example.org"; empty: none
  std::string team_template = {};

  // The address for the user (team); nullopt when none is configured, or when the template
  // would need a name that cannot stand in an address (anything but letters, digits and
  // ". _ + -").
  std::optional<std::string> AddressFor(DigestGroup group, const std::string& name) const;
};

// Checks that `address` is a plain addr-spec (local@domain, printable ASCII, no spaces,
// angle brackets, commas or quotes): INVALID_ARGUMENT saying which part is wrong.
absl::Status CheckMailAddress(const std::string& address);

// "2026-11-23 00:00 to 2026-11-30 00:00 UTC".
std::string PeriodLabel(absl::Time start, absl::Time end);
// GPU-hours as the digest prints them: "12.35".
std::string FormatGpuHours(double gpu_hours);
// OFU as the digest prints it: "37.2%"; "n/a" when unset.
std::string FormatOfu(std::optional<double> ofu);

// "GPU efficiency digest for alice (user), 2026-11-23 00:00 to 2026-11-30 00:00 UTC".
std::string DigestSubject(const Digest& digest);
// The digest as plain text for a person (lines end in "\n").
std::string DigestText(const Digest& digest);

// The digest as JSON (times RFC 3339) and back.
nlohmann::json DigestToJson(const Digest& digest);
absl::StatusOr<Digest> DigestFromJson(const nlohmann::json& json);

}  // namespace goodput::alerting
