// Terminal formatting for goodputctl and goodput-demo: aligned tables, sparklines, percentages,
// times and a progress bar. Pure functions of their inputs (no I/O, no clock, no protobuf), so
// every output a user reads is unit-tested.
//
//   Table t({{"JOB"}, {"OFU", Align::kRight}});
//   t.AddRow({"eos/4211", Percent(0.423)});
//   std::cout << t.Render();
//   std::cout << Sparkline({0.1, 0.4, std::nullopt, 0.8}, 0, 1) << "\n";   // "▁▄ █"
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace goodput::ctl {

// Columns printed by a terminal for `text` (UTF-8): one per code point; control bytes and
// ANSI colour sequences count zero.
int DisplayWidth(absl::string_view text);

// A sparkline of `values` with the eight block characters ▁▂▃▄▅▆▇█, `lo` mapped to the
// lowest block and `hi` to the highest (values outside are clamped). A missing value
// (nullopt, or NaN) is a space. With `width` > 0 and more values than columns, consecutive
// values are merged by their mean into exactly `width` columns (a column whose values are
// all missing stays a gap); fewer values are never stretched. Empty input gives "".
std::string Sparkline(const std::vector<std::optional<double>>& values, double lo, double hi,
                      int width = 0);

// Same, for a series without gaps.
std::string Sparkline(const std::vector<double>& values, double lo, double hi, int width = 0);

enum class Align { kLeft, kRight };

struct Column {
  std::string title;
  Align align = Align::kLeft;
};

// A table for the terminal: one header line, then one line per row; columns separated by two
// spaces and as wide as their widest cell (display width, so sparklines align). Trailing
// spaces are trimmed. Rows shorter than the header are padded with empty cells.
class Table {
 public:
  explicit Table(std::vector<Column> columns) : columns_(std::move(columns)) {}
  // Control characters in cells (a job name is whatever its owner typed) are written as
  // \xNN, so a cell can neither move the cursor nor recolour the terminal.
  void AddRow(std::vector<std::string> cells);
  size_t row_count() const { return rows_.size(); }
  // The header and rows, each line ending in '\n'.
  std::string Render() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

// `text` with control characters written as \xNN: what goodputctl prints of strings that
// came from users and exporters (job names, labels), so they cannot drive the terminal.
std::string Printable(std::string text);

// "42.3%" for 0.4234 (fraction in, percent out); "-" for nullopt or NaN.
std::string Percent(std::optional<double> fraction, int decimals = 1);
// "+3.2 pp" / "-12.0 pp" for a difference already in percentage points.
std::string PercentagePoints(double pp, int decimals = 1);
// "1,234.5" style number with a thousands separator and `decimals` digits.
std::string Number(double value, int decimals = 1);
// "2026-11-23 14:02:11" in UTC; "-" for the Unix epoch (an unset protobuf timestamp).
std::string FormatUtc(absl::Time time);
// "3h12m", "45s", "2d4h": a short human duration (rounded down to the unit shown).
std::string ShortDuration(absl::Duration d);

// "[#########.....................]  30%": a bar of `width` cells for `fraction` in [0, 1]
// (clamped).
std::string ProgressBar(double fraction, int width = 30);

// Parses "90s", "15m", "24h", "7d", "1h30m" (also anything absl::ParseDuration reads).
// INVALID_ARGUMENT naming `flag` and the value otherwise; durations must be positive.
absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view flag, absl::string_view value);

// Parses "now", RFC 3339 ("2026-11-23T14:00:00Z") or "2026-11-23 14:00:00" (UTC);
// INVALID_ARGUMENT naming `flag` and the value otherwise.
absl::StatusOr<absl::Time> ParseTimeFlag(absl::string_view flag, absl::string_view value,
                                         absl::Time now);

// Splits "cluster/job" at the first slash (job ids may hold slashes, e.g. Kubernetes
// "namespace/name"). INVALID_ARGUMENT naming the value when either part is empty.
absl::StatusOr<std::pair<std::string, std::string>> ParseJobRef(absl::string_view text);

// Parses "MxNxK" or "MxNxKxCOUNT" (positive integers) for GEMM shapes; INVALID_ARGUMENT
// naming the value otherwise.
struct GemmShape {
  int64_t m = 0, n = 0, k = 0, count = 1;
};
absl::StatusOr<GemmShape> ParseGemmShape(absl::string_view text);

// Parses "AxB" or "AxBxC" of positive integers (tile and cluster sizes).
absl::StatusOr<std::vector<int>> ParseDims(absl::string_view flag, absl::string_view text,
                                           size_t min_parts, size_t max_parts);

}  // namespace goodput::ctl
