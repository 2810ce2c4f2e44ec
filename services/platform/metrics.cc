#include "services/platform/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace goodput::platform {
namespace {

[[noreturn]] void Die(absl::string_view message) {
  std::fprintf(stderr, "metrics registry misuse: %.*s\n", static_cast<int>(message.size()),
               message.data());
  std::abort();
}

bool IsValidName(absl::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (allow_colon && c == ':') || (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// HELP text escapes backslash and newline; label values also escape the double quote.
std::string Escape(absl::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

void AtomicAdd(std::atomic<double>& target, double delta) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
  }
}

absl::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

template <class Map>
std::vector<typename Map::const_iterator> SortedChildren(const Map& children) {
  std::vector<typename Map::const_iterator> sorted;
  sorted.reserve(children.size());
  for (auto it = children.begin(); it != children.end(); ++it) sorted.push_back(it);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a->first < b->first; });
  return sorted;
}

}  // namespace

std::string FormatSampleValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

void Counter::Increment(double amount) {
  if (!(amount > 0)) return;
  AtomicAdd(value_, amount);
}

void Gauge::Add(double delta) { AtomicAdd(value_, delta); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      counts_(new std::atomic<uint64_t>[upper_bounds_.size() + 1]) {
  if (!std::is_sorted(upper_bounds_.begin(), upper_bounds_.end())) {
    Die("histogram bucket bounds must be sorted ascending");
  }
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) counts_[i].store(0);
}

void Histogram::Observe(double value) {
  // `le` buckets: the first bound >= value; NaN lands in +Inf.
  size_t index = std::isnan(value)
                     ? upper_bounds_.size()
                     : static_cast<size_t>(
                           std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) -
                           upper_bounds_.begin());
  counts_[index].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(sum_, value);
}

std::vector<uint64_t> Histogram::BucketCounts() const {
  std::vector<uint64_t> counts(upper_bounds_.size() + 1);
  for (size_t i = 0; i < counts.size(); ++i) counts[i] = counts_[i].load(std::memory_order_relaxed);
  return counts;
}

uint64_t Histogram::Count() const {
  uint64_t total = 0;
  for (uint64_t c : BucketCounts()) total += c;
  return total;
}

MetricFamilyBase::MetricFamilyBase(std::string name, std::string help, MetricType type,
                                   std::vector<std::string> label_names)
    : name_(std::move(name)),
      help_(std::move(help)),
      type_(type),
      label_names_(std::move(label_names)) {
  if (!IsValidName(name_, /*allow_colon=*/true)) Die(absl::StrCat("invalid metric name ", name_));
  for (const std::string& label : label_names_) {
    if (!IsValidName(label, /*allow_colon=*/false) || label.rfind("__", 0) == 0 ||
        (type_ == MetricType::kHistogram && label == "le")) {
      Die(absl::StrCat("metric ", name_, ": invalid label name ", label));
    }
  }
}

void MetricFamilyBase::CheckArity(size_t value_count) const {
  if (value_count != label_names_.size()) {
    Die(absl::StrCat("metric ", name_, " takes ", label_names_.size(), " label values (",
                     absl::StrJoin(label_names_, ", "), "), got ", value_count));
  }
}

std::string MetricFamilyBase::LabelText(const LabelValues& values, absl::string_view extra_name,
                                        absl::string_view extra_value) const {
  if (values.empty() && extra_name.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    absl::StrAppend(&out, label_names_[i], "=\"", Escape(values[i], true), "\"");
  }
  if (!extra_name.empty()) {
    if (!values.empty()) out += ",";
    absl::StrAppend(&out, extra_name, "=\"", extra_value, "\"");
  }
  out += "}";
  return out;
}

void MetricFamilyBase::Render(std::string* out) const {
  absl::StrAppend(out, "# HELP ", name_, " ", Escape(help_, false), "\n");
  absl::StrAppend(out, "# TYPE ", name_, " ", TypeName(type_), "\n");
  RenderChildren(out);
}

