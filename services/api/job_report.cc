#include "services/api/job_report.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "google/protobuf/util/json_util.h"
#include "services/api/api_convert.h"

namespace goodput::api {
namespace {

// Below this OFU a job is called poorly used.
constexpr double kLowOfu = 0.15;
// Peak HBM below this fraction of capacity: the job would fit a smaller-memory GPU.
constexpr double kHbmUnderused = 0.5;

std::string Quote(absl::string_view s) {
  std::string head(s.substr(0, 40));
  return absl::StrCat("\"", absl::CEscape(head), s.size() > 40 ? "...\"" : "\"");
}

// Strings that came from users and exporters, with control characters written as \xNN so
// that a report cannot drive a terminal.
std::string Clean(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

constexpr char kBase32Alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";

// RFC 4648 base32 in lower case, without padding.
std::string Base32Lower(absl::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() * 8 + 4) / 5);
  uint32_t buffer = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    buffer = (buffer << 8) | c;
    bits += 8;
    while (bits >= 5) {
      out.push_back(kBase32Alphabet[(buffer >> (bits - 5)) & 31]);
      bits -= 5;
    }
  }
  if (bits > 0) out.push_back(kBase32Alphabet[(buffer << (5 - bits)) & 31]);
  return out;
}

// Base32 in either case, with or without trailing '=' padding; false on any other character
// or on an impossible length.
bool Base32Decode(absl::string_view text, std::string* out) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  // 1, 3 and 6 characters past a multiple of 8 cannot end a whole number of bytes.
  const size_t tail = text.size() % 8;
  if (tail == 1 || tail == 3 || tail == 6) return false;
  out->clear();
  uint32_t buffer = 0;
  int bits = 0;
  for (char ch : text) {
    const char c = absl::ascii_tolower(static_cast<unsigned char>(ch));
    int value = -1;
    if (c >= 'a' && c <= 'z') value = c - 'a';
    if (c >= '2' && c <= '7') value = 26 + (c - '2');
    if (value < 0) return false;
    buffer = (buffer << 5) | static_cast<uint32_t>(value);
    bits += 5;
    if (bits >= 8) {
      out->push_back(static_cast<char>((buffer >> (bits - 8)) & 0xff));
      bits -= 8;
    }
  }
  return true;
}

double Round(double v, double scale) { return std::round(v * scale) / scale; }

std::string Pct(double fraction) { return absl::StrFormat("%.1f%%", fraction * 100); }

// "SPARSE_SAMPLING" -> "sparse sampling".
std::string EnumWords(const std::string& name, absl::string_view prefix) {
  std::string s = name;
  if (absl::StartsWith(s, prefix)) s = s.substr(prefix.size());
  s = absl::AsciiStrToLower(s);
  absl::StrReplaceAll({{"_", " "}}, &s);
  return s;
}

std::string RooflineWords(v1::RooflineClass c) {
  switch (c) {
    case v1::ROOFLINE_CLASS_COMPUTE_BOUND:
      return "compute-bound";
    case v1::ROOFLINE_CLASS_MEMORY_BOUND:
      return "memory-bound";
    case v1::ROOFLINE_CLASS_IDLE:
      return "idle";
    default:
      return "not classified";
  }
}

std::string VerdictWords(v1::Verdict v) {
  switch (v) {
    case v1::VERDICT_CONSISTENT:
      return "consistent";
    case v1::VERDICT_APP_FLOPS_OVERCOUNT:
      return "framework overcounts FLOPs";
    case v1::VERDICT_APP_FLOPS_UNDERCOUNT:
      return "framework undercounts FLOPs";
    case v1::VERDICT_INSUFFICIENT_EVIDENCE:
      return "insufficient evidence";
    default:
      return "no framework MFU reports";
  }
}

double BestOfu(const v1::ReportSummary& s) {
  return s.has_steady_state_ofu() ? s.steady_state_ofu() : s.ofu();
}

}  // namespace

