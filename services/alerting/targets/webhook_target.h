// Webhook target: the notification as a JSON POST, signed so that the receiver can tell it
// came from goodput and is not a replay.
//
// Headers:
//   X-Goodput-Timestamp: <unix seconds of this attempt>
//   X-Goodput-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>
//   Idempotency-Key: <alert>:<target>:<state>   (the same on every retry of the row)
// A receiver recomputes the HMAC over the timestamp header, a dot and the raw body, compares
// in constant time, refuses timestamps more than a few minutes old, and keeps the keys it has
// seen for at least the delivery max age, so a retry is never acted on twice.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "services/alerting/targets/target.h"

namespace goodput::alerting {

struct WebhookTargetConfig {
  std::string name = {};
  std::string url = {};
  std::string secret = {};  // HMAC key; required
  std::vector<std::pair<std::string, std::string>> headers = {};
  absl::Duration timeout = absl::Seconds(10);
};

// The body the webhook target POSTs for `n` (stable field names; times in RFC 3339;
// "type": "alert").
std::string WebhookBody(const Notification& n, const std::string& idempotency_key,
                        const std::string& target);

// The body for a digest: {"type": "digest", "idempotency_key", "target", "digest": {...}}.
std::string WebhookDigestBody(const Digest& digest, const std::string& idempotency_key,
                              const std::string& target);

// "sha256=" + hex HMAC-SHA256(secret, timestamp + "." + body).
std::string WebhookSignature(const std::string& secret, const std::string& timestamp,
                             const std::string& body);

class WebhookTarget final : public Target {
 public:
  explicit WebhookTarget(WebhookTargetConfig config) : config_(std::move(config)) {}

  // Target:
  const std::string& name() const override { return config_.name; }
  const char* kind() const override { return "webhook"; }
  absl::Status Send(const SendRequest& request) override;
  bool delivers_digests() const override { return true; }
  absl::Status SendDigest(const DigestSendRequest& request) override;

 private:
  absl::Status Post(const std::string& body, const std::string& idempotency_key, absl::Time now);
  WebhookTargetConfig config_;
};

}  // namespace goodput::alerting
