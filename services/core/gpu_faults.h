// GPU fault signals and the edge detection that turns them into fault events.
//
// DCGM publishes a GPU's faults as values that persist: the XID gauge holds the LAST XID
// until the exporter restarts, ECC/NVLink/PCIe error fields are counters that only grow (until
// the driver reloads), row-remap fields and clock-event bits are flags that stay set. Read
// every scrape, each of them would be "a fault" hundreds of times. A fault event is the edge
// instead: a value that appears, a counter that grows, a flag that rises.
//
//   SignalState state;                       // kept durably per GPU and signal
//   std::optional<FaultEdge> edge = DetectFaultEdge(reading, time_ms, &state);
//   if (edge) { /* one event: edge->count occurrences, value edge->value */ }
//
// Rules per kind (FaultSignalKind):
// - kLastValue (DCGM_FI_DEV_XID_ERRORS): an event when the value is non-zero and differs from
//   the last value seen for the GPU. The same value again is the same fault, however long the
//   series was away (an exporter restart that reads DCGM's cached last XID again, a scrape
//   outage); a 0 in between re-arms it: 79, 0, 79 is two events (dcgm-exporter prints 0 after
//   its restart until a new XID comes). Two XIDs of one code in a row are indistinguishable on
//   this gauge (dcgm-exporter issue #190); DCGM_EXP_XID_ERRORS_COUNT counts them.
// - kWindowCount (DCGM_EXP_XID_ERRORS_COUNT, labels `xid` and `window_size_in_ms`): XIDs of one
//   code within the exporter's sliding window. An event of `count = new - old` when it grows;
//   a value that stays or falls is no event. When the last change is older than the window,
//   the earlier XIDs have left it, so the whole value is new.
// - kCounter (ECC, remapped rows, NVLink and PCIe error counters): an event of
//   `count = new - old` when it grows. A decrease is a counter reset (driver reload, reboot):
//   like Prometheus' rate(), the new value counts as the increase since the reset. The first
//   value ever seen is the baseline (errors from before goodput watched): no event.
// - kFlag (row remap failure/pending, clock-event bits): an event when it rises to non-zero,
//   including the first value seen; none while it stays set; 0 re-arms it.
// A reading older than the state's last change (a late sample) changes nothing.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace goodput::core {

enum class FaultSignal {
  kXid,                        // DCGM_FI_DEV_XID_ERRORS (230): last XID
  kXidCount,                   // DCGM_EXP_XID_ERRORS_COUNT: XIDs of one code in a window
  kEccSbeVolatile,             // DCGM_FI_DEV_ECC_SBE_VOL_TOTAL (310)
  kEccDbeVolatile,             // DCGM_FI_DEV_ECC_DBE_VOL_TOTAL (311)
  kEccSbeAggregate,            // DCGM_FI_DEV_ECC_SBE_AGG_TOTAL (312)
  kEccDbeAggregate,            // DCGM_FI_DEV_ECC_DBE_AGG_TOTAL (313)
  kRemappedRowsUncorrectable,  // DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS (393)
  kRemappedRowsCorrectable,    // DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS (394)
  kRowRemapFailure,            // DCGM_FI_DEV_ROW_REMAP_FAILURE (395)
  kRowRemapPending,            // DCGM_FI_DEV_ROW_REMAP_PENDING (396)
  kNvlinkCrcFlitErrors,        // DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL (409)
  kNvlinkCrcDataErrors,        // DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL (419)
  kNvlinkReplayErrors,         // DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL (429)
  kNvlinkRecoveryErrors,       // DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL (439)
  kPcieReplays,                // DCGM_FI_DEV_PCIE_REPLAY_COUNTER (202)
  kHwSlowdown,                 // clock event reason bit 0x8 (DCGM_FI_DEV_CLOCKS_EVENT_REASONS)
  kSwThermalSlowdown,          // bit 0x20
  kHwThermalSlowdown,          // bit 0x40
  kHwPowerBrakeSlowdown,       // bit 0x80
};
inline constexpr int kFaultSignalCount = 19;

enum class FaultSignalKind { kLastValue, kWindowCount, kCounter, kFlag };

// Stable snake_case name used in storage and the API: "xid", "xid_count", "ecc_dbe_volatile",
// "row_remap_failure", "nvlink_crc_flit_errors", "hw_slowdown", ...
std::string_view FaultSignalName(FaultSignal signal);
std::optional<FaultSignal> FaultSignalFromName(std::string_view name);
FaultSignalKind KindOf(FaultSignal signal);
// A short sentence for people: "double-bit ECC errors (volatile)".
std::string_view FaultSignalDescription(FaultSignal signal);

// The signal a dcgm-exporter metric carries; nullopt for other metrics. Accepts both names the
// XID window count was printed under (DCGM_EXP_XID_ERRORS_COUNT, and
// DCGM_FI_DEV_XID_ERRORS_ACTIVE in dcgm-exporter's pull request #239).
std::optional<FaultSignal> FaultSignalForMetric(std::string_view metric_name);

// The clock-event reason bits that are faults (hardware slowdown, thermal, power brake), with
// their signals. The SW power cap (0x4) and idle (0x1) bits are ordinary operation.
struct ClockEventBit {
  uint64_t mask;
  FaultSignal signal;
};
const std::vector<ClockEventBit>& FaultClockEventBits();

// One observed value of a signal on one GPU.
struct FaultReading {
  FaultSignal signal = FaultSignal::kXid;
  double value = 0;
  int64_t xid = 0;        // kXidCount: the XID code counted (label `xid`)
  int64_t window_ms = 0;  // kXidCount: the exporter's window (label `window_size_in_ms`)
};

// The key of a reading's state within its GPU: the signal name, plus ":<xid>" for window
// counts ("xid_count:79").
std::string FaultStateKey(const FaultReading& reading);

// What is kept per GPU and state key between readings: the value and when it last changed.
struct SignalState {
  bool known = false;  // false: no reading seen yet
  double value = 0;
  int64_t changed_unix_ms = 0;
};

// One fault event.
struct FaultEdge {
  double value = 0;                      // the reading's value (the XID code for kXid)
  std::optional<double> previous_value;  // the state's value before, if any
  double count = 1;                      // occurrences: the counter's increase, or 1
  bool counter_reset = false;            // a counter went down before this increase
};

// Applies `reading` taken at `time_unix_ms` to `state` (updated in place when the reading is
// not older than the state) and returns the event it makes, if any. Sets *changed when the
// state was modified (the caller persists it then).
std::optional<FaultEdge> DetectFaultEdge(const FaultReading& reading, int64_t time_unix_ms,
                                         SignalState* state, bool* changed);

}  // namespace goodput::core