absl::StatusOr<std::string> EncodeAdminComment(const v1::ReportSummary& summary,
                                               AdminCommentEncoding encoding) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  if (auto s = google::protobuf::util::MessageToJsonString(summary, &json, options); !s.ok()) {
    return absl::InternalError(absl::StrCat("report summary to JSON: ", std::string(s.message())));
  }
  uLongf size = compressBound(json.size());
  std::string packed(size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(packed.data()), &size,
                reinterpret_cast<const Bytef*>(json.data()), json.size(),
                Z_BEST_COMPRESSION) != Z_OK) {
    return absl::InternalError("report summary: zlib compression failed");
  }
  packed.resize(size);
  if (encoding == AdminCommentEncoding::kBase32) {
    return absl::StrCat(kAdminCommentBase32Prefix, Base32Lower(packed));
  }
  return absl::StrCat(kAdminCommentPrefix, absl::Base64Escape(packed));
}

absl::StatusOr<v1::ReportSummary> DecodeAdminComment(absl::string_view comment) {
  comment = absl::StripAsciiWhitespace(comment);
  std::string packed;
  if (absl::StartsWithIgnoreCase(comment, kAdminCommentBase32Prefix)) {
    if (!Base32Decode(comment.substr(kAdminCommentBase32Prefix.size()), &packed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("admin comment ", Quote(comment), ": the text after \"",
                       kAdminCommentBase32Prefix, "\" is not base32"));
    }
  } else if (absl::StartsWith(comment, kAdminCommentPrefix)) {
    if (!absl::Base64Unescape(comment.substr(kAdminCommentPrefix.size()), &packed)) {
      return absl::InvalidArgumentError(absl::StrCat("admin comment ", Quote(comment),
                                                     ": the text after \"", kAdminCommentPrefix,
                                                     "\" is not base64"));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "admin comment ", Quote(comment), " does not start with \"", kAdminCommentPrefix,
        "\" or \"", kAdminCommentBase32Prefix, "\" (not a goodput report summary)"));
  }
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return absl::InternalError("zlib: inflateInit failed");
  std::string json(kMaxSummaryJsonBytes + 1, '\0');
  z.next_in = reinterpret_cast<Bytef*>(packed.data());
  z.avail_in = static_cast<uInt>(packed.size());
  z.next_out = reinterpret_cast<Bytef*>(json.data());
  z.avail_out = static_cast<uInt>(json.size());
  const int rc = inflate(&z, Z_FINISH);
  const size_t produced = json.size() - z.avail_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    return absl::InvalidArgumentError(absl::StrCat(
        "admin comment ", Quote(comment),
        produced > kMaxSummaryJsonBytes
            ? absl::StrCat(": the summary inflates beyond ", kMaxSummaryJsonBytes, " bytes")
            : std::string(": the payload is not a complete zlib stream")));
  }
  json.resize(produced);
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  v1::ReportSummary summary;
  if (auto s = google::protobuf::util::JsonStringToMessage(json, &summary, options); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("admin comment ", Quote(comment),
                     ": the summary JSON does not parse: ", std::string(s.message())));
  }
  if (summary.version() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "admin comment ", Quote(comment), ": summary version=", summary.version(), " is not 1"));
  }
  return summary;
}

core::JobLedger LedgerFromProto(const v1::GoodputLedger& l) {
  return {.allocated_gpu_hours = l.allocated_gpu_hours(),
          .productive = l.productive_gpu_hours(),
          .idle_gpus = l.idle_gpu_hours(),
          .silent_gpus = l.silent_gpu_hours(),
          .hung = l.hung_gpu_hours(),
          .job_idle = l.job_idle_gpu_hours(),
          .warmup = l.warmup_gpu_hours(),
          .regression = l.regression_gpu_hours(),
          .transient = l.transient_gpu_hours(),
          .below_workload_baseline = l.below_workload_baseline_gpu_hours(),
          .no_telemetry = l.no_telemetry_gpu_hours(),
          .coverage = l.coverage(),
          .transient_slowdowns = l.transient_slowdown_count()};
}

v1::GoodputLedger LedgerToProto(const core::JobLedger& l) {
  v1::GoodputLedger out;
  out.set_allocated_gpu_hours(l.allocated_gpu_hours);
  out.set_productive_gpu_hours(l.productive);
  out.set_idle_gpu_hours(l.idle_gpus);
  out.set_silent_gpu_hours(l.silent_gpus);
  out.set_hung_gpu_hours(l.hung);
  out.set_job_idle_gpu_hours(l.job_idle);
  out.set_warmup_gpu_hours(l.warmup);
  out.set_regression_gpu_hours(l.regression);
  out.set_transient_gpu_hours(l.transient);
  out.set_below_workload_baseline_gpu_hours(l.below_workload_baseline);
  out.set_no_telemetry_gpu_hours(l.no_telemetry);
  out.set_coverage(l.coverage);
  out.set_transient_slowdown_count(l.transient_slowdowns);
  return out;
}

