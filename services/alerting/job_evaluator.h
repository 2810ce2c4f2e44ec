// Detection for one job, window by window: the job's windows are fed once, in window order,
// and after each one the evaluator knows which conditions hold. A condition that starts and
// ends among the windows fed since the caller last looked (a drop confirmed and recovered
// inside one burst of windows, or in a backlog evaluated after the job ended) is kept as an
// ended finding with its onset, depth, duration and evidence, so what is found does not
// depend on how the windows were delivered: one by one, in bursts, or after an outage.
//
// The state is bounded (the detectors' windows, per-GPU counters, the last data-quality
// windows), so a window costs the same in the first hour of a job and in its second week.
// Checkpoint() saves it (CBOR) and Restore() takes it back, so that a restarted service
// replays only the windows after its last checkpoint.
//
//   JobEvaluator ev(options, earlier_jobs);
//   for (const JobWindow& w : new_windows) ev.AddWindow(w);
//   for (const Finding& f : ev.TakeEnded()) ... recorded as resolved ...
//   for (const Finding& f : ev.current()) ... open or update its alert ...
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "services/alerting/job_detectors.h"
#include "services/detect/findings.h"
#include "services/detect/regression.h"

namespace goodput::alerting {

class JobEvaluator {
 public:
  // `earlier_jobs`: the workload's earlier jobs (most recent first) as known when the job's
  // first window arrives; they make the baseline the job is compared with.
  JobEvaluator(const DetectorOptions& options, const std::vector<EarlierJob>& earlier_jobs);
  JobEvaluator(const JobEvaluator&) = delete;
  JobEvaluator& operator=(const JobEvaluator&) = delete;

  // Feeds the job's next window: its start must be after the last window's start.
  void AddWindow(const JobWindow& w);
  // mfu's events. A precision switch applies to the windows fed after it; one at or before
  // the last window fed changes how those windows read, and the caller replays the job
  // (needs_replay tells).
  void AddPrecisionSwitch(const PrecisionSwitchObs& s);
  void SetDivergence(const DivergenceObs& d);
  // The job is an inference service (its workload kind). Once its engines have reported
  // tokens (JobWindow::tokens_per_s), its OFU follows its traffic, so a drop in OFU is no
  // regression by itself: its in-job regression is a rise of busy GPU-seconds per token at a
  // comparable load (detect::ServingRegressionDetector), and its OFU is not compared with
  // its workload's. Without token counts it is read as any job. Recomputes the findings.
  void SetServing(bool serving);
  bool needs_replay(const PrecisionSwitchObs& s) const {
    return windows_ > 0 && s.time_s <= last_start_s_;
  }

  // The conditions that hold after the last window (and the divergence verdict).
  const std::vector<Finding>& current() const { return current_; }
  // The conditions that ended since the last call, in the order they ended.
  std::vector<Finding> TakeEnded();
  // The transient slowdowns found since the last call, in time order.
  std::vector<TransientSlowdown> TakeTransients();
  // The job's steady state (frozen at a confirmed in-job regression), for later baselines.
  detect::JobSteadyState steady() const { return steady_.Summary(""); }
  // Drops explained and so not alerted (a precision switch, or a service's load), the latest
  // last.
  const std::deque<std::string>& precision_annotations() const { return precision_notes_; }

  int64_t windows() const { return windows_; }
  int64_t first_start_s() const { return first_start_s_; }
  int64_t last_start_s() const { return last_start_s_; }  // -1 before the first window
  int64_t last_end_s() const { return last_end_s_; }

  // The whole state; Restore with the same options gives an evaluator that goes on exactly
  // as this one would.
  std::string Checkpoint() const;
  // INVALID_ARGUMENT when `checkpoint` is not one (or of another version): rebuild instead.
  static absl::StatusOr<std::unique_ptr<JobEvaluator>> Restore(const DetectorOptions& options,
                                                               std::string_view checkpoint);

 private:
  struct DataQualityWindow {
    int64_t start_s = 0;
    uint32_t flags = 0;
    int gpus_allocated = 0;
    int gpus_reporting = 0;
    double power_w_mean = 0;
  };

