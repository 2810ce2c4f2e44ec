#include "services/alerting/policy_stage.h"

#include <algorithm>
#include <exception>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "services/alerting/alert_proto.h"
#include "services/alerting/outbox.h"
#include "services/alerting/targets/render.h"
#include "services/api/api_convert.h"
#include "services/platform/stored_json.h"

namespace goodput::alerting {
namespace {

// Timestamps cross the wire as microseconds since the Unix epoch.
#define GP_TS(n) "('epoch'::timestamptz + $" #n "::bigint * interval '1 microsecond')"
#define GP_US(col) "coalesce((extract(epoch FROM " col ") * 1000000)::bigint, 0)"

// Firing alerts of the given kinds (a text array literal) that no rule has acted on yet, with
// their job's start.
constexpr char kNewFindings[] =
    "SELECT a.id, encode(a.alert_pb, 'base64'), a.kind, a.fingerprint, " GP_US("j.start_time")
    " FROM alerts a LEFT JOIN jobs j ON j.cluster = a.cluster AND j.job_id = a.job_id "
    "WHERE a.state = 'firing' AND a.kind = ANY($1::text[]) "
    "  AND NOT EXISTS (SELECT 1 FROM policy_actions p WHERE p.alert_id = a.id) "
    "ORDER BY a.id";

constexpr char kInsertAction[] =
    "INSERT INTO policy_actions (rule, alert_id, fingerprint, kind, cluster, job_id, scheduler, "
    "  action, node, dry_run, evidence, command, warned_at, act_after) "
    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, " GP_TS(13) ", " GP_TS(
        14) ") ON CONFLICT ON CONSTRAINT policy_actions_once DO NOTHING RETURNING id";

constexpr char kEnqueueNotice[] =
    "INSERT INTO alert_outbox (alert_id, kind, target, state, idempotency_key, payload) "
    "VALUES ($1, 'policy', $2, 'policy', $3, $4::jsonb) ON CONFLICT (idempotency_key) DO NOTHING";

#define GP_ROW_COLUMNS \
  "id, rule, alert_id, kind, cluster, job_id, scheduler, action, node, dry_run, status, "    \
  "evidence::text, command, outcome, note, peer_before, attempts, " GP_US("warned_at") ", " \
  GP_US("act_after") ", " GP_US("acted_at") ", acted_by, " GP_US("undone_at")              \
  ", undone_by, undo_outcome"

// Due rows: waiting past their time, or acting under a lease that ended (the replica that
// claimed them stopped).
constexpr char kClaimDue[] =
    "UPDATE policy_actions SET status = 'acting', attempts = attempts + 1, "
    "  claimed_until = " GP_TS(2) ", acted_by = $3 "
    "WHERE id IN (SELECT id FROM policy_actions "
    "  WHERE (status = 'waiting' AND act_after <= " GP_TS(1) ") "
    "     OR (status = 'acting' AND claimed_until <= " GP_TS(1) ") "
    "  ORDER BY act_after, id LIMIT 20 FOR UPDATE SKIP LOCKED) "
    "RETURNING " GP_ROW_COLUMNS;

constexpr char kAlertState[] = "SELECT state FROM alerts WHERE id = $1";

constexpr char kFinish[] =
    "UPDATE policy_actions SET status = $3, outcome = $4, command = $5, note = '', "
    "  claimed_until = NULL, acted_at = " GP_TS(6) " "
    "WHERE id = $1 AND status = 'acting' AND attempts = $2 RETURNING id";

// A hold that ran no command (a rate limit) gives the attempt back.
constexpr char kHold[] =
    "UPDATE policy_actions SET status = 'waiting', act_after = " GP_TS(3) ", note = $4, "
    "  claimed_until = NULL, attempts = attempts - $5 "
    "WHERE id = $1 AND status = 'acting' AND attempts = $2";

constexpr char kSetPeerBefore[] =
    "UPDATE policy_actions SET peer_before = $2 WHERE id = $1 AND peer_before = ''";

constexpr char kDrainLock[] =
    "SELECT pg_advisory_xact_lock(hashtext('goodput.policy.drain:' || $1))";

constexpr char kDrainsLastHour[] =
    "SELECT count(*) FROM policy_actions WHERE cluster = $1 AND action = 'drain' "
    "  AND NOT dry_run AND status IN ('done', 'undone') AND peer_before = '' "
    "  AND acted_at > " GP_TS(2);

constexpr char kGetRow[] = "SELECT " GP_ROW_COLUMNS " FROM policy_actions WHERE id = $1";
constexpr char kLockRow[] =
    "SELECT " GP_ROW_COLUMNS " FROM policy_actions WHERE id = $1 FOR UPDATE";

constexpr char kUndone[] =
    "UPDATE policy_actions SET status = 'undone', undone_at = " GP_TS(2) ", undone_by = $3, "
    "  undo_outcome = $4, claimed_until = NULL WHERE id = $1";

constexpr char kList[] =
    "SELECT " GP_ROW_COLUMNS
    " FROM policy_actions "
    "WHERE ($1 = '' OR cluster = $1) AND ($2 = '' OR job_id = $2) AND ($3 = '' OR status = $3) "
    "  AND ($4 = 0 OR id < $4) "
    "ORDER BY id DESC LIMIT $5";

absl::Time FromUs(int64_t us) { return absl::FromUnixMicros(us); }
int64_t Us(absl::Time t) { return absl::ToUnixMicros(t); }

std::string Clock(absl::Time t) {
  return absl::FormatTime("%Y-%m-%d %H:%M UTC", t, absl::UTCTimeZone());
}

// One row of policy_actions.
struct ActionRow {
  int64_t id = 0;
  std::string rule, kind, cluster, job_id, scheduler, action, node, status, evidence, command,
      outcome, note, peer_before, acted_by, undone_by, undo_outcome;
  int64_t alert_id = 0;
  bool dry_run = false;
  int attempts = 0;
  int64_t warned_us = 0, act_after_us = 0, acted_us = 0, undone_us = 0;
};

ActionRow RowFrom(const pqxx::row& r) {
  ActionRow a;
  a.id = r[0].as<int64_t>();
  a.rule = r[1].as<std::string>();
  a.alert_id = r[2].as<int64_t>();
  a.kind = r[3].as<std::string>();
  a.cluster = r[4].as<std::string>();
  a.job_id = r[5].as<std::string>();
  a.scheduler = r[6].as<std::string>();
  a.action = r[7].as<std::string>();
  a.node = r[8].as<std::string>();
  a.dry_run = r[9].as<bool>();
  a.status = r[10].as<std::string>();
  a.evidence = r[11].as<std::string>();
  a.command = r[12].as<std::string>();
  a.outcome = r[13].as<std::string>();
  a.note = r[14].as<std::string>();
  a.peer_before = r[15].as<std::string>();
  a.attempts = r[16].as<int>();
  a.warned_us = r[17].as<int64_t>();
  a.act_after_us = r[18].as<int64_t>();
  a.acted_us = r[19].as<int64_t>();
  a.acted_by = r[20].as<std::string>();
  a.undone_us = r[21].as<int64_t>();
  a.undone_by = r[22].as<std::string>();
  a.undo_outcome = r[23].as<std::string>();
  return a;
}

nlohmann::json EvidenceOf(const ActionRow& row) {
  absl::StatusOr<nlohmann::json> j = platform::ParseStoredJson(row.evidence);
  return j.ok() && j->is_object() ? *j : nlohmann::json::object();
}

v1::PolicyAction ToProto(const ActionRow& a) {
  v1::PolicyAction p;
  p.set_action_id(absl::StrCat(a.id));
  p.set_rule(a.rule);
  p.set_alert_id(absl::StrCat(a.alert_id));
  if (std::optional<Kind> k = KindFromName(a.kind)) p.set_kind(KindToProto(*k));
  const nlohmann::json ev = EvidenceOf(a);
  if (ev.contains("summary") && ev["summary"].is_string()) {
    p.set_finding_summary(ev["summary"].get<std::string>());
  }
  p.mutable_job()->set_cluster(a.cluster);
  p.mutable_job()->set_job_id(a.job_id);
  p.set_action(a.action);
  p.set_node(a.node);
  p.set_dry_run(a.dry_run);
  p.set_status(a.status);
  p.set_command(a.command);
  p.set_outcome(a.outcome);
  p.set_note(a.note);
  p.set_attempts(a.attempts);
  p.set_evidence_json(a.evidence);
  *p.mutable_warned_time() = api::UnixMicrosToTimestamp(a.warned_us);
  *p.mutable_act_after() = api::UnixMicrosToTimestamp(a.act_after_us);
  if (a.acted_us != 0) *p.mutable_acted_time() = api::UnixMicrosToTimestamp(a.acted_us);
  p.set_acted_by(a.acted_by);
  if (a.undone_us != 0) *p.mutable_undone_time() = api::UnixMicrosToTimestamp(a.undone_us);
  p.set_undone_by(a.undone_by);
  p.set_undo_outcome(a.undo_outcome);
  return p;
}

// The verb of an action in a sentence.
std::string Words(const std::string& action, const std::string& node) {
  if (action == "cancel") return "cancel the job";
  if (action == "requeue") return "requeue the job";
  return absl::StrCat("drain node ", node);
}

std::string Past(const std::string& action, const std::string& node) {
  if (action == "cancel") return "cancelled the job";
  if (action == "requeue") return "requeued the job";
  return absl::StrCat("drained node ", node);
}

// A notice about alert `alert_id` for the outbox (kind 'policy').
Notification Notice(const nlohmann::json& ev, int64_t alert_id, const std::string& fingerprint,
                    const std::string& severity, const std::string& summary,
                    const std::string& description, absl::Time when) {
  Notification n;
  n.alert_id = alert_id;
  n.fingerprint = fingerprint;
  n.kind = "policy_action";
  n.severity = severity;
  n.state = "firing";
  auto str = [&](const char* k) {
    return ev.contains(k) && ev[k].is_string() ? ev[k].get<std::string>() : std::string();
  };
  n.cluster = str("cluster");
  n.job_id = str("job_id");
  n.scheduler = str("scheduler");
  n.team = str("team");
  n.user = str("user");
  if (ev.contains("labels") && ev["labels"].is_object()) {
    for (const auto& [k, v] : ev["labels"].items()) {
      if (v.is_string()) n.labels[k] = v.get<std::string>();
    }
  }
  n.summary = summary;
  n.description = description;
  n.dashboard_url = str("dashboard_url");
  n.start_time = absl::ToChronoTime(when);
  return n;
}

absl::Status EnqueueNotices(pqxx::work& tx, const Notification& n, const std::string& key_prefix,
                            const std::vector<std::string>& targets) {
  const std::string payload = NotificationToJson(n);
  std::set<std::string> seen;
  for (const std::string& t : targets) {
    if (!seen.insert(t).second) continue;
    tx.exec_params(kEnqueueNotice, n.alert_id, t, absl::StrCat(key_prefix, ":", t), payload);
  }
  return absl::OkStatus();
}

bool Transient(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsResourceExhausted(s) ||
         absl::IsAborted(s) || absl::IsInternal(s);
}

constexpr int kMaxAttempts = 5;

}  // namespace