v1::TransientSlowdown TransientToProto(const core::LedgerTransient& t) {
  v1::TransientSlowdown out;
  *out.mutable_onset_time() = UnixMsToTimestamp(t.onset_s * 1000);
  out.set_duration_s(t.end_s - t.onset_s);
  out.set_before_ofu(t.before_ofu);
  if (t.factor > 0) out.set_during_ofu(t.before_ofu / t.factor);
  out.set_factor(t.factor);
  out.set_lost_gpu_hours(t.lost_gpu_hours);
  return out;
}

void RoundSummary(v1::ReportSummary& s) {
  constexpr double k4 = 1e4, k2 = 1e2, k1 = 1e1, k3 = 1e3;
  if (s.has_ofu()) s.set_ofu(Round(s.ofu(), k4));
  if (s.has_ofu_ci95_low()) s.set_ofu_ci95_low(Round(s.ofu_ci95_low(), k4));
  if (s.has_ofu_ci95_high()) s.set_ofu_ci95_high(Round(s.ofu_ci95_high(), k4));
  if (s.has_steady_state_ofu()) s.set_steady_state_ofu(Round(s.steady_state_ofu(), k4));
  s.set_gpu_coverage(Round(s.gpu_coverage(), k4));
  s.set_gpu_hours(Round(s.gpu_hours(), k2));
  s.set_effective_gpu_hours(Round(s.effective_gpu_hours(), k2));
  s.set_idle_gpu_hours(Round(s.idle_gpu_hours(), k2));
  s.set_wasted_gpu_hours(Round(s.wasted_gpu_hours(), k2));
  if (s.has_hbm_peak_fraction()) s.set_hbm_peak_fraction(Round(s.hbm_peak_fraction(), k4));
  if (s.has_hbm_capacity_gib()) s.set_hbm_capacity_gib(Round(s.hbm_capacity_gib(), k1));
  if (s.has_energy_kwh()) s.set_energy_kwh(Round(s.energy_kwh(), k3));
  if (s.has_mfu_ofu_ratio()) s.set_mfu_ofu_ratio(Round(s.mfu_ofu_ratio(), k2 * 10));
  if (s.has_joules_per_pflop()) s.set_joules_per_pflop(Round(s.joules_per_pflop(), k1));
  if (s.has_workload_joules_per_pflop()) {
    s.set_workload_joules_per_pflop(Round(s.workload_joules_per_pflop(), k1));
  }
  if (s.has_framework_joules_per_pflop()) {
    s.set_framework_joules_per_pflop(Round(s.framework_joules_per_pflop(), k1));
  }
  if (s.has_facility_energy_kwh()) s.set_facility_energy_kwh(Round(s.facility_energy_kwh(), k3));
  if (s.has_co2e_kg()) s.set_co2e_kg(Round(s.co2e_kg(), k3));
  if (s.has_cost()) s.set_cost(Round(s.cost(), k2));
  if (s.has_ledger()) {
    core::JobLedger l = LedgerFromProto(s.ledger());
    for (double* v : {&l.allocated_gpu_hours, &l.productive, &l.idle_gpus, &l.silent_gpus, &l.hung,
                      &l.job_idle, &l.warmup, &l.regression, &l.transient,
                      &l.below_workload_baseline, &l.no_telemetry}) {
      *v = Round(*v, k2);
    }
    l.coverage = Round(l.coverage, k4);
    *s.mutable_ledger() = LedgerToProto(l);
  }
}

bool MfuGapIsTheIdleGpus(const v1::ReportSummary& s) {
  const int busy = s.gpus_allocated() - s.idle_gpu_count();
  if (s.idle_gpu_count() <= 0 || busy <= 0 || !s.has_mfu_ofu_ratio()) return false;
  if (s.mfu_verdict() != v1::VERDICT_APP_FLOPS_OVERCOUNT) return false;
  const double expected = static_cast<double>(s.gpus_allocated()) / busy;
  return std::abs(s.mfu_ofu_ratio() / expected - 1.0) <= kIdleGpuRatioTolerance;
}

