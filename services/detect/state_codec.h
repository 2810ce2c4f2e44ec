// Checkpoints of the detectors' state, for services that keep detectors across restarts
// (goodput-alerting evaluates each job's windows once and saves where it stands).
//
// Only state is saved, never options: a detector is constructed with the options in force
// and then loaded, so a changed option applies from the restore on. Load throws
// nlohmann::json::exception on a checkpoint of another shape; callers rebuild the state from
// the windows instead.
//
// A checkpoint is read back from storage, where anything may have been written: DecodeCbor
// takes its bytes within CheckpointLimits (size, nesting depth, number of values) and never
// recurses deeper than the depth limit, so a hostile row is an error, not a crash.
//
//   std::string bytes = StateCodec::EncodeCbor(StateCodec::Save(detector));
//   absl::StatusOr<nlohmann::json> j = StateCodec::DecodeCbor(bytes);
//   InJobRegressionDetector restored(options);
//   if (j.ok()) StateCodec::Load(*j, restored);
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "services/core/bounded_document.h"
#include "services/detect/findings.h"
#include "services/detect/regression.h"
#include "services/detect/robust_stats.h"
#include "services/detect/serving_efficiency.h"

namespace goodput::detect {

// What a stored checkpoint may hold. A job's detector state is a few hundred windows and a
// few counters per GPU: tens of KiB for a job of thousands of GPUs, nesting 6 deep.
using CheckpointLimits = core::DocumentLimits;

struct StateCodec {
  // A JSON document as CBOR bytes.
  static std::string EncodeCbor(const nlohmann::json& j);
  // CBOR bytes as a JSON document; INVALID_ARGUMENT naming the limit exceeded (with its value
  // and where in the bytes) or the CBOR error. Parses without recursing past max_depth.
  static absl::StatusOr<nlohmann::json> DecodeCbor(std::string_view bytes,
                                                   const CheckpointLimits& limits = {});

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
  // The windows it holds and whether a regression is open; the last verdict is judged again
  // at the next window.
  static nlohmann::json Save(const ServingRegressionDetector& d);
  static void Load(const nlohmann::json& j, ServingRegressionDetector& d);
};

}  // namespace goodput::detect