struct PolicyStage::Claimed {
  ActionRow row;
};

PolicyStage::PolicyStage(platform::PgPool* pg, PolicyActuator* actuator, PolicyStageOptions options,
                         platform::Logger logger)
    : pg_(pg), actuator_(actuator), options_(std::move(options)), logger_(std::move(logger)) {}

PolicyStage::~PolicyStage() { Stop(); }

absl::StatusOr<PolicyStepResult> PolicyStage::Step() {
  PolicyStepResult result;
  absl::StatusOr<int> recorded = RecordFindings();
  if (!recorded.ok()) return recorded.status();
  result.recorded = *recorded;
  absl::StatusOr<std::vector<Claimed>> due = ClaimDue();
  if (!due.ok()) return due.status();
  for (const Claimed& c : *due) {
    absl::StatusOr<bool> done = Act(c);
    if (!done.ok()) {
      logger_.Warn("policy action not recorded", {{"action_id", absl::StrCat(c.row.id)},
                                                  {"error", std::string(done.status().message())}});
      continue;
    }
    ++(*done ? result.acted : result.held);
  }
  if ((result.recorded > 0 || result.acted > 0) && options_.wake_delivery) options_.wake_delivery();
  return result;
}

absl::StatusOr<int> PolicyStage::RecordFindings() {
  const PolicyConfig& config = options_.config;
  std::set<std::string> kinds;
  for (const PolicyRule& r : config.rules) {
    for (Kind k : r.kinds) kinds.insert(std::string(KindName(k)));
  }
  if (kinds.empty()) return 0;
  const std::string kind_array = absl::StrCat("{", absl::StrJoin(kinds, ","), "}");
  struct Finding {
    int64_t alert_id;
    v1::Alert alert;
    std::string kind, fingerprint;
    int64_t job_start_us;
  };
  absl::StatusOr<std::vector<Finding>> findings = pg_->RunTransactionFor<std::vector<Finding>>(
      [&](pqxx::work& tx) -> absl::StatusOr<std::vector<Finding>> {
        std::vector<Finding> out;
        for (const pqxx::row& r : tx.exec_params(kNewFindings, kind_array)) {
          Finding f{.alert_id = r[0].as<int64_t>(),
                    .alert = {},
                    .kind = r[2].as<std::string>(),
                    .fingerprint = r[3].as<std::string>(),
                    .job_start_us = r[4].as<int64_t>()};
          std::string bytes;
          if (!absl::Base64Unescape(r[1].as<std::string>(), &bytes) ||
              !f.alert.ParseFromString(bytes)) {
            continue;
          }
          out.push_back(std::move(f));
        }
        return out;
      });
  if (!findings.ok()) return findings.status();
  int recorded = 0;
  const absl::Time now = Now();
  for (const Finding& f : *findings) {
    std::optional<Kind> kind = KindFromName(f.kind);
    if (!kind) continue;
    const Labels labels = LabelsOf(f.alert);
    const PolicySubject subject = SubjectFromLabels(labels);
    std::vector<const PolicyRule*> rules = MatchingRules(config, *kind, subject);
    if (rules.empty()) continue;
    std::set<std::string> nodes;
    for (const v1::GpuRef& g : f.alert.gpus()) {
      if (!g.host().empty()) nodes.insert(g.host());
    }
    nlohmann::json gpus = nlohmann::json::array();
    for (const v1::GpuRef& g : f.alert.gpus()) {
      nlohmann::json j = {{"host", g.host()}, {"uuid", g.uuid()}};
      if (g.has_gpu_index()) j["gpu_index"] = g.gpu_index();
      gpus.push_back(std::move(j));
    }
    nlohmann::json job_labels = nlohmann::json::object();
    for (const auto& [k, v] : f.alert.labels()) job_labels[k] = v;
    const nlohmann::json evidence = {
        {"summary", f.alert.summary()},
        {"description", f.alert.description()},
        {"severity", labels.contains("severity") ? labels.at("severity") : ""},
        {"cluster", f.alert.job().cluster()},
        {"job_id", f.alert.job().job_id()},
        {"scheduler", subject.scheduler},
        {"team", subject.account},
        {"user", subject.user},
        {"partition", subject.partition},
        {"qos", subject.qos},
        {"gpus", gpus},
        {"labels", job_labels},
        {"dashboard_url", f.alert.dashboard_url()},
        {"alert_start",
         absl::FormatTime(absl::RFC3339_sec,
                          absl::FromUnixMillis(api::TimestampToUnixMs(f.alert.start_time())),
                          absl::UTCTimeZone())}};
    const std::optional<absl::Time> job_start =
        f.job_start_us > 0 ? std::optional<absl::Time>(FromUs(f.job_start_us)) : std::nullopt;
    absl::Status s = pg_->RunTransaction([&](pqxx::work& tx) -> absl::Status {
      int added_here = 0;
      for (const PolicyRule* rule : rules) {
        const bool dry_run = rule->dry_run.value_or(config.dry_run);
        const absl::Time act_after = ActAfter(*rule, now, job_start);
        std::vector<std::string> words;
        bool added = false;
        // A node is drained before its job is requeued or cancelled, so that the job does not
        // start again on it (rows are acted on in id order).
        std::vector<PolicyAction> ordered = rule->actions;
        std::stable_partition(ordered.begin(), ordered.end(),
                              [](PolicyAction x) { return x == PolicyAction::kDrain; });
        for (PolicyAction action : ordered) {
          const std::string name(PolicyActionName(action));
          std::vector<std::string> targets_nodes =
              action == PolicyAction::kDrain ? std::vector<std::string>(nodes.begin(), nodes.end())
                                             : std::vector<std::string>{""};
          for (const std::string& node : targets_nodes) {
            std::string command;
            const std::string& cluster = f.alert.job().cluster();
            const std::string& job = f.alert.job().job_id();
            if (action == PolicyAction::kCancel && subject.scheduler == "osmo") {
              absl::StatusOr<std::string> wf = actuator_->WorkflowOf(cluster, labels);
              command = actuator_->CancelWorkflowCommand(cluster, wf.ok() ? *wf : "<workflow>");
            } else if (action == PolicyAction::kCancel) {
              command = actuator_->CancelCommand(cluster, job);
            } else if (action == PolicyAction::kRequeue) {
              command = actuator_->RequeueCommand(cluster, job);
            } else {
              command = actuator_->DrainCommand(
                  cluster, node,
                  absl::StrCat(kDrainReasonPrefix, " ", f.alert.summary(), ", job ", job));
            }
            pqxx::result r =
                tx.exec_params(kInsertAction, rule->name, f.alert_id, f.fingerprint, f.kind,
                               cluster, job, subject.scheduler, name, node, dry_run,
                               evidence.dump(), command, Us(now), Us(act_after));
            if (!r.empty()) {
              added = true;
              ++added_here;
            }
            words.push_back(Words(name, node));
          }
        }
        if (!added || dry_run) continue;
        // The owner's warning: once per (finding, rule), whatever the number of actions.
        const std::string exempt_reason = [&] {
          std::string e = ExemptionOf(config.exempt, subject);
          return e.empty() ? ExemptionOf(rule->exempt, subject) : e;
        }();
        const std::string what = absl::StrJoin(words, " and ");
        const std::string summary = exempt_reason.empty()
                                        ? absl::StrCat("goodput will ", what, " after ",
                                                       Clock(act_after), ": ", f.alert.summary())
                                        : absl::StrCat("goodput would ", what, " (", exempt_reason,
                                                       "): ", f.alert.summary());
        const std::string description = absl::StrCat(
            "Policy ", rule->name, " acts on this finding (", f.kind, ", job ",
            f.alert.job().cluster(), "/", f.alert.job().job_id(), "). ",
            exempt_reason.empty() ? absl::StrCat("Unless it clears before ", Clock(act_after),
                                                 ", goodput will ", what, ".")
                                  : "Nothing will be done: the job is exempt.",
            " Ask an operator to undo it with goodputctl actions undo.");
        std::vector<std::string> targets = rule->notify;
        targets.insert(targets.end(), config.audit_targets.begin(), config.audit_targets.end());
        if (absl::Status s = EnqueueNotices(
                tx,
                Notice(evidence, f.alert_id, absl::StrCat("policy-", f.alert_id, "-", rule->name),
                       "warning", summary, description, now),
                absl::StrCat("policy:", f.alert_id, ":", rule->name, ":warned"), targets);
            !s.ok()) {
          return s;
        }
      }
      recorded += added_here;
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
  }
  return recorded;
}

absl::StatusOr<std::vector<PolicyStage::Claimed>> PolicyStage::ClaimDue() {
  const absl::Time now = Now();
  return pg_->RunTransactionFor<std::vector<Claimed>>(
      [&](pqxx::work& tx) -> absl::StatusOr<std::vector<Claimed>> {
        std::vector<Claimed> out;
        for (const pqxx::row& r : tx.exec_params(
                 kClaimDue, Us(now), Us(now + options_.config.lease), options_.replica)) {
          out.push_back(Claimed{RowFrom(r)});
        }
        std::sort(out.begin(), out.end(),
                  [](const Claimed& a, const Claimed& b) { return a.row.id < b.row.id; });
        return out;
      });
}

absl::Status PolicyStage::Finish(const Claimed& c, const std::string& status,
                                 const std::string& outcome, const std::string& command) {
  const ActionRow& row = c.row;
  const absl::Time now = Now();
  return pg_->RunTransaction([&](pqxx::work& tx) -> absl::Status {
    pqxx::result r =
        tx.exec_params(kFinish, row.id, row.attempts, status, outcome, command, Us(now));
    if (r.empty()) return absl::OkStatus();  // another replica took it over meanwhile
    if (options_.outcomes != nullptr) {
      options_.outcomes->WithLabels({row.rule, row.action, status}).Increment();
    }
    if (options_.config.audit_targets.empty()) return absl::OkStatus();
    const nlohmann::json ev = EvidenceOf(row);
    const std::string job = absl::StrCat(row.cluster, "/", row.job_id);
    std::string summary;
    if (status == "done") {
      summary = absl::StrCat("goodput ", Past(row.action, row.node), " (job ", job, ", policy ",
                             row.rule, ")");
    } else if (status == "dry_run") {
      summary = absl::StrCat("[dry run] goodput would ", Words(row.action, row.node), " (job ", job,
                             ", policy ", row.rule, ")");
    } else if (status == "failed") {
      summary = absl::StrCat("goodput could not ", Words(row.action, row.node), " (job ", job,
                             ", policy ", row.rule, ")");
    } else {
      summary = absl::StrCat("goodput did not ", Words(row.action, row.node), " (job ", job,
                             ", policy ", row.rule, "): ", status);
    }
    const std::string finding =
        ev.contains("summary") && ev["summary"].is_string() ? ev["summary"].get<std::string>() : "";
    const std::string description =
        absl::StrCat("Finding: ", finding, ". Command: ", command, ". Outcome: ", outcome,
                     ". Action ", row.id, " (goodputctl actions show ", row.id, ").");
    return EnqueueNotices(
        tx,
        Notice(ev, row.alert_id, absl::StrCat("policy-action-", row.id),
               status == "failed" ? "warning" : "info", summary, description, now),
        absl::StrCat("policy:action:", row.id, ":", status), options_.config.audit_targets);
  });
}

absl::Status PolicyStage::Hold(const Claimed& c, absl::Time until, const std::string& note,
                               bool attempted) {
  return pg_->RunTransaction([&](pqxx::work& tx) -> absl::Status {
    tx.exec_params(kHold, c.row.id, c.row.attempts, Us(until), note, attempted ? 0 : 1);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::string> PolicyStage::DrainWithLimits(const Claimed& c,
                                                         const std::string& reason, bool* held,
                                                         std::string* note) {
  const ActionRow& row = c.row;
  const PolicyClusterLimits& limits = LimitsFor(options_.config, row.cluster);
  const absl::Time now = Now();
  // One drain at a time per cluster across replicas: the count and the drain under one lock.
  return pg_->RunTransactionFor<std::string>([&](pqxx::work& tx) -> absl::StatusOr<std::string> {
    tx.exec_params(kDrainLock, row.cluster);
    absl::StatusOr<PolicyNodeView> view = actuator_->Node(row.cluster, row.node);
    if (!view.ok()) return view.status();
    if (NodeDrained(view->state)) {
      // Not goodput's doing (or an earlier attempt's, whose reason is goodput's).
      if (!absl::StartsWith(view->reason, kDrainReasonPrefix)) {
        tx.exec_params(kSetPeerBefore, row.id,
                       absl::StrCat("node was already ", view->state, ": ", view->reason));
      }
      return absl::StrCat("node already ", view->state, " (", OneLine(view->reason, 200), ")");
    }
    const int drains =
        tx.exec_params1(kDrainsLastHour, row.cluster, Us(now - absl::Hours(1)))[0].as<int>();
    absl::StatusOr<std::pair<int, int>> counts = actuator_->NodeCounts(row.cluster);
    if (!counts.ok()) return counts.status();
    const std::string why = DrainHeldBack(limits, drains, counts->first, counts->second);
    if (!why.empty()) {
      *held = true;
      *note = why;
      return std::string();
    }
    return actuator_->Drain(row.cluster, row.node, reason);
  });
}

absl::StatusOr<bool> PolicyStage::Act(const Claimed& c) {
  const ActionRow& row = c.row;
  const PolicyConfig& config = options_.config;
  const nlohmann::json ev = EvidenceOf(row);
  // The finding must still be firing: resolved (the job recovered or ended), acknowledged (a
  // person took it) or silenced (muted) all stop the ladder.
  absl::StatusOr<std::string> alert_state =
      pg_->RunTransactionFor<std::string>([&](pqxx::work& tx) -> absl::StatusOr<std::string> {
        pqxx::result r = tx.exec_params(kAlertState, row.alert_id);
        return r.empty() ? std::string("gone") : r[0][0].as<std::string>();
      });
  if (!alert_state.ok()) return alert_state.status();
  if (*alert_state != "firing") {
    if (absl::Status s =
            Finish(c, "cleared", absl::StrCat("the finding is ", *alert_state, ": nothing done"),
                   row.command);
        !s.ok()) {
      return s;
    }
    return true;
  }
  const PolicyRule* rule = nullptr;
  for (const PolicyRule& r : config.rules) {
    if (r.name == row.rule) rule = &r;
  }
  if (rule == nullptr) {
    if (absl::Status s = Finish(
            c, "cleared", absl::StrCat("rule ", row.rule, " is no longer configured"), row.command);
        !s.ok()) {
      return s;
    }
    return true;
  }
  Labels labels;
  if (ev.contains("labels") && ev["labels"].is_object()) {
    for (const auto& [k, v] : ev["labels"].items()) {
      if (v.is_string()) labels[k] = v.get<std::string>();
    }
  }
  const PolicySubject subject = SubjectFromLabels(labels);
  std::string exempt = ExemptionOf(config.exempt, subject);
  if (exempt.empty()) exempt = ExemptionOf(rule->exempt, subject);
  if (!exempt.empty()) {
    if (absl::Status s = Finish(c, "exempt", absl::StrCat(exempt, ": warned only"), row.command);
        !s.ok()) {
      return s;
    }
    return true;
  }
  if (row.dry_run) {
    if (absl::Status s =
            Finish(c, "dry_run", absl::StrCat("dry run: would run ", row.command), row.command);
        !s.ok()) {
      return s;
    }
    return true;
  }

  absl::StatusOr<std::string> outcome;
  bool held = false;
  std::string note;
  const std::string summary =
      ev.contains("summary") && ev["summary"].is_string() ? ev["summary"].get<std::string>() : "";
  if (row.action == "cancel") {
    if (row.scheduler == "osmo") {
      absl::StatusOr<std::string> wf = actuator_->WorkflowOf(row.cluster, labels);
      outcome = wf.ok() ? actuator_->CancelWorkflow(row.cluster, *wf) : wf.status();
    } else if (row.scheduler == "slurm") {
      outcome = actuator_->Cancel(row.cluster, row.job_id);
    } else {
      outcome = absl::FailedPreconditionError(absl::StrCat(
          "job is a ", row.scheduler.empty() ? "job of no known scheduler" : row.scheduler + " job",
          ": goodput cancels Slurm jobs and Osmo workflows"));
    }
  } else if (row.action == "requeue") {
    if (row.scheduler != "slurm") {
      outcome = absl::FailedPreconditionError("requeue needs a Slurm job");
    } else {
      std::string before = row.peer_before;
      if (before.empty()) {
        absl::StatusOr<PolicyJobView> job = actuator_->Job(row.cluster, row.job_id);
        if (job.ok()) {
          before = job->start_time;
          absl::Status s = pg_->RunTransaction([&](pqxx::work& tx) -> absl::Status {
            tx.exec_params(kSetPeerBefore, row.id, before);
            return absl::OkStatus();
          });
          if (!s.ok()) return s;
          outcome = actuator_->Requeue(row.cluster, row.job_id, before);
        } else {
          outcome = job.status();
        }
      } else {
        outcome = actuator_->Requeue(row.cluster, row.job_id, before);
      }
    }
  } else {
    if (!actuator_->HasSlurm(row.cluster)) {
      outcome = absl::FailedPreconditionError(absl::StrCat(
          "cluster ", row.cluster, " has no Slurm access: its nodes cannot be drained"));
    } else {
      outcome = DrainWithLimits(
          c, absl::StrCat(kDrainReasonPrefix, " ", summary, ", job ", row.job_id), &held, &note);
    }
  }
  const absl::Time now = Now();
  if (held) {
    if (absl::Status s =
            Hold(c, now + std::max(config.interval, absl::Seconds(60)), note, /*attempted=*/false);
        !s.ok()) {
      return s;
    }
    logger_.Info("policy action held back",
                 {{"action_id", absl::StrCat(row.id)}, {"reason", note}});
    return false;
  }
  if (!outcome.ok()) {
    const std::string error = std::string(outcome.status().message());
    if (Transient(outcome.status()) && row.attempts < kMaxAttempts) {
      const absl::Duration backoff =
          std::min(absl::Seconds(10) * (1 << std::min(row.attempts, 6)), absl::Minutes(10));
      if (absl::Status s =
              Hold(c, now + backoff, absl::StrCat("attempt ", row.attempts, " failed: ", error),
                   /*attempted=*/true);
          !s.ok()) {
        return s;
      }
      return false;
    }
    if (absl::Status s = Finish(c, "failed", error, row.command); !s.ok()) return s;
    logger_.Warn("policy action failed", {{"action_id", absl::StrCat(row.id)},
                                          {"rule", row.rule},
                                          {"command", row.command},
                                          {"error", error}});
    return true;
  }
  if (absl::Status s = Finish(c, "done", *outcome, row.command); !s.ok()) return s;
  logger_.Info("policy action done", {{"action_id", absl::StrCat(row.id)},
                                      {"rule", row.rule},
                                      {"command", row.command},
                                      {"outcome", *outcome}});
  return true;
}

void PolicyStage::Start() {
  thread_ = std::thread([this] {
    while (true) {
      absl::StatusOr<PolicyStepResult> r = Step();
      if (!r.ok()) {
        logger_.Warn("policy pass failed", {{"error", std::string(r.status().message())}});
      }
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || woken_; };
      mu_.AwaitWithTimeout(absl::Condition(&ready), options_.config.interval);
      if (stop_) return;
      woken_ = false;
    }
  });
}

void PolicyStage::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void PolicyStage::Wake() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
}

absl::StatusOr<v1::ListPolicyActionsResponse> PolicyStage::List(
    const v1::ListPolicyActionsRequest& request) {
  const int page_size = request.page_size() <= 0 ? 100 : std::min(request.page_size(), 1000);
  int64_t before = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &before) || before <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "page_token: \"", OneLine(request.page_token(), 100), "\" is not a token of this list"));
  }
  const std::string cluster = request.has_job() && !request.job().cluster().empty()
                                  ? request.job().cluster()
                                  : request.cluster();
  const std::string job_id = request.has_job() ? request.job().job_id() : "";
  return pg_->RunTransactionFor<v1::ListPolicyActionsResponse>(
      [&](pqxx::work& tx) -> absl::StatusOr<v1::ListPolicyActionsResponse> {
        v1::ListPolicyActionsResponse out;
        pqxx::result rows =
            tx.exec_params(kList, cluster, job_id, request.status(), before, page_size + 1);
        for (size_t i = 0; i < rows.size() && static_cast<int>(i) < page_size; ++i) {
          *out.add_actions() = ToProto(RowFrom(rows[i]));
        }
        if (static_cast<int>(rows.size()) > page_size) {
          out.set_next_page_token(out.actions(out.actions_size() - 1).action_id());
        }
        return out;
      });
}

