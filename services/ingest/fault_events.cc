#include "services/ingest/fault_events.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace goodput::ingest {

std::string FaultGpuKey(const Sample& sample) { return GpuKey(sample.gpu); }

std::vector<core::FaultReading> FaultReadingsOf(const Sample& sample) {
  std::vector<core::FaultReading> out = sample.faults;
  if (const auto& mask = sample.get(SampleField::kClockThrottleReasons); mask.has_value()) {
    const auto bits = static_cast<uint64_t>(*mask);
    for (const core::ClockEventBit& bit : core::FaultClockEventBits()) {
      out.push_back({.signal = bit.signal, .value = (bits & bit.mask) != 0 ? 1.0 : 0.0});
    }
  }
  return out;
}

std::vector<std::string> FaultGpuKeys(const std::vector<const Sample*>& samples) {
  std::set<std::string> keys;
  for (const Sample* s : samples) {
    if (!s->faults.empty() || s->get(SampleField::kClockThrottleReasons).has_value()) {
      keys.insert(FaultGpuKey(*s));
    }
  }
  return {keys.begin(), keys.end()};
}

FaultDetection DetectFaultEvents(const std::vector<const Sample*>& samples,
                                 const std::vector<std::optional<int64_t>>& jobs,
                                 absl::flat_hash_map<std::string, GpuFaultState>* states) {
  // Per GPU in sample time order (stable: the batch's order within one instant).
  std::vector<size_t> order;
  std::vector<std::string> keys(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i]->faults.empty() &&
        !samples[i]->get(SampleField::kClockThrottleReasons).has_value()) {
      continue;
    }
    keys[i] = FaultGpuKey(*samples[i]);
    order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (keys[a] != keys[b]) return keys[a] < keys[b];
    return samples[a]->time_unix_ms < samples[b]->time_unix_ms;
  });
  FaultDetection out;
  for (size_t i : order) {
    const Sample& s = *samples[i];
    GpuFaultState& gpu = (*states)[keys[i]];
    for (const core::FaultReading& reading : FaultReadingsOf(s)) {
      core::SignalState& state = gpu[core::FaultStateKey(reading)];
      bool changed = false;
      std::optional<core::FaultEdge> edge =
          core::DetectFaultEdge(reading, s.time_unix_ms, &state, &changed);
      if (changed) out.changed_gpus.insert(keys[i]);
      if (edge.has_value()) {
        out.events.push_back(FaultEvent{.sample = &s,
                                        .job = i < jobs.size() ? jobs[i] : std::nullopt,
                                        .reading = reading,
                                        .edge = *edge});
      }
    }
  }
  return out;
}

std::string EncodeFaultState(const GpuFaultState& state) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, s] : state) {
    if (!s.known) continue;
    j[key] = nlohmann::json::array({s.value, s.changed_unix_ms});
  }
  return j.dump();
}

absl::StatusOr<GpuFaultState> DecodeFaultState(const std::string& text) {
  GpuFaultState out;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return absl::DataLossError(absl::StrCat("gpu_fault_state.signals is not an object: ", text));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const nlohmann::json& v = it.value();
    if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number()) {
      return absl::DataLossError(
          absl::StrCat("gpu_fault_state.signals.", it.key(), " is not [value, time_ms]"));
    }
    out[it.key()] = core::SignalState{
        .known = true, .value = v[0].get<double>(), .changed_unix_ms = v[1].get<int64_t>()};
  }
  return out;
}

}  // namespace goodput::ingest
