#include "services/ingest/exposition.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace goodput::ingest {
namespace {

bool IsNameStart(char c) { return absl::ascii_isalpha(c) || c == '_' || c == ':'; }
bool IsNameChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == ':'; }
bool IsLabelStart(char c) { return absl::ascii_isalpha(c) || c == '_'; }
// Dots are accepted in label names for forwarders that keep Kubernetes label keys as they
// are ("osmo.workflow_id"); Prometheus itself would have sanitized them to underscores.
bool IsLabelChar(char c) { return absl::ascii_isalnum(c) || c == '_' || c == '.'; }

absl::Status Malformed(size_t pos, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(what, " at column ", pos + 1));
}

bool ParseValue(absl::string_view text, double* out) {
  if (text == "NaN") {
    *out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (text == "+Inf" || text == "Inf") {
    *out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (text == "-Inf") {
    *out = -std::numeric_limits<double>::infinity();
    return true;
  }
  // Go's ParseFloat (what Prometheus uses) accepts decimal and exponent forms; so does this.
  for (char c : text) {
    if (!(absl::ascii_isdigit(c) || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E')) {
      return false;
    }
  }
  return absl::SimpleAtod(text, out);
}

}  // namespace

absl::StatusOr<PromLine> ParsePromLine(absl::string_view line, size_t max_labels) {
  PromLine out;
  // Label names seen, as views into `line` (names are never escaped): a repeated name is
  // found in constant time, so a line with very many labels costs time linear in its length.
  absl::flat_hash_set<absl::string_view> seen;
  size_t pos = 0;
  const size_t n = line.size();
  auto skip_spaces = [&] {
    while (pos < n && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
  };
  skip_spaces();
  if (pos >= n || !IsNameStart(line[pos])) return Malformed(pos, "expected a metric name");
  const size_t name_start = pos;
  while (pos < n && IsNameChar(line[pos])) ++pos;
  out.name = std::string(line.substr(name_start, pos - name_start));
  size_t before_spaces = pos;
  skip_spaces();
  if (pos < n && line[pos] == '{') {
    ++pos;
    while (true) {
      skip_spaces();
      if (pos >= n) return Malformed(pos, "unterminated label set (missing '}')");
      if (line[pos] == '}') {
        ++pos;
        break;
      }
      if (!IsLabelStart(line[pos])) return Malformed(pos, "expected a label name");
      if (out.labels.size() == max_labels) {
        return absl::ResourceExhaustedError(
            absl::StrCat(out.name, " has more than ", max_labels, " labels"));
      }
      const size_t label_start = pos;
      while (pos < n && IsLabelChar(line[pos])) ++pos;
      const absl::string_view label_name = line.substr(label_start, pos - label_start);
      std::string label(label_name);
      skip_spaces();
      if (pos >= n || line[pos] != '=') {
        return Malformed(pos, absl::StrCat("expected '=' after label ", label));
      }
      ++pos;
      skip_spaces();
      if (pos >= n || line[pos] != '"') {
        return Malformed(pos, absl::StrCat("expected '\"' to open the value of label ", label));
      }
      ++pos;
      std::string value;
      bool closed = false;
      while (pos < n) {
        const char c = line[pos];
        if (c == '"') {
          closed = true;
          ++pos;
          break;
        }
        if (c == '\\') {
          if (pos + 1 >= n) break;
          const char e = line[pos + 1];
          if (e == '\\') {
            value.push_back('\\');
          } else if (e == '"') {
            value.push_back('"');
          } else if (e == 'n') {
            value.push_back('\n');
          } else {
            return Malformed(pos, absl::StrCat("invalid escape '\\",
                                               api::Sanitize(std::string(1, e)),
                                               "' in the value of label ", label));
          }
          pos += 2;
          continue;
        }
        value.push_back(c);
        ++pos;
      }
      if (!closed) {
        return Malformed(pos, absl::StrCat("unterminated value of label ", label));
      }
      if (!api::IsValidUtf8(value)) {
        return Malformed(pos, absl::StrCat("value of label ", label, " is not valid UTF-8"));
      }
      if (!seen.insert(label_name).second) {
        return Malformed(label_start, absl::StrCat("label ", label, " appears twice"));
      }
      out.labels.emplace_back(std::move(label), std::move(value));
      skip_spaces();
      if (pos < n && line[pos] == ',') {
        ++pos;
        continue;
      }
      if (pos < n && line[pos] == '}') continue;
      return Malformed(pos, "expected ',' or '}' after a label value");
    }
    before_spaces = pos;
    skip_spaces();
  }
  if (pos == before_spaces) return Malformed(pos, "expected a space before the value");
  const size_t value_start = pos;
  while (pos < n && line[pos] != ' ' && line[pos] != '\t') ++pos;
  const absl::string_view value_text = line.substr(value_start, pos - value_start);
  if (value_text.empty()) return Malformed(value_start, "missing sample value");
  if (!ParseValue(value_text, &out.value)) {
    return Malformed(value_start,
                     absl::StrCat("sample value \"", api::Sanitize(value_text), "\" is not a number"));
  }
  skip_spaces();
  if (pos < n) {
    const size_t ts_start = pos;
    while (pos < n && line[pos] != ' ' && line[pos] != '\t') ++pos;
    const absl::string_view ts_text = line.substr(ts_start, pos - ts_start);
    int64_t ts = 0;
    if (!absl::SimpleAtoi(ts_text, &ts)) {
      return Malformed(
          ts_start, absl::StrCat("timestamp \"", api::Sanitize(ts_text),
                                 "\" is not an integer of milliseconds"));
    }
    out.timestamp_ms = ts;
    skip_spaces();
    if (pos < n) return Malformed(pos, "unexpected text after the timestamp");
  }
  return out;
}

std::optional<DcgmMapping> MapDcgmMetric(absl::string_view name) {
  static const auto* const kMap = new absl::flat_hash_map<std::string, DcgmMapping>{
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", {SampleField::kTensorActive}},
      {"DCGM_FI_DEV_SM_CLOCK", {SampleField::kSmClockMhz}},
      {"DCGM_FI_PROF_SM_ACTIVE", {SampleField::kSmActive}},
      {"DCGM_FI_PROF_SM_OCCUPANCY", {SampleField::kSmOccupancy}},
      {"DCGM_FI_PROF_DRAM_ACTIVE", {SampleField::kDramActive}},
      {"DCGM_FI_PROF_PIPE_FP16_ACTIVE", {SampleField::kPipeFp16Active}},
      {"DCGM_FI_PROF_PIPE_FP32_ACTIVE", {SampleField::kPipeFp32Active}},
      {"DCGM_FI_PROF_PIPE_FP64_ACTIVE", {SampleField::kPipeFp64Active}},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", {SampleField::kGrEngineActive}},
      {"DCGM_FI_DEV_GPU_UTIL", {SampleField::kGpuUtil, 0.01}},
      {"DCGM_FI_DEV_FB_USED", {SampleField::kFbUsedMib}},
      {"DCGM_FI_DEV_FB_FREE", {SampleField::kFbFreeMib}},
      {"DCGM_FI_DEV_POWER_USAGE", {SampleField::kPowerW}},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", {SampleField::kTotalEnergyMj}},
      {"DCGM_FI_DEV_GPU_TEMP", {SampleField::kGpuTempC}},
      {"DCGM_FI_PROF_NVLINK_TX_BYTES", {SampleField::kNvlinkTxBytesPerS}},
      {"DCGM_FI_PROF_NVLINK_RX_BYTES", {SampleField::kNvlinkRxBytesPerS}},
      {"DCGM_FI_PROF_PCIE_TX_BYTES", {SampleField::kPcieTxBytesPerS}},
      {"DCGM_FI_PROF_PCIE_RX_BYTES", {SampleField::kPcieRxBytesPerS}},
      {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", {SampleField::kClockThrottleReasons}},
      {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", {SampleField::kClockThrottleReasons}},
  };
  auto it = kMap->find(name);
  if (it == kMap->end()) return std::nullopt;
  return it->second;
}

std::string HostFromEndpoint(absl::string_view endpoint) {
  absl::string_view rest = endpoint;
  if (auto scheme = rest.find("://"); scheme != absl::string_view::npos) {
    rest.remove_prefix(scheme + 3);
  }
  if (auto at = rest.find('@'); at != absl::string_view::npos && at < rest.find('/')) {
    rest.remove_prefix(at + 1);
  }
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    return close == absl::string_view::npos ? "" : std::string(rest.substr(1, close - 1));
  }
  const size_t end = rest.find_first_of(":/?#");
  return std::string(rest.substr(0, end));
}

namespace {

// A sample being assembled from lines.
struct Pending {
  Sample sample;
  int64_t first_line = 0;
  int64_t first_index = 0;
  int64_t line_count = 0;
  std::vector<int64_t> field_line;  // line that set each field (0 = unset)
  absl::flat_hash_map<std::string, int64_t> fault_line;  // FaultStateKey -> line
};

// DCGM's "no value" sentinels for the integer fault fields (INT64 and INT32 blanks, and the
// FP64 blank of a field read as a double): no error counter or XID reaches them.
bool IsDcgmFaultBlank(double raw) {
  constexpr double kFp64Blank = 140737488355328.0;
  constexpr double kInt64BlankLow = 9223372036854775808.0 - 2048.0;
  constexpr double kInt32Blank = 2147483632.0;
  constexpr double kInt32Max = 2147483647.0;
  return (raw >= kFp64Blank && raw < kFp64Blank + 16) || raw >= kInt64BlankLow ||
         (raw >= kInt32Blank && raw <= kInt32Max);
}

// Labels of fault lines that describe the value rather than the GPU or the workload: the XID
// gauge's `err_code`/`err_msg` (dcgm-exporter 3.3.6 and later) and the XID window count's
// `xid`/`window_size_in_ms`. They are taken off so they do not become sample labels.
absl::StatusOr<core::FaultReading> ReadFaultLine(core::FaultSignal signal, double value,
                                                 std::map<std::string, std::string>& labels) {
  core::FaultReading reading{.signal = signal, .value = value};
  std::optional<std::string> xid_text;
  std::optional<std::string> window_text;
  if (auto it = labels.find("xid"); it != labels.end() && signal == core::FaultSignal::kXidCount) {
    xid_text = it->second;
    labels.erase(it);
  }
  if (auto it = labels.find("window_size_in_ms"); it != labels.end()) {
    window_text = it->second;
    labels.erase(it);
  }
  if (signal == core::FaultSignal::kXid) {
    labels.erase("err_code");
    labels.erase("err_msg");
  }
  if (!std::isfinite(value) || value < 0) {
    return absl::OutOfRangeError("is not a fault value (a finite number, 0 or more)");
  }
  if (signal == core::FaultSignal::kXid && value != std::floor(value)) {
    return absl::OutOfRangeError("is not an XID code (an integer)");
  }
  if (signal == core::FaultSignal::kXidCount) {
    if (!xid_text.has_value()) {
      return absl::NotFoundError("has no xid label (the XID code it counts)");
    }
    if (!absl::SimpleAtoi(*xid_text, &reading.xid) || reading.xid <= 0) {
      return absl::OutOfRangeError(
          absl::StrCat("has xid=\"", api::Sanitize(*xid_text), "\", not an XID code"));
    }
    if (window_text.has_value() &&
        (!absl::SimpleAtoi(*window_text, &reading.window_ms) || reading.window_ms < 0)) {
      return absl::OutOfRangeError(absl::StrCat("has window_size_in_ms=\"",
                                                api::Sanitize(*window_text),
                                                "\", not a number of milliseconds"));
    }
  }
  return reading;
}

Refusal LineRefusal(const ExpositionOptions& options, int64_t line_number, int64_t index,
                    std::string field, absl::string_view value, RefusalCode code,
                    absl::string_view reason) {
  Refusal r;
  r.batch_id = options.batch_id;
  r.index = index;
  r.line_number = line_number;
  r.value = TruncateForRefusal(value);
  r.code = code;
  r.message = absl::StrCat("line ", line_number, " of batch ", options.batch_id, ": ", field,
                           value.empty() ? "" : "=", r.value, " ", reason);
  r.field = std::move(field);
  return r;
}

}  // namespace

ExpositionResult ParseDcgmExposition(absl::string_view body, const ExpositionOptions& options) {
  ExpositionResult result;
  std::vector<Pending> pending;
  absl::flat_hash_map<std::pair<std::string, int64_t>, size_t> by_gpu_time;
  absl::flat_hash_map<std::string, const core::GpuSpec*> specs;

  auto spec_for = [&](const std::string& model) -> const core::GpuSpec* {
    if (model.empty() || options.validation.catalog == nullptr) return nullptr;
    auto [it, inserted] = specs.try_emplace(model, nullptr);
    if (inserted) {
      if (auto found = options.validation.catalog->Find(model); found.ok()) it->second = *found;
    }
    return it->second;
  };

  int64_t line_number = 0;
  int64_t sample_index = -1;
  for (absl::string_view raw : absl::StrSplit(body, '\n')) {
    ++line_number;
    absl::string_view line = absl::StripSuffix(raw, "\r");
    line = absl::StripLeadingAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    ++result.metric_line_count;
    ++sample_index;
    if (!api::IsValidUtf8(line)) {
      ++result.refused_line_count;
      result.refusals.push_back(LineRefusal(options, line_number, sample_index, "line", "",
                                            RefusalCode::kMalformed, "is not valid UTF-8"));
      continue;
    }
    absl::StatusOr<PromLine> parsed = ParsePromLine(line, options.max_labels_per_series);
    if (parsed.status().code() == absl::StatusCode::kResourceExhausted) {
      ++result.refused_line_count;
      const absl::string_view name = line.substr(0, line.find_first_of("{ \t"));
      result.refusals.push_back(LineRefusal(
          options, line_number, sample_index, api::Sanitize(name), "", RefusalCode::kOutOfRange,
          absl::StrCat("has more than ", options.max_labels_per_series,
                       " labels, the most a series may have (ingest.max_labels_per_series)")));
      continue;
    }
    if (!parsed.ok()) {
      ++result.refused_line_count;
      result.refusals.push_back(
          LineRefusal(options, line_number, sample_index, "line", line, RefusalCode::kMalformed,
                      absl::StrCat("is malformed: ", parsed.status().message())));
      continue;
    }
    std::optional<DcgmMapping> mapping = MapDcgmMetric(parsed->name);
    const std::optional<core::FaultSignal> fault =
        mapping.has_value() ? std::nullopt : core::FaultSignalForMetric(parsed->name);
    if (!mapping.has_value() && !fault.has_value()) {
      ++result.ignored_line_count;
      continue;
    }

    // Identity and the other labels.
    Sample proto_sample;
    std::optional<std::string> index_text;
    std::optional<std::string> mig_id_text;
    std::string mig_profile;
    std::string hostname_lower;
    for (auto& [name, value] : parsed->labels) {
      if (name == "Hostname") {
        proto_sample.gpu.host = value;
      } else if (name == "hostname") {
        hostname_lower = value;
      } else if (name == "gpu") {
        index_text = value;
      } else if (name == "UUID") {
        proto_sample.gpu.uuid = value;
      } else if (name == "modelName") {
        proto_sample.gpu_model = value;
      } else if (name == "GPU_I_ID") {
        mig_id_text = value;
      } else if (name == "GPU_I_PROFILE") {
        mig_profile = value;
      } else {
        proto_sample.labels[name] = value;
      }
    }
    if (proto_sample.gpu.host.empty()) proto_sample.gpu.host = hostname_lower;
    if (proto_sample.gpu.host.empty()) proto_sample.gpu.host = options.default_host;
    const std::string value_text = absl::StrFormat("%g", parsed->value);
    if (index_text.has_value()) {
      int index = 0;
      if (!absl::SimpleAtoi(*index_text, &index) || index < 0) {
        ++result.refused_line_count;
        result.refusals.push_back(LineRefusal(options, line_number, sample_index, "gpu",
                                              *index_text, RefusalCode::kMalformed,
                                              "is not a GPU index (a non-negative integer)"));
        continue;
      }
      proto_sample.gpu.gpu_index = index;
    }
    if (mig_id_text.has_value() && !mig_id_text->empty()) {
      int mig_id = 0;
      if (!absl::SimpleAtoi(*mig_id_text, &mig_id) || mig_id < 0) {
        ++result.refused_line_count;
        result.refusals.push_back(LineRefusal(options, line_number, sample_index, "GPU_I_ID",
                                              *mig_id_text, RefusalCode::kMalformed,
                                              "is not a MIG instance id"));
        continue;
      }
      MigSlice mig;
      mig.gpu_instance_id = mig_id;
      mig.profile = mig_profile;
      proto_sample.gpu.mig = std::move(mig);
    }
    if (!proto_sample.gpu.gpu_index.has_value() && proto_sample.gpu.uuid.empty()) {
      ++result.refused_line_count;
      result.refusals.push_back(LineRefusal(options, line_number, sample_index, parsed->name,
                                            value_text, RefusalCode::kMissingField,
                                            "has no GPU identity (neither a gpu nor a UUID "
                                            "label)"));
      continue;
    }

    std::optional<core::FaultReading> reading;
    double value = 0;  // the field's value, scaled
    if (fault.has_value()) {
      if (IsDcgmFaultBlank(parsed->value)) {
        ++result.blank_value_count;
        continue;
      }
      auto fault_reading = ReadFaultLine(*fault, parsed->value, proto_sample.labels);
      if (!fault_reading.ok()) {
        ++result.refused_line_count;
        result.refusals.push_back(
            LineRefusal(options, line_number, sample_index, parsed->name, value_text,
                        fault_reading.status().code() == absl::StatusCode::kNotFound
                            ? RefusalCode::kMissingField
                            : RefusalCode::kOutOfRange,
                        fault_reading.status().message()));
        continue;
      }
      reading = *fault_reading;
    } else {
      if (IsDcgmBlank(mapping->field, parsed->value)) {
        ++result.blank_value_count;
        continue;
      }
      value = parsed->value * mapping->scale;
      const core::GpuSpec* spec = spec_for(proto_sample.gpu_model);
      if (auto problem = CheckFieldValue(mapping->field, value, spec, options.validation)) {
        ++result.refused_line_count;
        result.refusals.push_back(LineRefusal(options, line_number, sample_index, parsed->name,
                                              value_text, problem->code, problem->reason));
        continue;
      }
    }

    const int64_t time_ms = parsed->timestamp_ms.value_or(options.scrape_time_unix_ms);
    // One pod's series of a time-sliced GPU is not a duplicate of another pod's.
    auto key = std::make_pair(SeriesKey(proto_sample), time_ms);
    auto [it, inserted] = by_gpu_time.try_emplace(std::move(key), pending.size());
    if (inserted) {
      Pending p;
      p.sample = std::move(proto_sample);
      p.sample.time_unix_ms = time_ms;
      p.first_line = line_number;
      p.first_index = sample_index;
      p.field_line.assign(kSampleFieldCount, 0);
      pending.push_back(std::move(p));
    } else {
      Pending& p = pending[it->second];
      if (p.sample.gpu_model.empty()) p.sample.gpu_model = proto_sample.gpu_model;
      for (auto& [name, label_value] : proto_sample.labels) {
        p.sample.labels.try_emplace(name, label_value);
      }
    }
    Pending& p = pending[it->second];
    if (reading.has_value()) {
      auto [seen, first] = p.fault_line.try_emplace(core::FaultStateKey(*reading), line_number);
      if (!first) {
        ++result.refused_line_count;
        result.refusals.push_back(LineRefusal(
            options, line_number, sample_index, parsed->name, value_text, RefusalCode::kDuplicate,
            absl::StrCat("repeats line ", seen->second, " for the same GPU and timestamp")));
        continue;
      }
      p.sample.faults.push_back(*reading);
      ++p.line_count;
      continue;
    }
    const int field_index = static_cast<int>(mapping->field);
    if (p.field_line[field_index] != 0) {
      ++result.refused_line_count;
      result.refusals.push_back(LineRefusal(options, line_number, sample_index, parsed->name,
                                            value_text, RefusalCode::kDuplicate,
                                            absl::StrCat("repeats line ", p.field_line[field_index],
                                                         " for the same GPU and timestamp")));
      continue;
    }
    p.field_line[field_index] = line_number;
    p.sample.set(mapping->field, value);
    ++p.line_count;
  }

  for (Pending& p : pending) {
    if (p.line_count == 0) continue;
    for (const auto& [name, value] : options.extra_labels) p.sample.labels.try_emplace(name, value);
    const ItemLocation where{options.batch_id, p.first_index, p.first_line};
    if (auto refusal = ValidateSampleEnvelope(p.sample, where, options.validation)) {
      result.refused_line_count += p.line_count;
      if (p.line_count > 1) {
        absl::StrAppend(&refusal->message, " (", p.line_count,
                        " lines of this GPU and timestamp refused with it)");
      }
      result.refusals.push_back(*std::move(refusal));
      continue;
    }
    result.samples.push_back(ExpositionSample{std::move(p.sample), p.first_line, p.line_count});
  }
  return result;
}

}  // namespace goodput::ingest
