// GPU faults as alerting judges them: which fault events make a `gpu_fault` alert (one per
// faulty GPU of a job), and which faults coincide with another finding of the job (a
// regression, a straggler, a failed job) and so are named as its likely cause. Pure: the
// events come in as ingest stored them (gpu_fault_events, read by gpu_fault_store.h); the
// XID catalog (services/core/xid_catalog.h) says what a code means and whose fault it is.
//
//   std::vector<Finding> f = GpuFaultFindings(job_faults);            // kind gpu_fault
//   std::vector<FaultObs> c = CoincidingFaults(straggler, job_faults, 1800);
//   if (!c.empty()) sentence = LikelyCause(c.front(), straggler.onset_s, now_s);
//
// Alerting faults (README.md, "GPU faults"): an XID the catalog does not call informational
// (an unknown code included), double-bit ECC errors (volatile or aggregate), uncorrectable
// remapped rows, a row-remap failure and a pending row remap. Single-bit ECC errors, NVLink and
// PCIe error counters and clock slowdowns alert on nothing by themselves (a healthy fleet
// shows them every day), but any of them can be the likely cause of a straggler or a drop.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "services/alerting/alert_messages.h"
#include "services/alerting/alert_rules.h"
#include "services/alerting/job_detectors.h"

namespace goodput::alerting {

// The GPU as windows and straggler fingerprints name it: "host/index/uuid" (empty parts where
// unknown) plus "/mig<N>" for a MIG instance.
std::string FaultGpuKey(const FaultObs& f);
// "gpu-node-042/3", "gpu-node-042/GPU-5fd8…" or "gpu-node-042/3/mig2": short, for sentences.
std::string FaultGpuName(const FaultObs& f);

// Whose fault, as the label `fault_blame` says it: the XID catalog's "application",
// "hardware", "driver" or "informational"; "unknown" for an XID the catalog does not know;
// "hardware" for ECC, row-remap, NVLink, PCIe and clock-slowdown signals.
std::string FaultBlame(const FaultObs& f);

// Whether the event makes a gpu_fault alert by itself (above), and how bad it is: critical
// for hardware and driver faults (the GPU needs a reset or the node a drain), warning for the
// application's XIDs and unknown codes, nullopt when it does not alert.
std::optional<Severity> FaultAlertSeverity(const FaultObs& f);

// What the fault is, in a few words: "XID 79 (GPU has fallen off the bus; hardware fault)",
// "XID 13 (Graphics Engine Exception; the application's fault)", "double-bit ECC errors
// (volatile) +2".
std::string FaultWhat(const FaultObs& f);

// One gpu_fault finding per GPU of `faults` that has an alerting fault, in GPU order: detail
// the GPU (FaultGpuKey; the engine names it in Alert.gpus from the faults), onset the first
// alerting fault, `faults` its alerting faults worst first (then by time), `extra_labels` gpu,
// host, gpu_index, gpu_uuid, mig_instance, fault (signal), xid, fault_blame and catalog_severity
// ("critical" or "warning": FaultAlertSeverity) of the worst. A finding whose faults are all
// cleared flags has `condition_end_s` (the last clearing).
std::vector<Finding> GpuFaultFindings(const std::vector<FaultObs>& faults);

// Kinds whose findings are checked against the job's faults.
bool CorrelatesWithFaults(Kind kind);

// The faults of `job_faults` that coincide with `finding`: on one of the job's GPUs (for a
// straggler, on the straggling GPU: `finding.detail`), at a time in
// [onset - window_s, detected] (detected: `detected_s`, or the onset when unset). Ordered
// most likely first: alerting faults before the others, worse before milder, then the
// closest to the onset.
std::vector<FaultObs> CoincidingFaults(const Finding& finding,
                                       const std::vector<FaultObs>& job_faults, int64_t window_s);
// The same for a job that ended at `end_s` (failed): the faults that can end a job (XIDs,
// uncorrectable memory errors, NVLink and PCIe errors; not clock slowdowns or corrected
// errors) in [end - window_s, end].
std::vector<FaultObs> FaultsBeforeEnd(const std::vector<FaultObs>& job_faults, int64_t end_s,
                                      int64_t window_s);

// The likely cause in words: "XID 79 (GPU has fallen off the bus; hardware fault) on GPU
// gpu-node-042/3 at 14:02 UTC, 4 minutes before the onset". `reference_what` names the
// reference time ("the onset", "the job ended").
std::string LikelyCause(const FaultObs& f, int64_t reference_s, int64_t now_s,
                        const std::string& reference_what = "the onset");

// The words of a gpu_fault alert: the worst fault with the catalog's meaning, whose fault it
// is, the recommended action and the catalog's source, then the GPU's other faults.
Message GpuFaultMessage(const Finding& finding, const MessageContext& context);

}  // namespace goodput::alerting
