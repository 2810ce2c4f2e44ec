#include "services/alerting/alert_messages.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "services/alerting/gpu_fault_findings.h"

namespace goodput::alerting {
namespace {

std::string Factor(double f) { return absl::StrFormat("%.1f×", f); }

std::string ConfidenceWords(double c) {
  if (c >= 0.9) return absl::StrFormat("high confidence (%.0f%%)", c * 100);
  if (c >= 0.7) return absl::StrFormat("fairly confident (%.0f%%)", c * 100);
  return absl::StrFormat("low confidence (%.0f%%)", c * 100);
}

std::string JobName(const MessageContext& c) {
  return absl::StrCat("job ", c.job_id,
                      c.job_name.empty() ? "" : absl::StrCat(" (", c.job_name, ")"), " on ",
                      c.cluster);
}

std::string FlagNames(uint32_t flags) {
  static constexpr const char* kNames[] = {"",
                                           "sparse sampling",
                                           "tensor activity out of range",
                                           "SM clock above boost",
                                           "gaps in telemetry",
                                           "duplicate timestamps",
                                           "GPUs not reporting",
                                           "late samples dropped",
                                           "energy counter reset",
                                           "unknown GPU model",
                                           "single samples",
                                           "DCGM profiling paused or unavailable",
                                           "profiling counters stuck at 0",
                                           "GPU shared with other jobs"};
  std::vector<std::string> out;
  for (uint32_t i = 1; i < std::size(kNames); ++i) {
    if (flags & (1u << i)) out.push_back(kNames[i]);
  }
  return absl::StrJoin(out, ", ");
}

std::string CauseAdvice(const std::string& cause) {
  if (cause == "latent_projection_moe")
    return "check whether the FLOPs formula counts MoE experts at the full hidden dimension "
           "(latent projections)";
  if (cause == "layer_types_as_attention_mlp")
    return "check whether Mamba/MoE layers are counted as attention plus dense MLP";
  if (cause == "recompute_not_counted")
    return "check whether activation recomputation is left out of the FLOPs count";
  if (cause == "doubled_flops_or_half_peak")
    return "check for multiply-adds counted twice or a BF16 peak used for an FP8 run";
  if (cause == "halved_flops_or_double_peak")
    return "check for a sparse peak as denominator, FMA counted as one FLOP, or an FP8 peak "
           "for a BF16 run";
  return "compare the framework's FLOPs formula with the model's architecture";
}

// An inference service that needs more GPU time per token than it did at the same traffic.
Message ServingRegression(const Finding& f, const MessageContext& c) {
  const detect::ServingVerdict& v = *f.serving;
  Message m;
  m.summary = absl::StrCat("GPU time per token rose ", Factor(v.factor), " at ",
                           ClockTime(f.onset_s, c.now_s), " at a comparable load (",
                           absl::StrFormat("%.0f vs %.0f", v.load_after, v.load_before),
                           " tokens/s)");
  m.description = absl::StrCat(
      JobName(c), " is an inference service: its OFU follows its traffic, so goodput compares "
      "the busy GPU-seconds it spends per token at a comparable load instead. Since ",
      ClockTime(f.onset_s, c.now_s), " it spends ",
      absl::StrFormat("%.3g ms per token at %.0f tokens/s, against %.3g ms at %.0f tokens/s",
                      1000 * v.cost_after, v.load_after, 1000 * v.cost_before, v.load_before),
      " in ", v.comparable_windows, " earlier windows of similar load; ",
      ConfidenceWords(f.confidence),
      ". Look first for what changed at that time: a new model, engine version or "
      "quantization, a smaller batch (max_num_seqs, less KV-cache memory), CUDA graphs or "
      "prefix caching turned off, or a slower GPU or link.");
  return m;
}

Message RegressionInJob(const Finding& f, const MessageContext& c) {
  if (f.serving.has_value()) return ServingRegression(f, c);
  Message m;
  const double before = f.before_ofu.value_or(0), after = f.after_ofu.value_or(0);
  if (f.stalled) {
    m.summary = absl::StrCat("Job stopped computing at ", ClockTime(f.onset_s, c.now_s), " (OFU ",
                             Percent(before), " → ", Percent(after), ")");
    m.description = absl::StrCat(
        "The GPUs of ", JobName(c), " have been nearly idle since ", ClockTime(f.onset_s, c.now_s),
        ", longer than a checkpoint or evaluation pass lasts; ", ConfidenceWords(f.confidence),
        ". Look first for a hung collective (NCCL timeout, one rank stuck), a stalled data "
        "loader or file system, or a job waiting on a failed node.");
    return m;
  }
  m.summary =
      absl::StrCat("OFU fell ", Factor(f.factor.value_or(0)), " at ", ClockTime(f.onset_s, c.now_s),
                   " (", Percent(before), " → ", Percent(after), ")");
  std::string d = absl::StrCat(
      "The OFU of ", JobName(c), " dropped from ", Percent(before), " to ", Percent(after), " at ",
      ClockTime(f.onset_s, c.now_s),
      " and stayed there through the following computing windows (warm-up, checkpoints and "
      "short stalls are left out); ",
      ConfidenceWords(f.confidence), ".");
  if (!f.precision_switches.empty()) {
    absl::StrAppend(&d,
                    " The precision mix changed near the onset, but not by enough to "
                    "explain the drop.");
  }
  absl::StrAppend(&d,
                  " Look first for what changed at that time: a restart with new settings "
                  "(debug flags, profiling), new or slower collectives (a changed parallelism, "
                  "a slow link or node), or input-pipeline stalls.");
  m.description = std::move(d);
  return m;
}

Message RegressionVsWorkload(const Finding& f, const MessageContext& c) {
  Message m;
  const double baseline = f.baseline_ofu.value_or(0), job = f.after_ofu.value_or(0);
  const std::string when =
      f.baseline_last_end_s > 0 ? absl::StrCat(" ", Ago(f.baseline_last_end_s, c.now_s)) : "";
  m.summary =
      absl::StrCat("OFU ", Factor(f.factor.value_or(0)), " below its workload: ", Percent(job),
                   " vs ", Percent(baseline), " in earlier runs");
  m.description = absl::StrCat(
      JobName(c), " has run at ", Percent(job), " OFU since its warm-up ended at ",
      ClockTime(f.onset_s, c.now_s), "; the same workload ran at ", Percent(baseline), when, " (",
      f.baseline_jobs, f.baseline_jobs == 1 ? " earlier job" : " earlier jobs",
      f.baseline_job_ids.empty() ? "" : absl::StrCat(", latest ", f.baseline_job_ids.front()),
      "); ", ConfidenceWords(f.confidence),
      ". A job slow from its start usually carries a changed setting: look for debug settings "
      "(NCCL_DEBUG, CUDA_LAUNCH_BLOCKING, anomaly detection, profilers), new collectives or a "
      "changed parallelism, then for a slower node or GPU model.");
  return m;
}

Message DivergenceMessage(const Finding& f, const MessageContext& c) {
  Message m;
  const DivergenceObs d = f.divergence.value_or(DivergenceObs{});
  const bool over = d.verdict == "app_flops_overcount";
  m.summary = absl::StrFormat("Framework MFU is %.2f× OFU: FLOPs %s", d.ratio,
                              over ? "overcounted" : "undercounted");
  m.description = absl::StrCat(
      "The MFU that ", JobName(c), " reports ", over ? "exceeds" : "falls short of",
      " what its GPUs' tensor cores did (MFU/OFU ", absl::StrFormat("%.2f", d.ratio), "); ",
      ConfidenceWords(d.confidence), ".", d.reason.empty() ? "" : absl::StrCat(" ", d.reason, "."),
      " Multiply the framework's FLOPs by ", absl::StrFormat("%.2f", d.correction_factor),
      " to match the hardware. Look first: ", CauseAdvice(d.top_cause), ".");
  return m;
}

Message IdleGpus(const Finding& f, const MessageContext& c) {
  Message m;
  m.summary = absl::StrCat(f.gpus.size(), f.gpus.size() == 1 ? " allocated GPU" : " allocated GPUs",
                           " idle since ", ClockTime(f.onset_s, c.now_s),
                           absl::StrFormat(" (%.1f GPU-hours lost)", f.idle_gpu_hours));
  m.description = absl::StrCat(
      JobName(c), " holds GPUs that do no work: ", absl::StrJoin(f.gpus, ", "), "; ",
      ConfidenceWords(f.confidence),
      ". Look first at the launch: fewer ranks than GPUs requested, CUDA_VISIBLE_DEVICES, or a "
      "data-parallel size that leaves devices unused; otherwise request fewer GPUs.");
  return m;
}

Message Straggler(const Finding& f, const MessageContext& c) {
  Message m;
  const std::string gpu = f.gpus.empty() ? f.detail : f.gpus.front();
  m.summary =
      absl::StrCat("GPU ", gpu, " runs at ", Percent(f.straggler_score), " of the job's median");
  m.description = absl::StrCat(
      "In ", JobName(c), ", GPU ", gpu, " has been persistently slower than the others since ",
      ClockTime(f.onset_s, c.now_s), "; in synchronous training every rank waits for it. ",
      ConfidenceWords(f.confidence),
      ". Look first at that node: clock throttling (power or thermal), ECC or XID errors, a "
      "degraded NVLink or network link, or a noisy neighbour.");
  return m;
}

Message TelemetryStoppedMessage(const Finding& f, const MessageContext& c) {
  Message m;
  m.summary = absl::StrCat("No telemetry since ", ClockTime(f.last_sample_s, c.now_s),
                           " for a running job");
  m.description = absl::StrCat(
      JobName(c), " is still registered as running, but no OFU window has arrived since ",
      ClockTime(f.last_sample_s, c.now_s), "; ", ConfidenceWords(f.confidence),
      ". Look first at dcgm-exporter on the job's nodes and the scrape or remote_write path; "
      "if telemetry flows, check whether the job ended without its epilog reporting it.");
  return m;
}

Message DataQualityMessage(const Finding& f, const MessageContext& c) {
  Message m;
  m.summary = absl::StrCat("Telemetry unreliable: ", FlagNames(f.flags));
  m.description = absl::StrCat(f.flagged_windows, " of the last ", f.recent_windows, " windows of ",
                               JobName(c), " carry data-quality problems (", FlagNames(f.flags),
                               "), so its OFU is less certain than shown.");
  // The profiling causes, in words: their windows lack OFU, and neither a regression nor
  // idle GPUs are concluded from them.
  const bool unavailable = f.flags & (1u << 11);
  const bool stuck = f.flags & (1u << 12);
  if (unavailable) {
    const int n = std::max(1, f.profiling_unavailable_gpus);
    absl::StrAppend(&m.description, " DCGM profiling paused or unavailable on ", n,
                    n == 1 ? " GPU" : " GPUs",
                    " — e.g. Nsight holds the counters (dcgmi profile --pause) or the profiling "
                    "module is not loaded; those GPUs give no OFU meanwhile.");
  }
  if (stuck) {
    absl::StrAppend(&m.description, " Profiling counters stuck at 0 while GPUs draw ",
                    f.stuck_power_w_per_gpu.has_value()
                        ? absl::StrFormat("%.0f W", *f.stuck_power_w_per_gpu)
                        : std::string("near their board power"),
                    " at boost clock — a known dcgm-exporter failure; those samples give no OFU.");
  }
  if (unavailable || stuck) {
    std::vector<std::string> look;
    if (unavailable) look.push_back("for Nsight attached to the job or a paused DCGM profiler");
    if (stuck) {
      look.push_back(
          "at dcgm-exporter on the job's nodes (`dcgmi dmon -e 1001 -c 1` there, or restarting "
          "the exporter, revives stuck counters)");
    }
    absl::StrAppend(&m.description,
                    " Neither a regression nor idle GPUs are concluded from those windows. Look "
                    "first ",
                    absl::StrJoin(look, "; then "), ".");
  } else {
    absl::StrAppend(&m.description,
                    " Look first at the exporter's sampling interval and at GPUs that do not "
                    "report.");
  }
  return m;
}

// The resilience findings (GPU faults, silent GPUs, hung and idle jobs): the GPUs named and the
// detector's own sentences, which carry the evidence.
Message ResilienceMessage(const Finding& f, const MessageContext& c, absl::string_view what,
                          absl::string_view look) {
  Message m;
  m.summary =
      absl::StrCat(what, f.gpus.empty() ? "" : absl::StrCat(" (", absl::StrJoin(f.gpus, ", "), ")"),
                   " since ", ClockTime(f.onset_s, c.now_s));
  m.description =
      absl::StrCat("In ", JobName(c), ": ", what, " since ", ClockTime(f.onset_s, c.now_s), ". ");
  for (const std::string& a : f.annotations) absl::StrAppend(&m.description, a, " ");
  absl::StrAppend(&m.description, "Look first ", look, ".");
  return m;
}

std::string Minutes(int64_t seconds) {
  const int64_t m = std::max<int64_t>(0, seconds) / 60;
  return absl::StrCat(m, m == 1 ? " minute" : " minutes");
}

// goodput behind its own telemetry (platform_lag.h): for the operator, never a job's owner.
Message PlatformLaggingMessage(const Finding& f, const MessageContext& c) {
  Message m;
  const PlatformLag lag = f.platform_lag.value_or(PlatformLag{});
  const int64_t backlog_s = lag.backlog_ms / 1000;
  const int64_t age_s = lag.window_age_ms / 1000;
  m.summary = absl::StrCat("goodput is ", Minutes(backlog_s), " behind its telemetry");
  m.description = absl::StrCat(
      "The newest OFU windows from ofu producer ", lag.producer.empty() ? "?" : lag.producer,
      " reach alerting ", Minutes(age_s), " after they end (data up to ",
      ClockTime(lag.frontier_ms / 1000, c.now_s), "), ", Minutes(age_s - backlog_s),
      " being normal (a window plus ofu's lateness); ", lag.producers_behind, " of ",
      lag.producers_active, lag.producers_active == 1 ? " producer is" : " producers are",
      " behind, since ", ClockTime(f.onset_s, c.now_s),
      ". Until it catches up, stopped telemetry is judged against the data goodput has "
      "reached, not the clock, so no job is blamed for the backlog; a job's other findings "
      "arrive that much later. Look first at ingest (acknowledgement time, refused batches, "
      "its CPU), ofu's lag behind ingest, and PostgreSQL (CPU, I/O, locks); more ingest or "
      "ofu replicas, or shards, carry more samples.");
  return m;
}

// A GPU, or a whole host, that stopped reporting while the job's other GPUs report.
Message SilentGpuMessage(const Finding& f, const MessageContext& c) {
  Message m;
  const std::string since = ClockTime(f.onset_s, c.now_s);
  const std::string how_long = Minutes(f.detected_s - f.onset_s);
  if (!f.host.empty()) {
    m.summary = absl::StrCat("Host ", f.host, " silent since ", since, " (", f.gpus.size(),
                             f.gpus.size() == 1 ? " GPU" : " GPUs",
                             " of the job) while its other hosts report");
    m.description = absl::StrCat(
        "In ", JobName(c), ", host ", f.host, " has sent no telemetry for any of its GPUs (",
        absl::StrJoin(f.gpus, ", "), ") since ", since, " (", how_long,
        "), while the job's GPUs on other hosts keep reporting; ", ConfidenceWords(f.confidence),
        ". Evidence: every OFU window since then names the host's GPUs as silent. This is "
        "neither idle GPUs (they would report zeros) nor the job's telemetry stopping (the "
        "other hosts report). Look first at whether the node is up (scontrol show node, its "
        "BMC), then at dcgm-exporter on it and the scrape path to it; ranks on a node that went "
        "down leave the job hung or failing.");
    return m;
  }
  const std::string gpu = f.gpus.empty() ? f.detail : f.gpus.front();
  const std::string host = gpu.substr(0, gpu.find('/'));
  m.summary = absl::StrCat("GPU ", gpu, " silent since ", since,
                           " while the other GPUs of its host report");
  m.description = absl::StrCat(
      "In ", JobName(c), ", GPU ", gpu, " has sent no telemetry since ", since, " (", how_long,
      "), while the job's other GPUs on ", host, " keep reporting; ", ConfidenceWords(f.confidence),
      ". Evidence: every OFU window since then names it silent. A GPU that drops out of "
      "dcgm-exporter alone has usually fallen off the bus; an idle GPU would report zeros. Look "
      "first at nvidia-smi on ",
      host,
      " (is the GPU still listed?) and its kernel log for XID 79 or other NVRM lines, then at "
      "the job's rank on that GPU, which is likely stuck or dead.");
  return m;
}

std::string ActivityFigures(const Finding& f) {
  const ActivityObs a = f.activity.value_or(ActivityObs{});
  std::vector<std::string> parts;
  if (a.tensor_max) parts.push_back(absl::StrCat("tensor ≤ ", Percent(*a.tensor_max)));
  if (a.sm_max) parts.push_back(absl::StrCat("SM ≤ ", Percent(*a.sm_max)));
  if (a.gr_engine_mean) parts.push_back(absl::StrCat("GR engine ", Percent(*a.gr_engine_mean)));
  return absl::StrJoin(parts, ", ");
}

Message HungMessage(const Finding& f, const MessageContext& c) {
  Message m;
  const std::string since = ClockTime(f.onset_s, c.now_s);
  const ActivityObs a = f.activity.value_or(ActivityObs{});
  m.summary = absl::StrCat(
      "Job hung since ", since, ": ",
      f.spinning ? "every GPU spinning, none computing" : "every GPU stopped computing", " (",
      ActivityFigures(f), ")");
  std::string d = absl::StrCat("For ", Minutes(f.detected_s - f.onset_s), " (", f.stopped_windows,
                               f.stopped_windows == 1 ? " window" : " windows", ") no GPU of ",
                               JobName(c), " has done tensor work");
  if (f.spinning) {
    absl::StrAppend(&d,
                    " while the GR engine stayed busy and every GPU's SMs stayed nearly empty: "
                    "kernels are resident but make no progress, the signature of a collective "
                    "(an NCCL all-reduce or barrier) waiting for a rank that never arrives.");
  } else {
    absl::StrAppend(&d, " and every GPU's SM activity stayed at about 0.");
  }
  absl::StrAppend(&d, " Evidence: ", ActivityFigures(f),
                  " in the latest window; longer than a checkpoint, and not an evaluation pass "
                  "(which keeps the SMs busy); ",
                  ConfidenceWords(f.confidence), ".");
  if (!a.gr_engine_mean && !a.gr_engine_max) {
    absl::StrAppend(&d,
                    " DCGM's GR-engine activity is not reported for these GPUs, so a job that "
                    "runs no kernels at all (idle) would look the same.");
  }
  absl::StrAppend(&d,
                  " Look first at the job's last log lines and a stack dump of its ranks "
                  "(py-spy dump), the NCCL watchdog or timeout messages, and for a rank on a "
                  "failed GPU or node (silent GPUs, XID errors).");
  m.description = std::move(d);
  return m;
}

Message JobIdleMessage(const Finding& f, const MessageContext& c) {
  Message m;
  const std::string since = ClockTime(f.onset_s, c.now_s);
  const ActivityObs a = f.activity.value_or(ActivityObs{});
  m.summary = absl::StrCat("Job idle since ", since, " while holding its GPUs (no kernels for ",
                           Minutes(f.detected_s - f.onset_s), ")");
  m.description = absl::StrCat(
      JobName(c), " computed, then ran no kernels on any of its GPUs from ", since,
      " on (GR-engine activity at most ", Percent(a.gr_engine_max.value_or(0)),
      " on every GPU for ", f.stopped_windows, f.stopped_windows == 1 ? " window" : " windows",
      "), and still runs; ", ConfidenceWords(f.confidence),
      ". Evidence: the GR engine (\"GPU utilization\") near 0 everywhere, which a checkpoint "
      "does only for minutes and a hung collective does not (its kernels keep the GR engine "
      "busy). Look first at whether the job finished its work without exiting (its last log "
      "lines), then at what it waits for on the CPU side: a stalled data loader or file "
      "system, a lock, an interactive session left open.");
  return m;
}

}  // namespace

std::string Percent(double fraction) {
  const double p = fraction * 100;
  if (std::abs(p) < 1 && p != 0) return absl::StrFormat("%.1f%%", p);
  return absl::StrFormat("%.0f%%", p);
}

std::string ClockTime(int64_t unix_s, int64_t now_s) {
  const absl::TimeZone utc = absl::UTCTimeZone();
  const absl::Time t = absl::FromUnixSeconds(unix_s);
  if (absl::FormatTime("%Y-%m-%d", t, utc) ==
      absl::FormatTime("%Y-%m-%d", absl::FromUnixSeconds(now_s), utc)) {
    return absl::FormatTime("%H:%M UTC", t, utc);
  }
  return absl::FormatTime("%b %d %H:%M UTC", t, utc);
}

std::string Ago(int64_t unix_s, int64_t now_s) {
  const int64_t age = now_s - unix_s;
  constexpr int64_t kHour = 3600, kDay = 86400;
  if (age < kHour) return "within the hour";
  if (age < kDay) return absl::StrCat(age / kHour, age / kHour == 1 ? " hour ago" : " hours ago");
  if (age < 2 * kDay) return "yesterday";
  if (age < 7 * kDay) return absl::StrCat(age / kDay, " days ago");
  if (age < 14 * kDay) return "last week";
  return absl::StrCat(age / (7 * kDay), " weeks ago");
}

Message Describe(const Finding& finding, const MessageContext& context) {
  switch (finding.kind) {
    case Kind::kRegressionInJob:
      return RegressionInJob(finding, context);
    case Kind::kRegressionVsWorkload:
      return RegressionVsWorkload(finding, context);
    case Kind::kDivergence:
      return DivergenceMessage(finding, context);
    case Kind::kIdleGpus:
      return IdleGpus(finding, context);
    case Kind::kStraggler:
      return Straggler(finding, context);
    case Kind::kTelemetryStopped:
      return TelemetryStoppedMessage(finding, context);
    case Kind::kDataQuality:
      return DataQualityMessage(finding, context);
    case Kind::kGpuFault:
      if (!finding.faults.empty()) return GpuFaultMessage(finding, context);
      return ResilienceMessage(
          finding, context, "GPU fault",
          "at the node's kernel log (XID lines) and nvidia-smi -q for that GPU");
    case Kind::kSilentGpu:
      return SilentGpuMessage(finding, context);
    case Kind::kHung:
      return HungMessage(finding, context);
    case Kind::kJobIdle:
      return JobIdleMessage(finding, context);
    case Kind::kPlatformLagging:
      return PlatformLaggingMessage(finding, context);
  }
  return {};
}

namespace {

std::string UriComponent(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || (c != 0 && std::strchr("-_.!~*'()", c) != nullptr)) {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, absl::StrFormat("%%%02X", c));
    }
  }
  return out;
}

}  // namespace

std::string DashboardUrl(const std::string& base, const std::string& cluster,
                         const std::string& job_id) {
  if (base.empty()) return "";
  std::string b = base;
  while (!b.empty() && b.back() == '/') b.pop_back();
  return absl::StrCat(b, "/#/job/", UriComponent(cluster), "/", UriComponent(job_id));
}

}  // namespace goodput::alerting
