#include "services/alerting/digest.h"

#include <algorithm>
#include <cmath>
#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

namespace goodput::alerting {
namespace {

constexpr char kRfc3339[] = "%Y-%m-%dT%H:%M:%SZ";

std::string Rfc3339Seconds(absl::Time t) {
  return absl::FormatTime(kRfc3339, t, absl::UTCTimeZone());
}

absl::StatusOr<absl::Time> ParseRfc3339(const std::string& text, const char* field) {
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, text, &t, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("digest ", field, "=\"", text, "\" is not an RFC 3339 time: ", error));
  }
  return t;
}

const std::string& GroupKey(const DigestJob& job, DigestGroup group) {
  return group == DigestGroup::kUser ? job.user : job.team;
}

bool MoreWasted(const DigestJob& a, const DigestJob& b) {
  if (a.wasted_gpu_hours != b.wasted_gpu_hours) return a.wasted_gpu_hours > b.wasted_gpu_hours;
  if (a.cluster != b.cluster) return a.cluster < b.cluster;
  return a.job_id < b.job_id;
}

bool NameFitsAddress(const std::string& name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '+' ||
           c == '-';
  });
}

nlohmann::json OptionalNumber(std::optional<double> v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

std::optional<double> NumberOrNull(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<double>();
}

}  // namespace

const char* DigestGroupName(DigestGroup group) {
  return group == DigestGroup::kUser ? "user" : "team";
}

absl::StatusOr<DigestGroup> DigestGroupFromName(const std::string& name) {
  if (name == "user") return DigestGroup::kUser;
  if (name == "team") return DigestGroup::kTeam;
  return absl::InvalidArgumentError(absl::StrCat("\"", name, "\" is not user or team"));
}

std::vector<Digest> AssembleDigests(const std::vector<DigestJob>& jobs, DigestGroup group,
                                    absl::Time start, absl::Time end,
                                    const DigestOptions& options) {
  std::map<std::string, std::vector<const DigestJob*>> by_name;
  for (const DigestJob& job : jobs) {
    const std::string& key = GroupKey(job, group);
    if (!key.empty()) by_name[key].push_back(&job);
  }
  std::vector<Digest> out;
  for (const auto& [name, members] : by_name) {
    Digest d{.group = group, .name = name, .period_start = start, .period_end = end};
    double ofu_weighted = 0;
    double ofu_hours = 0;
    for (const DigestJob* job : members) {
      ++d.jobs;
      d.gpu_hours += job->gpu_hours;
      d.effective_gpu_hours += job->effective_gpu_hours;
      d.wasted_gpu_hours += job->wasted_gpu_hours;
      if (job->regressions > 0) ++d.jobs_with_regressions;
      if (job->ledger.has_value()) {
        core::AddLedger(*job->ledger, d.ledger);
        ++d.jobs_with_ledger;
      }
      if (job->ofu.has_value() && job->gpu_hours > 0) {
        ofu_weighted += *job->ofu * job->gpu_hours;
        ofu_hours += job->gpu_hours;
      }
    }
    if (d.gpu_hours < options.min_gpu_hours) continue;
    if (ofu_hours > 0) d.ofu = ofu_weighted / ofu_hours;
    std::vector<const DigestJob*> ranked = members;
    std::sort(ranked.begin(), ranked.end(),
              [](const DigestJob* a, const DigestJob* b) { return MoreWasted(*a, *b); });
    for (int i = 0; i < std::min<int>(options.top_jobs, static_cast<int>(ranked.size())); ++i) {
      d.top_jobs.push_back(*ranked[i]);
    }
    out.push_back(std::move(d));
  }
  return out;
}

