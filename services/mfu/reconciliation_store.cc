#include "services/mfu/reconciliation_store.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "services/api/api_convert.h"
#include "services/mfu/report_check.h"
#include "services/platform/logging.h"

namespace goodput::mfu {
namespace {

// ---------------------------------------------------------------------------------------
// SQL
// ---------------------------------------------------------------------------------------

constexpr char kLockWatermark[] =
    "INSERT INTO mfu_delivery_watermarks (producer) VALUES ($1) ON CONFLICT DO NOTHING";
constexpr char kSelectWatermark[] =
    "SELECT sequence FROM mfu_delivery_watermarks WHERE producer = $1 FOR UPDATE";
constexpr char kSetWatermark[] =
    "UPDATE mfu_delivery_watermarks SET sequence = $2, updated_at = now() WHERE producer = $1";
// A higher revision replaces a lower one; a resent equal revision rewrites the same values.
constexpr char kUpsertWindow[] =
    "INSERT INTO mfu_ofu_windows (cluster, job_id, start_time, end_time, gpu_model, "
    "workload_fingerprint, ofu, ofu_ci95_low, ofu_ci95_high, gpu_coverage, gpus_allocated, "
    "sample_count, warmup, revision, finalized, producer, sequence) VALUES ($1, $2, "
    "timestamptz 'epoch' + $3::bigint * interval '1 microsecond', "
    "timestamptz 'epoch' + $4::bigint * interval '1 microsecond', $5, $6, $7, $8, $9, $10, $11, "
    "$12, $13, $14, $15, $16, $17) "
    "ON CONFLICT (cluster, job_id, start_time) DO UPDATE SET end_time = EXCLUDED.end_time, "
    "gpu_model = EXCLUDED.gpu_model, workload_fingerprint = EXCLUDED.workload_fingerprint, "
    "ofu = EXCLUDED.ofu, ofu_ci95_low = EXCLUDED.ofu_ci95_low, "
    "ofu_ci95_high = EXCLUDED.ofu_ci95_high, gpu_coverage = EXCLUDED.gpu_coverage, "
    "gpus_allocated = EXCLUDED.gpus_allocated, sample_count = EXCLUDED.sample_count, "
    "warmup = EXCLUDED.warmup, revision = EXCLUDED.revision, finalized = EXCLUDED.finalized, "
    "producer = EXCLUDED.producer, sequence = EXCLUDED.sequence, received_at = now() "
    "WHERE mfu_ofu_windows.revision <= EXCLUDED.revision";
constexpr char kMarkPending[] =
    "INSERT INTO mfu_reconcile_pending (cluster, job_id) VALUES ($1, $2) "
    "ON CONFLICT (cluster, job_id) DO UPDATE SET "
    "generation = mfu_reconcile_pending.generation + 1, updated_at = now()";
constexpr char kPendingJobs[] =
    "SELECT cluster, job_id FROM mfu_reconcile_pending ORDER BY updated_at LIMIT $1";
constexpr char kIsPending[] =
    "SELECT 1 FROM mfu_reconcile_pending WHERE cluster = $1 AND job_id = $2";
constexpr char kPendingGeneration[] =
    "SELECT generation FROM mfu_reconcile_pending WHERE cluster = $1 AND job_id = $2";
constexpr char kClearPending[] =
    "DELETE FROM mfu_reconcile_pending WHERE cluster = $1 AND job_id = $2 AND generation = $3";
// Serializes reconciliations of one job across replicas.
constexpr char kLockJob[] = "SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))";
constexpr char kJob[] =
    "SELECT j.gpu_model, j.workload_fingerprint, "
    "GREATEST(coalesce(j.gpu_count, 0), (SELECT count(*) FROM job_gpus g WHERE g.job = j.id)) "
    "FROM jobs j WHERE j.cluster = $1 AND j.job_id = $2";
constexpr char kJobWindows[] =
    "SELECT (extract(epoch FROM start_time) * 1000000)::bigint, "
    "(extract(epoch FROM end_time) * 1000000)::bigint, ofu, ofu_ci95_low, ofu_ci95_high, "
    "gpu_coverage, gpus_allocated, warmup, gpu_model, workload_fingerprint "
    "FROM mfu_ofu_windows WHERE cluster = $1 AND job_id = $2 ORDER BY start_time";
constexpr char kJobReports[] =
    "SELECT report_id, encode(report, 'base64'), app_mfu, peak_tflops, coalesce(gpu_model, ''), "
    "(extract(epoch FROM interval_start) * 1000000)::bigint, "
    "(extract(epoch FROM interval_end) * 1000000)::bigint "
    "FROM mfu_reports WHERE cluster = $1 AND job_id = $2 ORDER BY interval_start, report_id";
constexpr char kUpdateReportMfu[] =
    "UPDATE mfu_reports SET app_mfu = $2, model_tflops_per_gpu = $3, peak_tflops = $4, "
    "gpu_model = $5 WHERE report_id = $1 AND cluster = $6";
constexpr char kDeletePoints[] =
    "DELETE FROM mfu_reconciliation_points WHERE cluster = $1 AND job_id = $2";
constexpr char kInsertPointsHead[] =
    "INSERT INTO mfu_reconciliation_points (cluster, job_id, start_time, end_time, app_mfu, ofu, "
    "ofu_ci95_low, ofu_ci95_high, difference_pp, ratio, gpu_coverage, gpus_allocated, "
    "report_count, paired, verdict) VALUES ";
constexpr char kPreviousVerdict[] =
    "SELECT verdict, switches_sent FROM mfu_job_reconciliations "
    "WHERE cluster = $1 AND job_id = $2";
constexpr char kUpsertJob[] =
    "INSERT INTO mfu_job_reconciliations (cluster, job_id, verdict, top_cause, summary, "
    "framework, gpu_model, switches_sent) VALUES ($1, $2, $3, $4, decode($5, 'base64'), $6, $7, "
    "$8) ON CONFLICT (cluster, job_id) DO UPDATE SET verdict = EXCLUDED.verdict, "
    "top_cause = EXCLUDED.top_cause, summary = EXCLUDED.summary, "
    "framework = EXCLUDED.framework, gpu_model = EXCLUDED.gpu_model, "
    "switches_sent = EXCLUDED.switches_sent, updated_at = now()";
constexpr char kNextEventSequence[] =
    "INSERT INTO mfu_event_producers (producer) VALUES ($1) ON CONFLICT DO NOTHING";
constexpr char kTakeEventSequence[] =
    "UPDATE mfu_event_producers SET commit_seq = commit_seq + 1 WHERE producer = $1 "
    "RETURNING commit_seq, (extract(epoch FROM now()) * 1000000)::bigint";
constexpr char kInsertEvent[] =
    "INSERT INTO mfu_divergence_events (producer, sequence, ordinal, event) "
    "VALUES ($1, $2, $3, decode($4, 'base64'))";
constexpr char kJobKnown[] =
    "SELECT EXISTS (SELECT 1 FROM jobs WHERE cluster = $1 AND job_id = $2) "
    "OR EXISTS (SELECT 1 FROM mfu_reports WHERE cluster = $1 AND job_id = $2) "
    "OR EXISTS (SELECT 1 FROM mfu_ofu_windows WHERE cluster = $1 AND job_id = $2)";
constexpr char kJobSummary[] =
    "SELECT encode(summary, 'base64') FROM mfu_job_reconciliations "
    "WHERE cluster = $1 AND job_id = $2";
constexpr char kJobPoints[] =
    "SELECT (extract(epoch FROM start_time) * 1000000)::bigint, "
    "(extract(epoch FROM end_time) * 1000000)::bigint, app_mfu, ofu, ofu_ci95_low, "
    "ofu_ci95_high, difference_pp, ratio, gpu_coverage, report_count, verdict "
    "FROM mfu_reconciliation_points WHERE cluster = $1 AND job_id = $2 "
    "AND ($3::bigint IS NULL OR end_time > timestamptz 'epoch' + $3 * interval '1 microsecond') "
    "AND ($4::bigint IS NULL OR start_time < timestamptz 'epoch' + $4 * interval '1 microsecond') "
    "ORDER BY start_time";
// Per job: app MFU and OFU time-weighted over the paired windows in the range (summed in
// window order, so that the result does not depend on the order rows were stored in); $1/$2
// range in microseconds, then cluster, GPU model, team, framework, scheduler ('' = any).
constexpr char kFleetJobs[] =
    "WITH pts AS ("
    "  SELECT p.cluster, p.job_id, "
    "    sum(p.app_mfu * extract(epoch FROM p.end_time - p.start_time) ORDER BY p.start_time) "
    "      / sum(extract(epoch FROM p.end_time - p.start_time)) AS app_mfu, "
    "    sum(p.ofu * extract(epoch FROM p.end_time - p.start_time) ORDER BY p.start_time) "
    "      / sum(extract(epoch FROM p.end_time - p.start_time)) AS ofu, "
    "    max(p.gpus_allocated) AS gpus "
    "  FROM mfu_reconciliation_points p "
    "  WHERE p.paired AND p.app_mfu IS NOT NULL "
    "    AND p.start_time < timestamptz 'epoch' + $2::bigint * interval '1 microsecond' "
    "    AND p.end_time > timestamptz 'epoch' + $1::bigint * interval '1 microsecond' "
    "    AND ($3 = '' OR p.cluster = $3) "
    "  GROUP BY p.cluster, p.job_id) "
    "SELECT pts.cluster, pts.job_id, pts.app_mfu::float8, pts.ofu::float8, "
    "  coalesce(nullif(pts.gpus, 0), j.gpu_count, "
    "           (SELECT count(*) FROM job_gpus g WHERE g.job = j.id), 0)::bigint AS gpu_count, "
    "  coalesce(r.verdict, 0), coalesce(r.top_cause, 0) "
    "FROM pts LEFT JOIN jobs j ON j.cluster = pts.cluster AND j.job_id = pts.job_id "
    "LEFT JOIN mfu_job_reconciliations r ON r.cluster = pts.cluster AND r.job_id = pts.job_id "
    "WHERE ($4 = '' OR coalesce(nullif(j.gpu_model, ''), r.gpu_model) = $4) "
    "  AND ($5 = '' OR j.team = $5) AND ($6 = '' OR r.framework = $6) "
    "  AND ($7 = '' OR j.scheduler = $7) "
    "ORDER BY gpu_count, pts.cluster, pts.job_id";
// GPU-hours of registered jobs in the range (clipped to it), and of those with OFU windows
// or app MFU reports in it. Same parameters as kFleetJobs plus $8 = minimum GPU count.
constexpr char kFleetCoverage[] =
    "WITH js AS ("
    "  SELECT j.cluster, j.job_id, "
    "    GREATEST(coalesce(j.gpu_count, 0), "
    "             (SELECT count(*) FROM job_gpus g WHERE g.job = j.id)) AS gpus, "
    "    GREATEST(0, extract(epoch FROM "
    "      LEAST(coalesce(j.end_time, timestamptz 'epoch' + $2::bigint * interval '1 "
    "microsecond'), "
    "            timestamptz 'epoch' + $2::bigint * interval '1 microsecond') - "
    "      GREATEST(coalesce(j.start_time, j.created_at), "
    "               timestamptz 'epoch' + $1::bigint * interval '1 microsecond'))) / 3600.0 "
    "      AS hours "
    "  FROM jobs j LEFT JOIN mfu_job_reconciliations r "
    "    ON r.cluster = j.cluster AND r.job_id = j.job_id "
    "  WHERE coalesce(j.start_time, j.created_at) < "
    "          timestamptz 'epoch' + $2::bigint * interval '1 microsecond' "
    "    AND (j.end_time IS NULL OR "
    "         j.end_time > timestamptz 'epoch' + $1::bigint * interval '1 microsecond') "
    "    AND ($3 = '' OR j.cluster = $3) AND ($4 = '' OR j.gpu_model = $4) "
    "    AND ($5 = '' OR j.team = $5) AND ($6 = '' OR r.framework = $6) "
    "    AND ($7 = '' OR j.scheduler = $7)) "
    "SELECT coalesce(sum(gpus * hours), 0)::float8, "
    "  coalesce(sum(gpus * hours) FILTER (WHERE EXISTS (SELECT 1 FROM mfu_ofu_windows w "
    "    WHERE w.cluster = js.cluster AND w.job_id = js.job_id "
    "      AND w.start_time < timestamptz 'epoch' + $2::bigint * interval '1 microsecond' "
    "      AND w.end_time > timestamptz 'epoch' + $1::bigint * interval '1 microsecond')), 0)"
    "    ::float8, "
    "  coalesce(sum(gpus * hours) FILTER (WHERE EXISTS (SELECT 1 FROM mfu_reports m "
    "    WHERE m.cluster = js.cluster AND m.job_id = js.job_id "
    "      AND m.interval_start < timestamptz 'epoch' + $2::bigint * interval '1 microsecond' "
    "      AND m.interval_end > timestamptz 'epoch' + $1::bigint * interval '1 microsecond')), 0)"
    "    ::float8 "
    "FROM js WHERE gpus >= $8";
constexpr char kAcked[] =
    "SELECT acked_seq FROM mfu_forward_state WHERE target = $1 AND producer = $2";
constexpr char kSetAcked[] =
    "INSERT INTO mfu_forward_state (target, producer, acked_seq) VALUES ($1, $2, $3) "
    "ON CONFLICT (target, producer) DO UPDATE SET acked_seq = EXCLUDED.acked_seq, "
    "updated_at = now()";
constexpr char kPendingEvents[] =
    "SELECT DISTINCT sequence FROM mfu_divergence_events WHERE producer = $1 AND sequence > $2 "
    "ORDER BY sequence LIMIT $3";
constexpr char kEventsOf[] =
    "SELECT encode(event, 'base64') FROM mfu_divergence_events WHERE producer = $1 "
    "AND sequence = $2 ORDER BY ordinal";

// Most point rows per INSERT statement.
constexpr size_t kPointsPerInsert = 500;

// ---------------------------------------------------------------------------------------

std::optional<double> OptionalDouble(const pqxx::field& f) {
  if (f.is_null()) return std::nullopt;
  return f.as<double>();
}

std::string SqlDouble(std::optional<double> v) {
  if (!v || !std::isfinite(*v)) return "NULL";
  return absl::StrFormat("%.17g", *v);
}

std::string SqlTime(int64_t us) {
  return absl::StrCat("timestamptz 'epoch' + ", us, " * interval '1 microsecond'");
}

template <class Message>
absl::Status ParseBase64(const std::string& b64, Message* out, absl::string_view what) {
  std::string bytes;
  if (!absl::Base64Unescape(b64, &bytes) || !out->ParseFromString(bytes)) {
    return absl::DataLossError(absl::StrCat("stored ", what, " cannot be parsed"));
  }
  return absl::OkStatus();
}

std::string Base64Of(const google::protobuf::Message& m) {
  return absl::Base64Escape(m.SerializeAsString());
}

// The precision mix of a report as (precision, share) sorted by precision; a single or
// assumed precision is a mix of one.
std::vector<std::pair<int, double>> MixOf(const v1::MfuReport& report) {
  std::vector<std::pair<int, double>> mix;
  if (report.precision_mix_size() > 0) {
    for (const v1::PrecisionShare& s : report.precision_mix()) {
      mix.emplace_back(static_cast<int>(s.precision()), s.flops_share());
    }
    std::sort(mix.begin(), mix.end());
  } else if (report.precision() != v1::PRECISION_UNSPECIFIED) {
    mix.emplace_back(static_cast<int>(report.precision()), 1.0);
  } else {
    mix.emplace_back(static_cast<int>(v1::PRECISION_BF16), 1.0);
  }
  return mix;
}

void AddShares(const std::vector<std::pair<int, double>>& mix,
               google::protobuf::RepeatedPtrField<v1::PrecisionShare>* out) {
  for (const auto& [precision, share] : mix) {
    v1::PrecisionShare* s = out->Add();
    s->set_precision(static_cast<v1::Precision>(precision));
    s->set_flops_share(share);
  }
}

std::string_view CauseExplanation(detect::Cause cause) {
  switch (cause) {
    case detect::Cause::kLatentProjectionMoe:
      return "MoE experts' FLOPs counted at the full hidden dimension (latent down/up "
             "projections ignored)";
    case detect::Cause::kLayerTypesAsAttentionMlp:
      return "Mamba, MoE or other layers counted as attention plus dense MLP";
    case detect::Cause::kRecomputeNotCounted:
      return "activation recomputation not counted: a step is 4F, not 3F";
    case detect::Cause::kDoubledFlopsOrHalfPeak:
      return "FLOPs doubled or peak halved (multiply-add counted twice, BF16 peak for an FP8 "
             "run)";
    case detect::Cause::kHalvedFlopsOrDoublePeak:
      return "FLOPs halved or peak doubled (sparse peak, FMA as one FLOP, FP8 peak for a BF16 "
             "run)";
    case detect::Cause::kTileQuantization:
      return "padded GEMM tiles make OFU a few percent higher than MFU (benign)";
    case detect::Cause::kUnexplained:
      return "no known cause fits the ratio";
  }
  return "";
}

std::string SchedulerText(v1::SchedulerKind kind) {
  switch (kind) {
    case v1::SCHEDULER_KIND_SLURM:
      return "slurm";
    case v1::SCHEDULER_KIND_OSMO:
      return "osmo";
    case v1::SCHEDULER_KIND_KUBERNETES:
      return "kubernetes";
    case v1::SCHEDULER_KIND_OTHER:
      return "other";
    default:
      return "";
  }
}

absl::Status CheckJobKey(const v1::JobKey& job) {
  if (job.cluster().empty() || job.job_id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job: cluster=\"", job.cluster().substr(0, 100),
                                                   "\" and job_id=\"", job.job_id().substr(0, 100),
                                                   "\" are both required"));
  }
  return absl::OkStatus();
}

