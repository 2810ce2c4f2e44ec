#include "services/alerting/digest_scheduler.h"

#include <algorithm>
#include <exception>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/time_util.h"
#include "services/alerting/alert_messages.h"
#include "services/alerting/outbox.h"
#include "services/api/job_report.h"

namespace goodput::alerting {
namespace {

constexpr char kKeys[] =
    "enabled, period, groups, top_jobs, min_gpu_hours, targets, recipients, settle_s, "
    "report_wait_s, catch_up_periods, check_interval_s";

constexpr char kDoneStarts[] =
    "SELECT (extract(epoch FROM period_start) * 1000000)::bigint FROM alert_digest_periods "
    "WHERE group_by = $1 AND period_start >= 'epoch'::timestamptz + $2::bigint * interval '1 "
    "microsecond'";

constexpr char kClaimPeriod[] =
    "INSERT INTO alert_digest_periods (group_by, period_start, period_end) VALUES ($1, "
    "'epoch'::timestamptz + $2::bigint * interval '1 microsecond', "
    "'epoch'::timestamptz + $3::bigint * interval '1 microsecond') "
    "ON CONFLICT (group_by, period_start) DO NOTHING";

constexpr char kRecordPeriod[] =
    "UPDATE alert_digest_periods SET digests = $3, rows = $4 WHERE group_by = $1 AND "
    "period_start = 'epoch'::timestamptz + $2::bigint * interval '1 microsecond'";

absl::Status Invalid(const std::string& key, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat("alerting.digests.", key, ": ", problem));
}

// The child `key` of a mapping; an undefined node when `node` is not a mapping or lacks it
// (yaml-cpp throws when indexing an undefined node, so every step is checked).
YAML::Node Child(const YAML::Node& node, const std::string& key) {
  if (!node || !node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  const YAML::Node child = node[key];
  if (!child) return YAML::Node(YAML::NodeType::Undefined);
  return child;
}

YAML::Node Recipients(const platform::ConfigTree& tree) {
  return Child(Child(Child(tree.root(), "alerting"), "digests"), "recipients");
}

absl::StatusOr<std::map<std::string, std::string>> AddressMap(const platform::ConfigTree& tree,
                                                              const std::string& key) {
  std::map<std::string, std::string> out;
  const YAML::Node node = Child(Recipients(tree), key);
  if (!node || node.IsNull()) return out;
  if (!node.IsMap())
    return Invalid(absl::StrCat("recipients.", key), "must be a map of name to address");
  for (const auto& kv : node) {
    const std::string name = kv.first.as<std::string>();
    const std::string address = kv.second.IsScalar() ? kv.second.as<std::string>() : "";
    if (absl::Status s = CheckMailAddress(address); !s.ok()) {
      return Invalid(absl::StrCat("recipients.", key, ".", name), std::string(s.message()));
    }
    out[name] = address;
  }
  return out;
}

absl::Status CheckTemplate(const std::string& tmpl, const char* placeholder, const char* key) {
  if (tmpl.empty()) return absl::OkStatus();
  if (tmpl.find(placeholder) == std::string::npos) {
    return Invalid(key, absl::StrCat("\"", tmpl, "\" does not contain ", placeholder));
  }
  std::string sample = tmpl;
  sample.replace(sample.find(placeholder), std::string(placeholder).size(), "name");
  if (absl::Status s = CheckMailAddress(sample); !s.ok()) {
    return Invalid(key, std::string(s.message()));
  }
  return absl::OkStatus();
}

std::optional<double> OptionalOfu(const v1::ReportSummary& s) {
  if (!s.has_ofu()) return std::nullopt;
  return s.ofu();
}

}  // namespace

absl::StatusOr<DigestConfig> LoadDigestConfig(const platform::ConfigTree& tree) {
  DigestConfig c;
  absl::StatusOr<bool> enabled = tree.GetBool("alerting.digests.enabled", false);
  if (!enabled.ok()) return enabled.status();
  c.enabled = *enabled;
  if (!c.enabled) return c;
  const YAML::Node node = Child(Child(tree.root(), "alerting"), "digests");
  if (!node.IsMap()) return Invalid("enabled", "digests must be a map of keys");
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>();
    if (absl::StrContains(absl::StrCat(", ", kKeys, ","), absl::StrCat(" ", key, ","))) continue;
    return Invalid(key, absl::StrCat("unknown key (", kKeys, ")"));
  }
  absl::StatusOr<std::string> period = tree.GetString("alerting.digests.period", "weekly");
  if (!period.ok()) return period.status();
  absl::StatusOr<DigestPeriod> parsed = ParseDigestPeriod(*period);
  if (!parsed.ok()) return Invalid("period", std::string(parsed.status().message()));
  c.period = *parsed;
  if (tree.Has("alerting.digests.groups")) {
    absl::StatusOr<std::vector<std::string>> groups = tree.GetStringList("alerting.digests.groups");
    if (!groups.ok()) return groups.status();
    c.groups.clear();
    for (const std::string& g : *groups) {
      absl::StatusOr<DigestGroup> group = DigestGroupFromName(g);
      if (!group.ok()) return Invalid("groups", std::string(group.status().message()));
      if (std::find(c.groups.begin(), c.groups.end(), *group) == c.groups.end()) {
        c.groups.push_back(*group);
      }
    }
    if (c.groups.empty()) return Invalid("groups", "must name user, team or both");
  }
  absl::StatusOr<int64_t> top = tree.GetIntInRange("alerting.digests.top_jobs", 5, 1, 100);
  if (!top.ok()) return top.status();
  c.options.top_jobs = static_cast<int>(*top);
  absl::StatusOr<double> min = tree.GetDouble("alerting.digests.min_gpu_hours", 0);
  if (!min.ok()) return min.status();
  if (*min < 0) return Invalid("min_gpu_hours", absl::StrCat(*min, " is negative"));
  c.options.min_gpu_hours = *min;
  absl::StatusOr<std::vector<std::string>> targets = tree.GetStringList("alerting.digests.targets");
  if (!targets.ok()) return targets.status();
  if (targets->empty()) return Invalid("targets", "is required when digests are enabled");
  c.targets = *targets;
  for (auto [key, field] :
       {std::pair{"users", &c.recipients.users}, std::pair{"teams", &c.recipients.teams}}) {
    absl::StatusOr<std::map<std::string, std::string>> m = AddressMap(tree, key);
    if (!m.ok()) return m.status();
    *field = *m;
  }
  absl::StatusOr<std::string> user_template =
      tree.GetString("alerting.digests.recipients.user_template", "");
  if (!user_template.ok()) return user_template.status();
  absl::StatusOr<std::string> team_template =
      tree.GetString("alerting.digests.recipients.team_template", "");
  if (!team_template.ok()) return team_template.status();
  if (absl::Status s = CheckTemplate(*user_template, "{user}", "recipients.user_template");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckTemplate(*team_template, "{team}", "recipients.team_template");
      !s.ok()) {
    return s;
  }
  c.recipients.user_template = *user_template;
  c.recipients.team_template = *team_template;
  const YAML::Node recipients = Recipients(tree);
  if (recipients && !recipients.IsNull() && !recipients.IsMap()) {
    return Invalid("recipients", "must be a map (users, teams, user_template, team_template)");
  }
  for (const auto& kv : recipients&& recipients.IsMap() ? recipients : YAML::Node()) {
    const std::string key = kv.first.as<std::string>();
    if (key != "users" && key != "teams" && key != "user_template" && key != "team_template") {
      return Invalid(absl::StrCat("recipients.", key),
                     "unknown key (users, teams, user_template, team_template)");
    }
  }
  absl::StatusOr<absl::Duration> settle = tree.GetSeconds("alerting.digests.settle_s", 3600);
  if (!settle.ok()) return settle.status();
  absl::StatusOr<absl::Duration> wait = tree.GetSeconds("alerting.digests.report_wait_s", 21600);
  if (!wait.ok()) return wait.status();
  absl::StatusOr<absl::Duration> check = tree.GetSeconds("alerting.digests.check_interval_s", 60);
  if (!check.ok()) return check.status();
  for (auto [key, d] : {std::pair{"settle_s", *settle}, std::pair{"report_wait_s", *wait}}) {
    if (d < absl::ZeroDuration()) {
      return Invalid(key, absl::StrCat(absl::ToDoubleSeconds(d), " is negative"));
    }
  }
  for (auto [key, d] : {std::pair{"check_interval_s", *check}}) {
    if (d <= absl::ZeroDuration()) {
      return Invalid(key, absl::StrCat(absl::ToDoubleSeconds(d), " must be > 0"));
    }
  }
  c.settle = *settle;
  c.report_wait = *wait;
  c.check_interval = *check;
  absl::StatusOr<int64_t> catch_up =
      tree.GetIntInRange("alerting.digests.catch_up_periods", 1, 1, 1000);
  if (!catch_up.ok()) return catch_up.status();
  c.catch_up_periods = static_cast<int>(*catch_up);
  absl::StatusOr<std::string> dashboard = tree.GetString("alerting.dashboard_url", "");
  if (!dashboard.ok()) return dashboard.status();
  c.dashboard_url = *dashboard;
  return c;
}