absl::StatusOr<DigestPeriod> ParseDigestPeriod(const std::string& text) {
  if (text == "weekly") return DigestPeriod{};
  if (text == "daily") return DigestPeriod{.length = absl::Hours(24), .anchor = absl::UnixEpoch()};
  int64_t seconds = 0;
  if (absl::SimpleAtoi(text, &seconds) && seconds >= 1) {
    return DigestPeriod{.length = absl::Seconds(seconds), .anchor = absl::UnixEpoch()};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\" is not weekly, daily or a whole number of seconds >= 1"));
}

std::vector<PeriodRange> ClosedPeriods(const DigestPeriod& period, absl::Time closed_by,
                                       int count) {
  // The last period boundary at or before closed_by ends the newest closed period.
  const int64_t k = static_cast<int64_t>(
      std::floor(absl::FDivDuration(closed_by - period.anchor, period.length)));
  std::vector<PeriodRange> out;
  for (int64_t i = k - count; i < k; ++i) {
    out.push_back(PeriodRange{.start = period.anchor + i * period.length,
                              .end = period.anchor + (i + 1) * period.length});
  }
  return out;
}

std::optional<std::string> DigestRecipients::AddressFor(DigestGroup group,
                                                        const std::string& name) const {
  const auto& fixed = group == DigestGroup::kUser ? users : teams;
  if (auto it = fixed.find(name); it != fixed.end()) return it->second;
  const std::string& tmpl = group == DigestGroup::kUser ? user_template : team_template;
  if (tmpl.empty() || !NameFitsAddress(name)) return std::nullopt;
  return absl::StrReplaceAll(tmpl, {{group == DigestGroup::kUser ? "{user}" : "{team}", name}});
}

absl::Status CheckMailAddress(const std::string& address) {
  const size_t at = address.rfind('@');
  if (at == std::string::npos || at == 0 || at + 1 == address.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", address, "\" is not an e-mail address (local@domain)"));
  }
  for (char c : address) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '<' || c == '>' || c == ',' || c == '"' || c == ';' ||
        c == '(' || c == ')' || c == '\\') {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", absl::CHexEscape(address),
          "\" may hold only printable ASCII without spaces, quotes, brackets or commas"));
    }
  }
  return absl::OkStatus();
}

std::string PeriodLabel(absl::Time start, absl::Time end) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  return absl::StrCat(absl::FormatTime("%Y-%m-%d %H:%M", start, utc), " to ",
                      absl::FormatTime("%Y-%m-%d %H:%M", end, utc), " UTC");
}

std::string FormatGpuHours(double gpu_hours) { return absl::StrFormat("%.2f", gpu_hours); }

std::string FormatOfu(std::optional<double> ofu) {
  return ofu ? absl::StrFormat("%.1f%%", 100 * *ofu) : "n/a";
}

std::string DigestSubject(const Digest& d) {
  return absl::StrCat("GPU efficiency digest for ", d.name, " (", DigestGroupName(d.group), "), ",
                      PeriodLabel(d.period_start, d.period_end));
}

