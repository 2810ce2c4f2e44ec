// The notification outbox: the one seam between deciding (the alert engine) and delivering
// (the targets). The engine, in the same PostgreSQL transaction that changes an alert's state,
// calls Enqueue once per routed target; a delivery worker later claims due rows, sends them,
// and records every attempt. A row's idempotency key is (alert, target, state), so an engine
// that replays its input after a crash enqueues nothing new, and a target that supports it
// (webhooks, Alertmanager, Osmo tags) sees the same key on every retry.
//
// Schema: migrations/0031_alert_outbox.sql (tables alert_outbox, alert_delivery_attempts).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/alerting/digest.h"

namespace goodput::alerting {

// Everything a target needs to render one notification. Written to the outbox as JSON, so a
// row is self-contained: delivery never reads the alert tables.
struct Notification {
  std::int64_t alert_id = 0;
  std::string fingerprint;       // stable across the alert's life
  std::string kind;              // "regression_in_job", "regression_vs_workload", "divergence",
                                 // "idle_gpus", "straggler", "telemetry_stopped", "data_quality",
                                 // "gpu_fault", "silent_gpu", "hung", "job_idle"
  std::string severity;          // "info", "warning", "critical"
  std::string state;             // "firing" or "resolved" (the state being announced)
  std::string cluster;
  std::string job_id;
  std::string scheduler;         // "slurm", "osmo", "kubernetes", "other"
  std::string team;
  std::string user;
  std::map<std::string, std::string> labels;  // the job's labels (e.g. the Osmo workflow name)
  std::string summary;           // one line a person reads first
  std::string description;       // what happened, how sure we are, what to look at first
  std::optional<double> factor;  // e.g. 2.5 for a 2.5x drop
  std::string verdict;           // divergence verdict, empty otherwise
  std::string dashboard_url;     // link to the job page
  std::chrono::system_clock::time_point start_time{};
  std::optional<std::chrono::system_clock::time_point> end_time;  // set when resolved
};

// The fields that the outbox row and the webhook body both carry as they are. Times and the
// optional factor are left to each caller: the row stores microseconds and omits what is
// unset, the webhook body has RFC 3339 times and explicit nulls.
nlohmann::json NotificationFieldsJson(const Notification& n);

std::string NotificationToJson(const Notification& n);
absl::StatusOr<Notification> NotificationFromJson(const std::string& json);

// "<alert_id>:<target>:<state>".
std::string IdempotencyKey(std::int64_t alert_id, const std::string& target,
                           const std::string& state);

// Adds one row per target inside the caller's transaction; a row whose idempotency key already
// exists is left as it is (ON CONFLICT DO NOTHING). Returns how many rows were new.
absl::StatusOr<int> Enqueue(pqxx::work& tx, const Notification& n,
                            const std::vector<std::string>& targets);

// Digests travel through the same table (kind 'digest', no alert, state 'digest'), one row
// per (user or team, period, target), keyed "digest:<user|team>:<name>:<period start>:<target>"
// (period start in RFC 3339), so a period enqueued twice (a restart, a second replica) adds
// nothing.
struct DigestDelivery {
  std::string target = {};
  std::vector<std::string> to = {};  // e-mail recipients; empty for other targets
};

// What a digest row carries: {"digest": DigestToJson, "to": [...]}.
struct DigestPayload {
  Digest digest = {};
  std::vector<std::string> to = {};
};
std::string DigestPayloadToJson(const DigestPayload& payload);
absl::StatusOr<DigestPayload> DigestPayloadFromJson(const std::string& json);

std::string DigestIdempotencyKey(const Digest& digest, const std::string& target);

// Adds one digest row per delivery inside the caller's transaction (ON CONFLICT DO NOTHING on
// the key). Returns how many rows were new.
absl::StatusOr<int> EnqueueDigest(pqxx::work& tx, const Digest& digest,
                                  const std::vector<DigestDelivery>& deliveries);

// A job report's AdminComment travels through the same table (kind 'admin_comment', no
// alert, state 'admin_comment'), one row per (report revision, target), keyed
// "admin_comment:<cluster>/<job id>:<revision>:<target>"; job_reporter.h enqueues it in the
// transaction that stores the revision (report_store.h Save).
struct AdminCommentPayload {
  std::string cluster = {};
  std::string job_id = {};
  int32_t revision = 0;
  std::string comment = {};  // EncodeAdminComment of the report's summary
};
std::string AdminCommentPayloadToJson(const AdminCommentPayload& payload);
absl::StatusOr<AdminCommentPayload> AdminCommentPayloadFromJson(const std::string& json);
std::string AdminCommentIdempotencyKey(const AdminCommentPayload& payload,
                                       const std::string& target);

// One row as GetAlert shows it (Alert.deliveries).
struct DeliveryRecord {
  std::string target;
  std::string state;
  std::string idempotency_key;
  // "pending" (queued, retrying, or waiting for its rate limit: never dropped for it),
  // "delivered", "failed" (permanent error or gave up). "dropped" is allowed by the schema but
  // not written by delivery.
  std::string status;
  int attempts = 0;
  std::string last_error;
  std::chrono::system_clock::time_point create_time{};
  std::optional<std::chrono::system_clock::time_point> last_attempt_time;
  std::optional<std::chrono::system_clock::time_point> next_attempt_time;
  std::optional<std::chrono::system_clock::time_point> delivered_time;
};

absl::StatusOr<std::vector<DeliveryRecord>> DeliveriesForAlert(pqxx::work& tx,
                                                               std::int64_t alert_id);

}  // namespace goodput::alerting