bool EnergyRegression(const v1::ReportSummary& s) {
  return s.has_joules_per_pflop() && s.has_workload_joules_per_pflop() &&
         s.workload_joules_per_pflop() > 0 &&
         s.joules_per_pflop() >= kEnergyRegressionFactor * s.workload_joules_per_pflop();
}

std::vector<v1::AdviceKind> ChooseAdvice(const v1::ReportSummary& s) {
  std::vector<v1::AdviceKind> out;
  if (!s.has_ofu()) out.push_back(v1::ADVICE_KIND_NO_OFU);
  if (s.idle_gpu_count() > 0) out.push_back(v1::ADVICE_KIND_IDLE_GPUS);
  if (s.regression_count() > 0) out.push_back(v1::ADVICE_KIND_REGRESSION);
  if (EnergyRegression(s)) out.push_back(v1::ADVICE_KIND_ENERGY_REGRESSION);
  if (s.straggler_count() > 0) out.push_back(v1::ADVICE_KIND_STRAGGLERS);
  if (s.has_ofu() && BestOfu(s) < kLowOfu) out.push_back(v1::ADVICE_KIND_LOW_OFU);
  if (s.roofline_class() == v1::ROOFLINE_CLASS_MEMORY_BOUND) {
    out.push_back(v1::ADVICE_KIND_MEMORY_BOUND);
  }
  if (s.has_hbm_peak_fraction() && s.hbm_peak_fraction() < kHbmUnderused) {
    out.push_back(v1::ADVICE_KIND_HBM_UNDERUSED);
  }
  if ((s.mfu_verdict() == v1::VERDICT_APP_FLOPS_OVERCOUNT ||
       s.mfu_verdict() == v1::VERDICT_APP_FLOPS_UNDERCOUNT) &&
      !MfuGapIsTheIdleGpus(s)) {
    out.push_back(v1::ADVICE_KIND_FLOPS_MISCOUNT);
  }
  if (!s.flags().empty()) out.push_back(v1::ADVICE_KIND_DATA_QUALITY);
  if (out.empty()) out.push_back(v1::ADVICE_KIND_WELL_USED);
  return out;
}

