#include "services/alerting/targets/osmo_target.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "services/alerting/targets/http_client.h"
#include "services/alerting/targets/render.h"

namespace goodput::alerting {

int SeverityRank(const std::string& severity) {
  if (severity == "info") return 1;
  if (severity == "warning") return 2;
  if (severity == "critical") return 3;
  return 0;
}

std::string OsmoTag(const std::string& tag_prefix, const std::string& kind) {
  std::string tag = absl::StrCat(tag_prefix, kind);
  std::replace(tag.begin(), tag.end(), '_', '-');
  return tag;
}

absl::Status OsmoTarget::Post(const std::string& path_and_query, const std::string& what) {
  HttpRequest http{.url = absl::StrCat(config_.url, path_and_query),
                   .headers = config_.headers,
                   .timeout = config_.timeout};
  http.headers.emplace_back("Content-Type", "application/json");
  absl::StatusOr<HttpResponse> response = PerformHttp(http);
  if (!response.ok()) return response.status();
  return HttpStatusToStatus(*response, what);
}

absl::Status OsmoTarget::Send(const SendRequest& request) {
  const Notification& n = *request.notification;
  if (!config_.cluster.empty() && n.cluster != config_.cluster) {
    return absl::InvalidArgumentError(
        absl::StrCat("job ", OneLine(n.cluster, 100), "/", OneLine(n.job_id, 100),
                     " is not on cluster ", config_.cluster, " that target ", name(), " serves"));
  }
  std::string workflow;
  for (const std::string& key : config_.workflow_label_keys) {
    auto it = n.labels.find(key);
    if (it != n.labels.end() && !it->second.empty()) {
      workflow = it->second;
      break;
    }
  }
  if (workflow.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job ", n.cluster, "/", n.job_id, " has none of the labels ",
        absl::StrJoin(config_.workflow_label_keys, ", "), " that name its Osmo workflow"));
  }
  // Escaped, the name is one path segment, except "." and ".." which URL resolution (curl's
  // too) would take as this or the parent folder: POST .../api/workflow/../tag.
  if (workflow == "." || workflow == "..") {
    return absl::InvalidArgumentError(absl::StrCat("job ", n.cluster, "/", n.job_id,
                                                   ": workflow \"", workflow,
                                                   "\" is not an Osmo workflow name"));
  }
  const std::string base = absl::StrCat("/api/workflow/", UrlEscape(workflow));
  const std::string tag = OsmoTag(config_.tag_prefix, n.kind);
  const bool firing = n.state == "firing";
  if (absl::Status s =
          Post(absl::StrCat(base, "/tag?", firing ? "add=" : "remove=", UrlEscape(tag)),
               absl::StrCat("osmo tag of workflow ", workflow));
      !s.ok()) {
    return s;
  }
  if (firing && config_.cancel &&
      SeverityRank(n.severity) >= SeverityRank(config_.cancel_min_severity)) {
    HttpRequest http{.url = absl::StrCat(config_.url, base, "/cancel"),
                     .headers = config_.headers,
                     .timeout = config_.timeout};
    absl::StatusOr<HttpResponse> response = PerformHttp(http);
    if (!response.ok()) return response.status();
    if (response->status == 409) return absl::OkStatus();  // already stopped
    return HttpStatusToStatus(*response, absl::StrCat("osmo cancel of workflow ", workflow));
  }
  return absl::OkStatus();
}

}  // namespace goodput::alerting
