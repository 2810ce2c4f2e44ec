#include "tools/fleetsim/stream_writer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace goodput::sim {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

StreamWriter::StreamWriter(std::ostream& out, StreamFormat format, StreamSelection selection)
    : out_(out), format_(format), selection_(selection) {}

void StreamWriter::Header() {
  if (header_written_ || format_ != StreamFormat::kCsv) return;
  header_written_ = true;
  out_ << "#job_start,cluster,job_id,workload,gpu_model,gpu_count,start_s,end_s,user,team,"
          "steady_ofu,miscount,miscount_factor,debug_flag,debug_factor,drops,precision,"
          "stragglers,idle_gpus\n"
          "#sample,cluster,job_id,timestamp_ms,hostname,gpu,uuid,model,tensor_active,"
          "sm_clock_mhz,sm_active,sm_occupancy,dram_active,fp16_active,fp32_active,fp64_active,"
          "gr_engine_active,fb_used_mib,power_w,energy_mj,temperature_c,nvlink_tx_bytes,"
          "nvlink_rx_bytes,pcie_tx_bytes,pcie_rx_bytes,clock_throttle_reasons,true_ofu\n"
          "#mfu,cluster,job_id,start_s,end_s,form,mfu,tflops_per_gpu,total_tflops,gpu_count,"
          "flops_per_step,step_time_s,fp8_share,effective_peak_tflops\n"
          "#window_truth,cluster,job_id,start_s,end_s,true_ofu\n"
          "#job_end,cluster,job_id,end_s\n";
}

void StreamWriter::OnJobStart(const JobTruth& job) {
  if (!selection_.jobs) return;
  Header();
  ++records_;
  std::vector<std::string> drops, precision, stragglers, idle;
  for (const InjectedDrop& d : job.drops) {
    drops.push_back(format_ == StreamFormat::kCsv
                        ? absl::StrFormat("%d-%d:%.3f", d.onset_s, d.end_s, d.factor)
                        : absl::StrFormat("{\"onset_s\":%d,\"end_s\":%d,\"factor\":%.4f}",
                                          d.onset_s, d.end_s, d.factor));
  }
  for (const PrecisionPhase& p : job.precision) {
    precision.push_back(
        format_ == StreamFormat::kCsv
            ? absl::StrFormat("%d:%.3f", p.start_s, p.fp8_share)
            : absl::StrFormat("{\"start_s\":%d,\"fp8_share\":%.4f,\"effective_peak_tflops\":%.2f}",
                              p.start_s, p.fp8_share, p.effective_peak_tflops));
  }
  for (size_t i = 0; i < job.straggler_gpus.size(); ++i) {
    stragglers.push_back(
        format_ == StreamFormat::kCsv
            ? absl::StrFormat("%d:%.3f", job.straggler_gpus[i], job.straggler_factors[i])
            : absl::StrFormat("{\"gpu\":%d,\"factor\":%.4f}", job.straggler_gpus[i],
                              job.straggler_factors[i]));
  }
  for (int g : job.idle_gpus) idle.push_back(absl::StrCat(g));
  if (format_ == StreamFormat::kCsv) {
    out_ << absl::StrFormat(
        "job_start,%s,%s,%s,%s,%d,%d,%d,%s,%s,%.4f,%s,%.4f,%d,%.3f,%s,%s,%s,%s\n", job.cluster,
        job.job_id, job.workload, job.gpu_model, job.gpu_count, job.start_s, job.end_s, job.user,
        job.team, job.steady_ofu, MiscountName(job.miscount), job.miscount_factor, job.debug_flag,
        job.debug_factor, absl::StrJoin(drops, ";"), absl::StrJoin(precision, ";"),
        absl::StrJoin(stragglers, ";"), absl::StrJoin(idle, ";"));
    return;
  }
  out_ << absl::StrFormat(
      "{\"type\":\"job_start\",\"cluster\":%s,\"job_id\":%s,\"workload\":%s,\"gpu_model\":%s,"
      "\"gpu_count\":%d,\"start_s\":%d,\"end_s\":%d,\"user\":%s,\"team\":%s,\"truth\":{"
      "\"steady_ofu\":%.4f,\"miscount\":\"%s\",\"miscount_factor\":%.4f,\"tile_overhead\":%.4f,"
      "\"debug_flag\":%s,\"debug_factor\":%.3f,\"drops\":[%s],\"precision\":[%s],"
      "\"stragglers\":[%s],\"idle_gpus\":[%s],\"warmup_s\":%d,\"checkpoint_period_s\":%d,"
      "\"checkpoint_s\":%d}}\n",
      JsonString(job.cluster), JsonString(job.job_id), JsonString(job.workload),
      JsonString(job.gpu_model), job.gpu_count, job.start_s, job.end_s, JsonString(job.user),
      JsonString(job.team), job.steady_ofu, MiscountName(job.miscount), job.miscount_factor,
      job.tile_overhead, job.debug_flag ? "true" : "false", job.debug_factor,
      absl::StrJoin(drops, ","), absl::StrJoin(precision, ","), absl::StrJoin(stragglers, ","),
      absl::StrJoin(idle, ","), job.warmup_s, job.checkpoint_period_s, job.checkpoint_s);
}

