// Query-side arithmetic of goodput-ofu over stored windows, kept apart from storage and RPC
// glue so that it is unit-testable: downsampling windows into coarser buckets, the whole-job
// summary (steady state, GPU-hours, effective and idle GPU-hours) and the fleet summary.
// Pure: no I/O, no clock, no protobuf.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "services/ofu/window_engine.h"

namespace goodput::ofu {

// A stored window as the queries read it.
struct StoredWindow {
  WindowResult result;
  int32_t window_s = 0;
  int32_t revision = 0;
};

// Job identity and figures for summaries.
struct JobRow {
  int64_t id = 0;
  std::string cluster = {};
  std::string job_id = {};
  std::string gpu_model = {};
  // The job's team, or its `team` label when that is empty.
  std::string team = {};
  std::string scheduler = {};
  std::string workload_fingerprint = {};
  std::string state = {};
  std::string user = {};
  int gpus_allocated = 0;
  std::optional<int64_t> start_ms = {};
  std::optional<int64_t> end_ms = {};
  int64_t late_sample_count = 0;
};

// Effective bucket length for a requested resolution: the native window when resolution_s is
// 0 or at most native_s, otherwise resolution_s rounded up to a multiple of native_s.
int32_t EffectiveResolutionS(int32_t resolution_s, int32_t native_s);

// Merges windows (of one job and one GPU, or of the job level) into buckets of `bucket_s`
// aligned to the epoch: sample-weighted OFU mean with the CI recomputed from the merged
// moments (core MergeOfuStats), flags united, min/max of the GPU spread, means of coverage,
// median (approximation: mean of the window medians) and SI, max of TI and HBM, energy summed.
// Input in time order (per GPU for per-GPU windows); output in the same order.
std::vector<StoredWindow> Downsample(const std::vector<StoredWindow>& windows, int32_t bucket_s);

struct PerGpuFigure {
  std::string gpu;
  double ofu = 0;     // sample-weighted mean over the job
  bool idle = false;  // idle in every window it reported
};

struct JobSummaryFigures {
  std::optional<int64_t> first_start_ms, last_end_ms;
  int64_t sample_count = 0;
  std::optional<double> ofu, ofu_ci95_half_width;
  std::optional<double> steady_state_ofu;
  std::optional<int64_t> steady_state_start_ms;
  double gpu_coverage = 0;
  double gpu_hours = 0, effective_gpu_hours = 0, idle_gpu_hours = 0;
  std::optional<double> spatial_imbalance, temporal_imbalance;
  std::vector<StragglerResult> stragglers;
  std::vector<std::string> idle_gpus;
  Roofline roofline = Roofline::kUnspecified;
  std::optional<double> hbm_peak_fraction, energy_j, energy_kwh_per_gpu_hour;
  uint32_t flags = 0;
  // Per flag bit, the job-level windows carrying it (of all the job's windows).
  std::array<int32_t, 32> flag_windows{};
  bool all_final = true;
};

// Steady state starts at the first window whose OFU reaches `steady_fraction` of the median
// window OFU of the job (warm-up is the ramp before it); unset when that is the first window
// with data and the job has fewer than three windows.
// Why a job has no OFU (JobOfuSummary.ofu_unavailable_reason), or "" when it has one.
std::string OfuUnavailableReason(const JobSummaryFigures& figures, const std::string& gpu_model,
                                 bool has_windows);

JobSummaryFigures SummarizeJob(const JobRow& job, const std::vector<StoredWindow>& job_windows,
                               const std::vector<PerGpuFigure>& gpus, int64_t now_ms,
                               double steady_fraction = 0.9, double straggler_threshold = 0.2);

struct FleetFilter {
  // Empty: all.
  std::string cluster = {};
  std::string gpu_model = {};
  std::string team = {};
  std::string scheduler = {};
  std::string user = {};
  std::string workload_fingerprint = {};
};
enum class FleetDimension { kCluster, kGpuModel, kTeam, kScheduler, kUser, kWorkload };
struct FleetGroupFigures {
  std::string cluster, gpu_model, team, scheduler, user, workload_fingerprint;
  int64_t job_count = 0;
  double gpu_hours = 0, effective_gpu_hours = 0, ofu_mean = 0, idle_gpu_hours = 0,
         low_efficiency_gpu_hours = 0;
  std::vector<double> gpu_hours_by_ofu_decile = std::vector<double>(10, 0.0);
};
// The low-efficiency threshold the stored hourly fleet figures are computed at (migration
// 0061, ofu_fleet_hours): a summary at this threshold reads them, one at another reads the
// windows themselves.
inline constexpr double kFleetHoursLowEfficiencyOfu = 0.2;

// A job's share of fleet figures: one job-level window (FleetPieceOf), or the sums over a
// job's windows of whole hours (OfuStore::FleetPieces reads them from ofu_fleet_hours).
struct FleetPiece {
  JobRow job;
  std::string gpu_model;  // the windows' (the job's may be empty)
  double gpu_hours = 0, effective_gpu_hours = 0, idle_gpu_hours = 0, low_efficiency_gpu_hours = 0;
  std::vector<double> gpu_hours_by_ofu_decile = std::vector<double>(10, 0.0);
};
// A window stands for gpu_equivalents GPUs over window_s; OFU below the threshold makes its
// GPU-hours low-efficiency ones. The same arithmetic as ofu_fleet_hours_refresh (0061).
FleetPiece FleetPieceOf(const JobRow& job, const StoredWindow& window,
                        double low_efficiency_threshold);

// Groups fleet pieces by the dimensions (none: one group), largest GPU-hours first; the second
// value is the total over all groups. Sums run in the pieces' order.
std::pair<std::vector<FleetGroupFigures>, FleetGroupFigures> SummarizeFleet(
    const std::vector<FleetPiece>& pieces, const FleetFilter& filter,
    const std::vector<FleetDimension>& group_by);
// The same over job-level windows.
std::pair<std::vector<FleetGroupFigures>, FleetGroupFigures> SummarizeFleet(
    const std::vector<std::pair<JobRow, StoredWindow>>& windows, const FleetFilter& filter,
    const std::vector<FleetDimension>& group_by, double low_efficiency_threshold);

}  // namespace goodput::ofu
