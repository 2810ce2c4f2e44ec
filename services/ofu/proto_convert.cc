#include "services/ofu/proto_convert.h"

#include "services/api/api_convert.h"

namespace goodput::ofu {

void AddFlags(uint32_t flags, google::protobuf::RepeatedField<int>* out) {
  for (int n = 1; n <= v1::DataQualityFlag_MAX; ++n) {
    if (flags & (1u << n)) out->Add(n);
  }
}

v1::GpuRef GpuRefFromKey(const std::string& key) {
  GpuKeyParts parts = ParseGpuKey(key);
  v1::GpuRef ref;
  ref.set_host(parts.host);
  if (parts.gpu_index.has_value()) ref.set_gpu_index(*parts.gpu_index);
  ref.set_uuid(parts.uuid);
  if (parts.mig_instance.has_value()) ref.mutable_mig()->set_gpu_instance_id(*parts.mig_instance);
  return ref;
}

std::string GpuKeyFromRef(const v1::GpuRef& gpu) {
  return GpuKey(gpu.host(),
                gpu.has_gpu_index() ? std::optional<int>(gpu.gpu_index()) : std::nullopt,
                gpu.uuid(),
                gpu.has_mig() ? std::optional<int>(gpu.mig().gpu_instance_id()) : std::nullopt);
}

v1::OfuWindow WindowToProto(const WindowResult& w, int32_t window_s, int32_t revision,
                            const std::string& cluster, const std::string& job_id,
                            const std::string& workload_fingerprint, bool warmup) {
  v1::OfuWindow p;
  p.mutable_job()->set_cluster(cluster);
  p.mutable_job()->set_job_id(job_id);
  if (!w.gpu.empty()) *p.mutable_gpu() = GpuRefFromKey(w.gpu);
  *p.mutable_start_time() = api::UnixMsToTimestamp(w.start_ms);
  *p.mutable_end_time() = api::UnixMsToTimestamp(w.end_ms);
  p.set_window_s(window_s);
  p.set_gpu_model(w.gpu_model);
  p.set_workload_fingerprint(workload_fingerprint);
  if (w.ofu.has_value()) {
    p.set_ofu(*w.ofu);
    const double half = w.ofu_ci95_half_width.value_or(0);
    p.set_ofu_ci95_low(std::max(0.0, *w.ofu - half));
    p.set_ofu_ci95_high(*w.ofu + half);
  }
  p.set_sample_count(w.sample_count);
  p.set_gpus_reporting(w.gpus_reporting);
  p.set_gpus_allocated(w.gpus_allocated);
  p.set_gpu_coverage(w.gpu_coverage);
  p.set_gpu_ofu_min(w.gpu_ofu_min.value_or(0));
  p.set_gpu_ofu_median(w.gpu_ofu_median.value_or(0));
  p.set_gpu_ofu_max(w.gpu_ofu_max.value_or(0));
  p.set_tensor_active_mean(w.tensor_active_mean.value_or(0));
  p.set_sm_clock_mhz_mean(w.sm_clock_mhz_mean.value_or(0));
  AddFlags(w.flags, p.mutable_flags());
  if (w.spatial_imbalance.has_value()) p.set_spatial_imbalance(*w.spatial_imbalance);
  if (w.temporal_imbalance.has_value()) p.set_temporal_imbalance(*w.temporal_imbalance);
  for (const StragglerResult& s : w.stragglers) {
    v1::Straggler* out = p.add_stragglers();
    *out->mutable_gpu() = GpuRefFromKey(s.gpu);
    out->set_ofu(s.ofu);
    out->set_score(s.score);
  }
  for (const std::string& g : w.idle_gpus) *p.add_idle_gpus() = GpuRefFromKey(g);
  p.set_roofline_class(static_cast<v1::RooflineClass>(static_cast<int>(w.roofline)));
  if (w.hbm_peak_fraction.has_value()) p.set_hbm_peak_fraction(*w.hbm_peak_fraction);
  if (w.energy_j.has_value()) p.set_energy_j(*w.energy_j);
  if (w.power_w_mean.has_value()) p.set_power_w_mean(*w.power_w_mean);
  p.set_warmup(warmup);
  p.set_late_sample_count(w.late_sample_count);
  p.set_revision(revision);
  p.set_finalized(w.finalized);
  for (const SilentGpuResult& g : w.silent_gpus) {
    v1::SilentGpu* out = p.add_silent_gpus();
    *out->mutable_gpu() = GpuRefFromKey(g.gpu);
    *out->mutable_last_sample_time() = api::UnixMsToTimestamp(g.last_sample_ms);
    out->set_host_silent(g.host_silent);
  }
  if (w.gr_engine_active_mean.has_value()) p.set_gr_engine_active_mean(*w.gr_engine_active_mean);
  if (w.sm_active_mean.has_value()) p.set_sm_active_mean(*w.sm_active_mean);
  if (w.gpu_tensor_active_max.has_value()) p.set_gpu_tensor_active_max(*w.gpu_tensor_active_max);
  if (w.gpu_sm_active_max.has_value()) p.set_gpu_sm_active_max(*w.gpu_sm_active_max);
  if (w.gpu_gr_engine_active_max.has_value()) {
    p.set_gpu_gr_engine_active_max(*w.gpu_gr_engine_active_max);
  }
  return p;
}

}  // namespace goodput::ofu