absl::Status CheckWindow(const v1::OfuWindow& w, int index) {
  const std::string where = absl::StrCat("windows[", index, "]");
  if (w.job().cluster().empty() || w.job().job_id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".job: cluster and job_id required"));
  }
  if (api::TimestampToUnixMicros(w.end_time()) <= api::TimestampToUnixMicros(w.start_time())) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ".end_time=", w.end_time().seconds(),
                     " is not after start_time=", w.start_time().seconds()));
  }
  for (auto [name, v] : {std::pair<const char*, double>{"ofu", w.ofu()},
                         {"ofu_ci95_low", w.ofu_ci95_low()},
                         {"ofu_ci95_high", w.ofu_ci95_high()},
                         {"gpu_coverage", w.gpu_coverage()}}) {
    if (!std::isfinite(v) || v < 0 || v > 1.5) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".", name, "=", v, " is outside [0, 1.5]"));
    }
  }
  return absl::OkStatus();
}

// Downsamples points into buckets of `resolution_us` aligned to the epoch: time-weighted
// means, summed report counts, the last point's verdict.
std::vector<v1::ReconciliationPoint> Downsample(const std::vector<v1::ReconciliationPoint>& in,
                                                int64_t resolution_us) {
  std::vector<v1::ReconciliationPoint> out;
  size_t i = 0;
  while (i < in.size()) {
    const int64_t start = api::TimestampToUnixMicros(in[i].interval().start_time());
    const int64_t bucket = start - ((start % resolution_us) + resolution_us) % resolution_us;
    double w_all = 0, ofu = 0, low = 0, high = 0, cov = 0, w_app = 0, app = 0;
    int32_t reports = 0;
    v1::Verdict verdict = v1::VERDICT_UNSPECIFIED;
    size_t j = i;
    for (; j < in.size(); ++j) {
      const int64_t s = api::TimestampToUnixMicros(in[j].interval().start_time());
      if (s >= bucket + resolution_us) break;
      const double d =
          static_cast<double>(api::TimestampToUnixMicros(in[j].interval().end_time()) - s);
      w_all += d;
      ofu += d * in[j].ofu();
      low += d * in[j].ofu_ci95_low();
      high += d * in[j].ofu_ci95_high();
      cov += d * in[j].gpu_coverage();
      if (in[j].has_app_mfu()) {
        w_app += d;
        app += d * in[j].app_mfu();
      }
      reports += in[j].report_count();
      if (in[j].verdict() != v1::VERDICT_UNSPECIFIED) verdict = in[j].verdict();
    }
    v1::ReconciliationPoint p;
    *p.mutable_interval()->mutable_start_time() = api::UnixMicrosToTimestamp(bucket);
    *p.mutable_interval()->mutable_end_time() = api::UnixMicrosToTimestamp(bucket + resolution_us);
    if (w_all > 0) {
      p.set_ofu(ofu / w_all);
      p.set_ofu_ci95_low(low / w_all);
      p.set_ofu_ci95_high(high / w_all);
      p.set_gpu_coverage(cov / w_all);
    }
    if (w_app > 0) {
      p.set_app_mfu(app / w_app);
      p.set_difference_pp((p.app_mfu() - p.ofu()) * 100);
      if (p.ofu() > 0) p.set_ratio(p.app_mfu() / p.ofu());
    }
    p.set_report_count(reports);
    p.set_verdict(verdict);
    out.push_back(std::move(p));
    i = j;
  }
  return out;
}

}  // namespace