std::string AdviceText(v1::AdviceKind kind, const v1::ReportSummary& s) {
  switch (kind) {
    case v1::ADVICE_KIND_NO_OFU:
      return "No OFU could be computed for this job (no usable DCGM profiling telemetry or a GPU "
             "model missing from the catalog); its efficiency is unknown.";
    case v1::ADVICE_KIND_IDLE_GPUS: {
      std::string text = absl::StrFormat(
          "%d of %d GPUs stayed idle (%.2f GPU-hours): request %d GPUs, or check why the job "
          "did not use all of them.",
          s.idle_gpu_count(), s.gpus_allocated(), s.idle_gpu_hours(),
          std::max(1, s.gpus_allocated() - s.idle_gpu_count()));
      if (MfuGapIsTheIdleGpus(s)) {
        const int busy = s.gpus_allocated() - s.idle_gpu_count();
        absl::StrAppend(
            &text, absl::StrFormat(
                       " They are also why the framework's MFU reads %.2fx OFU: it is over the "
                       "%d busy GPUs, OFU over all %d (%d/%d = %.2f), not a FLOPs miscount.",
                       s.mfu_ofu_ratio(), busy, s.gpus_allocated(), s.gpus_allocated(), busy,
                       static_cast<double>(s.gpus_allocated()) / busy));
      }
      return text;
    }
    case v1::ADVICE_KIND_REGRESSION:
      return absl::StrFormat(
          "%d regression%s found: this run was slower than it was earlier or than earlier runs "
          "of its workload; compare its configuration with the last good run.",
          s.regression_count(), s.regression_count() == 1 ? " was" : "s were");
    case v1::ADVICE_KIND_STRAGGLERS:
      return absl::StrFormat(
          "%d GPU%s lagged the others and held the whole job back: check those nodes (clocks, "
          "thermals, a slow link) and exclude them if it repeats.",
          s.straggler_count(), s.straggler_count() == 1 ? "" : "s");
    case v1::ADVICE_KIND_LOW_OFU:
      return absl::StrFormat(
          "OFU was %s: the tensor cores were busy for a small part of the time. Profile the job "
          "(data loading, communication, small kernels, synchronisation) before the next run; "
          "%.2f GPU-hours were not turned into tensor work.",
          Pct(BestOfu(s)), s.wasted_gpu_hours());
    case v1::ADVICE_KIND_MEMORY_BOUND:
      return "Most of the time the GPUs waited on memory: larger batches, fused kernels or "
             "lower-precision activations raise the work done per byte.";
    case v1::ADVICE_KIND_HBM_UNDERUSED: {
      std::string text =
          absl::StrFormat("Peak GPU memory use was %s of capacity", Pct(s.hbm_peak_fraction()));
      if (s.has_hbm_capacity_gib()) {
        absl::StrAppend(&text, absl::StrFormat(" (%.1f of %.1f GiB)",
                                               s.hbm_peak_fraction() * s.hbm_capacity_gib(),
                                               s.hbm_capacity_gib()));
      }
      absl::StrAppend(&text,
                      ": a GPU with less memory, or fewer GPUs with a larger share of the "
                      "model each, would do.");
      return text;
    }
    case v1::ADVICE_KIND_FLOPS_MISCOUNT:
      return absl::StrFormat(
          "The framework's MFU is %.2fx the hardware's OFU: its FLOPs formula %s; fix it before "
          "comparing MFU across runs.",
          s.mfu_ofu_ratio(),
          s.mfu_verdict() == v1::VERDICT_APP_FLOPS_OVERCOUNT ? "counts FLOPs that never ran"
                                                             : "misses FLOPs that ran");
    case v1::ADVICE_KIND_DATA_QUALITY:
      return "The telemetry behind these figures has problems (see the caveats): trust them "
             "less, and ask the cluster's operators about the exporter.";
    case v1::ADVICE_KIND_WELL_USED:
      return "Nothing to change: the job kept its GPUs busy.";
    case v1::ADVICE_KIND_ENERGY_REGRESSION: {
      std::string text = absl::StrFormat(
          "This run spent %.2fx the energy per PFLOP of tensor work of its workload's earlier "
          "runs on %s (%.1f vs %.1f J/PFLOP, the median of %d %s): ",
          s.joules_per_pflop() / s.workload_joules_per_pflop(), s.gpu_model(),
          s.joules_per_pflop(), s.workload_joules_per_pflop(), s.workload_energy_jobs(),
          s.workload_energy_jobs() == 1 ? "job" : "jobs");
      absl::StrAppend(
          &text, s.roofline_class() == v1::ROOFLINE_CLASS_MEMORY_BOUND
                     ? "it was mostly memory-bound, and power spent waiting on memory is the "
                       "usual cause; raise the work done per byte (larger batches, fused "
                       "kernels) or compare its configuration with the earlier runs."
                     : "the GPUs drew power without doing tensor work (memory- or host-bound "
                       "phases, a data loader or launch overhead) or ran power-capped; compare "
                       "its configuration and nodes with the earlier runs.");
      return text;
    }
    case v1::ADVICE_KIND_GPU_FAULT:
      return absl::StrCat("The job met ", s.fault_count(),
                          s.fault_count() == 1 ? " GPU fault" : " GPU faults",
                          " (XID, ECC, row remapping): the full report names each, whose fault "
                          "it was and what to do.");
    default:
      return "";
  }
}

std::string CaveatText(v1::DataQualityFlag flag) {
  switch (flag) {
    case v1::DATA_QUALITY_FLAG_SPARSE_SAMPLING:
      return "sparse sampling: samples more than 30 s apart, so OFU is an average of averages";
    case v1::DATA_QUALITY_FLAG_GAP:
      return "gaps: some GPUs sent no telemetry for a while; those stretches count as unused";
    case v1::DATA_QUALITY_FLAG_LOW_GPU_COVERAGE:
      return "low GPU coverage: fewer GPUs reported than were allocated";
    case v1::DATA_QUALITY_FLAG_LATE_SAMPLES_DROPPED:
      return "late samples: some telemetry arrived too late to be counted";
    case v1::DATA_QUALITY_FLAG_LATE_SAMPLES_RECOMPUTED:
      return "late samples recomputed: windows were revised when delayed telemetry arrived";
    case v1::DATA_QUALITY_FLAG_UNKNOWN_GPU_MODEL:
      return "unknown GPU model: not in the catalog, so no OFU";
    case v1::DATA_QUALITY_FLAG_PROFILING_UNAVAILABLE:
      return "profiling unavailable: DCGM profiling was paused or not loaded on some GPUs";
    case v1::DATA_QUALITY_FLAG_PROFILING_COUNTER_STUCK:
      return "profiling counters stuck at 0 on busy GPUs; those samples give no OFU";
    case v1::DATA_QUALITY_FLAG_SHARED_GPU:
      return "shared GPUs: the job's OFU is the whole GPU's, shared with other jobs";
    default:
      return EnumWords(v1::DataQualityFlag_Name(flag), "DATA_QUALITY_FLAG_");
  }
}

