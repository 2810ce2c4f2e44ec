#include "services/ingest/proto_convert.h"

namespace goodput::ingest {

Sample SampleFromProto(const v1::GpuSample& p) {
  Sample s;
  s.gpu.host = p.gpu().host();
  if (p.gpu().has_gpu_index()) s.gpu.gpu_index = p.gpu().gpu_index();
  s.gpu.uuid = p.gpu().uuid();
  if (p.gpu().has_mig()) {
    MigSlice mig;
    mig.gpu_instance_id = p.gpu().mig().gpu_instance_id();
    if (p.gpu().mig().has_compute_instance_id()) {
      mig.compute_instance_id = p.gpu().mig().compute_instance_id();
    }
    mig.profile = p.gpu().mig().profile();
    s.gpu.mig = std::move(mig);
  }
  s.time_unix_ms = p.time_unix_ms();
  s.gpu_model = p.gpu_model();
  for (const auto& [k, v] : p.labels()) s.labels.emplace(k, v);
  using F = SampleField;
  if (p.has_tensor_active()) s.set(F::kTensorActive, p.tensor_active());
  if (p.has_sm_clock_mhz()) s.set(F::kSmClockMhz, p.sm_clock_mhz());
  if (p.has_sm_active()) s.set(F::kSmActive, p.sm_active());
  if (p.has_sm_occupancy()) s.set(F::kSmOccupancy, p.sm_occupancy());
  if (p.has_dram_active()) s.set(F::kDramActive, p.dram_active());
  if (p.has_pipe_fp16_active()) s.set(F::kPipeFp16Active, p.pipe_fp16_active());
  if (p.has_pipe_fp32_active()) s.set(F::kPipeFp32Active, p.pipe_fp32_active());
  if (p.has_pipe_fp64_active()) s.set(F::kPipeFp64Active, p.pipe_fp64_active());
  if (p.has_gr_engine_active()) s.set(F::kGrEngineActive, p.gr_engine_active());
  if (p.has_gpu_util()) s.set(F::kGpuUtil, p.gpu_util());
  if (p.has_fb_used_mib()) s.set(F::kFbUsedMib, p.fb_used_mib());
  if (p.has_fb_free_mib()) s.set(F::kFbFreeMib, p.fb_free_mib());
  if (p.has_power_w()) s.set(F::kPowerW, p.power_w());
  if (p.has_total_energy_mj()) s.set(F::kTotalEnergyMj, p.total_energy_mj());
  if (p.has_gpu_temp_c()) s.set(F::kGpuTempC, p.gpu_temp_c());
  if (p.has_nvlink_tx_bytes_per_s()) s.set(F::kNvlinkTxBytesPerS, p.nvlink_tx_bytes_per_s());
  if (p.has_nvlink_rx_bytes_per_s()) s.set(F::kNvlinkRxBytesPerS, p.nvlink_rx_bytes_per_s());
  if (p.has_pcie_tx_bytes_per_s()) s.set(F::kPcieTxBytesPerS, p.pcie_tx_bytes_per_s());
  if (p.has_pcie_rx_bytes_per_s()) s.set(F::kPcieRxBytesPerS, p.pcie_rx_bytes_per_s());
  if (p.has_clock_throttle_reasons()) {
    s.set(F::kClockThrottleReasons, static_cast<double>(p.clock_throttle_reasons()));
  }
  for (const v1::GpuFaultReading& f : p.faults()) {
    core::FaultReading r;
    // Out of range (UNSPECIFIED included) stays recognisable for validation: -1.
    const int index = static_cast<int>(f.signal()) - 1;
    r.signal = static_cast<core::FaultSignal>(
        index >= 0 && index < core::kFaultSignalCount ? index : core::kFaultSignalCount);
    r.value = f.value();
    r.xid = f.xid();
    r.window_ms = f.window_ms();
    s.faults.push_back(r);
  }
  return s;
}

void RefusalToProto(const Refusal& r, v1::Refusal* p) {
  p->set_batch_id(r.batch_id);
  p->set_index(r.index);
  p->set_line_number(r.line_number);
  p->set_field(r.field);
  p->set_value(r.value);
  p->set_code(static_cast<v1::RefusalCode>(static_cast<int>(r.code)));
  p->set_message(r.message);
}

}  // namespace goodput::ingest
