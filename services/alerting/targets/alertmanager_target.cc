#include "services/alerting/targets/alertmanager_target.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "services/alerting/targets/http_client.h"
#include "services/alerting/targets/render.h"

namespace goodput::alerting {

std::string AlertmanagerBody(const Notification& n, absl::Time now,
                             absl::Duration resend_interval) {
  nlohmann::json labels = {
      {"alertname", AlertName(n.kind)}, {"cluster", n.cluster}, {"job_id", n.job_id},
      {"severity", n.severity},         {"kind", n.kind},       {"fingerprint", n.fingerprint},
  };
  if (!n.team.empty()) labels["team"] = n.team;
  if (!n.scheduler.empty()) labels["scheduler"] = n.scheduler;
  nlohmann::json annotations = {{"summary", n.summary}, {"description", n.description}};
  if (n.factor) annotations["factor"] = absl::StrFormat("%.2f", *n.factor);
  if (!n.verdict.empty()) annotations["verdict"] = n.verdict;
  if (!n.dashboard_url.empty()) annotations["dashboard_url"] = n.dashboard_url;
  nlohmann::json alert = {{"labels", labels},
                          {"annotations", annotations},
                          {"startsAt", Rfc3339(ToAbslTime(n.start_time))}};
  if (!n.dashboard_url.empty()) alert["generatorURL"] = n.dashboard_url;
  if (n.state == "resolved") {
    // A resolution without a time is dated now: Alertmanager needs endsAt to close it.
    alert["endsAt"] = Rfc3339(n.end_time ? ToAbslTime(*n.end_time) : now);
  } else {
    alert["endsAt"] = Rfc3339(now + 4 * resend_interval);
  }
  return nlohmann::json::array({alert}).dump();
}

absl::Status AlertmanagerTarget::Send(const SendRequest& request) {
  HttpRequest http{
      .url = absl::StrCat(config_.url, "/api/v2/alerts"),
      .headers = config_.headers,
      .body = AlertmanagerBody(*request.notification, request.now, config_.resend_interval),
      .timeout = config_.timeout};
  http.headers.emplace_back("Content-Type", "application/json");
  absl::StatusOr<HttpResponse> response = PerformHttp(http);
  if (!response.ok()) return response.status();
  return HttpStatusToStatus(*response, absl::StrCat("alertmanager ", config_.url));
}

}  // namespace goodput::alerting
