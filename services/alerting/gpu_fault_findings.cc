#include "services/alerting/gpu_fault_findings.h"

#include <algorithm>
#include <cstdlib>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "services/core/gpu_faults.h"
#include "services/core/xid_catalog.h"

namespace goodput::alerting {
namespace {

bool IsXid(const FaultObs& f) { return f.signal == "xid" || f.signal == "xid_count"; }

// Severity as a number for ordering: critical 3, warning 2, no alert 0 (then milder signals
// by how often they explain a slow GPU).
int Rank(const FaultObs& f) {
  if (std::optional<Severity> s = FaultAlertSeverity(f)) return static_cast<int>(*s) * 10;
  if (IsXid(f)) return 5;  // informational XIDs
  if (absl::StartsWith(f.signal, "nvlink_") || f.signal == "pcie_replays") return 4;
  if (absl::StrContains(f.signal, "slowdown")) return 3;
  return 1;  // single-bit ECC, correctable remapped rows
}

std::string Minutes(int64_t s) {
  const int64_t m = s / 60;
  return absl::StrCat(m, m == 1 ? " minute" : " minutes");
}

std::string Trim(std::string_view s) {
  std::string out(s);
  while (!out.empty() && (out.back() == '.' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

std::string FaultGpuKey(const FaultObs& f) {
  std::string key =
      absl::StrCat(f.host, "/", f.gpu_index ? absl::StrCat(*f.gpu_index) : "", "/", f.gpu_uuid);
  if (f.mig_instance) absl::StrAppend(&key, "/mig", *f.mig_instance);
  return key;
}

std::string FaultGpuName(const FaultObs& f) {
  std::string name =
      absl::StrCat(f.host, "/", f.gpu_index ? absl::StrCat(*f.gpu_index) : f.gpu_uuid);
  if (f.mig_instance) absl::StrAppend(&name, "/mig", *f.mig_instance);
  return name;
}

std::string FaultBlame(const FaultObs& f) {
  if (!IsXid(f)) return "hardware";
  const core::XidInfo* info = f.xid ? core::FindXid(*f.xid) : nullptr;
  if (info == nullptr) return "unknown";
  return std::string(core::XidBlameName(info->blame));
}

std::optional<Severity> FaultAlertSeverity(const FaultObs& f) {
  if (IsXid(f)) {
    if (!f.xid || *f.xid == 0) return std::nullopt;
    const core::XidInfo* info = core::FindXid(*f.xid);
    if (info == nullptr) return Severity::kWarning;
    switch (info->blame) {
      case core::XidBlame::kInformational:
        return std::nullopt;
      case core::XidBlame::kApplication:
        return Severity::kWarning;
      case core::XidBlame::kHardware:
      case core::XidBlame::kDriver:
        // Corrected errors the catalog asks no action for (e.g. XID 92) only warn.
        return absl::StartsWith(std::string(info->action), "no immediate action")
                   ? Severity::kWarning
                   : Severity::kCritical;
    }
    return Severity::kWarning;
  }
  if (f.signal == "ecc_dbe_volatile" || f.signal == "ecc_dbe_aggregate" ||
      f.signal == "remapped_rows_uncorrectable" || f.signal == "row_remap_failure" ||
      f.signal == "row_remap_pending") {
    return Severity::kCritical;
  }
  return std::nullopt;
}

std::string FaultWhat(const FaultObs& f) {
  if (IsXid(f) && f.xid) {
    const core::XidInfo* info = core::FindXid(*f.xid);
    if (info == nullptr) return absl::StrCat("XID ", *f.xid, " (not in the XID catalog)");
    const std::string blame =
        info->blame == core::XidBlame::kApplication ? "the application's fault"
        : info->blame == core::XidBlame::kInformational
            ? "informational"
            : absl::StrCat(std::string(core::XidBlameName(info->blame)), " fault");
    return absl::StrCat("XID ", *f.xid, " (", std::string(info->meaning), "; ", blame, ")");
  }
  std::string what(f.signal);
  if (std::optional<core::FaultSignal> s = core::FaultSignalFromName(f.signal)) {
    what = std::string(core::FaultSignalDescription(*s));
    if (core::KindOf(*s) == core::FaultSignalKind::kCounter) {
      absl::StrAppend(&what, absl::StrFormat(" +%g", f.count));
    }
  }
  return what;
}

std::vector<Finding> GpuFaultFindings(const std::vector<FaultObs>& faults) {
  std::map<std::string, std::vector<FaultObs>> by_gpu;
  for (const FaultObs& f : faults) {
    if (FaultAlertSeverity(f)) by_gpu[FaultGpuKey(f)].push_back(f);
  }
  std::vector<Finding> out;
  for (auto& [gpu, list] : by_gpu) {
    std::stable_sort(list.begin(), list.end(), [](const FaultObs& a, const FaultObs& b) {
      return std::make_tuple(-Rank(a), a.time_ms, a.id) <
             std::make_tuple(-Rank(b), b.time_ms, b.id);
    });
    const FaultObs& worst = list.front();
    Finding f;
    f.kind = Kind::kGpuFault;
    f.detail = gpu;
    f.detector = "gpu_fault_events";
    f.confidence = 1.0;  // the GPU reported it
    int64_t onset_ms = list.front().time_ms;
    bool all_cleared = true;
    int64_t cleared_ms = 0;
    for (const FaultObs& o : list) {
      onset_ms = std::min(onset_ms, o.time_ms);
      all_cleared = all_cleared && o.cleared_ms.has_value();
      if (o.cleared_ms) cleared_ms = std::max(cleared_ms, *o.cleared_ms);
    }
    f.onset_s = onset_ms / 1000;
    f.detected_s = worst.time_ms / 1000;
    if (all_cleared) f.condition_end_s = cleared_ms / 1000;
    f.faults = list;
    f.extra_labels = {{"gpu", gpu},
                      {"host", worst.host},
                      {"fault", worst.signal},
                      {"fault_blame", FaultBlame(worst)}};
    if (worst.gpu_index) f.extra_labels["gpu_index"] = absl::StrCat(*worst.gpu_index);
    if (!worst.gpu_uuid.empty()) f.extra_labels["gpu_uuid"] = worst.gpu_uuid;
    if (worst.mig_instance) f.extra_labels["mig_instance"] = absl::StrCat(*worst.mig_instance);
    if (IsXid(worst) && worst.xid) f.extra_labels["xid"] = absl::StrCat(*worst.xid);
    f.extra_labels["catalog_severity"] =
        std::string(SeverityName(FaultAlertSeverity(worst).value_or(Severity::kWarning)));
    out.push_back(std::move(f));
  }
  return out;
}

bool CorrelatesWithFaults(Kind kind) {
  switch (kind) {
    case Kind::kRegressionInJob:
    case Kind::kRegressionVsWorkload:
    case Kind::kStraggler:
    case Kind::kIdleGpus:
    case Kind::kTelemetryStopped:
    case Kind::kSilentGpu:
    case Kind::kHung:
      return true;
    default:
      return false;
  }
}

namespace {

// Whether fault `f` is on the GPU that `key` ("host/index/uuid[/migN]") names: same host, and
// the same UUID when both know it, else the same index.
bool OnGpu(const FaultObs& f, const std::string& key) {
  std::vector<std::string> parts = absl::StrSplit(key, absl::MaxSplits('/', 3));
  if (parts.size() < 3 || parts[0] != f.host) return false;
  if (!parts[2].empty() && !f.gpu_uuid.empty()) return parts[2] == f.gpu_uuid;
  int index = 0;
  if (!parts[1].empty() && f.gpu_index && absl::SimpleAtoi(parts[1], &index)) {
    return index == *f.gpu_index;
  }
  return false;
}

void MostLikelyFirst(std::vector<FaultObs>& out, int64_t reference_ms) {
  std::stable_sort(out.begin(), out.end(), [reference_ms](const FaultObs& a, const FaultObs& b) {
    return std::make_tuple(-Rank(a), std::llabs(a.time_ms - reference_ms), a.id) <
           std::make_tuple(-Rank(b), std::llabs(b.time_ms - reference_ms), b.id);
  });
}

}  // namespace

std::vector<FaultObs> CoincidingFaults(const Finding& finding,
                                       const std::vector<FaultObs>& job_faults, int64_t window_s) {
  std::vector<FaultObs> out;
  if (!CorrelatesWithFaults(finding.kind)) return out;
  const int64_t from_ms = (finding.onset_s - window_s) * 1000;
  const int64_t to_ms = std::max(finding.onset_s, finding.detected_s) * 1000 + 999;
  for (const FaultObs& f : job_faults) {
    if (f.time_ms < from_ms || f.time_ms > to_ms) continue;
    if (finding.kind == Kind::kStraggler && !OnGpu(f, finding.detail)) continue;
    if (finding.kind == Kind::kSilentGpu && !finding.detail.empty() && !OnGpu(f, finding.detail)) {
      continue;
    }
    out.push_back(f);
  }
  MostLikelyFirst(out, finding.onset_s * 1000);
  return out;
}

std::vector<FaultObs> FaultsBeforeEnd(const std::vector<FaultObs>& job_faults, int64_t end_s,
                                      int64_t window_s) {
  std::vector<FaultObs> out;
  for (const FaultObs& f : job_faults) {
    // Slowdowns and corrected errors slow a job down; they do not end it.
    if (Rank(f) < 4) continue;
    if (f.time_ms >= (end_s - window_s) * 1000 && f.time_ms <= end_s * 1000 + 999) {
      out.push_back(f);
    }
  }
  MostLikelyFirst(out, end_s * 1000);
  return out;
}

std::string LikelyCause(const FaultObs& f, int64_t reference_s, int64_t now_s,
                        const std::string& reference_what) {
  const int64_t t_s = f.time_ms / 1000;
  std::string when;
  if (t_s + 60 <= reference_s) {
    when = absl::StrCat(", ", Minutes(reference_s - t_s), " before ", reference_what);
  } else if (t_s >= reference_s + 60) {
    when = absl::StrCat(", ", Minutes(t_s - reference_s), " after ", reference_what);
  } else {
    when = absl::StrCat(", at ", reference_what);
  }
  return absl::StrCat(FaultWhat(f), " on GPU ", FaultGpuName(f), " at ", ClockTime(t_s, now_s),
                      when);
}

Message GpuFaultMessage(const Finding& finding, const MessageContext& c) {
  Message m;
  if (finding.faults.empty()) {
    m.summary = absl::StrCat("GPU fault on ", finding.detail);
    m.description = m.summary;
    return m;
  }
  const FaultObs& worst = finding.faults.front();
  const std::string gpu = FaultGpuName(worst);
  const std::string job =
      absl::StrCat("job ", c.job_id, c.job_name.empty() ? "" : absl::StrCat(" (", c.job_name, ")"),
                   " on ", c.cluster);
  const core::XidInfo* info = IsXid(worst) && worst.xid ? core::FindXid(*worst.xid) : nullptr;
  m.summary = absl::StrCat(FaultWhat(worst), " on GPU ", gpu);
  if (finding.faults.size() > 1) {
    absl::StrAppend(&m.summary, " (+", finding.faults.size() - 1, " more)");
  }
  m.description = absl::StrCat("GPU ", gpu, " of ", job, " reported ", FaultWhat(worst), " at ",
                               ClockTime(worst.time_ms / 1000, c.now_s), ". ");
  if (info != nullptr) {
    const std::string whose =
        info->blame == core::XidBlame::kApplication
            ? "This is the application's fault (the workload, not the GPU)"
        : info->blame == core::XidBlame::kDriver        ? "This is a driver or firmware fault"
        : info->blame == core::XidBlame::kInformational ? "This is informational"
                                                        : "This is a hardware fault";
    absl::StrAppend(&m.description, whose, ". Recommended action: ", Trim(info->action),
                    ". (Source: ", std::string(info->source), ".)");
  } else if (IsXid(worst)) {
    absl::StrAppend(&m.description,
                    "The XID catalog does not know this code: look it up in NVIDIA's XID "
                    "documentation and at the node's kernel log (NVRM: Xid lines).");
  } else {
    absl::StrAppend(&m.description,
                    "This is a hardware memory fault: the GPU needs a reset (row remapping takes "
                    "effect then) and, if it recurs, replacement. Recommended action: drain the "
                    "node, reset the GPU and check nvidia-smi -q -d ECC,ROW_REMAPPER. (Source: "
                    "NVIDIA GPU Memory Error Management, "
                    "docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/.)");
  }
  if (finding.faults.size() > 1) {
    std::vector<std::string> others;
    for (size_t i = 1; i < finding.faults.size() && i <= 5; ++i) {
      const FaultObs& o = finding.faults[i];
      others.push_back(absl::StrCat(FaultWhat(o), " at ", ClockTime(o.time_ms / 1000, c.now_s)));
    }
    absl::StrAppend(&m.description, " The GPU also reported: ", absl::StrJoin(others, "; "),
                    finding.faults.size() > 6 ? "; ..." : "", ".");
  }
  return m;
}

}  // namespace goodput::alerting