v1::Verdict ToProtoVerdict(detect::Verdict verdict) {
  switch (verdict) {
    case detect::Verdict::kConsistent:
      return v1::VERDICT_CONSISTENT;
    case detect::Verdict::kAppFlopsOvercount:
      return v1::VERDICT_APP_FLOPS_OVERCOUNT;
    case detect::Verdict::kAppFlopsUndercount:
      return v1::VERDICT_APP_FLOPS_UNDERCOUNT;
    case detect::Verdict::kInsufficientEvidence:
      return v1::VERDICT_INSUFFICIENT_EVIDENCE;
  }
  return v1::VERDICT_UNSPECIFIED;
}

detect::Verdict FromProtoVerdict(v1::Verdict verdict) {
  switch (verdict) {
    case v1::VERDICT_CONSISTENT:
      return detect::Verdict::kConsistent;
    case v1::VERDICT_APP_FLOPS_OVERCOUNT:
      return detect::Verdict::kAppFlopsOvercount;
    case v1::VERDICT_APP_FLOPS_UNDERCOUNT:
      return detect::Verdict::kAppFlopsUndercount;
    default:
      return detect::Verdict::kInsufficientEvidence;
  }
}

v1::DivergenceCause ToProtoCause(detect::Cause cause) {
  switch (cause) {
    case detect::Cause::kLatentProjectionMoe:
      return v1::DIVERGENCE_CAUSE_LATENT_PROJECTION_MOE;
    case detect::Cause::kLayerTypesAsAttentionMlp:
      return v1::DIVERGENCE_CAUSE_LAYER_TYPES_AS_ATTENTION_MLP;
    case detect::Cause::kRecomputeNotCounted:
      return v1::DIVERGENCE_CAUSE_RECOMPUTE_NOT_COUNTED;
    case detect::Cause::kDoubledFlopsOrHalfPeak:
      return v1::DIVERGENCE_CAUSE_DOUBLED_FLOPS_OR_HALF_PEAK;
    case detect::Cause::kHalvedFlopsOrDoublePeak:
      return v1::DIVERGENCE_CAUSE_HALVED_FLOPS_OR_DOUBLE_PEAK;
    case detect::Cause::kTileQuantization:
      return v1::DIVERGENCE_CAUSE_TILE_QUANTIZATION;
    case detect::Cause::kUnexplained:
      return v1::DIVERGENCE_CAUSE_UNEXPLAINED;
  }
  return v1::DIVERGENCE_CAUSE_UNSPECIFIED;
}