DigestScheduler::DigestScheduler(platform::PgPool* pool, ReportServiceImpl* reports,
                                 DigestConfig config, std::function<void()> on_enqueued,
                                 platform::Logger logger, std::function<absl::Time()> clock)
    : pool_(pool),
      reports_(reports),
      config_(std::move(config)),
      on_enqueued_(std::move(on_enqueued)),
      logger_(std::move(logger)),
      clock_(std::move(clock)) {}

DigestScheduler::~DigestScheduler() { Stop(); }

void DigestScheduler::Start(std::function<bool()> may_run) {
  thread_ = std::thread([this, may_run = std::move(may_run)] { Run(may_run); });
}

void DigestScheduler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void DigestScheduler::Run(std::function<bool()> may_run) {
  while (true) {
    if (!may_run || may_run()) {
      absl::StatusOr<int> added = RunOnce();
      if (!added.ok()) {
        logger_.Warn("digests: looking at the closed periods failed; trying again later",
                     {{"error", std::string(added.status().message())}});
      }
    }
    absl::MutexLock lock(&mu_);
    if (mu_.AwaitWithTimeout(absl::Condition(&stop_), config_.check_interval)) return;
  }
}

absl::StatusOr<int> DigestScheduler::RunOnce() {
  const absl::Time now = clock_();
  const std::vector<PeriodRange> periods =
      ClosedPeriods(config_.period, now - config_.settle, config_.catch_up_periods);
  if (periods.empty()) return 0;
  std::map<DigestGroup, std::set<int64_t>> done;
  for (DigestGroup group : config_.groups) {
    absl::StatusOr<std::vector<int64_t>> starts = DoneStarts(group, periods.front().start);
    if (!starts.ok()) return starts.status();
    done[group] = std::set<int64_t>(starts->begin(), starts->end());
  }
  int added = 0;
  for (const PeriodRange& period : periods) {
    std::vector<DigestGroup> due;
    for (DigestGroup group : config_.groups) {
      if (!done[group].count(absl::ToUnixMicros(period.start))) due.push_back(group);
    }
    if (due.empty()) continue;
    absl::StatusOr<PeriodJobs> jobs = ReadJobs(period);
    if (!jobs.ok()) return jobs.status();
    if (jobs->pending_reports > 0 && now < period.end + config_.settle + config_.report_wait) {
      logger_.Info("digests: waiting for job reports",
                   {{"period", PeriodLabel(period.start, period.end)},
                    {"jobs_without_report", jobs->pending_reports}});
      continue;
    }
    for (DigestGroup group : due) {
      std::vector<Digest> digests =
          AssembleDigests(jobs->jobs, group, period.start, period.end, config_.options);
      for (Digest& d : digests) {
        for (DigestJob& job : d.top_jobs) {
          if (absl::Status s = FillTopJob(&job); !s.ok()) return s;
        }
      }
      absl::StatusOr<int> rows = Commit(group, period, digests);
      if (!rows.ok()) return rows.status();
      added += *rows;
      logger_.Info("digests: period enqueued", {{"group", DigestGroupName(group)},
                                                {"period", PeriodLabel(period.start, period.end)},
                                                {"jobs", static_cast<int64_t>(jobs->jobs.size())},
                                                {"digests", static_cast<int64_t>(digests.size())},
                                                {"rows", *rows}});
    }
  }
  if (added > 0 && on_enqueued_) on_enqueued_();
  return added;
}

