#include "tools/fleetsim/fleet_proto.h"

#include <set>
#include <utility>

namespace goodput::sim {
namespace {

void SetSeconds(int64_t unix_s, google::protobuf::Timestamp* t) {
  t->set_seconds(unix_s);
  t->set_nanos(0);
}

}  // namespace

v1::RegisterJobRequest RegisterJobRequestFor(const std::string& cluster, const JobTruth& job,
                                             const std::vector<GpuSample>& samples) {
  v1::RegisterJobRequest request;
  v1::Job* out = request.mutable_job();
  out->mutable_key()->set_cluster(cluster);
  out->mutable_key()->set_job_id(job.job_id);
  out->set_scheduler(v1::SCHEDULER_KIND_SLURM);
  out->set_user(job.user);
  out->set_team(job.team);
  out->set_name(job.workload);
  out->set_workload_fingerprint(job.workload);
  out->set_gpu_model(job.gpu_model);
  out->set_gpu_count(job.gpu_count);
  out->set_state(v1::JOB_STATE_RUNNING);
  SetSeconds(job.start_s, out->mutable_start_time());
  std::set<std::pair<std::string, int>> gpus;
  for (const GpuSample& s : samples) gpus.insert({s.hostname, s.device});
  for (const auto& [host, device] : gpus) {
    v1::GpuAllocation* a = out->add_allocations();
    a->mutable_gpu()->set_host(host);
    a->mutable_gpu()->set_gpu_index(device);
    SetSeconds(job.start_s, a->mutable_start_time());
  }
  return request;
}

void SampleToProto(const GpuSample& s, const std::string& gpu_model, v1::GpuSample* out) {
  out->mutable_gpu()->set_host(s.hostname);
  out->mutable_gpu()->set_gpu_index(s.device);
  out->mutable_gpu()->set_uuid(s.uuid);
  out->set_time_unix_ms(s.timestamp_ms);
  out->set_gpu_model(gpu_model);
  out->set_tensor_active(s.tensor_active);
  out->set_sm_clock_mhz(s.sm_clock_mhz);
  out->set_sm_active(s.sm_active);
  out->set_sm_occupancy(s.sm_occupancy);
  out->set_dram_active(s.dram_active);
  out->set_pipe_fp16_active(s.fp16_active);
  out->set_pipe_fp32_active(s.fp32_active);
  out->set_pipe_fp64_active(s.fp64_active);
  out->set_gr_engine_active(s.gr_engine_active);
  out->set_fb_used_mib(s.fb_used_mib);
  out->set_power_w(s.power_w);
  out->set_total_energy_mj(s.energy_mj);
  out->set_gpu_temp_c(s.temperature_c);
  out->set_clock_throttle_reasons(s.clock_throttle_reasons);
}

}  // namespace goodput::sim