v1::Divergence ToProtoDivergence(const detect::DivergenceResult& r) {
  v1::Divergence d;
  d.set_verdict(ToProtoVerdict(r.verdict));
  d.set_ratio(r.ratio);
  d.set_ratio_ci95_low(r.ratio_ci95_low);
  d.set_ratio_ci95_high(r.ratio_ci95_high);
  d.set_correction_factor(r.correction_factor);
  d.set_confidence(r.confidence);
  d.set_app_mfu_mean(r.mean_app_mfu);
  d.set_ofu_mean(r.mean_ofu);
  d.set_windows_used(r.windows_used);
  d.set_duration_s(r.duration_s);
  if (r.verdict != detect::Verdict::kInsufficientEvidence) {
    for (const detect::CauseFit& c : r.causes) {
      v1::CauseFit* f = d.add_causes();
      f->set_cause(ToProtoCause(c.cause));
      f->set_expected_ratio_low(c.expected_ratio_low);
      f->set_expected_ratio_high(c.expected_ratio_high);
      f->set_fit_score(c.fit);
      f->set_explanation(std::string(CauseExplanation(c.cause)));
    }
  }
  d.set_reason(r.reason);
  return d;
}

absl::StatusOr<v1::DeliveryAck> ReconciliationStore::ApplyOfuWindows(
    const v1::PushOfuWindowsRequest& request) {
  const v1::DeliverySequence& pos = request.position();
  if (pos.producer_id().empty()) {
    return absl::InvalidArgumentError("position.producer_id is required");
  }
  if (pos.sequence() <= 0 || pos.previous_sequence() < 0 ||
      pos.previous_sequence() >= pos.sequence()) {
    return absl::InvalidArgumentError(absl::StrCat("position: sequence=", pos.sequence(),
                                                   " must be > 0 and above ",
                                                   "previous_sequence=", pos.previous_sequence()));
  }
  for (int i = 0; i < request.windows_size(); ++i) {
    if (absl::Status s = CheckWindow(request.windows(i), i); !s.ok()) return s;
  }
  return pool_->RunTransactionFor<v1::DeliveryAck>(
      [&](pqxx::work& txn) -> absl::StatusOr<v1::DeliveryAck> {
        txn.exec_params(kLockWatermark, pos.producer_id());
        const int64_t watermark =
            txn.exec_params(kSelectWatermark, pos.producer_id())[0][0].as<int64_t>();
        v1::DeliveryAck ack;
        ack.set_watermark_sequence(watermark);
        if (pos.sequence() <= watermark) {
          ack.set_duplicate(true);
          return ack;
        }
        if (pos.previous_sequence() > watermark) {
          ack.set_gap_detected(true);
          return ack;
        }
        std::set<std::pair<std::string, std::string>> jobs;
        for (const v1::OfuWindow& w : request.windows()) {
          // Per-GPU windows are not reconciled: framework reports are job-level.
          if (w.has_gpu()) continue;
          txn.exec_params(kUpsertWindow, w.job().cluster(), w.job().job_id(),
                          api::TimestampToUnixMicros(w.start_time()),
                          api::TimestampToUnixMicros(w.end_time()), w.gpu_model(),
                          w.workload_fingerprint(), w.ofu(), w.ofu_ci95_low(), w.ofu_ci95_high(),
                          w.gpu_coverage(), w.gpus_allocated(), w.sample_count(), w.warmup(),
                          w.revision(), w.finalized(), pos.producer_id(), pos.sequence());
          jobs.emplace(w.job().cluster(), w.job().job_id());
        }
        for (const auto& [cluster, job_id] : jobs) txn.exec_params(kMarkPending, cluster, job_id);
        txn.exec_params(kSetWatermark, pos.producer_id(), pos.sequence());
        ack.set_watermark_sequence(pos.sequence());
        return ack;
      });
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReconciliationStore::PendingJobs(
    int limit) {
  using Jobs = std::vector<std::pair<std::string, std::string>>;
  return pool_->RunTransactionFor<Jobs>([&](pqxx::work& txn) -> absl::StatusOr<Jobs> {
    Jobs out;
    for (const pqxx::row& r : txn.exec_params(kPendingJobs, limit)) {
      out.emplace_back(r[0].as<std::string>(), r[1].as<std::string>());
    }
    return out;
  });
}

absl::StatusOr<bool> ReconciliationStore::IsPending(const std::string& cluster,
                                                    const std::string& job_id) {
  return pool_->RunTransactionFor<bool>([&](pqxx::work& txn) -> absl::StatusOr<bool> {
    return !txn.exec_params(kIsPending, cluster, job_id).empty();
  });
}

absl::StatusOr<int> ReconciliationStore::ReconcileJob(const std::string& cluster,
                                                      const std::string& job_id) {
  return pool_->RunTransactionFor<int>([&](pqxx::work& txn) -> absl::StatusOr<int> {
    txn.exec_params(kLockJob, cluster, job_id);
    pqxx::result gen = txn.exec_params(kPendingGeneration, cluster, job_id);
    const std::optional<int64_t> generation =
        gen.empty() ? std::nullopt : std::optional<int64_t>(gen[0][0].as<int64_t>());

    std::string gpu_model, fingerprint;
    int64_t allocated = 0;
    if (pqxx::result job = txn.exec_params(kJob, cluster, job_id); !job.empty()) {
      gpu_model = job[0][0].as<std::string>();
      fingerprint = job[0][1].as<std::string>();
      allocated = job[0][2].as<int64_t>();
    }

    std::vector<WindowInput> windows;
    for (const pqxx::row& r : txn.exec_params(kJobWindows, cluster, job_id)) {
      windows.push_back({.start_us = r[0].as<int64_t>(),
                         .end_us = r[1].as<int64_t>(),
                         .ofu = r[2].as<double>(),
                         .ofu_ci95_low = r[3].as<double>(),
                         .ofu_ci95_high = r[4].as<double>(),
                         .gpu_coverage = r[5].as<double>(),
                         .gpus_allocated = r[6].as<int32_t>(),
                         .warmup = r[7].as<bool>()});
      // Jobs known only from ofu's windows take the model and fingerprint from them.
      if (gpu_model.empty()) gpu_model = r[8].as<std::string>();
      if (fingerprint.empty()) fingerprint = r[9].as<std::string>();
      allocated = std::max<int64_t>(allocated, windows.back().gpus_allocated);
    }

    std::vector<ReportInput> reports;
    v1::MfuReport latest;
    int64_t latest_end_us = -1;
    for (const pqxx::row& r : txn.exec_params(kJobReports, cluster, job_id)) {
      v1::MfuReport report;
      if (absl::Status s = ParseBase64(r[1].as<std::string>(), &report, "report"); !s.ok()) {
        // One bad row must not stop the job's reconciliation: logged by its key, left out.
        platform::Logger().Warn(
            "skipping a stored MFU report that does not parse",
            {{"cluster", cluster}, {"job_id", job_id}, {"report_id", r[0].as<std::string>()}});
        continue;
      }
      std::optional<double> app_mfu = OptionalDouble(r[2]);
      std::optional<double> peak = OptionalDouble(r[3]);
      const std::string computed_for = r[4].as<std::string>();
      if (!gpu_model.empty() && (!app_mfu || computed_for != gpu_model)) {
        absl::StatusOr<AppMfu> app = ComputeAppMfu(report, gpu_model, allocated, *catalog_);
        if (app.ok()) {
          app_mfu = app->app_mfu;
          peak = app->peak_tflops;
          txn.exec_params(kUpdateReportMfu, report.report_id(), app->app_mfu,
                          app->model_tflops_per_gpu, app->peak_tflops, gpu_model,
                          report.job().cluster());
        }
      } else if (!app_mfu && report.measurement_case() == v1::MfuReport::kMfu) {
        app_mfu = report.mfu();  // the framework's own figure while the model is unknown
      }
      const int64_t end_us = r[6].as<int64_t>();
      if (end_us >= latest_end_us) {
        latest_end_us = end_us;
        latest = report;
      }
      reports.push_back({.start_us = r[5].as<int64_t>(),
                         .end_us = end_us,
                         .app_mfu = app_mfu,
                         .precision_mix = MixOf(report),
                         .peak_tflops = peak,
                         .gpu_count = StatedGpuCount(report)});
    }

    absl::StatusOr<JobReconciliation> rec = Reconcile(windows, reports, options_);
    if (!rec.ok()) return rec.status();

    // Points.
    txn.exec_params(kDeletePoints, cluster, job_id);
    const std::string key = absl::StrCat(txn.quote(cluster), ", ", txn.quote(job_id));
    for (size_t i = 0; i < rec->points.size(); i += kPointsPerInsert) {
      std::vector<std::string> rows;
      for (size_t k = i; k < std::min(rec->points.size(), i + kPointsPerInsert); ++k) {
        const PointResult& p = rec->points[k];
        const v1::Verdict verdict =
            p.verdict ? ToProtoVerdict(*p.verdict) : v1::VERDICT_UNSPECIFIED;
        rows.push_back(absl::StrCat(
            "(", key, ", ", SqlTime(p.start_us), ", ", SqlTime(p.end_us), ", ",
            SqlDouble(p.app_mfu), ", ", SqlDouble(p.ofu), ", ", SqlDouble(p.ofu_ci95_low), ", ",
            SqlDouble(p.ofu_ci95_high), ", ", SqlDouble(p.difference_pp), ", ", SqlDouble(p.ratio),
            ", ", SqlDouble(p.gpu_coverage), ", ", p.gpus_allocated, ", ", p.report_count, ", ",
            p.paired ? "true" : "false", ", ", static_cast<int>(verdict), ")"));
      }
      txn.exec(absl::StrCat(kInsertPointsHead, absl::StrJoin(rows, ", ")));
    }

    // Summary.
    v1::GetReconciliationResponse summary;
    *summary.mutable_verdict() = ToProtoDivergence(rec->divergence.job);
    for (const detect::IntervalVerdict& iv : rec->divergence.intervals) {
      v1::IntervalDivergence* out = summary.add_intervals();
      *out->mutable_interval()->mutable_start_time() =
          api::UnixMicrosToTimestamp(iv.start_s * 1000000);
      *out->mutable_interval()->mutable_end_time() = api::UnixMicrosToTimestamp(iv.end_s * 1000000);
      *out->mutable_divergence() = ToProtoDivergence(iv.result);
    }
    for (const PrecisionSwitchResult& s : rec->switches) {
      v1::PrecisionSwitch* out = summary.add_precision_switches();
      *out->mutable_time() = api::UnixMicrosToTimestamp(s.time_us);
      AddShares(s.before, out->mutable_before());
      AddShares(s.after, out->mutable_after());
      out->set_peak_tflops_before(s.peak_tflops_before.value_or(0));
      out->set_peak_tflops_after(s.peak_tflops_after.value_or(0));
    }
    summary.set_framework(latest.framework());
    summary.set_framework_version(latest.framework_version());
    summary.set_flops_formula(latest.flops_formula());
    summary.set_activation_checkpointing(latest.activation_checkpointing());
    if (fingerprint.empty()) fingerprint = latest.workload_fingerprint();

    // Events for alerting: a changed verdict (a first "insufficient evidence" is not news),
    // and precision switches not sent yet.
    v1::Verdict previous = v1::VERDICT_UNSPECIFIED;
    int64_t switches_sent = 0;
    if (pqxx::result prev = txn.exec_params(kPreviousVerdict, cluster, job_id); !prev.empty()) {
      previous = static_cast<v1::Verdict>(prev[0][0].as<int>());
      switches_sent = prev[0][1].as<int64_t>();
    }
    const v1::Verdict now_verdict = summary.verdict().verdict();
    std::vector<v1::DivergenceEvent> events;
    if (now_verdict != previous && !(previous == v1::VERDICT_UNSPECIFIED &&
                                     now_verdict == v1::VERDICT_INSUFFICIENT_EVIDENCE)) {
      v1::DivergenceEvent e;
      *e.mutable_verdict() = summary.verdict();
      events.push_back(std::move(e));
    }
    for (int64_t i = switches_sent; i < summary.precision_switches_size(); ++i) {
      v1::DivergenceEvent e;
      *e.mutable_precision_switch() = summary.precision_switches(static_cast<int>(i));
      events.push_back(std::move(e));
    }
    if (!events.empty()) {
      txn.exec_params(kNextEventSequence, producer_id_);
      pqxx::result seq = txn.exec_params(kTakeEventSequence, producer_id_);
      const int64_t sequence = seq[0][0].as<int64_t>();
      const int64_t now_us = seq[0][1].as<int64_t>();
      int64_t first_us = 0, last_us = 0;
      for (const PointResult& p : rec->points) {
        if (!p.paired) continue;
        if (first_us == 0) first_us = p.start_us;
        last_us = p.end_us;
      }
      for (size_t i = 0; i < events.size(); ++i) {
        v1::DivergenceEvent& e = events[i];
        e.set_event_id(absl::StrCat(producer_id_, "/", sequence, "/", i));
        e.mutable_job()->set_cluster(cluster);
        e.mutable_job()->set_job_id(job_id);
        *e.mutable_time() = api::UnixMicrosToTimestamp(now_us);
        if (e.has_precision_switch()) {
          *e.mutable_interval()->mutable_start_time() = e.precision_switch().time();
          *e.mutable_interval()->mutable_end_time() = api::UnixMicrosToTimestamp(now_us);
        } else if (first_us != 0) {
          *e.mutable_interval()->mutable_start_time() = api::UnixMicrosToTimestamp(first_us);
          *e.mutable_interval()->mutable_end_time() = api::UnixMicrosToTimestamp(last_us);
        }
        e.set_workload_fingerprint(fingerprint);
        txn.exec_params(kInsertEvent, producer_id_, sequence, static_cast<int>(i), Base64Of(e));
      }
    }

    const int top_cause = summary.verdict().causes_size() > 0
                              ? static_cast<int>(summary.verdict().causes(0).cause())
                              : 0;
    txn.exec_params(kUpsertJob, cluster, job_id, static_cast<int>(now_verdict), top_cause,
                    Base64Of(summary), latest.framework(), gpu_model,
                    static_cast<int64_t>(summary.precision_switches_size()));
    if (generation) txn.exec_params(kClearPending, cluster, job_id, *generation);
    return static_cast<int>(events.size());
  });
}

absl::StatusOr<v1::GetReconciliationResponse> ReconciliationStore::Get(
    const v1::GetReconciliationRequest& request) {
  if (absl::Status s = CheckJobKey(request.job()); !s.ok()) return s;
  if (request.resolution_s() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("resolution_s=", request.resolution_s(), " must not be negative"));
  }
  std::optional<int64_t> from_us, to_us;
  if (request.has_time_range()) {
    if (request.time_range().has_start_time()) {
      from_us = api::TimestampToUnixMicros(request.time_range().start_time());
    }
    if (request.time_range().has_end_time())
      to_us = api::TimestampToUnixMicros(request.time_range().end_time());
  }
  const std::string& cluster = request.job().cluster();
  const std::string& job_id = request.job().job_id();
  return pool_->RunTransactionFor<v1::GetReconciliationResponse>(
      [&](pqxx::work& txn) -> absl::StatusOr<v1::GetReconciliationResponse> {
        if (!txn.exec_params(kJobKnown, cluster, job_id)[0][0].as<bool>()) {
          return absl::NotFoundError(absl::StrCat("job ", cluster, "/", job_id,
                                                  " is not known: not registered, and no "
                                                  "reports or OFU windows"));
        }
        v1::GetReconciliationResponse response;
        if (pqxx::result s = txn.exec_params(kJobSummary, cluster, job_id); !s.empty()) {
          if (absl::Status st = ParseBase64(s[0][0].as<std::string>(), &response, "summary");
              !st.ok()) {
            return st;
          }
        } else {
          response.mutable_verdict()->set_verdict(v1::VERDICT_INSUFFICIENT_EVIDENCE);
          response.mutable_verdict()->set_reason("no OFU windows or reports reconciled yet");
        }
        *response.mutable_job() = request.job();
        std::vector<v1::ReconciliationPoint> points;
        for (const pqxx::row& r : txn.exec_params(kJobPoints, cluster, job_id, from_us, to_us)) {
          v1::ReconciliationPoint p;
          *p.mutable_interval()->mutable_start_time() =
              api::UnixMicrosToTimestamp(r[0].as<int64_t>());
          *p.mutable_interval()->mutable_end_time() =
              api::UnixMicrosToTimestamp(r[1].as<int64_t>());
          if (!r[2].is_null()) p.set_app_mfu(r[2].as<double>());
          p.set_ofu(r[3].as<double>());
          p.set_ofu_ci95_low(r[4].as<double>());
          p.set_ofu_ci95_high(r[5].as<double>());
          if (!r[6].is_null()) p.set_difference_pp(r[6].as<double>());
          if (!r[7].is_null()) p.set_ratio(r[7].as<double>());
          p.set_gpu_coverage(r[8].as<double>());
          p.set_report_count(r[9].as<int32_t>());
          p.set_verdict(static_cast<v1::Verdict>(r[10].as<int>()));
          points.push_back(std::move(p));
        }
        if (request.resolution_s() > 0) {
          points = Downsample(points, int64_t{request.resolution_s()} * 1000000);
        }
        for (v1::ReconciliationPoint& p : points) *response.add_points() = std::move(p);
        return response;
      });
}