absl::StatusOr<DigestScheduler::PeriodJobs> DigestScheduler::ReadJobs(const PeriodRange& period) {
  PeriodJobs out;
  std::string page_token;
  do {
    v1::ListJobReportsRequest request;
    *request.mutable_ended_in()->mutable_start_time() =
        google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(period.start));
    *request.mutable_ended_in()->mutable_end_time() =
        google::protobuf::util::TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(period.end));
    request.set_page_size(1000);
    request.set_page_token(page_token);
    v1::ListJobReportsResponse response;
    if (absl::Status s = reports_->DoListJobReports(request, &response); !s.ok()) {
      return absl::UnavailableError(absl::StrCat("job reports of the period: ", s.message()));
    }
    for (const v1::ReportSummary& s : response.reports()) {
      out.jobs.push_back(DigestJob{.cluster = s.job().cluster(),
                                   .job_id = s.job().job_id(),
                                   .user = s.user(),
                                   .team = s.team(),
                                   .gpu_model = s.gpu_model(),
                                   .gpus = s.gpus_allocated(),
                                   .ofu = OptionalOfu(s),
                                   .gpu_hours = s.gpu_hours(),
                                   .effective_gpu_hours = s.effective_gpu_hours(),
                                   .wasted_gpu_hours = s.wasted_gpu_hours(),
                                   .regressions = s.regression_count(),
                                   .transient_slowdowns =
                                       s.ledger().transient_slowdown_count(),
                                   .ledger = s.has_ledger()
                                                 ? std::optional<core::JobLedger>(
                                                       api::LedgerFromProto(s.ledger()))
                                                 : std::nullopt});
    }
    out.pending_reports = response.pending_reports();
    page_token = response.next_page_token();
  } while (!page_token.empty());
  return out;
}