namespace {

// The share of a job's windows from which a flag changes what the job's figures mean.
double CaveatShare(v1::DataQualityFlag flag) {
  switch (flag) {
    case v1::DATA_QUALITY_FLAG_UNKNOWN_GPU_MODEL:
    case v1::DATA_QUALITY_FLAG_SHARED_GPU:
      return 0;
    case v1::DATA_QUALITY_FLAG_GAP:
    case v1::DATA_QUALITY_FLAG_LATE_SAMPLES_DROPPED:
    case v1::DATA_QUALITY_FLAG_LOW_GPU_COVERAGE:
    case v1::DATA_QUALITY_FLAG_PROFILING_UNAVAILABLE:
    case v1::DATA_QUALITY_FLAG_PROFILING_COUNTER_STUCK:
      return 0.05;
    default:
      return 0.25;
  }
}

// Flags that qualify no figure of the job as a caveat: an estimated energy figure says so
// itself, and a window recomputed with its late samples is exact.
bool QualifiesNothing(v1::DataQualityFlag flag) {
  return flag == v1::DATA_QUALITY_FLAG_ENERGY_ESTIMATED ||
         flag == v1::DATA_QUALITY_FLAG_LATE_SAMPLES_RECOMPUTED;
}

}  // namespace

std::vector<JobCaveat> JobCaveats(const v1::JobOfuSummary& ofu) {
  std::vector<JobCaveat> out;
  if (ofu.window_count() <= 0 || ofu.flag_shares().empty()) {
    for (int f : ofu.flags()) {
      const auto flag = static_cast<v1::DataQualityFlag>(f);
      if (QualifiesNothing(flag)) continue;
      out.push_back({flag, CaveatText(flag)});
    }
    return out;
  }
  for (const v1::DataQualityShare& share : ofu.flag_shares()) {
    if (QualifiesNothing(share.flag())) continue;
    const double fraction =
        static_cast<double>(share.windows()) / static_cast<double>(ofu.window_count());
    if (share.windows() <= 0 || fraction < CaveatShare(share.flag())) continue;
    out.push_back({share.flag(),
                   absl::StrFormat("%s (on %d of %d windows, %s)", CaveatText(share.flag()),
                                   share.windows(), ofu.window_count(), Pct(fraction))});
  }
  return out;
}

