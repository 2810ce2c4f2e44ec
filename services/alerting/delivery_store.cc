#include "services/alerting/delivery_store.h"

#include <algorithm>
#include <exception>

#include "absl/strings/str_cat.h"

namespace goodput::alerting {
namespace {

// Timestamps cross the wire as microseconds since the Unix epoch.
#define GP_TS(n) "('epoch'::timestamptz + $" #n "::bigint * interval '1 microsecond')"
#define GP_US(col) "(extract(epoch FROM " col ") * 1000000)::bigint"

constexpr char kClaimDue[] =
    "UPDATE alert_outbox SET next_attempt_at = " GP_TS(3) " "
    "WHERE id IN ("
    "  SELECT o.id FROM alert_outbox o "
    "  WHERE o.status = 'pending' AND o.target = $1 AND o.next_attempt_at <= " GP_TS(2) " "
    "    AND NOT (o.state = 'resolved' AND EXISTS ("
    "      SELECT 1 FROM alert_outbox f WHERE f.alert_id = o.alert_id AND f.target = o.target "
    "        AND f.state = 'firing' AND f.status = 'pending')) "
    "  ORDER BY o.next_attempt_at, o.id LIMIT $4 FOR UPDATE SKIP LOCKED) "
    "RETURNING id, coalesce(alert_id, 0), kind, state, idempotency_key, payload::text, "
    "attempts, " GP_US("created_at")
    ", false";

constexpr char kClaimResends[] =
    "UPDATE alert_outbox o SET resend_at = " GP_TS(3) " "
    "WHERE id IN ("
    "  SELECT id FROM alert_outbox "
    "  WHERE target = $1 AND resend_at <= " GP_TS(2) " AND status = 'delivered' "
    "    AND state = 'firing' "
    "  ORDER BY resend_at, id LIMIT $4 FOR UPDATE SKIP LOCKED) "
    "RETURNING id, coalesce(alert_id, 0), kind, state, idempotency_key, payload::text, "
    "attempts, " GP_US("created_at")
    ", EXISTS (SELECT 1 FROM alert_outbox r WHERE r.alert_id = o.alert_id "
    "          AND r.target = o.target AND r.state = 'resolved')";

constexpr char kPostpone[] = "UPDATE alert_outbox SET next_attempt_at = " GP_TS(2) " WHERE id = $1";

constexpr char kStopResend[] = "UPDATE alert_outbox SET resend_at = NULL WHERE id = $1";

constexpr char kBeginAttempt[] =
    "WITH o AS ("
    "  UPDATE alert_outbox SET attempts = attempts + 1, last_attempt_at = " GP_TS(2) " "
    "  WHERE id = $1 RETURNING id, attempts) "
    "INSERT INTO alert_delivery_attempts (outbox_id, attempt, attempted_at, ok, error) "
    "SELECT id, attempts, " GP_TS(2) ", false, "
    "  'no outcome recorded: the sender stopped during the attempt' FROM o "
    "RETURNING attempt";

constexpr char kRecordAttempt[] =
    "UPDATE alert_delivery_attempts SET ok = $3, error = $4 WHERE outbox_id = $1 AND attempt = $2";

constexpr char kMarkDelivered[] =
    "UPDATE alert_outbox SET status = 'delivered', delivered_at = " GP_TS(2) ", "
    "  resend_at = CASE WHEN $3 THEN " GP_TS(4) " END "
    "WHERE id = $1 RETURNING alert_id, target, state";

constexpr char kEndFiringResends[] =
    "UPDATE alert_outbox SET resend_at = NULL "
    "WHERE alert_id = $1 AND target = $2 AND state = 'firing' AND resend_at IS NOT NULL";

constexpr char kMarkRetry[] =
    "UPDATE alert_outbox SET last_error = $2, next_attempt_at = " GP_TS(3) " WHERE id = $1";

constexpr char kMarkFailed[] =
    "UPDATE alert_outbox SET status = 'failed', last_error = $2 WHERE id = $1";

constexpr char kMarkSkipped[] =
    "UPDATE alert_outbox SET status = 'dropped', last_error = $2 WHERE id = $1";

constexpr char kMarkResendFailed[] =
    "UPDATE alert_outbox SET last_error = $2, resend_at = " GP_TS(3) " WHERE id = $1";

constexpr char kSetResendAt[] = "UPDATE alert_outbox SET resend_at = " GP_TS(2) " WHERE id = $1";

#undef GP_TS
#undef GP_US

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }

absl::StatusOr<std::vector<ClaimedRow>> Claim(platform::PgPool* pool, const char* sql,
                                              const std::string& target, absl::Time now,
                                              absl::Time lease_until, int limit) {
  return pool->RunTransactionFor<std::vector<ClaimedRow>>(
      [&](pqxx::work& tx) -> absl::StatusOr<std::vector<ClaimedRow>> {
        std::vector<ClaimedRow> rows;
        for (const pqxx::row& r :
             tx.exec_params(sql, target, Micros(now), Micros(lease_until), limit)) {
          rows.push_back(ClaimedRow{.id = r[0].as<int64_t>(),
                                    .alert_id = r[1].as<int64_t>(),
                                    .kind = r[2].as<std::string>(),
                                    .state = r[3].as<std::string>(),
                                    .idempotency_key = r[4].as<std::string>(),
                                    .payload = r[5].as<std::string>(),
                                    .attempts = r[6].as<int>(),
                                    .created = absl::FromUnixMicros(r[7].as<int64_t>()),
                                    .resolved_sibling = r[8].as<bool>()});
        }
        // RETURNING has no order: send oldest first.
        std::sort(rows.begin(), rows.end(),
                  [](const ClaimedRow& a, const ClaimedRow& b) { return a.id < b.id; });
        return rows;
      });
}

}  // namespace

