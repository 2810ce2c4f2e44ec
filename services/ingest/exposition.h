// dcgm-exporter's Prometheus text exposition (format 0.0.4) turned into GPU samples.
//
// ParsePromLine reads one sample line: a metric name, optional labels (escaped values,
// optional spaces after commas, a trailing comma), a value (NaN and +/-Inf included) and an
// optional millisecond timestamp. ParseDcgmExposition reads a whole body: `# HELP`/`# TYPE`
// and other comments are skipped; DCGM_FI_* metrics goodput uses are mapped to sample fields
// (DCGM_FI_DEV_GPU_UTIL is divided by 100 into a fraction); lines of the same GPU (host +
// UUID or index + MIG instance) and timestamp are combined into one sample; labels that are
// not GPU identity (`hpc_job`, `pod`, `namespace`, label-type DCGM fields such as
// `DCGM_FI_DRIVER_VERSION`, ...) are kept as sample labels. Fault metrics (the XID gauge and
// window count, ECC, row-remap, NVLink and PCIe error fields: core::FaultSignalForMetric)
// become the sample's `faults` (their value labels `err_code`, `err_msg`, `xid`,
// `window_size_in_ms` are read, not kept). Other metrics are counted as ignored. A DCGM blank
// (IsDcgmBlank: the field could not be read) is a missing value: the line is counted in
// `blank_value_count` and the GPU's other fields are kept. A GPU model the catalog does not know is
// kept too (ofu reports its OFU as unavailable). A malformed line, a line with more than
// `max_labels_per_series` labels, or a value that fails validation, is refused with its line number
// and reason while the rest of the body is kept.
//
//   ExpositionResult r = ParseDcgmExposition(body, {.batch_id = "scrape-17",
//                                                  .default_host = "gpu-node-042",
//                                                  .scrape_time_unix_ms = now_ms,
//                                                  .validation = {.catalog = &catalog,
//                                                                 .now_unix_ms = now_ms}});
//
// Identity labels: `Hostname` (or `hostname`), `gpu` (index), `UUID`, `modelName`,
// `GPU_I_ID` and `GPU_I_PROFILE` (MIG).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/ingest/sample.h"
#include "services/ingest/validation.h"

namespace goodput::ingest {

// One sample line of the text format.
struct PromLine {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in line order, unescaped
  double value = 0;
  std::optional<int64_t> timestamp_ms;
};

// Labels a series may have (besides its metric name) unless configured otherwise
// (ingest.max_labels_per_series).
inline constexpr size_t kDefaultMaxLabelsPerSeries = 128;

// Parses one sample line (not blank, not a comment) in time linear in its length.
// INVALID_ARGUMENT with the reason and the column (1-based) where reading stopped;
// RESOURCE_EXHAUSTED when it has more than `max_labels` labels.
absl::StatusOr<PromLine> ParsePromLine(absl::string_view line,
                                       size_t max_labels = std::numeric_limits<size_t>::max());

// The sample field a DCGM metric maps to and the factor its value is multiplied by
// (0.01 for percentages); nullopt for metrics goodput does not use.
struct DcgmMapping {
  SampleField field;
  double scale = 1.0;
};
std::optional<DcgmMapping> MapDcgmMetric(absl::string_view metric_name);

struct ExpositionOptions {
  std::string batch_id;
  // Host for lines without a `Hostname`/`hostname` label (the scraped endpoint's host).
  std::string default_host;
  // Timestamp of lines without one.
  int64_t scrape_time_unix_ms = 0;
  // Added to every sample; labels in the body win.
  std::map<std::string, std::string> extra_labels;
  // A line with more labels is refused alone (ingest.max_labels_per_series).
  size_t max_labels_per_series = kDefaultMaxLabelsPerSeries;
  ValidationOptions validation;
};

// A sample built from one or more lines; `first_line` is 1-based.
struct ExpositionSample {
  Sample sample;
  int64_t first_line = 0;
  int64_t line_count = 0;
};

struct ExpositionResult {
  std::vector<ExpositionSample> samples;  // valid samples, in order of first appearance
  std::vector<Refusal> refusals;          // one per refused line or sample
  int64_t refused_line_count = 0;         // metric lines refused (alone or with their sample)
  int64_t ignored_line_count = 0;         // lines of metrics goodput does not use
  int64_t blank_value_count = 0;          // DCGM "no value" sentinels, kept as missing values
  int64_t metric_line_count = 0;          // all non-comment, non-blank lines
};

// Parses a whole body as described in the file comment. Never fails as a whole.
ExpositionResult ParseDcgmExposition(absl::string_view body, const ExpositionOptions& options);

// The host part of an endpoint URL ("http://gpu-node-042:9400/metrics" -> "gpu-node-042");
// empty when there is none.
std::string HostFromEndpoint(absl::string_view endpoint);

}  // namespace goodput::ingest
