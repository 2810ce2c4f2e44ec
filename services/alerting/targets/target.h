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
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "services/alerting/digest.h"
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

// One send of one digest row (outbox.h, DigestPayload).
struct DigestSendRequest {
  const Digest* digest = nullptr;
  std::vector<std::string> to = {};  // e-mail recipients resolved when it was enqueued
  std::string idempotency_key = {};  // digest:<user|team>:<name>:<period start>:<target>
  int attempt = 1;
  absl::Time now = {};
};

// One send of one job report's AdminComment row (outbox.h, AdminCommentPayload).
struct AdminCommentSendRequest {
  const AdminCommentPayload* payload = nullptr;
  std::string idempotency_key = {};  // admin_comment:<cluster>/<job id>:<revision>:<target>
  int attempt = 1;
  absl::Time now = {};
};

class Target {
 public:
  virtual ~Target() = default;

  // The name routes refer to (alerting.targets[].name).
  virtual const std::string& name() const = 0;
  // "slurm", "osmo", "alertmanager", "webhook", "smtp" or "slurm_admin_comment".
  virtual const char* kind() const = 0;
  // The cluster whose jobs this target acts on (scheduler targets: slurm, osmo,
  // slurm_admin_comment); empty for targets that take every cluster's rows (alertmanager,
  // webhook, smtp). The worker skips a row of another cluster: it is recorded as dropped with
  // the reason and never sent.
  virtual const std::string& cluster() const {
    static const std::string kAny;
    return kAny;
  }
  // Sends one notification (see the file comment for the meaning of the status). Called from
  // one thread at a time per target.
  virtual absl::Status Send(const SendRequest& request) = 0;
  // True for targets that deliver digests (webhook, smtp).
  virtual bool delivers_digests() const { return false; }
  // Sends one digest; the status means what Send's does. Targets that do not deliver
  // digests refuse (FAILED_PRECONDITION, permanent).
  virtual absl::Status SendDigest(const DigestSendRequest& request);
  // True for targets that write job reports' AdminComments (slurm_admin_comment).
  virtual bool delivers_admin_comments() const { return false; }
  // Writes one AdminComment; the status means what Send's does. Other targets refuse
  // (FAILED_PRECONDITION, permanent).
  virtual absl::Status SendAdminComment(const AdminCommentSendRequest& request);
  // Set when a delivered firing notification must be sent again at this interval until the
  // alert resolves (Alertmanager forgets alerts that are not re-sent).
  virtual std::optional<absl::Duration> resend_interval() const { return std::nullopt; }
};

inline absl::Status Target::SendDigest(const DigestSendRequest&) {
  return absl::FailedPreconditionError(
      absl::StrCat("target ", name(), " (", kind(), ") does not deliver digests"));
}

inline absl::Status Target::SendAdminComment(const AdminCommentSendRequest&) {
  return absl::FailedPreconditionError(
      absl::StrCat("target ", name(), " (", kind(), ") does not write AdminComments"));
}

}  // namespace goodput::alerting
