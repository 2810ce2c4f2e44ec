// PostgreSQL side of delivery: claiming due outbox rows and recording attempts and outcomes
// (tables of migrations/0031 and 0040). Times come from the worker's clock, not the
// server's, so that tests can drive them.
//
// A claim moves the row's next_attempt_at one lease ahead and commits at once (FOR UPDATE
// SKIP LOCKED, so replicas never claim the same row): nobody else takes it while it is being
// sent, no transaction stays open during the send, and a sender that dies leaves the row due
// again when the lease ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/platform/pg_pool.h"

namespace goodput::alerting {

struct ClaimedRow {
  int64_t id = 0;
  int64_t alert_id = 0;     // 0 for a digest
  std::string kind = {};    // alert | digest | admin_comment
  std::string state = {};   // firing | resolved | digest | admin_comment
  std::string idempotency_key = {};
  std::string payload = {};  // Notification, DigestPayload or AdminCommentPayload JSON
  int attempts = 0;          // before this one
  absl::Time created = {};
  bool resolved_sibling = false;  // resends only: the alert has a resolution for this target
};

class DeliveryStore {
 public:
  explicit DeliveryStore(platform::PgPool* pool) : pool_(pool) {}

  // Due pending rows of `target` (oldest due first, at most `limit`), leased until
  // `lease_until`. A resolution waits while the firing notification of the same alert and
  // target is still pending, so a peer never hears them in the wrong order.
  absl::StatusOr<std::vector<ClaimedRow>> ClaimDue(const std::string& target, absl::Time now,
                                                   absl::Time lease_until, int limit);
  // Delivered firing rows of `target` whose re-send is due, leased until `lease_until`.
  absl::StatusOr<std::vector<ClaimedRow>> ClaimResends(const std::string& target, absl::Time now,
                                                       absl::Time lease_until, int limit);

  // Moves a claimed row's next attempt to `at` without counting an attempt (rate limit,
  // shutdown).
  absl::Status Postpone(int64_t id, absl::Time at);
  // Stops re-sending a row (its alert has resolved).
  absl::Status StopResend(int64_t id);

  // Counts an attempt and records it as one without an outcome, so that a sender that dies
  // during the send leaves a trace. Returns the attempt number.
  absl::StatusOr<int> BeginAttempt(int64_t id, absl::Time now);
  // The peer has it. `resend_at`: when to send a firing row again (nullopt: never). A
  // delivered resolution also ends the re-sending of its firing sibling.
  absl::Status MarkDelivered(int64_t id, int attempt, absl::Time now,
                             std::optional<absl::Time> resend_at);
  // The attempt failed; another is due at `next_attempt`.
  absl::Status MarkRetry(int64_t id, int attempt, const std::string& error,
                         absl::Time next_attempt);
  // The attempt failed and the row is given up (status failed).
  absl::Status MarkFailed(int64_t id, int attempt, const std::string& error);
  // The row is not for this target (a job of another cluster): status dropped with `reason`,
  // no attempt counted, never sent.
  absl::Status MarkSkipped(int64_t id, const std::string& reason);
  // A re-send got through; the next is due at `resend_at`.
  absl::Status MarkResent(int64_t id, int attempt, absl::Time resend_at);
  // A re-send waits for its rate limit until `at` (no attempt counted).
  absl::Status PostponeResend(int64_t id, absl::Time at);
  // A re-send failed; the next is due at `resend_at`.
  absl::Status MarkResendFailed(int64_t id, int attempt, const std::string& error,
                                absl::Time resend_at);

 private:
  platform::PgPool* pool_;
};

}  // namespace goodput::alerting
