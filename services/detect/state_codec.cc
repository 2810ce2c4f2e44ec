#include "services/detect/state_codec.h"

#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/core/bounded_document.h"

namespace goodput::detect {

using nlohmann::json;

namespace {

// NaN (a window whose OFU is not to be trusted) has no JSON form: null stands for it.
json Num(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }
double NumOf(const json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}

template <class Container>
json SaveWindows(const Container& windows) {
  json out = json::array();
  for (const OfuWindow& w : windows) out.push_back(StateCodec::Save(w));
  return out;
}
template <class Container>
void LoadWindows(const json& j, Container& out) {
  out.clear();
  for (const json& w : j) out.push_back(StateCodec::LoadWindow(w));
}

}  // namespace

std::string StateCodec::EncodeCbor(const json& j) {
  std::vector<std::uint8_t> bytes = json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
}

absl::StatusOr<json> StateCodec::DecodeCbor(std::string_view bytes,
                                            const CheckpointLimits& limits) {
  absl::StatusOr<json> j = core::ParseBounded<json, nlohmann::detail::json_sax_dom_parser<json>>(
      bytes, limits, json::input_format_t::cbor, "CBOR");
  if (!j.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint: ", j.status().message()));
  }
  return j;
}

json StateCodec::Save(const OfuWindow& w) {
  return json::array(
      {w.start_s, w.end_s, Num(w.ofu), w.gpu_coverage, w.effective_peak_tflops, w.app_mfu});
}

OfuWindow StateCodec::LoadWindow(const json& j) {
  OfuWindow w;
  w.start_s = j.at(0).get<int64_t>();
  w.end_s = j.at(1).get<int64_t>();
  w.ofu = NumOf(j.at(2));
  w.gpu_coverage = j.at(3).get<double>();
  w.effective_peak_tflops = j.at(4).get<double>();
  w.app_mfu = j.at(5).get<double>();
  return w;
}

json StateCodec::Save(const JobSteadyState& s) {
  return {{"job", s.job_id},
          {"median", s.median_ofu},
          {"mad", s.mad_ofu},
          {"windows", s.steady_windows},
          {"peak", s.effective_peak_tflops}};
}

JobSteadyState StateCodec::LoadSteadyState(const json& j) {
  JobSteadyState s;
  s.job_id = j.at("job").get<std::string>();
  s.median_ofu = j.at("median").get<double>();
  s.mad_ofu = j.at("mad").get<double>();
  s.steady_windows = j.at("windows").get<int64_t>();
  s.effective_peak_tflops = j.at("peak").get<double>();
  return s;
}

// Sparse: [[bin, count], ...] for the bins that hold values.
json StateCodec::Save(const FractionHistogram& h) {
  json bins = json::array();
  for (int i = 0; i < FractionHistogram::kBins; ++i) {
    if (h.bins_[static_cast<size_t>(i)] != 0) {
      bins.push_back(json::array({i, h.bins_[static_cast<size_t>(i)]}));
    }
  }
  return {{"count", h.count_}, {"bins", std::move(bins)}};
}

void StateCodec::Load(const json& j, FractionHistogram& h) {
  h.bins_.fill(0);
  h.count_ = j.at("count").get<int64_t>();
  for (const json& b : j.at("bins")) {
    const int i = b.at(0).get<int>();
    if (i < 0 || i >= FractionHistogram::kBins) throw json::out_of_range::create(401, "bin", &b);
    h.bins_[static_cast<size_t>(i)] = b.at(1).get<int64_t>();
  }
}

json StateCodec::Save(const WarmupTracker& t) {
  return {{"recent", t.recent_}, {"first", t.first_start_s_}, {"done", t.done_}};
}

void StateCodec::Load(const json& j, WarmupTracker& t) {
  t.recent_ = j.at("recent").get<std::deque<double>>();
  t.first_start_s_ = j.at("first").get<int64_t>();
  t.done_ = j.at("done").get<bool>();
}

json StateCodec::Save(const InJobRegressionDetector& d) {
  return {{"warmup", Save(d.warmup_)},      {"reference", SaveWindows(d.reference_)},
          {"test", SaveWindows(d.test_)},   {"dips", d.recent_dips_},
          {"stall_open", d.stall_open_},    {"open_drop_before", d.open_drop_before_},
          {"drop_pending", d.drop_pending_}, {"run", SaveWindows(d.run_)},
          {"run_confirmed", d.run_confirmed_}, {"longest_phase", d.longest_phase_windows_},
          {"phases_marked", d.phases_marked_}};
}

void StateCodec::Load(const json& j, InJobRegressionDetector& d) {
  Load(j.at("warmup"), d.warmup_);
  LoadWindows(j.at("reference"), d.reference_);
  LoadWindows(j.at("test"), d.test_);
  d.recent_dips_ = j.at("dips").get<std::deque<bool>>();
  d.stall_open_ = j.at("stall_open").get<bool>();
  d.open_drop_before_ = j.at("open_drop_before").get<double>();
  d.drop_pending_ = j.at("drop_pending").get<bool>();
  // Absent from checkpoints written before the run rule: no run, no phase seen yet.
  d.run_.clear();
  if (j.contains("run")) LoadWindows(j.at("run"), d.run_);
  d.run_confirmed_ = j.value("run_confirmed", false);
  d.longest_phase_windows_ = j.value("longest_phase", 0);
  d.phases_marked_ = j.value("phases_marked", false);
}

json StateCodec::Save(const SteadyStateSummarizer& s) {
  json hist = json::array();
  for (const FractionHistogram& h : s.ofu_) hist.push_back(Save(h));
  return {{"warmup", Save(s.warmup_)},
          {"peaks", s.peaks_},
          {"ofu", std::move(hist)},
          {"frozen", s.frozen_}};
}

void StateCodec::Load(const json& j, SteadyStateSummarizer& s) {
  Load(j.at("warmup"), s.warmup_);
  s.peaks_ = j.at("peaks").get<std::vector<double>>();
  s.ofu_.clear();
  for (const json& h : j.at("ofu")) Load(h, s.ofu_.emplace_back());
  if (s.ofu_.size() != s.peaks_.size()) throw json::other_error::create(501, "mixes", &j);
  s.frozen_ = j.at("frozen").get<bool>();
}

json StateCodec::Save(const WorkloadBaseline& b) {
  json jobs = json::array();
  for (const JobSteadyState& s : b.jobs_) jobs.push_back(Save(s));
  return jobs;
}

void StateCodec::Load(const json& j, WorkloadBaseline& b) {
  b.jobs_.clear();
  for (const json& s : j) b.jobs_.push_back(LoadSteadyState(s));
}

json StateCodec::Save(const NewJobComparator& c) {
  return {{"baseline", Save(c.baseline_)},
          {"warmup", Save(c.warmup_)},
          {"steady", SaveWindows(c.steady_)},
          {"decided", c.decided_}};
}

void StateCodec::Load(const json& j, NewJobComparator& c) {
  Load(j.at("baseline"), c.baseline_);
  Load(j.at("warmup"), c.warmup_);
  LoadWindows(j.at("steady"), c.steady_);
  c.decided_ = j.at("decided").get<bool>();
}

// Per GPU: [observed, idle, first_idle_s, computing, slow, first_slow_s, ratio_sum].
json StateCodec::Save(const GpuFindingsTracker& t) {
  json gpus = json::array();
  for (const GpuFindingsTracker::PerGpu& g : t.gpus_) {
    gpus.push_back(json::array(
        {g.observed, g.idle, g.first_idle_s, g.computing, g.slow, g.first_slow_s, g.ratio_sum}));
  }
  return {{"windows", t.windows_}, {"gpus", std::move(gpus)}};
}

void StateCodec::Load(const json& j, GpuFindingsTracker& t) {
  t.windows_ = j.at("windows").get<int64_t>();
  t.gpus_.clear();
  for (const json& g : j.at("gpus")) {
    GpuFindingsTracker::PerGpu p;
    p.observed = g.at(0).get<int64_t>();
    p.idle = g.at(1).get<int64_t>();
    p.first_idle_s = g.at(2).get<int64_t>();
    p.computing = g.at(3).get<int64_t>();
    p.slow = g.at(4).get<int64_t>();
    p.first_slow_s = g.at(5).get<int64_t>();
    p.ratio_sum = g.at(6).get<double>();
    t.gpus_.push_back(p);
  }
}

namespace {

// A service's window as [start, end, ofu, tokens/s, busy, GPUs]: a day of windows is a few
// thousand numbers.
json SaveServingWindows(const std::deque<ServingWindow>& windows) {
  json out = json::array();
  for (const ServingWindow& w : windows) {
    out.push_back(json::array({w.start_s, w.end_s, w.ofu, w.tokens_per_s, w.gpu_busy, w.gpu_count}));
  }
  return out;
}

void LoadServingWindows(const json& j, std::deque<ServingWindow>& out, size_t max) {
  out.clear();
  if (j.size() > max) throw json::other_error::create(501, "too many serving windows", &j);
  for (const json& w : j) {
    ServingWindow s;
    s.start_s = w.at(0).get<int64_t>();
    s.end_s = w.at(1).get<int64_t>();
    s.ofu = w.at(2).get<double>();
    s.tokens_per_s = w.at(3).get<double>();
    s.gpu_busy = w.at(4).get<double>();
    s.gpu_count = w.at(5).get<int>();
    out.push_back(s);
  }
}

}  // namespace

json StateCodec::Save(const ServingRegressionDetector& d) {
  return {{"reference", SaveServingWindows(d.reference_)},
          {"test", SaveServingWindows(d.test_)},
          {"open", d.open_}};
}

void StateCodec::Load(const json& j, ServingRegressionDetector& d) {
  LoadServingWindows(j.at("reference"), d.reference_, d.reference_windows_);
  LoadServingWindows(j.at("test"), d.test_, d.test_windows_);
  d.open_ = j.at("open").get<bool>();
  d.last_ = ServingVerdict();
}

}  // namespace goodput::detect