template <>
void MetricFamily<Counter>::RenderChildren(std::string* out) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& it : SortedChildren(children_)) {
    absl::StrAppend(out, name(), LabelText(it->first), " ", FormatSampleValue(it->second->Value()),
                    "\n");
  }
}

template <>
void MetricFamily<Gauge>::RenderChildren(std::string* out) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& it : SortedChildren(children_)) {
    absl::StrAppend(out, name(), LabelText(it->first), " ", FormatSampleValue(it->second->Value()),
                    "\n");
  }
}

template <>
void MetricFamily<Histogram>::RenderChildren(std::string* out) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& it : SortedChildren(children_)) {
    const Histogram& histogram = *it->second;
    std::vector<uint64_t> counts = histogram.BucketCounts();
    uint64_t cumulative = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
      cumulative += counts[i];
      std::string le = i < histogram.upper_bounds().size()
                           ? FormatSampleValue(histogram.upper_bounds()[i])
                           : std::string("+Inf");
      absl::StrAppend(out, name(), "_bucket", LabelText(it->first, "le", le), " ", cumulative,
                      "\n");
    }
    absl::StrAppend(out, name(), "_sum", LabelText(it->first), " ",
                    FormatSampleValue(histogram.Sum()), "\n");
    absl::StrAppend(out, name(), "_count", LabelText(it->first), " ", cumulative, "\n");
  }
}

MetricFamilyBase* MetricsRegistry::Find(const std::string& name, MetricType type,
                                        const std::vector<std::string>& label_names) {
  for (const auto& family : families_) {
    if (family->name() != name) continue;
    if (family->type() != type || family->label_names() != label_names) {
      Die(absl::StrCat("metric ", name, " is already registered with another type or labels"));
    }
    return family.get();
  }
  return nullptr;
}

CounterFamily& MetricsRegistry::AddCounter(std::string name, std::string help,
                                           std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  if (auto* existing = Find(name, MetricType::kCounter, label_names)) {
    return static_cast<CounterFamily&>(*existing);
  }
  auto family = std::make_unique<CounterFamily>(std::move(name), std::move(help),
                                                MetricType::kCounter, std::move(label_names),
                                                [] { return std::make_unique<Counter>(); });
  CounterFamily& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

GaugeFamily& MetricsRegistry::AddGauge(std::string name, std::string help,
                                       std::vector<std::string> label_names) {
  absl::MutexLock lock(&mu_);
  if (auto* existing = Find(name, MetricType::kGauge, label_names)) {
    return static_cast<GaugeFamily&>(*existing);
  }
  auto family = std::make_unique<GaugeFamily>(std::move(name), std::move(help), MetricType::kGauge,
                                              std::move(label_names),
                                              [] { return std::make_unique<Gauge>(); });
  GaugeFamily& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

HistogramFamily& MetricsRegistry::AddHistogram(std::string name, std::string help,
                                               std::vector<std::string> label_names,
                                               std::vector<double> upper_bounds) {
  absl::MutexLock lock(&mu_);
  if (auto* existing = Find(name, MetricType::kHistogram, label_names)) {
    return static_cast<HistogramFamily&>(*existing);
  }
  if (!std::is_sorted(upper_bounds.begin(), upper_bounds.end())) {
    Die(absl::StrCat("histogram ", name, ": bucket bounds must be sorted ascending"));
  }
  auto family = std::make_unique<HistogramFamily>(
      std::move(name), std::move(help), MetricType::kHistogram, std::move(label_names),
      [bounds = std::move(upper_bounds)] { return std::make_unique<Histogram>(bounds); });
  HistogramFamily& ref = *family;
  families_.push_back(std::move(family));
  return ref;
}

std::string MetricsRegistry::Exposition() const {
  std::string out;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& family : families_) family->Render(&out);
  return out;
}

std::vector<double> MetricsRegistry::LatencyBuckets_s() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

}  // namespace goodput::platform