void StreamWriter::OnSamples(const JobTruth& job, int64_t, int64_t,
                             const std::vector<GpuSample>& samples) {
  if (!selection_.samples) return;
  Header();
  for (const GpuSample& s : samples) {
    ++records_;
    if (format_ == StreamFormat::kCsv) {
      out_ << absl::StrFormat(
          "sample,%s,%s,%d,%s,%d,%s,%s,%.4f,%.0f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.0f,%.1f,"
          "%.0f,%.1f,%.0f,%.0f,%.0f,%.0f,%d,%.5f\n",
          job.cluster, job.job_id, s.timestamp_ms, s.hostname, s.device, s.uuid, job.gpu_model,
          s.tensor_active, s.sm_clock_mhz, s.sm_active, s.sm_occupancy, s.dram_active,
          s.fp16_active, s.fp32_active, s.fp64_active, s.gr_engine_active, s.fb_used_mib, s.power_w,
          s.energy_mj, s.temperature_c, s.nvlink_tx_bytes, s.nvlink_rx_bytes, s.pcie_tx_bytes,
          s.pcie_rx_bytes, s.clock_throttle_reasons, s.true_ofu);
    } else {
      out_ << absl::StrFormat(
          "{\"type\":\"sample\",\"cluster\":%s,\"job_id\":%s,\"timestamp_ms\":%d,"
          "\"hostname\":%s,\"gpu\":%d,\"uuid\":%s,\"model\":%s,\"tensor_active\":%.4f,"
          "\"sm_clock_mhz\":%.0f,\"sm_active\":%.4f,\"sm_occupancy\":%.4f,\"dram_active\":%.4f,"
          "\"fp16_active\":%.4f,\"fp32_active\":%.4f,\"fp64_active\":%.4f,"
          "\"gr_engine_active\":%.4f,\"fb_used_mib\":%.0f,\"power_w\":%.1f,\"energy_mj\":%.0f,"
          "\"temperature_c\":%.1f,\"nvlink_tx_bytes\":%.0f,\"nvlink_rx_bytes\":%.0f,"
          "\"pcie_tx_bytes\":%.0f,\"pcie_rx_bytes\":%.0f,\"clock_throttle_reasons\":%d,"
          "\"true_ofu\":%.5f}\n",
          JsonString(job.cluster), JsonString(job.job_id), s.timestamp_ms, JsonString(s.hostname),
          s.device, JsonString(s.uuid), JsonString(job.gpu_model), s.tensor_active, s.sm_clock_mhz,
          s.sm_active, s.sm_occupancy, s.dram_active, s.fp16_active, s.fp32_active, s.fp64_active,
          s.gr_engine_active, s.fb_used_mib, s.power_w, s.energy_mj, s.temperature_c,
          s.nvlink_tx_bytes, s.nvlink_rx_bytes, s.pcie_tx_bytes, s.pcie_rx_bytes,
          s.clock_throttle_reasons, s.true_ofu);
    }
  }
}

void StreamWriter::OnMfuReport(const JobTruth& job, const MfuReport& m) {
  if (!selection_.mfu) return;
  Header();
  ++records_;
  if (format_ == StreamFormat::kCsv) {
    out_ << absl::StrFormat("mfu,%s,%s,%d,%d,%s,%.5f,%.3f,%.1f,%d,%.4g,%.2f,%.4f,%.2f\n",
                            job.cluster, job.job_id, m.start_s, m.end_s, m.form, m.mfu,
                            m.tflops_per_gpu, m.total_tflops, m.gpu_count, m.flops_per_step,
                            m.step_time_s, m.fp8_share, m.effective_peak_tflops);
    return;
  }
  // Only the fields of the framework's form are sent, as a framework would.
  std::string payload;
  if (m.form == "mfu") {
    payload = absl::StrFormat("\"mfu\":%.5f", m.mfu);
  } else if (m.form == "tflops_per_gpu") {
    payload = absl::StrFormat("\"tflops_per_gpu\":%.3f", m.tflops_per_gpu);
  } else if (m.form == "total_tflops") {
    payload =
        absl::StrFormat("\"total_tflops\":%.1f,\"gpu_count\":%d", m.total_tflops, m.gpu_count);
  } else {
    payload = absl::StrFormat("\"flops_per_step\":%.6g,\"step_time_s\":%.3f,\"gpu_count\":%d",
                              m.flops_per_step, m.step_time_s, m.gpu_count);
  }
  out_ << absl::StrFormat(
      "{\"type\":\"mfu\",\"cluster\":%s,\"job_id\":%s,\"start_s\":%d,\"end_s\":%d,%s,"
      "\"precision_mix\":{\"bf16\":%.4f,\"fp8\":%.4f}}\n",
      JsonString(job.cluster), JsonString(job.job_id), m.start_s, m.end_s, payload, 1 - m.fp8_share,
      m.fp8_share);
}

void StreamWriter::OnWindowTruth(const JobTruth& job, int64_t start_s, int64_t end_s,
                                 double true_ofu) {
  if (!selection_.truth) return;
  Header();
  ++records_;
  if (format_ == StreamFormat::kCsv) {
    out_ << absl::StrFormat("window_truth,%s,%s,%d,%d,%.5f\n", job.cluster, job.job_id, start_s,
                            end_s, true_ofu);
    return;
  }
  out_ << absl::StrFormat(
      "{\"type\":\"window_truth\",\"cluster\":%s,\"job_id\":%s,\"start_s\":%d,\"end_s\":%d,"
      "\"true_ofu\":%.5f}\n",
      JsonString(job.cluster), JsonString(job.job_id), start_s, end_s, true_ofu);
}

void StreamWriter::OnJobEnd(const JobTruth& job) {
  if (!selection_.jobs) return;
  Header();
  ++records_;
  if (format_ == StreamFormat::kCsv) {
    out_ << absl::StrFormat("job_end,%s,%s,%d\n", job.cluster, job.job_id, job.end_s);
    return;
  }
  out_ << absl::StrFormat("{\"type\":\"job_end\",\"cluster\":%s,\"job_id\":%s,\"end_s\":%d}\n",
                          JsonString(job.cluster), JsonString(job.job_id), job.end_s);
}

}  // namespace goodput::sim
