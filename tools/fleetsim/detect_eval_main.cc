// goodput-detect-eval: runs the detectors on simulated fleets and prints how they do:
// regression recall and detection delay, false alarms per 1,000 job-hours, divergence verdict
// accuracy by miscount case, OFU error against the simulator's truth, idle/straggler findings.
// Fleets: several seeds of the configuration the detectors were developed on, and a held-out
// generator configuration they were not tuned on.
//
//   goodput-detect-eval [--seeds N] [--held-out-seeds N] [--small] [--check] [--verbose]
//
// --check exits 1 when a target is missed: recall >= 95% (drops >= 1.5x lasting >= 10 min),
// <= 1 false alarm per 1,000 job-hours, every divergence verdict and top cause right.

#include <iostream>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "tools/fleetsim/evaluation.h"

namespace {

bool TargetsMet(const goodput::sim::EvaluationResult& r, std::string& why) {
  bool ok = true;
  if (r.Recall() < 0.95) {
    why += " recall " + std::to_string(r.Recall()) + " < 0.95;";
    ok = false;
  }
  if (r.FalseAlarmsPer1000JobHours() > 1.0) {
    why += " false alarms " + std::to_string(r.FalseAlarmsPer1000JobHours()) + "/1000 job-h > 1;";
    ok = false;
  }
  for (const auto& [name, t] : r.verdicts) {
    if (t.right_cause != t.jobs) {
      why += " verdicts " + name + " " + std::to_string(t.right_cause) + "/" +
             std::to_string(t.jobs) + ";";
      ok = false;
    }
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int seeds = 4;
  int held_out_seeds = 3;
  bool small = false;
  bool check = false;
  bool verbose = false;
  goodput::sim::EvaluationOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--small") {
      small = true;
    } else if (arg == "--trace" && i + 1 < argc) {
      options.trace_job_id = argv[++i];
      verbose = true;
    } else if (arg == "--verbose") {
      verbose = true;
    } else if (arg == "--persistence-only") {
      // The detector before fast confirmation: every drop waits for 8 of 10 low windows.
      options.regression.deep_factor = std::numeric_limits<double>::infinity();
    } else if (arg == "--check") {
      check = true;
    } else if ((arg == "--seeds" || arg == "--held-out-seeds") && i + 1 < argc) {
      int n = 0;
      if (!absl::SimpleAtoi(argv[++i], &n) || n < 0) {
        std::cerr << "goodput-detect-eval: invalid value '" << argv[i] << "' for " << arg << "\n";
        return 2;
      }
      (arg == "--seeds" ? seeds : held_out_seeds) = n;
    } else {
      std::cerr << "goodput-detect-eval: unknown option " << arg
                << "\nusage: goodput-detect-eval [--seeds N] [--held-out-seeds N] [--small] "
                   "[--check] [--persistence-only]\n";
      return 2;
    }
  }
  std::vector<goodput::sim::EvaluationResult> developed, held_out;
  for (int s = 1; s <= seeds; ++s) {
    auto config = small ? goodput::sim::SmallFleetConfig(s) : goodput::sim::DefaultFleetConfig(s);
    auto r = goodput::sim::EvaluateFleet(config, options);
    if (!r.ok()) {
      std::cerr << "goodput-detect-eval: " << r.status() << "\n";
      return 1;
    }
    developed.push_back(*r);
  }
  for (int s = 1; s <= held_out_seeds; ++s) {
    auto config = goodput::sim::HeldOutFleetConfig(1000 + s);
    if (small) {
      const auto reference = goodput::sim::SmallFleetConfig(s);
      config.workloads = reference.workloads;
      config.gpu_counts = reference.gpu_counts;
    }
    auto r = goodput::sim::EvaluateFleet(config, options);
    if (!r.ok()) {
      std::cerr << "goodput-detect-eval: " << r.status() << "\n";
      return 1;
    }
    held_out.push_back(*r);
  }
  std::vector<goodput::sim::EvaluationResult> rows = developed;
  rows.insert(rows.end(), held_out.begin(), held_out.end());
  std::vector<goodput::sim::EvaluationResult> all = rows;
  if (!developed.empty()) rows.push_back(goodput::sim::CombineResults(developed, "developed"));
  if (!held_out.empty()) rows.push_back(goodput::sim::CombineResults(held_out, "held-out"));
  const auto total = goodput::sim::CombineResults(all, "all fleets");
  rows.push_back(total);
  std::cout << goodput::sim::FormatEvaluationTable(rows);
  std::cout << "\nTargets: recall >= 95% for drops >= 1.5x lasting >= 10 min (plus new jobs "
               "bad from the start, against their workload); <= 1 false alarm per 1,000 "
               "job-hours; every divergence verdict and top cause right.\n";
  if (verbose) {
    for (const std::string& note : total.notes) std::cout << "  " << note << "\n";
  }
  std::cout << "\nIn-job detection delay by depth (all fleets, detector; windows of "
            << total.window_s << " s from the injected onset)\n"
            << goodput::sim::FormatDelayTable(total);
  std::cout << "\nAlerting by delivery (all fleets through goodput-alerting's detector state and "
               "alert lifecycle; found = an alert opened or recorded resolved)\n"
            << goodput::sim::FormatDeliveryTable(total);
  std::string why;
  bool met = TargetsMet(total, why);
  static constexpr const char* kDeliveries[] = {"live", "bursts", "EndJob at end"};
  for (int m = 0; m < goodput::sim::kDeliveryModes; ++m) {
    const auto d = static_cast<goodput::sim::Delivery>(m);
    const goodput::sim::DeliveryTally& t = total.delivery[m];
    if (goodput::sim::DeliveryRecall(total, d) < 0.95 ||
        goodput::sim::DeliveryFalseAlarmsPer1000JobHours(total, d) > 1.0 ||
        t.miscounts_found < t.miscount_jobs || t.miscount_false > 0) {
      met = false;
      why += std::string(" delivery ") + kDeliveries[m] + ";";
    }
  }
  std::cout << (met ? "All targets met.\n" : "Targets missed:" + why + "\n");
  return check && !met ? 1 : 0;
}
