// The job-end report's shared parts: the AdminComment encoding of its compact summary, the
// advice chosen from that summary, and its text rendering. goodput-ofu uses them to assemble
// and write reports; goodputctl to decode an AdminComment and to print a report; so a summary
// read back from Slurm prints exactly as the service's report does.
//
//   absl::StatusOr<std::string> comment = EncodeAdminComment(summary);   // "goodput1:eJx..."
//   absl::StatusOr<v1::ReportSummary> back = DecodeAdminComment(*comment);
//   std::cout << RenderSummaryText(*back);
//
// Encoding (version 1): "goodput1:" + base64 (standard alphabet, padded) of the zlib stream
// (RFC 1950) of the summary's protobuf JSON (proto field names, enums by name, defaults left
// out); or "goodput1-b32:" + the same bytes in base32 (RFC 4648 alphabet in lower case, no
// padding), which survives sacctmgr: Slurm 22.05's sacctmgr lower-cases the AdminComment it
// sets through slurmdbd. The decoder reads both (base32 in either case, padded or not) and
// ignores JSON fields it does not know, so later versions of the summary that only add fields
// keep the prefixes.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "goodput/v1/ofu.pb.h"
#include "goodput/v1/report.pb.h"
#include "services/core/ledger.h"

namespace goodput::api {

namespace v1 = ::goodput::v1;

inline constexpr absl::string_view kAdminCommentPrefix = "goodput1:";
inline constexpr absl::string_view kAdminCommentBase32Prefix = "goodput1-b32:";

// How the compressed summary is spelled: base64 where the text is kept as written (scontrol,
// slurmctld), base32 in lower case where it is lower-cased (sacctmgr, slurmdbd).
enum class AdminCommentEncoding { kBase64, kBase32 };
// Largest decoded (inflated) summary accepted, bytes.
inline constexpr size_t kMaxSummaryJsonBytes = 64 * 1024;

// The AdminComment text of `summary`.
absl::StatusOr<std::string> EncodeAdminComment(
    const v1::ReportSummary& summary,
    AdminCommentEncoding encoding = AdminCommentEncoding::kBase64);
// The summary in an AdminComment of either encoding; INVALID_ARGUMENT saying which step failed
// (prefix, base64 or base32, zlib, JSON) and quoting the start of the input.
absl::StatusOr<v1::ReportSummary> DecodeAdminComment(absl::string_view comment);

// The ledger (services/core/ledger.h) and its proto form.
core::JobLedger LedgerFromProto(const v1::GoodputLedger& ledger);
v1::GoodputLedger LedgerToProto(const core::JobLedger& ledger);
// One of the ledger's transient slowdowns as the report lists it.
v1::TransientSlowdown TransientToProto(const core::LedgerTransient& transient);

// Rounds the summary's figures as they are stored and encoded (fractions to 4 decimals,
// GPU-hours to 2, GiB to 1, kWh to 3), so that a decoded summary equals the stored one.
void RoundSummary(v1::ReportSummary& summary);

// True when an APP_FLOPS_OVERCOUNT verdict is what idle GPUs alone give: the framework's MFU
// is over its busy GPUs (its ranks), OFU over every allocated GPU, so MFU/OFU is allocated /
// busy (8/7 = 1.14 for one idle GPU of eight) within kIdleGpuRatioTolerance. The report then
// names the idle GPUs as the cause, not a FLOPs miscount. (A report that states its GPU count
// is compared over the allocation by goodput-mfu already, services/mfu/reconcile.h.)
inline constexpr double kIdleGpuRatioTolerance = 0.05;
bool MfuGapIsTheIdleGpus(const v1::ReportSummary& summary);

// An energy regression: the job's J/PFLOP at least this many times its workload's
// (ReportSummary.workload_joules_per_pflop, earlier jobs on the same GPU model).
inline constexpr double kEnergyRegressionFactor = 1.3;
bool EnergyRegression(const v1::ReportSummary& summary);

// Advice for a summary, most important first; WELL_USED when nothing applies.
std::vector<v1::AdviceKind> ChooseAdvice(const v1::ReportSummary& summary);
// One or two sentences for a person, with the summary's numbers.
std::string AdviceText(v1::AdviceKind kind, const v1::ReportSummary& summary);
// A data-quality flag in plain words, with what it means for the figures.
std::string CaveatText(v1::DataQualityFlag flag);

// The data-quality flags of a job's OFU summary that change what its figures mean, each with
// its caveat saying how much of the job it touches. A flag counts by the share of the job's
// windows carrying it (JobOfuSummary.flag_shares of window_count):
//   - any window: unknown GPU model, shared GPU (the figure is not the job's own there);
//   - 5% of the windows: gaps, late samples dropped, low GPU coverage, profiling unavailable
//     or stuck (telemetry missing: the job's figures are short by about that share);
//   - 25%: sparse sampling, single samples, duplicate timestamps, out-of-range tensor
//     activity, SM clock above boost, energy counter resets (each window's figure is still
//     measured, less precisely: a few such windows do not move the job's figures).
// Flags below their share stay on the windows (and in JobOfuSummary.flags), not on the job.
// A summary without flag_shares (no windows counted) keeps every flag, with no share.
struct JobCaveat {
  v1::DataQualityFlag flag = v1::DATA_QUALITY_FLAG_UNSPECIFIED;
  std::string text;  // CaveatText plus "(on N of M windows, P%)"
};
std::vector<JobCaveat> JobCaveats(const v1::JobOfuSummary& ofu);

// The summary as text, like jobstats' report: one line per figure, then the advice.
std::string RenderSummaryText(const v1::ReportSummary& summary);

}  // namespace goodput::api
