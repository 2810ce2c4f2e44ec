// A small Prometheus metrics registry: counters, gauges and histograms with labels, rendered in
// the text exposition format 0.0.4 (what `/metrics` serves, see http_server.h).
//
// Registration is done once at start-up; updates are lock-free atomics, so hot paths fetch the
// labelled child once and keep the reference (children live as long as the registry):
//
//   MetricsRegistry registry;
//   auto& stored = registry.AddCounter("goodput_ingest_samples_stored_total",
//                                      "Samples committed to PostgreSQL.", {"source"});
//   Counter& from_grpc = stored.WithLabels({"grpc"});
//   from_grpc.Increment(batch_size);
//   std::string text = registry.Exposition();
//
// Misuse that can only be a programming error (invalid metric or label name, the same name
// registered with a different type or labels, wrong number of label values) aborts with a
// message naming the metric.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace goodput::platform {

// A monotonically increasing value (events, bytes, seconds spent).
class Counter {
 public:
  // Adds `amount`; negative amounts are ignored (counters never go down).
  void Increment(double amount = 1.0);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down (queue depth, connections, last timestamp).
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Counts observations into fixed buckets (`le` upper bounds) plus their sum.
class Histogram {
 public:
  // `upper_bounds` must be sorted ascending; +Inf is implicit.
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);

  const std::vector<double>& upper_bounds() const { return upper_bounds_; }
  // Non-cumulative count per bucket, the last one being +Inf.
  std::vector<uint64_t> BucketCounts() const;
  double Sum() const { return sum_.load(std::memory_order_relaxed); }
  uint64_t Count() const;

 private:
  std::vector<double> upper_bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0.0};
};

enum class MetricType { kCounter, kGauge, kHistogram };

// All children of one metric name, one per distinct set of label values.
class MetricFamilyBase {
 public:
  MetricFamilyBase(std::string name, std::string help, MetricType type,
                   std::vector<std::string> label_names);
  virtual ~MetricFamilyBase() = default;
  const std::string& name() const { return name_; }
  MetricType type() const { return type_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  // Appends HELP, TYPE and one line per sample to `out`.
  void Render(std::string* out) const;

 protected:
  using LabelValues = std::vector<std::string>;
  virtual void RenderChildren(std::string* out) const = 0;
  void CheckArity(size_t value_count) const;
  // `{a="x",b="y"}` with an optional extra label (for histogram `le`).
  std::string LabelText(const LabelValues& values, absl::string_view extra_name = {},
                        absl::string_view extra_value = {}) const;

 private:
  std::string name_;
  std::string help_;
  MetricType type_;
  std::vector<std::string> label_names_;
};

template <class Metric>
class MetricFamily final : public MetricFamilyBase {
 public:
  MetricFamily(std::string name, std::string help, MetricType type,
               std::vector<std::string> label_names, std::function<std::unique_ptr<Metric>()> make)
      : MetricFamilyBase(std::move(name), std::move(help), type, std::move(label_names)),
        make_(std::move(make)) {}

  // The child for these label values (in label-name order), created on first use. The
  // reference stays valid for the registry's lifetime; keep it on hot paths.
  Metric& WithLabels(std::initializer_list<absl::string_view> values) {
    return WithLabels(LabelValues(values.begin(), values.end()));
  }
  Metric& WithLabels(const std::vector<std::string>& values) {
    CheckArity(values.size());
    {
      absl::ReaderMutexLock lock(&mu_);
      auto it = children_.find(values);
      if (it != children_.end()) return *it->second;
    }
    absl::MutexLock lock(&mu_);
    auto& slot = children_[values];
    if (slot == nullptr) slot = make_();
    return *slot;
  }

 private:
  void RenderChildren(std::string* out) const override;

  std::function<std::unique_ptr<Metric>()> make_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<LabelValues, std::unique_ptr<Metric>> children_ ABSL_GUARDED_BY(mu_);
};

template <>
void MetricFamily<Counter>::RenderChildren(std::string* out) const;
template <>
void MetricFamily<Gauge>::RenderChildren(std::string* out) const;
template <>
void MetricFamily<Histogram>::RenderChildren(std::string* out) const;

using CounterFamily = MetricFamily<Counter>;
using GaugeFamily = MetricFamily<Gauge>;
using HistogramFamily = MetricFamily<Histogram>;

// Owns metric families and renders them. Thread-safe.
class MetricsRegistry {
 public:
  // Registers (or returns the already registered, identical) family.
  CounterFamily& AddCounter(std::string name, std::string help,
                            std::vector<std::string> label_names = {});
  GaugeFamily& AddGauge(std::string name, std::string help,
                        std::vector<std::string> label_names = {});
  HistogramFamily& AddHistogram(std::string name, std::string help,
                                std::vector<std::string> label_names,
                                std::vector<double> upper_bounds = LatencyBuckets_s());

  // The whole registry in Prometheus text format 0.0.4, families in registration order.
  std::string Exposition() const;

  // Buckets for request latencies in seconds, 1 ms to 60 s.
  static std::vector<double> LatencyBuckets_s();

 private:
  MetricFamilyBase* Find(const std::string& name, MetricType type,
                         const std::vector<std::string>& label_names);

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<MetricFamilyBase>> families_ ABSL_GUARDED_BY(mu_);
};

// Content-Type of Exposition()'s output.
inline constexpr absl::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// Formats a sample value as the exposition format wants it (`+Inf`, `NaN`, shortest round-trip).
std::string FormatSampleValue(double value);

}  // namespace goodput::platform
