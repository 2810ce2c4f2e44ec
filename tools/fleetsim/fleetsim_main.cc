// goodput-fleetsim: streams a simulated GPU fleet (jobs with ground truth, per-GPU DCGM-like
// samples, framework MFU reports, true OFU per window) as JSON lines or CSV on stdout.
//
//   goodput-fleetsim --seed 42 --config default --format jsonl --speed 60
//
// The same seed and config give the same stream. --speed is simulated seconds per wall-clock
// second (0, the default, is as fast as possible).

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tools/fleetsim/fleet_sim.h"
#include "tools/fleetsim/stream_writer.h"

namespace {

constexpr const char* kUsage = R"(usage: goodput-fleetsim [options]
  --seed N            generator seed (default 1)
  --config NAME       default | held-out | small (default default)
  --format F          jsonl | csv (default jsonl)
  --speed X           simulated seconds per wall second; 0 = as fast as possible (default 0)
  --records LIST      comma list of jobs,samples,mfu,truth (default all)
  --workloads N       number of workloads (default from the config)
  --max-gpus N        leave out GPU counts above N
  --max-windows N     stop after N windows of simulated time
)";

int Fail(const std::string& message) {
  std::cerr << "goodput-fleetsim: " << message << "\n" << kUsage;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using goodput::sim::FleetConfig;
  uint64_t seed = 1;
  std::string config_name = "default";
  std::string format = "jsonl";
  double speed = 0;
  int64_t max_windows = -1;
  int workloads = -1;
  int max_gpus = -1;
  goodput::sim::StreamSelection selection;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (i + 1 >= argc) return Fail(std::string("missing value for ") + argv[i]);
    const std::string value = argv[++i];
    bool ok = true;
    if (arg == "--seed") {
      ok = absl::SimpleAtoi(value, &seed);
    } else if (arg == "--config") {
      config_name = value;
    } else if (arg == "--format") {
      format = value;
    } else if (arg == "--speed") {
      ok = absl::SimpleAtod(value, &speed) && speed >= 0;
    } else if (arg == "--max-windows") {
      ok = absl::SimpleAtoi(value, &max_windows);
    } else if (arg == "--workloads") {
      ok = absl::SimpleAtoi(value, &workloads) && workloads > 0;
    } else if (arg == "--max-gpus") {
      ok = absl::SimpleAtoi(value, &max_gpus) && max_gpus > 0;
    } else if (arg == "--records") {
      selection = {false, false, false, false};
      for (absl::string_view r : absl::StrSplit(value, ',')) {
        if (r == "jobs") {
          selection.jobs = true;
        } else if (r == "samples") {
          selection.samples = true;
        } else if (r == "mfu") {
          selection.mfu = true;
        } else if (r == "truth") {
          selection.truth = true;
        } else {
          return Fail("--records: unknown record type '" + std::string(r) + "'");
        }
      }
    } else {
      return Fail("unknown option " + std::string(arg));
    }
    if (!ok) return Fail("invalid value '" + value + "' for " + std::string(arg));
  }
  FleetConfig config;
  if (config_name == "default") {
    config = goodput::sim::DefaultFleetConfig(seed);
  } else if (config_name == "held-out") {
    config = goodput::sim::HeldOutFleetConfig(seed);
  } else if (config_name == "small") {
    config = goodput::sim::SmallFleetConfig(seed);
  } else {
    return Fail("--config: unknown configuration '" + config_name + "'");
  }
  if (workloads > 0) config.workloads = workloads;
  if (max_gpus > 0) {
    std::erase_if(config.gpu_counts, [&](const auto& g) { return g.gpus > max_gpus; });
    if (config.gpu_counts.empty()) return Fail("--max-gpus leaves no GPU count");
  }
  goodput::sim::StreamFormat stream_format;
  if (format == "jsonl") {
    stream_format = goodput::sim::StreamFormat::kJsonLines;
  } else if (format == "csv") {
    stream_format = goodput::sim::StreamFormat::kCsv;
  } else {
    return Fail("--format: unknown format '" + format + "'");
  }
  auto sim = goodput::sim::FleetSimulator::Create(config);
  if (!sim.ok()) {
    std::cerr << "goodput-fleetsim: " << sim.status() << "\n";
    return 1;
  }
  std::ios::sync_with_stdio(false);
  goodput::sim::StreamWriter writer(std::cout, stream_format, selection);
  const auto wall_start = std::chrono::steady_clock::now();
  const int64_t sim_start = (*sim)->now_s();
  int64_t windows = 0;
  while ((*sim)->Step(writer)) {
    if (++windows == max_windows) break;
    if (speed > 0) {
      std::cout.flush();
      const double sim_elapsed = static_cast<double>((*sim)->now_s() - sim_start);
      std::this_thread::sleep_until(wall_start +
                                    std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        std::chrono::duration<double>(sim_elapsed / speed)));
    }
    if (!std::cout) return 1;  // reader went away
  }
  std::cout.flush();
  return 0;
}