absl::StatusOr<FleetData> ReconciliationStore::Fleet(const v1::GetFleetReportRequest& request) {
  const v1::TimeRange& range = request.time_range();
  if (!range.has_start_time() || !range.has_end_time()) {
    return absl::InvalidArgumentError("time_range: start_time and end_time are both required");
  }
  const int64_t from_us = api::TimestampToUnixMicros(range.start_time());
  const int64_t to_us = api::TimestampToUnixMicros(range.end_time());
  if (to_us <= from_us) {
    return absl::InvalidArgumentError(
        absl::StrCat("time_range.end_time=", range.end_time().seconds(),
                     " is not after start_time=", range.start_time().seconds()));
  }
  if (request.min_gpu_count() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_gpu_count=", request.min_gpu_count(), " must not be negative"));
  }
  if (!v1::SchedulerKind_IsValid(request.scheduler())) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler=", static_cast<int>(request.scheduler()), " is not known"));
  }
  const std::string scheduler = SchedulerText(request.scheduler());
  return pool_->RunTransactionFor<FleetData>([&](pqxx::work& txn) -> absl::StatusOr<FleetData> {
    FleetData data;
    for (const pqxx::row& r :
         txn.exec_params(kFleetJobs, from_us, to_us, request.cluster(), request.gpu_model(),
                         request.team(), request.framework(), scheduler)) {
      FleetJob j;
      j.cluster = r[0].as<std::string>();
      j.job_id = r[1].as<std::string>();
      j.app_mfu = r[2].as<double>();
      j.ofu = r[3].as<double>();
      j.gpu_count = r[4].as<int64_t>();
      if (j.gpu_count < request.min_gpu_count()) continue;
      j.verdict = FromProtoVerdict(static_cast<v1::Verdict>(r[5].as<int>()));
      const int cause = r[6].as<int>();
      for (detect::Cause c :
           {detect::Cause::kLatentProjectionMoe, detect::Cause::kLayerTypesAsAttentionMlp,
            detect::Cause::kRecomputeNotCounted, detect::Cause::kDoubledFlopsOrHalfPeak,
            detect::Cause::kHalvedFlopsOrDoublePeak, detect::Cause::kTileQuantization,
            detect::Cause::kUnexplained}) {
        if (static_cast<int>(ToProtoCause(c)) == cause) j.top_cause = c;
      }
      data.jobs.push_back(std::move(j));
    }
    pqxx::result cov = txn.exec_params(kFleetCoverage, from_us, to_us, request.cluster(),
                                       request.gpu_model(), request.team(), request.framework(),
                                       scheduler, int64_t{request.min_gpu_count()});
    data.gpu_hours_total = cov[0][0].as<double>();
    data.gpu_hours_with_ofu = cov[0][1].as<double>();
    data.gpu_hours_with_app_mfu = cov[0][2].as<double>();
    return data;
  });
}

