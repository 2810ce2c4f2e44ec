#include "services/core/gpu_faults.h"

#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace goodput::core {
namespace {

struct SignalInfo {
  FaultSignal signal;
  std::string_view name;
  FaultSignalKind kind;
  std::string_view description;
};

constexpr std::array<SignalInfo, kFaultSignalCount> kSignals = {{
    {FaultSignal::kXid, "xid", FaultSignalKind::kLastValue, "XID error"},
    {FaultSignal::kXidCount, "xid_count", FaultSignalKind::kWindowCount,
     "XID errors in the exporter's window"},
    {FaultSignal::kEccSbeVolatile, "ecc_sbe_volatile", FaultSignalKind::kCounter,
     "single-bit ECC errors (volatile)"},
    {FaultSignal::kEccDbeVolatile, "ecc_dbe_volatile", FaultSignalKind::kCounter,
     "double-bit ECC errors (volatile)"},
    {FaultSignal::kEccSbeAggregate, "ecc_sbe_aggregate", FaultSignalKind::kCounter,
     "single-bit ECC errors (aggregate)"},
    {FaultSignal::kEccDbeAggregate, "ecc_dbe_aggregate", FaultSignalKind::kCounter,
     "double-bit ECC errors (aggregate)"},
    {FaultSignal::kRemappedRowsUncorrectable, "remapped_rows_uncorrectable",
     FaultSignalKind::kCounter, "rows remapped for uncorrectable errors"},
    {FaultSignal::kRemappedRowsCorrectable, "remapped_rows_correctable", FaultSignalKind::kCounter,
     "rows remapped for correctable errors"},
    {FaultSignal::kRowRemapFailure, "row_remap_failure", FaultSignalKind::kFlag,
     "row remapping failed"},
    {FaultSignal::kRowRemapPending, "row_remap_pending", FaultSignalKind::kFlag,
     "row remapping pending (reset the GPU to apply)"},
    {FaultSignal::kNvlinkCrcFlitErrors, "nvlink_crc_flit_errors", FaultSignalKind::kCounter,
     "NVLink flow-control CRC errors"},
    {FaultSignal::kNvlinkCrcDataErrors, "nvlink_crc_data_errors", FaultSignalKind::kCounter,
     "NVLink data CRC errors"},
    {FaultSignal::kNvlinkReplayErrors, "nvlink_replay_errors", FaultSignalKind::kCounter,
     "NVLink replays"},
    {FaultSignal::kNvlinkRecoveryErrors, "nvlink_recovery_errors", FaultSignalKind::kCounter,
     "NVLink recovery errors"},
    {FaultSignal::kPcieReplays, "pcie_replays", FaultSignalKind::kCounter, "PCIe replays"},
    {FaultSignal::kHwSlowdown, "hw_slowdown", FaultSignalKind::kFlag,
     "hardware slowdown (clock event 0x8)"},
    {FaultSignal::kSwThermalSlowdown, "sw_thermal_slowdown", FaultSignalKind::kFlag,
     "software thermal slowdown (clock event 0x20)"},
    {FaultSignal::kHwThermalSlowdown, "hw_thermal_slowdown", FaultSignalKind::kFlag,
     "hardware thermal slowdown (clock event 0x40)"},
    {FaultSignal::kHwPowerBrakeSlowdown, "hw_power_brake_slowdown", FaultSignalKind::kFlag,
     "hardware power brake slowdown (clock event 0x80)"},
}};

const SignalInfo& Info(FaultSignal signal) { return kSignals[static_cast<int>(signal)]; }

}  // namespace

std::string_view FaultSignalName(FaultSignal signal) { return Info(signal).name; }
FaultSignalKind KindOf(FaultSignal signal) { return Info(signal).kind; }
std::string_view FaultSignalDescription(FaultSignal signal) { return Info(signal).description; }

std::optional<FaultSignal> FaultSignalFromName(std::string_view name) {
  for (const SignalInfo& s : kSignals) {
    if (s.name == name) return s.signal;
  }
  return std::nullopt;
}

