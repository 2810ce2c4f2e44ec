#include "tools/goodputctl/format.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace goodput::ctl {
namespace {

// The eight block elements U+2581..U+2588, lowest first.
constexpr const char* kBlocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};

bool Missing(const std::optional<double>& v) { return !v.has_value() || std::isnan(*v); }

}  // namespace

int DisplayWidth(absl::string_view text) {
  int width = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == 0x1b) {  // ESC [ ... final byte in @..~
      ++i;
      if (i < text.size() && text[i] == '[') {
        while (i + 1 < text.size() && !(text[i + 1] >= '@' && text[i + 1] <= '~')) ++i;
        ++i;
      }
      continue;
    }
    if (c < 0x20 || c == 0x7f) continue;
    if ((c & 0xC0) == 0x80) continue;  // continuation byte of a multi-byte code point
    ++width;
  }
  return width;
}

std::string Sparkline(const std::vector<std::optional<double>>& values, double lo, double hi,
                      int width) {
  std::vector<std::optional<double>> columns;
  if (width > 0 && values.size() > static_cast<size_t>(width)) {
    columns.resize(static_cast<size_t>(width));
    for (size_t col = 0; col < columns.size(); ++col) {
      // Column `col` holds values [col*n/width, (col+1)*n/width): every value lands in
      // exactly one column and the columns differ in size by at most one.
      size_t begin = col * values.size() / columns.size();
      size_t end = (col + 1) * values.size() / columns.size();
      double sum = 0;
      int count = 0;
      for (size_t i = begin; i < end; ++i) {
        if (Missing(values[i])) continue;
        sum += *values[i];
        ++count;
      }
      if (count > 0) columns[col] = sum / count;
    }
  } else {
    columns = values;
  }
  std::string out;
  const double span = hi - lo;
  for (const std::optional<double>& v : columns) {
    if (Missing(v)) {
      out += ' ';
      continue;
    }
    double x = span > 0 ? (*v - lo) / span : 0.5;
    x = std::clamp(x, 0.0, 1.0);
    int level = static_cast<int>(std::lround(x * 7));
    out += kBlocks[level];
  }
  return out;
}

std::string Sparkline(const std::vector<double>& values, double lo, double hi, int width) {
  std::vector<std::optional<double>> with_gaps(values.begin(), values.end());
  return Sparkline(with_gaps, lo, hi, width);
}

std::string Printable(std::string text) {
  auto is_control = [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c < 0x20 || c == 0x7F;
  };
  if (std::none_of(text.begin(), text.end(), is_control)) return text;
  std::string escaped;
  for (char ch : text) {
    if (is_control(ch)) {
      absl::StrAppendFormat(&escaped, "\\x%02x", static_cast<unsigned char>(ch));
    } else {
      escaped.push_back(ch);
    }
  }
  return escaped;
}

