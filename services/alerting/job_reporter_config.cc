// alerting.reports.* (job_reporter.h's ReporterOptions), with the carbon and cost rates per
// site (services/core/carbon_cost.h).
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/alerting/job_reporter.h"
#include "yaml-cpp/yaml.h"

namespace goodput::alerting {
namespace {

absl::Status Invalid(const std::string& key, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat("alerting.reports.", key, ": ", problem));
}

constexpr char kReportKeys[] =
    "enabled, ofu_address, mfu_address, token, timeout_s, revise_for_s, idle_check_s, "
    "retry_backoff_s, admin_comment_targets, sites";

// alerting.reports.sites: [{cluster, pue, grid_gco2e_per_kwh, currency, price_per_gpu_hour,
// price_per_kwh}].
absl::StatusOr<std::vector<core::SiteRates>> LoadSites(const platform::ConfigTree& tree) {
  std::vector<core::SiteRates> out;
  const YAML::Node& root = tree.root();
  std::optional<YAML::Node> list;
  if (root.IsMap() && root["alerting"].IsMap() && root["alerting"]["reports"].IsMap()) {
    list = root["alerting"]["reports"]["sites"];
  }
  if (!list || !list->IsDefined() || list->IsNull()) return out;
  if (!list->IsSequence()) {
    return absl::InvalidArgumentError("config key alerting.reports.sites: expected a list");
  }
  constexpr const char* kKeys[] = {"cluster",            "pue",           "grid_gco2e_per_kwh",
                                   "currency",           "price_per_gpu_hour",
                                   "price_per_kwh"};
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string where = absl::StrCat("config key alerting.reports.sites[", i, "]");
    const YAML::Node site = (*list)[i];
    if (!site.IsMap()) return absl::InvalidArgumentError(absl::StrCat(where, ": expected a mapping"));
    core::SiteRates r;
    for (const auto& kv : site) {
      const std::string key = kv.first.as<std::string>();
      if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".", key, ": unknown key (", absl::StrJoin(kKeys, ", "), ")"));
      }
      try {
        if (key == "cluster") r.cluster = kv.second.as<std::string>();
        if (key == "currency") r.currency = kv.second.as<std::string>();
        if (key == "pue") r.pue = kv.second.as<double>();
        if (key == "grid_gco2e_per_kwh") r.grid_gco2e_per_kwh = kv.second.as<double>();
        if (key == "price_per_gpu_hour") r.price_per_gpu_hour = kv.second.as<double>();
        if (key == "price_per_kwh") r.price_per_kwh = kv.second.as<double>();
      } catch (const YAML::Exception&) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".", key, ": \"", kv.second.Scalar(), "\" is not ",
            key == "cluster" || key == "currency" ? "a string" : "a number"));
      }
    }
    if (absl::Status s = core::ValidateSiteRates(r, where); !s.ok()) return s;
    for (const core::SiteRates& before : out) {
      if (before.cluster == r.cluster) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ".cluster: \"", r.cluster, "\" has rates already"));
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}


}  // namespace

absl::StatusOr<ReporterOptions> LoadReporterOptions(const platform::ConfigTree& tree) {
  ReporterOptions o;
  for (const std::string& key : tree.ChildKeys("alerting.reports")) {
    if (!absl::StrContains(absl::StrCat(", ", kReportKeys, ","), absl::StrCat(" ", key, ","))) {
      return Invalid(key, absl::StrCat("unknown key (", kReportKeys, ")"));
    }
  }
  absl::StatusOr<std::string> ofu = tree.GetString("alerting.reports.ofu_address", "");
  if (!ofu.ok()) return ofu.status();
  o.ofu_address = *ofu;
  // On by default wherever ofu's address is known.
  absl::StatusOr<bool> enabled = tree.GetBool("alerting.reports.enabled", !ofu->empty());
  if (!enabled.ok()) return enabled.status();
  o.enabled = *enabled;
  if (!o.enabled) return o;
  if (o.ofu_address.empty()) {
    return Invalid("ofu_address",
                   "is required when reports are enabled (goodput-ofu's gRPC address)");
  }
  absl::StatusOr<std::string> mfu = tree.GetString("alerting.reports.mfu_address", "");
  if (!mfu.ok()) return mfu.status();
  o.mfu_address = *mfu;
  absl::StatusOr<std::string> token = tree.GetString("alerting.reports.token", "");
  if (!token.ok()) return token.status();
  o.token = *token;
  absl::StatusOr<absl::Duration> timeout = tree.GetSeconds("alerting.reports.timeout_s", 10);
  if (!timeout.ok()) return timeout.status();
  absl::StatusOr<absl::Duration> revise_for =
      tree.GetSeconds("alerting.reports.revise_for_s", 86400);
  if (!revise_for.ok()) return revise_for.status();
  absl::StatusOr<absl::Duration> idle = tree.GetSeconds("alerting.reports.idle_check_s", 60);
  if (!idle.ok()) return idle.status();
  absl::StatusOr<absl::Duration> backoff = tree.GetSeconds("alerting.reports.retry_backoff_s", 5);
  if (!backoff.ok()) return backoff.status();
  for (auto [key, d] : {std::pair{"timeout_s", *timeout}, std::pair{"idle_check_s", *idle},
                        std::pair{"retry_backoff_s", *backoff}}) {
    if (d <= absl::ZeroDuration()) {
      return Invalid(key, absl::StrCat(absl::ToDoubleSeconds(d), " must be > 0"));
    }
  }
  if (*revise_for < absl::ZeroDuration()) {
    return Invalid("revise_for_s",
                   absl::StrCat(absl::ToDoubleSeconds(*revise_for), " is negative"));
  }
  o.rpc_timeout = *timeout;
  o.revise_for = *revise_for;
  o.idle_check = *idle;
  o.retry_backoff = *backoff;
  absl::StatusOr<std::vector<std::string>> targets =
      tree.GetStringList("alerting.reports.admin_comment_targets");
  if (!targets.ok()) return targets.status();
  o.admin_comment_targets = *targets;
  absl::StatusOr<std::vector<core::SiteRates>> sites = LoadSites(tree);
  if (!sites.ok()) return sites.status();
  o.sites = *std::move(sites);
  return o;
}

}  // namespace goodput::alerting
