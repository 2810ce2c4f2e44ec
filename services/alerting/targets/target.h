// A delivery target: one configured peer (a Slurm cluster, an Osmo deployment, an
// Alertmanager, a webhook receiver) that the delivery worker hands outbox rows to.
//
// Send reports what the peer did: OK when it has the notification; a permanent error
// (delivery_policy.h IsPermanentError: INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, ...)
// when another attempt cannot help; anything else (UNAVAILABLE, DEADLINE_EXCEEDED,
// RESOURCE_EXHAUSTED, PERMISSION_DENIED, ...) is retried with backoff. The same row always
// carries the same idempotency key, so a target whose peer can deduplicate passes it on.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/alerting/outbox.h"

namespace goodput::alerting {

// One send of one outbox row.
struct SendRequest {
  const Notification* notification = nullptr;
  std::string idempotency_key = {};  // (alert, target, state)
  int attempt = 1;                   // 1 for the first attempt of the row
  bool resend = false;               // a periodic re-send of a delivered firing row
  absl::Time now = {};               // the worker's clock
};

class Target {
 public:
  virtual ~Target() = default;

  // The name routes refer to (alerting.targets[].name).
  virtual const std::string& name() const = 0;
  // "slurm", "osmo", "alertmanager" or "webhook".
  virtual const char* kind() const = 0;
  // Sends one notification (see the file comment for the meaning of the status). Called from
  // one thread at a time per target.
  virtual absl::Status Send(const SendRequest& request) = 0;
  // Set when a delivered firing notification must be sent again at this interval until the
  // alert resolves (Alertmanager forgets alerts that are not re-sent).
  virtual std::optional<absl::Duration> resend_interval() const { return std::nullopt; }
};

}  // namespace goodput::alerting