std::string DigestText(const Digest& d) {
  std::string out =
      absl::StrCat("GPU efficiency digest for ", DigestGroupName(d.group), " ", d.name, "\n",
                   "Period: ", PeriodLabel(d.period_start, d.period_end), "\n\n");
  absl::StrAppend(&out, "Jobs ended: ", d.jobs, "\n");
  absl::StrAppend(&out, "GPU-hours allocated: ", FormatGpuHours(d.gpu_hours), "\n");
  absl::StrAppend(&out, "GPU-hours effective: ", FormatGpuHours(d.effective_gpu_hours), " (OFU ",
                  FormatOfu(d.ofu), ")\n");
  absl::StrAppend(&out, "GPU-hours wasted: ", FormatGpuHours(d.wasted_gpu_hours), "\n");
  if (d.jobs_with_regressions > 0) {
    absl::StrAppend(&out, "Jobs with regressions: ", d.jobs_with_regressions, "\n");
  }
  if (d.jobs_with_ledger > 0) {
    absl::StrAppend(&out, "Where the GPU-hours went", d.jobs_with_ledger < d.jobs
                        ? absl::StrCat(" (", d.jobs_with_ledger, " of the ", d.jobs, " jobs)")
                        : std::string(),
                    ": ", core::LedgerWords(d.ledger), "\n");
    if (d.ledger.transient_slowdowns > 0) {
      absl::StrAppend(&out, "Transient slowdowns: ", d.ledger.transient_slowdowns, " (",
                      FormatGpuHours(d.ledger.transient),
                      " GPU-hours), drops that recovered before they were confirmed; not paged\n");
    }
  }
  if (!d.top_jobs.empty()) {
    absl::StrAppend(&out, "\nMost wasteful jobs\n");
    for (size_t i = 0; i < d.top_jobs.size(); ++i) {
      const DigestJob& j = d.top_jobs[i];
      absl::StrAppend(&out, i + 1, ". ", j.cluster, "/", j.job_id, ": ",
                      FormatGpuHours(j.wasted_gpu_hours), " of ", FormatGpuHours(j.gpu_hours),
                      " GPU-hours wasted, OFU ", FormatOfu(j.ofu));
      if (j.gpus > 0) absl::StrAppend(&out, ", ", j.gpus, " x ", j.gpu_model);
      if (j.regressions > 0) absl::StrAppend(&out, " [REGRESSION]");
      if (j.transient_slowdowns > 0) {
        absl::StrAppend(&out, " [", j.transient_slowdowns, " TRANSIENT SLOWDOWN",
                        j.transient_slowdowns == 1 ? "" : "S", "]");
      }
      absl::StrAppend(&out, "\n");
      if (!j.advice.empty()) absl::StrAppend(&out, "   Advice: ", j.advice, "\n");
      if (!j.dashboard_url.empty()) absl::StrAppend(&out, "   ", j.dashboard_url, "\n");
    }
  }
  absl::StrAppend(&out,
                  "\nOFU: the share of the GPUs' peak tensor throughput the jobs used. Wasted "
                  "GPU-hours: allocated GPU-hours not turned into tensor work.\n");
  return out;
}

namespace {

// A digest's ledger in its stored payload (one stored before ledgers has none: zeros, and
// jobs_with_ledger 0).
nlohmann::json LedgerToJson(const core::JobLedger& l) {
  return {{"allocated_gpu_hours", l.allocated_gpu_hours},
          {"productive", l.productive},
          {"idle_gpus", l.idle_gpus},
          {"silent_gpus", l.silent_gpus},
          {"hung", l.hung},
          {"job_idle", l.job_idle},
          {"warmup", l.warmup},
          {"regression", l.regression},
          {"transient", l.transient},
          {"below_workload_baseline", l.below_workload_baseline},
          {"no_telemetry", l.no_telemetry},
          {"coverage", l.coverage},
          {"transient_slowdowns", l.transient_slowdowns}};
}

core::JobLedger LedgerFromJson(const nlohmann::json& j) {
  return {.allocated_gpu_hours = j.at("allocated_gpu_hours").get<double>(),
          .productive = j.at("productive").get<double>(),
          .idle_gpus = j.at("idle_gpus").get<double>(),
          .silent_gpus = j.at("silent_gpus").get<double>(),
          .hung = j.at("hung").get<double>(),
          .job_idle = j.at("job_idle").get<double>(),
          .warmup = j.at("warmup").get<double>(),
          .regression = j.at("regression").get<double>(),
          .transient = j.at("transient").get<double>(),
          .below_workload_baseline = j.at("below_workload_baseline").get<double>(),
          .no_telemetry = j.at("no_telemetry").get<double>(),
          .coverage = j.at("coverage").get<double>(),
          // A digest stored before transient slowdowns were counted has none.
          .transient_slowdowns = j.value("transient_slowdowns", 0)};
}

}  // namespace

