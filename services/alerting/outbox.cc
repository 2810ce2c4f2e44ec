#include "services/alerting/outbox.h"

#include <exception>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "services/platform/stored_json.h"

namespace goodput::alerting {
namespace {

using Clock = std::chrono::system_clock;

std::int64_t ToUnixMicros(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

Clock::time_point FromUnixMicros(std::int64_t us) {
  return Clock::time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(us)));
}

std::optional<Clock::time_point> OptionalTime(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return FromUnixMicros(f.as<std::int64_t>());
}

constexpr char kEnqueue[] =
    "INSERT INTO alert_outbox (alert_id, target, state, idempotency_key, payload) "
    "VALUES ($1, $2, $3, $4, $5::jsonb) ON CONFLICT (idempotency_key) DO NOTHING";

constexpr char kEnqueueDigest[] =
    "INSERT INTO alert_outbox (alert_id, kind, target, state, idempotency_key, payload) "
    "VALUES (NULL, 'digest', $1, 'digest', $2, $3::jsonb) "
    "ON CONFLICT (idempotency_key) DO NOTHING";

constexpr char kDeliveriesForAlert[] =
    "SELECT target, state, idempotency_key, status, attempts, last_error, "
    "  (extract(epoch FROM created_at) * 1000000)::bigint, "
    "  (extract(epoch FROM last_attempt_at) * 1000000)::bigint, "
    "  CASE WHEN status = 'pending' THEN (extract(epoch FROM next_attempt_at) * 1000000)::bigint END, "
    "  (extract(epoch FROM delivered_at) * 1000000)::bigint "
    "FROM alert_outbox WHERE alert_id = $1 ORDER BY id";

}  // namespace

nlohmann::json NotificationFieldsJson(const Notification& n) {
  return {
      {"alert_id", n.alert_id},
      {"fingerprint", n.fingerprint},
      {"kind", n.kind},
      {"severity", n.severity},
      {"state", n.state},
      {"cluster", n.cluster},
      {"job_id", n.job_id},
      {"scheduler", n.scheduler},
      {"team", n.team},
      {"user", n.user},
      {"labels", n.labels},
      {"summary", n.summary},
      {"description", n.description},
      {"verdict", n.verdict},
      {"dashboard_url", n.dashboard_url},
  };
}

std::string NotificationToJson(const Notification& n) {
  nlohmann::json j = NotificationFieldsJson(n);
  j["start_time_us"] = ToUnixMicros(n.start_time);
  if (n.factor) j["factor"] = *n.factor;
  if (n.end_time) j["end_time_us"] = ToUnixMicros(*n.end_time);
  return j.dump();
}

absl::StatusOr<Notification> NotificationFromJson(const std::string& json) {
  absl::StatusOr<nlohmann::json> parsed = platform::ParseStoredJson(json);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("outbox payload is not a notification: ", parsed.status().message()));
  }
  try {
    const nlohmann::json& j = *parsed;
    Notification n;
    n.alert_id = j.at("alert_id").get<std::int64_t>();
    n.fingerprint = j.at("fingerprint").get<std::string>();
    n.kind = j.at("kind").get<std::string>();
    n.severity = j.at("severity").get<std::string>();
    n.state = j.at("state").get<std::string>();
    n.cluster = j.at("cluster").get<std::string>();
    n.job_id = j.at("job_id").get<std::string>();
    n.scheduler = j.value("scheduler", "");
    n.team = j.value("team", "");
    n.user = j.value("user", "");
    if (j.contains("labels")) n.labels = j.at("labels").get<std::map<std::string, std::string>>();
    n.summary = j.value("summary", "");
    n.description = j.value("description", "");
    n.verdict = j.value("verdict", "");
    n.dashboard_url = j.value("dashboard_url", "");
    n.start_time = FromUnixMicros(j.at("start_time_us").get<std::int64_t>());
    if (j.contains("factor")) n.factor = j.at("factor").get<double>();
    if (j.contains("end_time_us")) n.end_time = FromUnixMicros(j.at("end_time_us").get<std::int64_t>());
    return n;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("outbox payload is not a notification: ", e.what()));
  }
}

std::string IdempotencyKey(std::int64_t alert_id, const std::string& target,
                           const std::string& state) {
  return absl::StrCat(alert_id, ":", target, ":", state);
}

