#include "services/alerting/targets/webhook_target.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "services/alerting/targets/http_client.h"
#include "services/alerting/targets/render.h"
#include "services/alerting/targets/signing.h"

namespace goodput::alerting {

std::string WebhookBody(const Notification& n, const std::string& idempotency_key,
                        const std::string& target) {
  nlohmann::json j = NotificationFieldsJson(n);
  j["type"] = "alert";
  j["idempotency_key"] = idempotency_key;
  j["target"] = target;
  j["start_time"] = Rfc3339(ToAbslTime(n.start_time));
  j["factor"] = n.factor ? nlohmann::json(*n.factor) : nlohmann::json(nullptr);
  j["end_time"] =
      n.end_time ? nlohmann::json(Rfc3339(ToAbslTime(*n.end_time))) : nlohmann::json(nullptr);
  return j.dump();
}

std::string WebhookDigestBody(const Digest& digest, const std::string& idempotency_key,
                              const std::string& target) {
  return nlohmann::json{{"type", "digest"},
                        {"idempotency_key", idempotency_key},
                        {"target", target},
                        {"digest", DigestToJson(digest)}}
      .dump();
}

std::string WebhookSignature(const std::string& secret, const std::string& timestamp,
                             const std::string& body) {
  return absl::StrCat("sha256=", HmacSha256Hex(secret, absl::StrCat(timestamp, ".", body)));
}

absl::Status WebhookTarget::Send(const SendRequest& request) {
  return Post(WebhookBody(*request.notification, request.idempotency_key, name()),
              request.idempotency_key, request.now);
}

absl::Status WebhookTarget::SendDigest(const DigestSendRequest& request) {
  return Post(WebhookDigestBody(*request.digest, request.idempotency_key, name()),
              request.idempotency_key, request.now);
}

absl::Status WebhookTarget::Post(const std::string& body, const std::string& idempotency_key,
                                 absl::Time now) {
  const std::string timestamp = absl::StrCat(absl::ToUnixSeconds(now));
  HttpRequest http{
      .url = config_.url, .headers = config_.headers, .body = body, .timeout = config_.timeout};
  http.headers.emplace_back("Content-Type", "application/json");
  http.headers.emplace_back("X-Goodput-Timestamp", timestamp);
  http.headers.emplace_back("X-Goodput-Signature",
                            WebhookSignature(config_.secret, timestamp, body));
  http.headers.emplace_back("Idempotency-Key", idempotency_key);
  absl::StatusOr<HttpResponse> response = PerformHttp(http);
  if (!response.ok()) return response.status();
  return HttpStatusToStatus(*response, absl::StrCat("webhook ", config_.url));
}

}  // namespace goodput::alerting