absl::StatusOr<int64_t> ReconciliationStore::AckedSequence(const std::string& target) {
  return pool_->RunTransactionFor<int64_t>([&](pqxx::work& txn) -> absl::StatusOr<int64_t> {
    pqxx::result r = txn.exec_params(kAcked, target, producer_id_);
    return r.empty() ? int64_t{0} : r[0][0].as<int64_t>();
  });
}

absl::Status ReconciliationStore::SetAckedSequence(const std::string& target, int64_t sequence) {
  return pool_->RunTransaction([&](pqxx::work& txn) {
    txn.exec_params(kSetAcked, target, producer_id_, sequence);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<int64_t>> ReconciliationStore::PendingEventSequences(int64_t after,
                                                                                int limit) {
  return pool_->RunTransactionFor<std::vector<int64_t>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<int64_t>> {
        std::vector<int64_t> out;
        for (const pqxx::row& r : txn.exec_params(kPendingEvents, producer_id_, after, limit)) {
          out.push_back(r[0].as<int64_t>());
        }
        return out;
      });
}

absl::StatusOr<std::vector<v1::DivergenceEvent>> ReconciliationStore::Events(int64_t sequence) {
  return pool_->RunTransactionFor<std::vector<v1::DivergenceEvent>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::vector<v1::DivergenceEvent>> {
        std::vector<v1::DivergenceEvent> out;
        for (const pqxx::row& r : txn.exec_params(kEventsOf, producer_id_, sequence)) {
          v1::DivergenceEvent e;
          if (absl::Status s = ParseBase64(r[0].as<std::string>(), &e, "event"); !s.ok()) {
            // Forwarding would retry this sequence for ever: logged by its key and left out.
            platform::Logger().Warn("skipping a stored divergence event that does not parse",
                                    {{"sequence", sequence}});
            continue;
          }
          out.push_back(std::move(e));
        }
        return out;
      });
}

}  // namespace goodput::mfu