std::string RenderSummaryText(const v1::ReportSummary& s) {
  std::string out;
  auto line = [&out](absl::string_view label, const std::string& value) {
    absl::StrAppend(&out, absl::StrFormat("  %-18s %s\n", label, value));
  };
  absl::StrAppend(&out,
                  absl::StrFormat("goodput report: %s/%s (revision %d)\n", Clean(s.job().cluster()),
                                  Clean(s.job().job_id()), s.revision()));
  line("user / team", absl::StrCat(s.user().empty() ? "-" : Clean(s.user()), " / ",
                                   s.team().empty() ? "-" : Clean(s.team())));
  line("state", absl::StrCat(JobStateName(s.state()).empty() ? "-" : JobStateName(s.state()), ", ",
                             s.gpus_allocated(), " x ",
                             s.gpu_model().empty() ? "unknown GPU" : Clean(s.gpu_model())));
  if (s.has_ofu()) {
    std::string ofu = Pct(s.ofu());
    if (s.has_ofu_ci95_low() && s.has_ofu_ci95_high()) {
      absl::StrAppend(&ofu, " (95% CI ", Pct(s.ofu_ci95_low()), " - ", Pct(s.ofu_ci95_high()), ")");
    }
    if (s.has_steady_state_ofu())
      absl::StrAppend(&ofu, ", steady state ", Pct(s.steady_state_ofu()));
    line("OFU", ofu);
  } else {
    line("OFU", "not available");
  }
  line("GPU coverage", Pct(s.gpu_coverage()));
  line("GPU-hours",
       absl::StrFormat("%.2f allocated, %.2f effective, %.2f wasted, %.2f idle", s.gpu_hours(),
                       s.effective_gpu_hours(), s.wasted_gpu_hours(), s.idle_gpu_hours()));
  if (s.has_ledger()) line("where they went", core::LedgerWords(LedgerFromProto(s.ledger())));
  line("idle GPUs", absl::StrCat(s.idle_gpu_count()));
  line("stragglers", absl::StrCat(s.straggler_count()));
  if (s.has_hbm_peak_fraction()) {
    std::string hbm = absl::StrCat(Pct(s.hbm_peak_fraction()), " of capacity");
    if (s.has_hbm_capacity_gib()) {
      hbm = absl::StrFormat("%.1f of %.1f GiB (%s)", s.hbm_peak_fraction() * s.hbm_capacity_gib(),
                            s.hbm_capacity_gib(), Pct(s.hbm_peak_fraction()));
    }
    line("HBM peak", hbm);
  } else {
    line("HBM peak", "no framebuffer telemetry");
  }
  line("energy", !s.has_energy_kwh() ? std::string("no energy telemetry")
                 : s.energy_estimated()
                     ? absl::StrFormat("%.3f kWh (partly estimated: board power x time where a "
                                       "GPU had no energy counter)",
                                       s.energy_kwh())
                     : absl::StrFormat("%.3f kWh", s.energy_kwh()));
  if (s.has_joules_per_pflop()) {
    std::string per = absl::StrFormat("%.1f J/PFLOP of tensor work the GPUs did", s.joules_per_pflop());
    if (s.has_framework_joules_per_pflop()) {
      absl::StrAppend(&per, absl::StrFormat(", %.1f J/PFLOP of what the framework counts",
                                            s.framework_joules_per_pflop()));
    }
    if (s.has_workload_joules_per_pflop()) {
      absl::StrAppend(&per, absl::StrFormat("; its workload's earlier runs %.1f (median of %d)",
                                            s.workload_joules_per_pflop(),
                                            s.workload_energy_jobs()));
    }
    line("energy per work", per);
  }
  if (!s.carbon_cost_basis().empty()) {
    std::vector<std::string> parts;
    if (s.has_facility_energy_kwh()) {
      parts.push_back(absl::StrFormat("%.3f kWh at the facility", s.facility_energy_kwh()));
    }
    if (s.has_co2e_kg()) parts.push_back(absl::StrFormat("%.3f kg CO2e", s.co2e_kg()));
    if (s.has_cost()) parts.push_back(absl::StrFormat("%s %.2f", s.currency(), s.cost()));
    line("carbon and cost",
         absl::StrCat(absl::StrJoin(parts, ", "), " (", s.carbon_cost_basis(), ")"));
  }
  line("roofline", RooflineWords(s.roofline_class()));
  std::string mfu = MfuGapIsTheIdleGpus(s) ? std::string("consistent over the busy GPUs")
                                            : VerdictWords(s.mfu_verdict());
  if (s.has_mfu_ofu_ratio())
    absl::StrAppend(&mfu, absl::StrFormat(" (MFU/OFU %.2f)", s.mfu_ofu_ratio()));
  if (MfuGapIsTheIdleGpus(s)) {
    absl::StrAppend(&mfu, absl::StrFormat(", %d idle GPU%s not in the framework's count",
                                          s.idle_gpu_count(), s.idle_gpu_count() == 1 ? "" : "s"));
  }
  line("MFU vs OFU", mfu);
  line("regressions", absl::StrCat(s.regression_count()));
  if (s.fault_count() > 0) line("GPU faults", absl::StrCat(s.fault_count()));
  std::vector<std::string> flags;
  for (int f : s.flags()) {
    flags.push_back(EnumWords(v1::DataQualityFlag_Name(static_cast<v1::DataQualityFlag>(f)),
                              "DATA_QUALITY_FLAG_"));
  }
  line("data quality", flags.empty() ? std::string("no problems") : absl::StrJoin(flags, ", "));
  absl::StrAppend(&out, "Advice\n");
  for (int a : s.advice()) {
    absl::StrAppend(&out, "  - ", AdviceText(static_cast<v1::AdviceKind>(a), s), "\n");
  }
  return out;
}

}  // namespace goodput::api
