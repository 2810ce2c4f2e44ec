#pragma once
// Writes a simulated fleet as text: JSON lines (one object per record, "type" says which) or
// CSV (one row per record, first column the record type; a commented header per type first).
// Records: job_start (with ground-truth labels), sample (per-GPU DCGM fields), mfu (framework
// report), window_truth (true job OFU per window), job_end.

#include <cstdint>
#include <ostream>
#include <string>

#include "tools/fleetsim/fleet_sim.h"

namespace goodput::sim {

enum class StreamFormat { kJsonLines, kCsv };

struct StreamSelection {
  bool jobs = true;
  bool samples = true;
  bool mfu = true;
  bool truth = true;
};

class StreamWriter : public FleetSink {
 public:
  StreamWriter(std::ostream& out, StreamFormat format, StreamSelection selection = {});

  void OnJobStart(const JobTruth& job) override;
  void OnSamples(const JobTruth& job, int64_t window_start_s, int64_t window_end_s,
                 const std::vector<GpuSample>& samples) override;
  void OnMfuReport(const JobTruth& job, const MfuReport& report) override;
  void OnWindowTruth(const JobTruth& job, int64_t window_start_s, int64_t window_end_s,
                     double true_ofu) override;
  void OnJobEnd(const JobTruth& job) override;

  int64_t records() const { return records_; }

 private:
  void Header();
  std::ostream& out_;
  StreamFormat format_;
  StreamSelection selection_;
  bool header_written_ = false;
  int64_t records_ = 0;
};

// JSON string literal for `s` (quotes and escapes).
std::string JsonString(const std::string& s);

}  // namespace goodput::sim