absl::StatusOr<std::vector<ClaimedRow>> DeliveryStore::ClaimDue(const std::string& target,
                                                                absl::Time now,
                                                                absl::Time lease_until, int limit) {
  return Claim(pool_, kClaimDue, target, now, lease_until, limit);
}

absl::StatusOr<std::vector<ClaimedRow>> DeliveryStore::ClaimResends(const std::string& target,
                                                                    absl::Time now,
                                                                    absl::Time lease_until,
                                                                    int limit) {
  return Claim(pool_, kClaimResends, target, now, lease_until, limit);
}

absl::Status DeliveryStore::Postpone(int64_t id, absl::Time at) {
  return pool_->RunTransaction([&](pqxx::work& tx) {
    tx.exec_params(kPostpone, id, Micros(at));
    return absl::OkStatus();
  });
}

absl::Status DeliveryStore::StopResend(int64_t id) {
  return pool_->RunTransaction([&](pqxx::work& tx) {
    tx.exec_params(kStopResend, id);
    return absl::OkStatus();
  });
}

absl::StatusOr<int> DeliveryStore::BeginAttempt(int64_t id, absl::Time now) {
  return pool_->RunTransactionFor<int>([&](pqxx::work& tx) -> absl::StatusOr<int> {
    pqxx::result r = tx.exec_params(kBeginAttempt, id, Micros(now));
    if (r.empty()) return absl::NotFoundError(absl::StrCat("outbox row ", id, " is gone"));
    return r[0][0].as<int>();
  });
}

absl::Status DeliveryStore::MarkDelivered(int64_t id, int attempt, absl::Time now,
                                          std::optional<absl::Time> resend_at) {
  return pool_->RunTransaction([&](pqxx::work& tx) {
    tx.exec_params(kRecordAttempt, id, attempt, true, "");
    pqxx::result r = tx.exec_params(kMarkDelivered, id, Micros(now), resend_at.has_value(),
                                    Micros(resend_at.value_or(now)));
    if (!r.empty() && r[0][2].as<std::string>() == "resolved") {
      tx.exec_params(kEndFiringResends, r[0][0].as<int64_t>(), r[0][1].as<std::string>());
    }
    return absl::OkStatus();
  });
}

absl::Status DeliveryStore::MarkRetry(int64_t id, int attempt, const std::string& error,
                                      absl::Time next_attempt) {
  return pool_->RunTransaction([&](pqxx::work& tx) {
    tx.exec_params(kRecordAttempt, id, attempt, false, error);
    tx.exec_params(kMarkRetry, id, error, Micros(next_attempt));
    return absl::OkStatus();
  });
}

absl::Status DeliveryStore::MarkFailed(int64_t id, int attempt, const std::string& error) {
  return pool_->RunTransaction([&](pqxx::work& tx) {
    tx.exec_params(kRecordAttempt, id, attempt, false, error);
    tx.exec_params(kMarkFailed, id, error);
    return absl::OkStatus();
  });
}

absl::Status DeliveryStore::MarkSkipped(int64_t id, const std::string& reason) {
  return pool_->RunTransaction([&](pqxx::work& tx) {
    tx.exec_params(kMarkSkipped, id, reason);
    return absl::OkStatus();
  });
}

absl::Status DeliveryStore::MarkResent(int64_t id, int attempt, absl::Time resend_at) {
  return pool_->RunTransaction([&](pqxx::work& tx) {
    tx.exec_params(kRecordAttempt, id, attempt, true, "");
    tx.exec_params(kSetResendAt, id, Micros(resend_at));
    return absl::OkStatus();
  });
}

absl::Status DeliveryStore::PostponeResend(int64_t id, absl::Time at) {
  return pool_->RunTransaction([&](pqxx::work& tx) {
    tx.exec_params(kSetResendAt, id, Micros(at));
    return absl::OkStatus();
  });
}

absl::Status DeliveryStore::MarkResendFailed(int64_t id, int attempt, const std::string& error,
                                             absl::Time resend_at) {
  return pool_->RunTransaction([&](pqxx::work& tx) {
    tx.exec_params(kRecordAttempt, id, attempt, false, error);
    tx.exec_params(kMarkResendFailed, id, error, Micros(resend_at));
    return absl::OkStatus();
  });
}

}  // namespace goodput::alerting