nlohmann::json DigestToJson(const Digest& d) {
  nlohmann::json top = nlohmann::json::array();
  for (const DigestJob& j : d.top_jobs) {
    top.push_back({{"cluster", j.cluster},
                   {"job_id", j.job_id},
                   {"user", j.user},
                   {"team", j.team},
                   {"gpu_model", j.gpu_model},
                   {"gpus", j.gpus},
                   {"ofu", OptionalNumber(j.ofu)},
                   {"gpu_hours", j.gpu_hours},
                   {"effective_gpu_hours", j.effective_gpu_hours},
                   {"wasted_gpu_hours", j.wasted_gpu_hours},
                   {"regressions", j.regressions},
                   {"transient_slowdowns", j.transient_slowdowns},
                   {"advice", j.advice},
                   {"dashboard_url", j.dashboard_url}});
  }
  return {{"group", DigestGroupName(d.group)},
          {"name", d.name},
          {"period_start", Rfc3339Seconds(d.period_start)},
          {"period_end", Rfc3339Seconds(d.period_end)},
          {"jobs", d.jobs},
          {"gpu_hours", d.gpu_hours},
          {"effective_gpu_hours", d.effective_gpu_hours},
          {"wasted_gpu_hours", d.wasted_gpu_hours},
          {"ofu", OptionalNumber(d.ofu)},
          {"jobs_with_regressions", d.jobs_with_regressions},
          {"jobs_with_ledger", d.jobs_with_ledger},
          {"ledger", LedgerToJson(d.ledger)},
          {"top_jobs", top}};
}

absl::StatusOr<Digest> DigestFromJson(const nlohmann::json& j) {
  try {
    Digest d;
    absl::StatusOr<DigestGroup> group = DigestGroupFromName(j.at("group").get<std::string>());
    if (!group.ok()) return group.status();
    d.group = *group;
    d.name = j.at("name").get<std::string>();
    absl::StatusOr<absl::Time> start =
        ParseRfc3339(j.at("period_start").get<std::string>(), "period_start");
    if (!start.ok()) return start.status();
    absl::StatusOr<absl::Time> end =
        ParseRfc3339(j.at("period_end").get<std::string>(), "period_end");
    if (!end.ok()) return end.status();
    d.period_start = *start;
    d.period_end = *end;
    d.jobs = j.at("jobs").get<int>();
    d.gpu_hours = j.at("gpu_hours").get<double>();
    d.effective_gpu_hours = j.at("effective_gpu_hours").get<double>();
    d.wasted_gpu_hours = j.at("wasted_gpu_hours").get<double>();
    d.ofu = NumberOrNull(j, "ofu");
    d.jobs_with_regressions = j.value("jobs_with_regressions", 0);
    d.jobs_with_ledger = j.value("jobs_with_ledger", 0);
    if (j.contains("ledger")) d.ledger = LedgerFromJson(j.at("ledger"));
    for (const nlohmann::json& t : j.at("top_jobs")) {
      d.top_jobs.push_back(DigestJob{.cluster = t.at("cluster").get<std::string>(),
                                     .job_id = t.at("job_id").get<std::string>(),
                                     .user = t.value("user", ""),
                                     .team = t.value("team", ""),
                                     .gpu_model = t.value("gpu_model", ""),
                                     .gpus = t.value("gpus", 0),
                                     .ofu = NumberOrNull(t, "ofu"),
                                     .gpu_hours = t.at("gpu_hours").get<double>(),
                                     .effective_gpu_hours = t.value("effective_gpu_hours", 0.0),
                                     .wasted_gpu_hours = t.at("wasted_gpu_hours").get<double>(),
                                     .regressions = t.value("regressions", 0),
                                     .transient_slowdowns = t.value("transient_slowdowns", 0),
                                     .advice = t.value("advice", ""),
                                     .dashboard_url = t.value("dashboard_url", "")});
    }
    return d;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("digest payload: ", e.what()));
  }
}

}  // namespace goodput::alerting