void Table::AddRow(std::vector<std::string> cells) {
  for (std::string& cell : cells) cell = Printable(std::move(cell));
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<int> widths(columns_.size(), 0);
  for (size_t c = 0; c < columns_.size(); ++c) widths[c] = DisplayWidth(columns_[c].title);
  for (const auto& row : rows_) {
    for (size_t c = 0; c < columns_.size() && c < row.size(); ++c) {
      widths[c] = std::max(widths[c], DisplayWidth(row[c]));
    }
  }
  auto line = [&](auto cell_at) {
    std::string out;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const std::string& cell = cell_at(c);
      int pad = widths[c] - DisplayWidth(cell);
      if (c > 0) out += "  ";
      if (columns_[c].align == Align::kRight) out.append(static_cast<size_t>(pad), ' ');
      out += cell;
      if (columns_[c].align == Align::kLeft) out.append(static_cast<size_t>(pad), ' ');
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line([&](size_t c) -> const std::string& { return columns_[c].title; });
  static const std::string kEmpty;
  for (const auto& row : rows_) {
    out += line([&](size_t c) -> const std::string& { return c < row.size() ? row[c] : kEmpty; });
  }
  return out;
}

std::string Percent(std::optional<double> fraction, int decimals) {
  if (Missing(fraction)) return "-";
  return absl::StrFormat("%.*f%%", decimals, *fraction * 100);
}

std::string PercentagePoints(double pp, int decimals) {
  return absl::StrFormat("%+.*f pp", decimals, pp);
}

std::string Number(double value, int decimals) {
  std::string digits = absl::StrFormat("%.*f", decimals, std::fabs(value));
  size_t dot = digits.find('.');
  std::string integer = digits.substr(0, dot);
  std::string fraction = dot == std::string::npos ? "" : digits.substr(dot);
  std::string grouped;
  for (size_t i = 0; i < integer.size(); ++i) {
    if (i > 0 && (integer.size() - i) % 3 == 0) grouped += ',';
    grouped += integer[i];
  }
  bool negative = value < 0 && std::stod(digits) != 0;
  return absl::StrCat(negative ? "-" : "", grouped, fraction);
}

std::string FormatUtc(absl::Time time) {
  if (time == absl::UnixEpoch()) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", time, absl::UTCTimeZone());
}

std::string ShortDuration(absl::Duration d) {
  if (d < absl::ZeroDuration()) return "-" + ShortDuration(-d);
  int64_t s = absl::ToInt64Seconds(d);
  int64_t days = s / 86400, hours = (s % 86400) / 3600, minutes = (s % 3600) / 60;
  if (days > 0) return hours > 0 ? absl::StrCat(days, "d", hours, "h") : absl::StrCat(days, "d");
  if (hours > 0) {
    return minutes > 0 ? absl::StrCat(hours, "h", minutes, "m") : absl::StrCat(hours, "h");
  }
  if (minutes > 0) return absl::StrCat(minutes, "m");
  return absl::StrCat(s, "s");
}

std::string ProgressBar(double fraction, int width) {
  if (std::isnan(fraction)) fraction = 0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  int filled = static_cast<int>(fraction * width);
  return absl::StrFormat("[%s%s] %3.0f%%", std::string(static_cast<size_t>(filled), '#'),
                         std::string(static_cast<size_t>(width - filled), '.'), fraction * 100);
}

absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view flag, absl::string_view value) {
  std::string text = absl::AsciiStrToLower(absl::StripAsciiWhitespace(value));
  absl::Duration total = absl::ZeroDuration();
  bool ok = !text.empty();
  // absl::ParseDuration knows h, m, s but not days: take a leading "<n>d" ourselves.
  if (size_t d = text.find('d'); ok && d != std::string::npos) {
    int64_t days = 0;
    ok = absl::SimpleAtoi(text.substr(0, d), &days) && days >= 0;
    total += absl::Hours(24 * days);
    text = text.substr(d + 1);
  }
  if (ok && !text.empty()) {
    absl::Duration rest;
    ok = absl::ParseDuration(text, &rest);
    total += rest;
  }
  if (!ok || total <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": \"", value, "\" is not a positive duration such as 90s, 15m, 24h or 7d"));
  }
  return total;
}

absl::StatusOr<absl::Time> ParseTimeFlag(absl::string_view flag, absl::string_view value,
                                         absl::Time now) {
  if (value == "now") return now;
  absl::Time t;
  std::string error;
  std::string text(value);
  if (absl::ParseTime(absl::RFC3339_full, text, &t, &error)) return t;
  if (absl::ParseTime("%Y-%m-%d %H:%M:%S", text, absl::UTCTimeZone(), &t, &error)) return t;
  if (absl::ParseTime("%Y-%m-%d", text, absl::UTCTimeZone(), &t, &error)) return t;
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag, ": \"", value, "\" is not \"now\", an RFC 3339 time or YYYY-MM-DD HH:MM:SS"));
}

absl::StatusOr<std::pair<std::string, std::string>> ParseJobRef(absl::string_view text) {
  size_t slash = text.find('/');
  if (slash == absl::string_view::npos || slash == 0 || slash + 1 == text.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("job \"", text, "\" is not CLUSTER/JOB_ID (e.g. eos/4211873)"));
  }
  return std::make_pair(std::string(text.substr(0, slash)), std::string(text.substr(slash + 1)));
}

absl::StatusOr<std::vector<int>> ParseDims(absl::string_view flag, absl::string_view text,
                                           size_t min_parts, size_t max_parts) {
  std::vector<std::string> parts = absl::StrSplit(absl::AsciiStrToLower(text), 'x');
  std::vector<int> dims;
  bool ok = parts.size() >= min_parts && parts.size() <= max_parts;
  for (const std::string& p : parts) {
    int v = 0;
    if (!absl::SimpleAtoi(p, &v) || v <= 0) ok = false;
    dims.push_back(v);
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": \"", text, "\" is not ",
                                                   min_parts == max_parts ? "" : "up to ",
                                                   max_parts, " positive integers joined by x"));
  }
  return dims;
}

absl::StatusOr<GemmShape> ParseGemmShape(absl::string_view text) {
  std::vector<std::string> parts = absl::StrSplit(absl::AsciiStrToLower(text), 'x');
  GemmShape shape;
  int64_t* fields[] = {&shape.m, &shape.n, &shape.k, &shape.count};
  bool ok = parts.size() == 3 || parts.size() == 4;
  for (size_t i = 0; ok && i < parts.size(); ++i) {
    ok = absl::SimpleAtoi(parts[i], fields[i]) && *fields[i] > 0;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shape: \"", text, "\" is not MxNxK or MxNxKxCOUNT of positive integers"));
  }
  return shape;
}

}  // namespace goodput::ctl