std::optional<FaultSignal> FaultSignalForMetric(std::string_view name) {
  struct Metric {
    std::string_view name;
    FaultSignal signal;
  };
  static constexpr std::array<Metric, 16> kMetrics = {{
      {"DCGM_FI_DEV_XID_ERRORS", FaultSignal::kXid},
      {"DCGM_EXP_XID_ERRORS_COUNT", FaultSignal::kXidCount},
      {"DCGM_FI_DEV_XID_ERRORS_ACTIVE", FaultSignal::kXidCount},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", FaultSignal::kEccSbeVolatile},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", FaultSignal::kEccDbeVolatile},
      {"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", FaultSignal::kEccSbeAggregate},
      {"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", FaultSignal::kEccDbeAggregate},
      {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", FaultSignal::kRemappedRowsUncorrectable},
      {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", FaultSignal::kRemappedRowsCorrectable},
      {"DCGM_FI_DEV_ROW_REMAP_FAILURE", FaultSignal::kRowRemapFailure},
      {"DCGM_FI_DEV_ROW_REMAP_PENDING", FaultSignal::kRowRemapPending},
      {"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", FaultSignal::kNvlinkCrcFlitErrors},
      {"DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", FaultSignal::kNvlinkCrcDataErrors},
      {"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", FaultSignal::kNvlinkReplayErrors},
      {"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", FaultSignal::kNvlinkRecoveryErrors},
      {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", FaultSignal::kPcieReplays},
  }};
  for (const Metric& m : kMetrics) {
    if (m.name == name) return m.signal;
  }
  return std::nullopt;
}

const std::vector<ClockEventBit>& FaultClockEventBits() {
  static const auto* const kBits = new std::vector<ClockEventBit>{
      {0x8, FaultSignal::kHwSlowdown},
      {0x20, FaultSignal::kSwThermalSlowdown},
      {0x40, FaultSignal::kHwThermalSlowdown},
      {0x80, FaultSignal::kHwPowerBrakeSlowdown},
  };
  return *kBits;
}

std::string FaultStateKey(const FaultReading& reading) {
  if (reading.signal == FaultSignal::kXidCount) {
    return absl::StrCat(std::string(FaultSignalName(reading.signal)), ":", reading.xid);
  }
  return std::string(FaultSignalName(reading.signal));
}

std::optional<FaultEdge> DetectFaultEdge(const FaultReading& reading, int64_t time_unix_ms,
                                         SignalState* state, bool* changed) {
  *changed = false;
  if (!std::isfinite(reading.value)) return std::nullopt;
  if (state->known && time_unix_ms < state->changed_unix_ms) return std::nullopt;  // late
  const double v = reading.value;
  std::optional<FaultEdge> edge;
  auto make_edge = [&](double count, bool reset) {
    FaultEdge e;
    e.value = v;
    if (state->known) e.previous_value = state->value;
    e.count = count;
    e.counter_reset = reset;
    return e;
  };
  switch (KindOf(reading.signal)) {
    case FaultSignalKind::kLastValue:
      if (v != 0 && (!state->known || v != state->value)) edge = make_edge(1, false);
      break;
    case FaultSignalKind::kWindowCount: {
      double before = state->known ? state->value : 0;
      if (state->known && reading.window_ms > 0 &&
          time_unix_ms - state->changed_unix_ms > reading.window_ms) {
        before = 0;  // every XID counted before has left the window
      }
      if (v > before) edge = make_edge(v - before, false);
      if (edge.has_value() && state->known && v == state->value) {
        // Same value as stored but new XIDs: store the time so the window restarts here.
        state->changed_unix_ms = time_unix_ms;
        *changed = true;
      }
      break;
    }
    case FaultSignalKind::kCounter:
      if (state->known && v > state->value) {
        edge = make_edge(v - state->value, false);
      } else if (state->known && v < state->value && v > 0) {
        edge = make_edge(v, true);
      }
      break;
    case FaultSignalKind::kFlag:
      if (v != 0 && (!state->known || state->value == 0)) edge = make_edge(1, false);
      break;
  }
  if (!state->known || v != state->value) {
    state->known = true;
    state->value = v;
    state->changed_unix_ms = time_unix_ms;
    *changed = true;
  }
  return edge;
}

}  // namespace goodput::core
