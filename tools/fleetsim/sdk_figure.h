#pragma once

// What a simulated framework's MFU report (FleetSink::OnMfuReport) sends through the C++ SDK:
// the figure in the form the framework reported it (MFU, TFLOP/s per GPU, total TFLOP/s, or
// FLOPs per step and step time), its precision mix and its interval. Header-only, for the
// programs that link both the simulator and the SDK (the demo, the scale-out test).

#include "absl/time/time.h"
#include "sdk/cpp/reporter.h"
#include "tools/fleetsim/fleet_sim.h"

namespace goodput::sim {

inline sdk::MfuFigure SdkFigure(const MfuReport& report) {
  sdk::MfuFigure figure;
  if (report.form == "tflops_per_gpu") {
    figure.tflops_per_gpu = report.tflops_per_gpu;
  } else if (report.form == "total_tflops") {
    figure.total_tflops = report.total_tflops;
    figure.gpu_count = report.gpu_count;
  } else if (report.form == "flops_per_step") {
    figure.flops_per_step = report.flops_per_step;
    figure.step_time_s = report.step_time_s;
    figure.gpu_count = report.gpu_count;
  } else {
    figure.mfu = report.mfu;
  }
  figure.precision_mix = {{v1::PRECISION_BF16, 1 - report.fp8_share}};
  if (report.fp8_share > 0) figure.precision_mix.push_back({v1::PRECISION_FP8, report.fp8_share});
  figure.interval_s = static_cast<double>(report.end_s - report.start_s);
  figure.end_time = absl::FromUnixSeconds(report.end_s);
  return figure;
}

}  // namespace goodput::sim
