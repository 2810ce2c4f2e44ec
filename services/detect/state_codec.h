// Checkpoints of the detectors' state, for services that keep detectors across restarts
// (goodput-alerting evaluates each job's windows once and saves where it stands).
//
// Only state is saved, never options: a detector is constructed with the options in force
// and then loaded, so a changed option applies from the restore on. Load throws
// nlohmann::json::exception on a checkpoint of another shape; callers rebuild the state from
// the windows instead.
//
//   nlohmann::json j = StateCodec::Save(detector);
//   InJobRegressionDetector restored(options);
//   StateCodec::Load(j, restored);
#pragma once

#include <nlohmann/json.hpp>

#include "services/detect/findings.h"
#include "services/detect/regression.h"
#include "services/detect/robust_stats.h"

namespace goodput::detect {

struct StateCodec {
  static nlohmann::json Save(const OfuWindow& w);
  static OfuWindow LoadWindow(const nlohmann::json& j);
  static nlohmann::json Save(const JobSteadyState& s);
  static JobSteadyState LoadSteadyState(const nlohmann::json& j);

  static nlohmann::json Save(const FractionHistogram& h);
  static void Load(const nlohmann::json& j, FractionHistogram& h);
  static nlohmann::json Save(const WarmupTracker& t);
  static void Load(const nlohmann::json& j, WarmupTracker& t);
  static nlohmann::json Save(const InJobRegressionDetector& d);
  static void Load(const nlohmann::json& j, InJobRegressionDetector& d);
  static nlohmann::json Save(const SteadyStateSummarizer& s);
  static void Load(const nlohmann::json& j, SteadyStateSummarizer& s);
  static nlohmann::json Save(const WorkloadBaseline& b);
  static void Load(const nlohmann::json& j, WorkloadBaseline& b);
  static nlohmann::json Save(const NewJobComparator& c);
  static void Load(const nlohmann::json& j, NewJobComparator& c);
  static nlohmann::json Save(const GpuFindingsTracker& t);
  static void Load(const nlohmann::json& j, GpuFindingsTracker& t);
};

}  // namespace goodput::detect