absl::StatusOr<v1::PolicyAction> PolicyStage::Get(const std::string& action_id) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(action_id, &id) || id <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("action_id: \"", OneLine(action_id, 100), "\" is not an action id"));
  }
  return pg_->RunTransactionFor<v1::PolicyAction>(
      [&](pqxx::work& tx) -> absl::StatusOr<v1::PolicyAction> {
        pqxx::result r = tx.exec_params(kGetRow, id);
        if (r.empty()) return absl::NotFoundError(absl::StrCat("no policy action ", id));
        return ToProto(RowFrom(r[0]));
      });
}

absl::StatusOr<v1::PolicyAction> PolicyStage::Undo(const v1::UndoPolicyActionRequest& request) {
  int64_t id = 0;
  if (!absl::SimpleAtoi(request.action_id(), &id) || id <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("action_id: \"", OneLine(request.action_id(), 100), "\" is not an action id"));
  }
  if (request.by().empty()) return absl::InvalidArgumentError("by: is required");
  const std::string by = OneLine(request.by(), 200);
  const absl::Time now = Now();
  absl::Status done = pg_->RunTransaction([&](pqxx::work& tx) -> absl::Status {
    pqxx::result r = tx.exec_params(kLockRow, id);
    if (r.empty()) return absl::NotFoundError(absl::StrCat("no policy action ", id));
    const ActionRow row = RowFrom(r[0]);
    std::string outcome;
    if (row.status == "undone") return absl::OkStatus();
    if (row.status == "waiting") {
      outcome = "stopped before acting";
    } else if (row.status == "acting") {
      return absl::FailedPreconditionError(absl::StrCat("action ", id, " is running now (",
                                                        row.command, "); undo it once it is done"));
    } else if (row.status != "done") {
      return absl::FailedPreconditionError(absl::StrCat(
          "action ", id, " is ", row.status, ": nothing was done, so there is nothing to undo"));
    } else if (row.action != "drain") {
      return absl::FailedPreconditionError(
          absl::StrCat("action ", id, " ", Past(row.action, row.node),
                       ": goodput cannot undo that (the job's owner resubmits or releases it)"));
    } else if (!row.peer_before.empty()) {
      return absl::FailedPreconditionError(absl::StrCat("goodput did not drain node ", row.node,
                                                        " (", row.peer_before,
                                                        "): it is left as it is"));
    } else {
      absl::StatusOr<std::string> resumed = actuator_->Resume(row.cluster, row.node);
      if (!resumed.ok()) return resumed.status();
      outcome = absl::StrCat(*resumed, " (", actuator_->ResumeCommand(row.cluster, row.node), ")");
    }
    if (!request.comment().empty())
      absl::StrAppend(&outcome, ": ", OneLine(request.comment(), 300));
    tx.exec_params(kUndone, id, Us(now), by, outcome);
    if (!options_.config.audit_targets.empty()) {
      const nlohmann::json ev = EvidenceOf(row);
      return EnqueueNotices(tx,
                            Notice(ev, row.alert_id, absl::StrCat("policy-action-", row.id), "info",
                                   absl::StrCat(by, " undid goodput's action ", row.id, " (",
                                                Words(row.action, row.node), ", job ", row.cluster,
                                                "/", row.job_id, ")"),
                                   outcome, now),
                            absl::StrCat("policy:action:", row.id, ":undone"),
                            options_.config.audit_targets);
    }
    return absl::OkStatus();
  });
  if (!done.ok()) return done;
  if (options_.wake_delivery) options_.wake_delivery();
  return Get(request.action_id());
}

#undef GP_TS
#undef GP_US
#undef GP_ROW_COLUMNS

}  // namespace goodput::alerting