  void Recompute();
  void InJob(std::vector<Finding>& out) const;
  void ServingInJob(std::vector<Finding>& out) const;
  void FeedServing(const JobWindow& w, bool untrusted);
  void Note(std::string note);
  // A service whose tokens are known: read by its load, not by its OFU.
  bool ReadByLoad() const { return serving_ && load_seen_; }
  void Workload(std::vector<Finding>& out) const;
  void Gpus(std::vector<Finding>& out) const;
  void DataQuality(std::vector<Finding>& out) const;
  void Silent(std::vector<Finding>& out) const;
  void Stopped(std::vector<Finding>& out) const;
  void TrackActivity(const JobWindow& w);
  void Divergence(std::vector<Finding>& out) const;
  std::optional<std::string> SwitchExplains(const detect::RegressionEvent& e) const;
  std::vector<PrecisionSwitchObs> SwitchesNear(int64_t from_s, int64_t to_s) const;
  int Slot(const std::string& gpu);

  DetectorOptions options_;
  int64_t windows_ = 0;
  int64_t first_start_s_ = -1;
  int64_t last_start_s_ = -1;
  int64_t last_end_s_ = -1;
  int64_t window_len_s_ = 60;

  // mfu's precision switches (time order) and the effective peak in force.
  std::vector<PrecisionSwitchObs> switches_;
  size_t next_switch_ = 0;
  double peak_ = 0;
  std::optional<DivergenceObs> divergence_;

  // Regression inside the job.
  detect::InJobRegressionDetector in_job_;
  detect::SteadyStateSummarizer steady_;
  std::optional<detect::RegressionEvent> in_job_open_;
  std::deque<std::string> precision_notes_;  // the last few
  std::vector<TransientSlowdown> transients_;  // not yet taken (TakeTransients)

  // Inference services: the per-token detector (fed whenever tokens are known) and the
  // regression it opened, from the start of the recent windows that showed it.
  struct ServingOpen {
    detect::ServingVerdict verdict;
    int64_t onset_s = 0;
    int64_t detected_s = 0;
  };
  bool serving_ = false;
  bool load_seen_ = false;
  detect::ServingRegressionDetector serving_detector_;
  std::optional<ServingOpen> serving_open_;

  // Regression against the workload's earlier jobs.
  std::optional<detect::NewJobComparator> comparator_;
  std::optional<detect::BaselineRegression> workload_found_;
  std::vector<std::string> baseline_job_ids_;  // most recent first, at most 20
  int64_t baseline_last_end_s_ = 0;
  std::deque<double> recent_steady_;  // OFU of the latest trusted steady windows

  // Idle GPUs and stragglers: GPUs named in windows get slots in the tracker in the order
  // they were first named; the other slots stand for GPUs at the job's median.
  std::vector<std::string> gpu_names_;
  absl::flat_hash_map<std::string, int> gpu_slots_;
  int gpus_allocated_ = 0;
  detect::GpuFindingsTracker gpu_tracker_;
  double last_gpu_ofu_median_ = 0;

  std::deque<DataQualityWindow> data_quality_;

  // Silent GPUs: those ofu named in the latest window in which the job reported, by GPU key.
  std::map<std::string, SilentGpuObs> silent_;

  // Hung and idle: the current runs of windows classified so (ClassifyActivity; windows of
  // unknown activity neither extend nor break a run), -1 when none.
  bool computed_ = false;  // a computing window was seen: idle is "went idle"
  int64_t hung_since_s_ = -1;
  int64_t idle_since_s_ = -1;
  int64_t stopped_since_s_ = -1;  // hung or idle windows in a row
  int64_t hung_windows_ = 0;
  int64_t idle_windows_ = 0;
  bool spinning_ = false;         // the hung run saw the GR engine busy
  ActivityObs stopped_activity_;  // the latest hung or idle window's
  // The open in-job stall fell within a run of hung or idle windows: those findings tell it.
  bool stall_explained_ = false;

  std::vector<Finding> current_;
  std::vector<Finding> ended_;
};

}  // namespace goodput::alerting