absl::StatusOr<int> Enqueue(pqxx::work& tx, const Notification& n,
                            const std::vector<std::string>& targets) {
  if (n.state != "firing" && n.state != "resolved") {
    return absl::InvalidArgumentError(
        absl::StrCat("notification state=\"", n.state, "\" is not firing or resolved"));
  }
  const std::string payload = NotificationToJson(n);
  int added = 0;
  try {
    for (const std::string& target : targets) {
      pqxx::result r = tx.exec_params(kEnqueue, n.alert_id, target, n.state,
                                      IdempotencyKey(n.alert_id, target, n.state), payload);
      added += static_cast<int>(r.affected_rows());
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("enqueue notification: ", e.what()));
  }
  return added;
}

std::string DigestPayloadToJson(const DigestPayload& payload) {
  return nlohmann::json{{"digest", DigestToJson(payload.digest)}, {"to", payload.to}}.dump();
}

absl::StatusOr<DigestPayload> DigestPayloadFromJson(const std::string& json) {
  absl::StatusOr<nlohmann::json> parsed = platform::ParseStoredJson(json);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("outbox payload is not a digest: ", parsed.status().message()));
  }
  try {
    const nlohmann::json& j = *parsed;
    absl::StatusOr<Digest> digest = DigestFromJson(j.at("digest"));
    if (!digest.ok()) return digest.status();
    DigestPayload p{.digest = *std::move(digest)};
    if (j.contains("to")) p.to = j.at("to").get<std::vector<std::string>>();
    return p;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("outbox payload is not a digest: ", e.what()));
  }
}

std::string DigestIdempotencyKey(const Digest& digest, const std::string& target) {
  return absl::StrCat("digest:", DigestGroupName(digest.group), ":", digest.name, ":",
                      absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", digest.period_start,
                                       absl::UTCTimeZone()),
                      ":", target);
}

absl::StatusOr<int> EnqueueDigest(pqxx::work& tx, const Digest& digest,
                                  const std::vector<DigestDelivery>& deliveries) {
  int added = 0;
  try {
    for (const DigestDelivery& d : deliveries) {
      pqxx::result r =
          tx.exec_params(kEnqueueDigest, d.target, DigestIdempotencyKey(digest, d.target),
                         DigestPayloadToJson(DigestPayload{.digest = digest, .to = d.to}));
      added += static_cast<int>(r.affected_rows());
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("enqueue digest: ", e.what()));
  }
  return added;
}

std::string AdminCommentPayloadToJson(const AdminCommentPayload& p) {
  return nlohmann::json{{"cluster", p.cluster},
                        {"job_id", p.job_id},
                        {"revision", p.revision},
                        {"comment", p.comment}}
      .dump();
}

absl::StatusOr<AdminCommentPayload> AdminCommentPayloadFromJson(const std::string& json) {
  try {
    nlohmann::json j = nlohmann::json::parse(json);
    return AdminCommentPayload{.cluster = j.at("cluster").get<std::string>(),
                               .job_id = j.at("job_id").get<std::string>(),
                               .revision = j.at("revision").get<int32_t>(),
                               .comment = j.at("comment").get<std::string>()};
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("outbox payload is not an AdminComment: ", e.what()));
  }
}

std::string AdminCommentIdempotencyKey(const AdminCommentPayload& p, const std::string& target) {
  return absl::StrCat("admin_comment:", p.cluster, "/", p.job_id, ":", p.revision, ":", target);
}

absl::StatusOr<std::vector<DeliveryRecord>> DeliveriesForAlert(pqxx::work& tx,
                                                               std::int64_t alert_id) {
  std::vector<DeliveryRecord> out;
  try {
    for (const pqxx::row& row : tx.exec_params(kDeliveriesForAlert, alert_id)) {
      DeliveryRecord d;
      d.target = row[0].as<std::string>();
      d.state = row[1].as<std::string>();
      d.idempotency_key = row[2].as<std::string>();
      d.status = row[3].as<std::string>();
      d.attempts = row[4].as<int>();
      d.last_error = row[5].as<std::string>();
      d.create_time = FromUnixMicros(row[6].as<std::int64_t>());
      d.last_attempt_time = OptionalTime(row[7]);
      d.next_attempt_time = OptionalTime(row[8]);
      d.delivered_time = OptionalTime(row[9]);
      out.push_back(std::move(d));
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("read deliveries of alert ", alert_id, ": ", e.what()));
  }
  return out;
}

}  // namespace goodput::alerting
