// Load-aware efficiency of an inference service: the gate the in-job regression path asks
// before it reports an OFU drop of a job whose workload kind is inference.
//
// A service's OFU follows its traffic: at night fewer requests arrive, the GPUs compute less,
// and OFU falls with no loss of efficiency. What a regression of a service is, is more work
// per unit of load: more busy GPU-seconds per token served at a comparable load (the same
// traffic, so batching is comparable). The gate compares the recent windows' busy
// GPU-seconds per token with those of the reference windows whose load is within
// `comparable_load` of the recent load (median of each):
//
//   ServingVerdict v = JudgeServing(reference_windows, recent_windows, options);
//   if (v.kind == ServingVerdict::Kind::kSlowerPerToken) ... report v.annotation ...
//   // kLoadExplained, kNoComparableLoad, kSteady: the OFU drop is no regression of the service
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace goodput::detect {

// One window of a service.
struct ServingWindow {
  int64_t start_s = 0;
  int64_t end_s = 0;
  double ofu = 0;           // job OFU (fraction)
  double tokens_per_s = 0;  // prompt + generation tokens served per second, whole job
  // Fraction of the window the job's GPUs were busy (DCGM GR engine active, mean over GPUs);
  // negative when unknown: OFU stands in for it (the FLOPs per token then).
  double gpu_busy = -1;
  int gpu_count = 1;
};

struct ServingGateOptions {
  // Smallest rise of busy GPU-seconds per token reported (the in-job regression's factor).
  double min_factor = 1.35;
  // Two loads are comparable when the larger is within this factor of the smaller.
  double comparable_load = 1.5;
  // Fewer comparable reference windows than this: no decision.
  int min_reference_windows = 5;
  // Windows serving fewer tokens per second than this are idle: no per-token reading.
  double min_tokens_per_s = 1;
};

struct ServingVerdict {
  enum class Kind {
    kNoComparableLoad,  // load moved away from anything seen: nothing to compare with
    kLoadExplained,     // OFU fell, and so did load; per-token cost is steady
    kSteady,            // per-token cost steady at a comparable load
    kSlowerPerToken,    // per-token cost rose by at least min_factor at a comparable load
  };
  Kind kind = Kind::kNoComparableLoad;
  double load_before = 0;  // median tokens/s of the comparable reference windows
  double load_after = 0;   // median tokens/s of the recent windows
  double cost_before = 0;  // median busy GPU-seconds per token (or OFU-GPU-seconds)
  double cost_after = 0;
  double factor = 0;  // cost_after / cost_before
  int comparable_windows = 0;
  // kSlowerPerToken: start of the first recent window whose cost per token is past the
  // geometric midpoint of before and after (where the change shows); 0 otherwise.
  int64_t onset_s = 0;
  std::string annotation;  // one sentence for a human
  bool is_regression() const { return kind == Kind::kSlowerPerToken; }
};

// Busy GPU-seconds per token of `w` (OFU standing in for busy when unknown); negative for an
// idle window.
double BusyGpuSecondsPerToken(const ServingWindow& w, const ServingGateOptions& options);

// See the file comment. `reference`: the service's windows before the suspected change;
// `recent`: those since.
ServingVerdict JudgeServing(const std::vector<ServingWindow>& reference,
                            const std::vector<ServingWindow>& recent,
                            const ServingGateOptions& options = ServingGateOptions());

// The in-job detector of a service, window by window: the gate the evaluator of an inference
// job asks instead of (not besides) the OFU drop detector. It keeps the last `test_windows`
// windows as the recent ones and up to `reference_windows` before them as the reference, and
// judges them (JudgeServing) once the recent windows are complete. While a regression is open
// the reference is frozen (a slower service must not become its own baseline); it closes
// when the cost per token is back within the factor at a comparable load. Memory is bounded
// by the two window counts.
//
//   ServingRegressionDetector d;
//   for (const ServingWindow& w : windows) {
//     if (std::optional<ServingVerdict> v = d.Add(w)) ... open or resolve the finding ...
//   }
//   // An OFU drop of the service: a regression only if d.open().
class ServingRegressionDetector {
 public:
  explicit ServingRegressionDetector(ServingGateOptions options = ServingGateOptions(),
                                     int test_windows = 10, int reference_windows = 1440);

  // Feeds the next window (time order). Returns the verdict when a regression opens or
  // closes; nullopt otherwise.
  std::optional<ServingVerdict> Add(const ServingWindow& w);
  // A regression per token is open.
  bool open() const { return open_; }
  // The verdict of the last complete set of recent windows.
  const ServingVerdict& last() const { return last_; }
  // Windows held: the recent ones and the reference.
  size_t windows_held() const { return test_.size() + reference_.size(); }

 private:
  friend struct StateCodec;

  ServingGateOptions options_;
  size_t test_windows_;
  size_t reference_windows_;
  std::deque<ServingWindow> reference_;
  std::deque<ServingWindow> test_;
  bool open_ = false;
  ServingVerdict last_;
};

}  // namespace goodput::detect