absl::Status DigestScheduler::FillTopJob(DigestJob* job) {
  job->dashboard_url = DashboardUrl(config_.dashboard_url, job->cluster, job->job_id);
  v1::GetJobReportRequest request;
  request.mutable_job()->set_cluster(job->cluster);
  request.mutable_job()->set_job_id(job->job_id);
  v1::GetJobReportResponse response;
  if (absl::Status s = reports_->DoGetJobReport(request, &response); !s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("job report ", job->cluster, "/", job->job_id, ": ", s.message()));
  }
  if (response.report().advice_size() > 0) job->advice = response.report().advice(0).text();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> DigestScheduler::DoneStarts(DigestGroup group,
                                                                 absl::Time from) {
  return pool_->RunTransactionFor<std::vector<int64_t>>(
      [&](pqxx::work& tx) -> absl::StatusOr<std::vector<int64_t>> {
        std::vector<int64_t> out;
        for (const pqxx::row& r :
             tx.exec_params(kDoneStarts, DigestGroupName(group), absl::ToUnixMicros(from))) {
          out.push_back(r[0].as<int64_t>());
        }
        return out;
      });
}

absl::StatusOr<int> DigestScheduler::Commit(DigestGroup group, const PeriodRange& period,
                                            const std::vector<Digest>& digests) {
  return pool_->RunTransactionFor<int>([&](pqxx::work& tx) -> absl::StatusOr<int> {
    pqxx::result claimed =
        tx.exec_params(kClaimPeriod, DigestGroupName(group), absl::ToUnixMicros(period.start),
                       absl::ToUnixMicros(period.end));
    if (claimed.affected_rows() == 0) return 0;  // another replica has done it
    int rows = 0;
    for (const Digest& d : digests) {
      std::vector<DigestDelivery> deliveries;
      const std::optional<std::string> address = config_.recipients.AddressFor(group, d.name);
      for (const std::string& target : config_.targets) {
        if (config_.mail_targets.count(target)) {
          if (!address.has_value()) continue;  // no address: nobody to mail
          deliveries.push_back(DigestDelivery{.target = target, .to = {*address}});
        } else {
          deliveries.push_back(DigestDelivery{.target = target});
        }
      }
      absl::StatusOr<int> added = EnqueueDigest(tx, d, deliveries);
      if (!added.ok()) return added.status();
      rows += *added;
    }
    tx.exec_params(kRecordPeriod, DigestGroupName(group), absl::ToUnixMicros(period.start),
                   static_cast<int>(digests.size()), rows);
    return rows;
  });
}

}  // namespace goodput::alerting
