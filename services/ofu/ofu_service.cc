#include "services/ofu/ofu_service.h"

#include <algorithm>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "services/api/api_checks.h"
#include "services/api/api_convert.h"
#include "services/core/gpu_faults.h"
#include "services/core/tile_quantization.h"
#include "services/core/xid_catalog.h"
#include "services/ofu/proto_convert.h"
#include "services/platform/auth.h"
#include "services/platform/grpc_reactors.h"
#include "services/platform/scope.h"
#include "services/platform/status_convert.h"

namespace goodput::ofu {
namespace {

constexpr int64_t kEarliestMs = 0;
constexpr int64_t kLatestMs = 4'102'444'800'000;  // 2100-01-01
constexpr char kTokenPrefix[] = "ofu1:";

using platform::FinishUnary;

absl::Status CheckJobKey(const v1::JobKey& key, absl::string_view field) {
  if (key.cluster().empty() || key.job_id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": cluster=\"", key.cluster(),
                                                   "\" and job_id=\"", key.job_id(),
                                                   "\" must both be set"));
  }
  return absl::OkStatus();
}

// The job summary's fault events: the first ones of the job (ListFaultEvents has them all).
constexpr int kSummaryFaultEvents = 20;

void FaultEventToProto(const StoredFaultEvent& e, v1::FaultEvent* out) {
  out->set_cluster(e.cluster);
  v1::GpuRef* gpu = out->mutable_gpu();
  gpu->set_host(e.host);
  if (e.gpu_index) gpu->set_gpu_index(*e.gpu_index);
  gpu->set_uuid(e.gpu_uuid);
  if (e.mig_instance) gpu->mutable_mig()->set_gpu_instance_id(*e.mig_instance);
  if (e.job_id) {
    out->mutable_job()->set_cluster(*e.job_cluster);
    out->mutable_job()->set_job_id(*e.job_id);
  }
  *out->mutable_time() = api::UnixMsToTimestamp(e.time_ms);
  if (std::optional<core::FaultSignal> signal = core::FaultSignalFromName(e.signal)) {
    out->set_signal(static_cast<v1::FaultSignal>(static_cast<int>(*signal) + 1));
    out->set_signal_description(std::string(core::FaultSignalDescription(*signal)));
  }
  if (e.xid) {
    out->set_xid(*e.xid);
    if (const core::XidInfo* info = core::FindXid(*e.xid)) {
      out->set_xid_meaning(std::string(info->meaning));
      out->set_blame(std::string(core::XidBlameName(info->blame)));
      out->set_recommended_action(std::string(info->action));
      out->set_xid_source(std::string(info->source));
    }
  }
  out->set_value(e.value);
  if (e.previous_value) out->set_previous_value(*e.previous_value);
  out->set_count(e.count);
  out->set_counter_reset(e.counter_reset);
  out->set_source(e.source);
}

void FillGroup(const FleetGroupFigures& g, v1::FleetGroup* out) {
  out->set_cluster(g.cluster);
  out->set_gpu_model(g.gpu_model);
  out->set_team(g.team);
  out->set_user(g.user);
  out->set_workload_fingerprint(g.workload_fingerprint);
  out->set_wasted_gpu_hours(std::max(0.0, g.gpu_hours - g.effective_gpu_hours));
  out->set_scheduler(api::SchedulerKindFromName(g.scheduler));
  out->set_job_count(g.job_count);
  out->set_gpu_hours(g.gpu_hours);
  out->set_effective_gpu_hours(g.effective_gpu_hours);
  out->set_ofu_mean(g.ofu_mean);
  out->set_idle_gpu_hours(g.idle_gpu_hours);
  out->set_low_efficiency_gpu_hours(g.low_efficiency_gpu_hours);
  for (double h : g.gpu_hours_by_ofu_decile) out->add_gpu_hours_by_ofu_decile(h);
}

absl::StatusOr<core::TileConfig> TileFromProto(const v1::TileConfig& t, absl::string_view where) {
  core::TileConfig c;
  c.tile_m = t.tile_m();
  c.tile_n = t.tile_n();
  c.tile_k = t.tile_k();
  c.cluster_m = t.cluster_m() == 0 ? 1 : t.cluster_m();
  c.cluster_n = t.cluster_n() == 0 ? 1 : t.cluster_n();
  if (c.tile_m <= 0 || c.tile_n <= 0 || c.tile_k <= 0 || c.cluster_m < 0 || c.cluster_n < 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": tile ", t.tile_m(), "x", t.tile_n(),
                                                   "x", t.tile_k(), " cluster ", t.cluster_m(), "x",
                                                   t.cluster_n(), " must have positive sizes"));
  }
  return c;
}

v1::TileConfig TileToProto(const core::TileConfig& c, int64_t stages) {
  v1::TileConfig t;
  t.set_tile_m(static_cast<int32_t>(c.tile_m));
  t.set_tile_n(static_cast<int32_t>(c.tile_n));
  t.set_tile_k(static_cast<int32_t>(c.tile_k));
  t.set_cluster_m(static_cast<int32_t>(c.cluster_m));
  t.set_cluster_n(static_cast<int32_t>(c.cluster_n));
  t.set_pipeline_stages(static_cast<int32_t>(stages));
  return t;
}

// Live windows of one job to one client; replayed windows first. A client that falls more
// than kMaxQueued messages behind loses the oldest ones (the API's GetJobOfu has them all).
class JobStream : public platform::QueuedStreamWriter<v1::StreamJobOfuResponse> {
 public:
  static constexpr size_t kMaxQueued = 1000;

  JobStream(StreamHub* hub, int64_t job, bool include_per_gpu,
            std::vector<v1::StreamJobOfuResponse> replay)
      : QueuedStreamWriter(kMaxQueued), hub_(hub) {
    Hold();
    subscription_ = hub_->Subscribe(job, include_per_gpu,
                                    [this](const v1::StreamJobOfuResponse& r) { Push(r); });
    Start(std::move(replay));
  }

  void OnDone() override {
    hub_->Unsubscribe(subscription_);
    delete this;
  }

 private:
  StreamHub* hub_;
  int64_t subscription_ = 0;
};

}  // namespace

OfuServiceImpl::OfuServiceImpl(OfuStore* store, OfuConsumer* consumer, LatestCache* cache,
                               StreamHub* hub, const core::GpuCatalog* catalog,
                               OfuServiceOptions options)
    : store_(store),
      consumer_(consumer),
      cache_(cache),
      hub_(hub),
      catalog_(catalog),
      options_(std::move(options)) {}

int64_t OfuServiceImpl::NowMs() const {
  return options_.clock ? options_.clock() : absl::ToUnixMillis(absl::Now());
}

absl::Status OfuServiceImpl::DoGetJobOfu(const v1::GetJobOfuRequest& request,
                                         v1::GetJobOfuResponse* response) {
  if (absl::Status s = CheckJobKey(request.job(), "job"); !s.ok()) return s;
  if (request.resolution_s() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("resolution_s=", request.resolution_s(), " must not be negative"));
  }
  if (request.page_size() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size=", request.page_size(), " must not be negative"));
  }
  absl::StatusOr<JobRow> job = store_->FindJob(request.job().cluster(), request.job().job_id());
  if (!job.ok()) return job.status();
  const int32_t native_s = options_.window_s;
  const int32_t bucket_s = EffectiveResolutionS(request.resolution_s(), native_s);
  const int64_t bucket_ms = int64_t{bucket_s} * 1000;
  const int page_size = request.page_size() == 0 ? 100 : std::min(request.page_size(), 1000);
  int64_t from_ms = request.time_range().has_start_time()
                        ? api::TimestampToUnixMs(request.time_range().start_time())
                        : kEarliestMs;
  const int64_t to_ms = request.time_range().has_end_time()
                            ? api::TimestampToUnixMs(request.time_range().end_time())
                            : kLatestMs;
  from_ms = std::max(from_ms, kEarliestMs);
  if (!request.page_token().empty()) {
    int64_t token_ms = 0;
    absl::string_view t = request.page_token();
    if (!absl::ConsumePrefix(&t, kTokenPrefix) || !absl::SimpleAtoi(t, &token_ms)) {
      return absl::InvalidArgumentError(
          absl::StrCat("page_token=\"", request.page_token(), "\" is not a token of this query"));
    }
    from_ms = std::max(from_ms, token_ms);
  }
  from_ms = WindowStart(from_ms, bucket_ms);
  response->set_effective_window_s(bucket_s);
  const int per_bucket = std::max(1, bucket_s / std::max(1, native_s));
  const int limit = (page_size + 1) * per_bucket;
  absl::StatusOr<std::vector<StoredWindow>> rows =
      store_->Windows(job->id, /*per_gpu=*/false, from_ms, to_ms, limit);
  if (!rows.ok()) return rows.status();
  std::vector<StoredWindow> buckets = Downsample(*rows, bucket_s);
  if (static_cast<int>(buckets.size()) > page_size) {
    response->set_next_page_token(absl::StrCat(kTokenPrefix, buckets[page_size].result.start_ms));
    buckets.resize(page_size);
  } else if (static_cast<int>(rows->size()) >= limit && buckets.size() > 1) {
    // The last bucket may be cut by the row limit: it starts the next page instead.
    response->set_next_page_token(absl::StrCat(kTokenPrefix, buckets.back().result.start_ms));
    buckets.pop_back();
  }
  // Warm-up is judged over the whole job, as in GetJobSummary.
  std::optional<int64_t> steady_start_ms;
  if (!buckets.empty()) {
    absl::StatusOr<std::vector<StoredWindow>> whole =
        store_->Windows(job->id, false, kEarliestMs, kLatestMs, 0);
    if (!whole.ok()) return whole.status();
    steady_start_ms = SummarizeJob(*job, *whole, {}, NowMs()).steady_state_start_ms;
  }
  for (const StoredWindow& b : buckets) {
    const bool warmup = !steady_start_ms.has_value() || b.result.start_ms < *steady_start_ms;
    *response->add_windows() = WindowToProto(b.result, b.window_s, b.revision, job->cluster,
                                             job->job_id, job->workload_fingerprint, warmup);
  }
  if (request.include_per_gpu() && !buckets.empty()) {
    absl::StatusOr<std::vector<StoredWindow>> gpus =
        store_->Windows(job->id, /*per_gpu=*/true, buckets.front().result.start_ms,
                        buckets.back().result.end_ms, 0);
    if (!gpus.ok()) return gpus.status();
    std::stable_sort(gpus->begin(), gpus->end(), [](const StoredWindow& a, const StoredWindow& b) {
      return a.result.gpu < b.result.gpu;
    });
    std::vector<StoredWindow> merged = Downsample(*gpus, bucket_s);
    std::stable_sort(merged.begin(), merged.end(),
                     [](const StoredWindow& a, const StoredWindow& b) {
                       return a.result.start_ms < b.result.start_ms;
                     });
    for (const StoredWindow& g : merged) {
      *response->add_gpu_windows() = WindowToProto(g.result, g.window_s, g.revision, job->cluster,
                                                   job->job_id, job->workload_fingerprint);
    }
  }
  return absl::OkStatus();
}

absl::Status OfuServiceImpl::DoGetJobSummary(const v1::GetJobSummaryRequest& request,
                                             v1::GetJobSummaryResponse* response) {
  if (absl::Status s = CheckJobKey(request.job(), "job"); !s.ok()) return s;
  absl::StatusOr<JobRow> job = store_->FindJob(request.job().cluster(), request.job().job_id());
  if (!job.ok()) return job.status();
  absl::StatusOr<std::vector<StoredWindow>> windows =
      store_->Windows(job->id, false, kEarliestMs, kLatestMs, 0);
  if (!windows.ok()) return windows.status();
  absl::StatusOr<std::vector<PerGpuFigure>> gpus = store_->GpuFigures(job->id);
  if (!gpus.ok()) return gpus.status();
  const JobSummaryFigures f =
      SummarizeJob(*job, *windows, *gpus, NowMs(), 0.9, options_.straggler_threshold);
  v1::JobOfuSummary* s = response->mutable_summary();
  s->mutable_job()->set_cluster(job->cluster);
  s->mutable_job()->set_job_id(job->job_id);
  s->set_gpu_model(job->gpu_model.empty() && !windows->empty() ? windows->front().result.gpu_model
                                                               : job->gpu_model);
  s->set_gpus_allocated(job->gpus_allocated);
  if (f.first_start_ms.has_value()) {
    *s->mutable_time_range()->mutable_start_time() = api::UnixMsToTimestamp(*f.first_start_ms);
    *s->mutable_time_range()->mutable_end_time() = api::UnixMsToTimestamp(*f.last_end_ms);
  }
  s->set_finalized(job->end_ms.has_value() && f.all_final);
  if (f.ofu.has_value()) {
    s->set_ofu(*f.ofu);
    s->set_ofu_ci95_low(std::max(0.0, *f.ofu - f.ofu_ci95_half_width.value_or(0)));
    s->set_ofu_ci95_high(*f.ofu + f.ofu_ci95_half_width.value_or(0));
  }
  if (f.steady_state_ofu.has_value()) s->set_steady_state_ofu(*f.steady_state_ofu);
  if (f.steady_state_start_ms.has_value()) {
    *s->mutable_steady_state_start_time() = api::UnixMsToTimestamp(*f.steady_state_start_ms);
  }
  s->set_ofu_unavailable_reason(OfuUnavailableReason(f, s->gpu_model(), !windows->empty()));
  s->set_sample_count(f.sample_count);
  s->set_gpu_coverage(f.gpu_coverage);
  s->set_gpu_hours(f.gpu_hours);
  s->set_effective_gpu_hours(f.effective_gpu_hours);
  s->set_idle_gpu_hours(f.idle_gpu_hours);
  if (f.spatial_imbalance.has_value()) s->set_spatial_imbalance(*f.spatial_imbalance);
  if (f.temporal_imbalance.has_value()) s->set_temporal_imbalance(*f.temporal_imbalance);
  for (const StragglerResult& st : f.stragglers) {
    v1::Straggler* out = s->add_stragglers();
    *out->mutable_gpu() = GpuRefFromKey(st.gpu);
    out->set_ofu(st.ofu);
    out->set_score(st.score);
  }
  for (const std::string& g : f.idle_gpus) *s->add_idle_gpus() = GpuRefFromKey(g);
  s->set_roofline_class(static_cast<v1::RooflineClass>(static_cast<int>(f.roofline)));
  if (f.hbm_peak_fraction.has_value()) s->set_hbm_peak_fraction(*f.hbm_peak_fraction);
  if (f.energy_j.has_value()) s->set_energy_j(*f.energy_j);
  if (f.energy_kwh_per_gpu_hour.has_value()) {
    s->set_energy_kwh_per_gpu_hour(*f.energy_kwh_per_gpu_hour);
  }
  AddFlags(f.flags, s->mutable_flags());
  for (int bit = 1; bit <= v1::DataQualityFlag_MAX && bit < 32; ++bit) {
    if (f.flag_windows[bit] == 0) continue;
    v1::DataQualityShare* share = s->add_flag_shares();
    share->set_flag(static_cast<v1::DataQualityFlag>(bit));
    share->set_windows(f.flag_windows[bit]);
  }
  s->set_window_count(static_cast<int32_t>(windows->size()));
  s->set_late_sample_count(job->late_sample_count);
  if (options_.faults != nullptr) {
    absl::StatusOr<FaultEventPage> faults =
        options_.faults->ForJob(job->id, {.limit = kSummaryFaultEvents});
    if (!faults.ok()) return faults.status();
    s->set_fault_event_count(faults->total);
    for (const StoredFaultEvent& e : faults->events) FaultEventToProto(e, s->add_fault_events());
  }
  return absl::OkStatus();
}

absl::Status OfuServiceImpl::DoListFaultEvents(const v1::ListFaultEventsRequest& request,
                                               v1::ListFaultEventsResponse* response,
                                               const grpc::ServerContextBase* context) {
  if (options_.faults == nullptr) {
    return absl::UnimplementedError("fault events are not served by this goodput-ofu");
  }
  // Scope first, whatever else is wrong with the request. A job's faults: the job must be
  // within the token's scope; a cluster's or host's: other users' jobs held those GPUs, so a
  // user- or team-limited token names one of its jobs.
  std::string cluster = request.cluster();
  if (absl::Status s = platform::CallScope::Of(context).NarrowToJob(
          "ListFaultEvents", &cluster, request.job().cluster(), request.job().job_id());
      !s.ok()) {
    return s;
  }
  const bool by_job = request.has_job();
  if (by_job == !request.cluster().empty()) {
    return absl::InvalidArgumentError(
        "set either job or cluster (and optionally host), not both and not neither");
  }
  if (!request.host().empty() && by_job) {
    return absl::InvalidArgumentError("host: only with cluster");
  }
  if (request.page_size() < 0 || request.page_size() > 10000) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size=", request.page_size(), " is outside [0, 10000]"));
  }
  FaultEventQuery query;
  query.limit = request.page_size() == 0 ? 1000 : request.page_size();
  if (request.range().has_start_time()) {
    query.from_ms = api::TimestampToUnixMs(request.range().start_time());
  }
  if (request.range().has_end_time()) {
    query.to_ms = api::TimestampToUnixMs(request.range().end_time());
  }
  if (!request.page_token().empty()) {
    std::vector<std::string> parts = absl::StrSplit(request.page_token(), '|');
    int64_t time_ms = 0;
    int64_t id = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &time_ms) ||
        !absl::SimpleAtoi(parts[1], &id)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "page_token=\"", api::Sanitize(request.page_token()), "\" is not a token of this list"));
    }
    query.after = std::make_pair(time_ms, id);
  }
  absl::StatusOr<FaultEventPage> page;
  if (by_job) {
    if (absl::Status s = CheckJobKey(request.job(), "job"); !s.ok()) return s;
    absl::StatusOr<JobRow> job = store_->FindJob(request.job().cluster(), request.job().job_id());
    if (!job.ok()) return job.status();
    page = options_.faults->ForJob(job->id, query);
  } else {
    page = options_.faults->ForCluster(cluster, request.host(), query);
  }
  if (!page.ok()) return page.status();
  for (const StoredFaultEvent& e : page->events) FaultEventToProto(e, response->add_events());
  if (page->more && !page->events.empty()) {
    response->set_next_page_token(
        absl::StrCat(page->events.back().time_ms, "|", page->events.back().id));
  }
  return absl::OkStatus();
}

absl::Status OfuServiceImpl::DoGetLatestOfu(const v1::GetLatestOfuRequest& request,
                                            v1::GetLatestOfuResponse* response) {
  if (request.jobs_size() > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("jobs: ", request.jobs_size(), " jobs requested; at most 1000 per call"));
  }
  for (int i = 0; i < request.jobs_size(); ++i) {
    const v1::JobKey& key = request.jobs(i);
    if (absl::Status s = CheckJobKey(key, absl::StrCat("jobs[", i, "]")); !s.ok()) return s;
    v1::LatestOfu* out = response->add_jobs();
    *out->mutable_job() = key;
    std::optional<v1::OfuWindow> cached;
    if (cache_ != nullptr && !request.include_per_gpu()) {
      cached = cache_->Get(key.cluster(), key.job_id());
    }
    if (cached.has_value()) {
      *out->mutable_window() = *std::move(cached);
      continue;
    }
    absl::StatusOr<JobRow> job = store_->FindJob(key.cluster(), key.job_id());
    if (absl::IsNotFound(job.status())) continue;
    if (!job.ok()) return job.status();
    absl::StatusOr<std::optional<int64_t>> start = store_->LatestWindowStart(job->id);
    if (!start.ok()) return start.status();
    if (!start->has_value()) continue;
    absl::StatusOr<std::vector<StoredWindow>> w =
        store_->Windows(job->id, false, **start, **start + 1, 1);
    if (!w.ok()) return w.status();
    if (!w->empty()) {
      *out->mutable_window() =
          WindowToProto(w->front().result, w->front().window_s, w->front().revision, job->cluster,
                        job->job_id, job->workload_fingerprint);
    }
    if (request.include_per_gpu()) {
      absl::StatusOr<std::vector<StoredWindow>> g =
          store_->Windows(job->id, true, **start, **start + 1, 0);
      if (!g.ok()) return g.status();
      for (const StoredWindow& sw : *g) {
        *out->add_gpu_windows() = WindowToProto(sw.result, sw.window_s, sw.revision, job->cluster,
                                                job->job_id, job->workload_fingerprint);
      }
    }
  }
  return absl::OkStatus();
}

absl::Status OfuServiceImpl::DoGetFleetSummary(const v1::GetFleetSummaryRequest& request,
                                               v1::GetFleetSummaryResponse* response) {
  if (!request.time_range().has_start_time() || !request.time_range().has_end_time()) {
    return absl::InvalidArgumentError("time_range: start_time and end_time are both required");
  }
  double threshold = request.low_efficiency_ofu_threshold();
  if (threshold < 0 || threshold > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("low_efficiency_ofu_threshold=", threshold, " is outside [0, 1]"));
  }
  if (threshold == 0) threshold = options_.low_efficiency_ofu_threshold;
  std::vector<FleetDimension> dims;
  for (int g : request.group_by()) {
    switch (g) {
      case v1::FLEET_GROUP_BY_CLUSTER:
        dims.push_back(FleetDimension::kCluster);
        break;
      case v1::FLEET_GROUP_BY_GPU_MODEL:
        dims.push_back(FleetDimension::kGpuModel);
        break;
      case v1::FLEET_GROUP_BY_TEAM:
        dims.push_back(FleetDimension::kTeam);
        break;
      case v1::FLEET_GROUP_BY_SCHEDULER:
        dims.push_back(FleetDimension::kScheduler);
        break;
      case v1::FLEET_GROUP_BY_USER:
        dims.push_back(FleetDimension::kUser);
        break;
      case v1::FLEET_GROUP_BY_WORKLOAD:
        dims.push_back(FleetDimension::kWorkload);
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("group_by=", g, " is not a dimension"));
    }
  }
  absl::StatusOr<std::vector<FleetPiece>> pieces =
      store_->FleetPieces(api::TimestampToUnixMs(request.time_range().start_time()),
                          api::TimestampToUnixMs(request.time_range().end_time()), threshold);
  if (!pieces.ok()) return pieces.status();
  FleetFilter filter{.cluster = request.cluster(),
                     .gpu_model = request.gpu_model(),
                     .team = request.team(),
                     .scheduler = api::SchedulerKindName(request.scheduler()),
                     .user = request.user(),
                     .workload_fingerprint = request.workload_fingerprint()};
  auto [groups, total] = SummarizeFleet(*pieces, filter, dims);
  for (const FleetGroupFigures& g : groups) FillGroup(g, response->add_groups());
  FillGroup(total, response->mutable_total());
  response->set_low_efficiency_ofu_threshold(threshold);
  return absl::OkStatus();
}

absl::Status OfuServiceImpl::DoListGpuSpecs(const v1::ListGpuSpecsRequest& request,
                                            v1::ListGpuSpecsResponse* response) {
  std::vector<const core::GpuSpec*> specs;
  if (!request.model().empty()) {
    absl::StatusOr<const core::GpuSpec*> spec = catalog_->Find(request.model());
    if (!spec.ok()) return spec.status();
    specs.push_back(*spec);
  } else {
    for (const core::GpuSpec& s : catalog_->specs()) specs.push_back(&s);
    std::sort(specs.begin(), specs.end(),
              [](const core::GpuSpec* a, const core::GpuSpec* b) { return a->name < b->name; });
  }
  for (const core::GpuSpec* s : specs) {
    v1::GpuSpec* out = response->add_specs();
    out->set_model(s->name);
    for (const std::string& alias : s->model_names) out->add_aliases(alias);
    out->set_sm_count(s->sm_count);
    out->set_tensor_max_clock_mhz(s->tensor_max_clock_mhz);
    out->set_sm_boost_clock_mhz(s->sm_boost_clock_mhz);
    for (core::Precision p : core::kAllPrecisions) {
      std::optional<double> flops = s->FlopsPerCyclePerSm(p);
      if (!flops.has_value()) continue;
      v1::PrecisionPeak* peak = out->add_peaks();
      peak->set_precision(api::PrecisionToProto(p));
      peak->set_flops_per_cycle_per_sm(*flops);
      absl::StatusOr<double> tflops = s->PeakTflops(p);
      if (tflops.ok()) peak->set_peak_tflops(*tflops);
    }
    out->set_hbm_capacity_mib(s->hbm_capacity_gib * 1024.0);
    out->set_hbm_bandwidth_gb_per_s(s->hbm_bandwidth_gb_per_s);
    out->set_source_note(s->source_note);
  }
  return absl::OkStatus();
}

absl::Status OfuServiceImpl::DoEstimateGemmOverhead(const v1::EstimateGemmOverheadRequest& request,
                                                    v1::EstimateGemmOverheadResponse* response) {
  if (request.calls_size() == 0) return absl::InvalidArgumentError("calls: at least one GEMM");
  std::vector<core::WeightedGemm> gemms;
  for (int i = 0; i < request.calls_size(); ++i) {
    const v1::GemmCall& call = request.calls(i);
    const std::string where = absl::StrCat("calls[", i, "]");
    core::TileConfig tile;
    int64_t stages = 0;
    auto from_name = [&](const std::string& name) -> absl::Status {
      absl::StatusOr<core::NvjetKernel> k = core::ParseNvjetKernelName(name);
      if (!k.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": ", k.status().message()));
      }
      tile = k->tile;
      stages = k->stages;
      return absl::OkStatus();
    };
    absl::Status status;
    if (call.has_tile()) {
      absl::StatusOr<core::TileConfig> t = TileFromProto(call.tile(), where);
      if (!t.ok()) return t.status();
      tile = *t;
      stages = call.tile().pipeline_stages();
    } else if (call.has_nvjet_kernel_name()) {
      status = from_name(call.nvjet_kernel_name());
    } else if (request.has_tile()) {
      absl::StatusOr<core::TileConfig> t = TileFromProto(request.tile(), "tile");
      if (!t.ok()) return t.status();
      tile = *t;
      stages = request.tile().pipeline_stages();
    } else if (request.has_nvjet_kernel_name()) {
      status = from_name(request.nvjet_kernel_name());
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": no tile or nvjet_kernel_name, and the request has no default"));
    }
    if (!status.ok()) return status;
    if (call.count() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": count=", call.count(), " must not be negative"));
    }
    const core::GemmShape shape{.m = call.m(), .n = call.n(), .k = call.k()};
    absl::StatusOr<core::TileQuantization> q = core::ComputeTileQuantization(shape, tile);
    if (!q.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": ", q.status().message()));
    v1::GemmOverhead* out = response->add_calls();
    *out->mutable_call() = call;
    *out->mutable_tile() = TileToProto(tile, stages);
    out->set_m_eff(q->m_eff);
    out->set_n_eff(q->n_eff);
    out->set_k_eff(q->k_eff);
    out->set_useful_flops(q->useful_flops);
    out->set_executed_flops(q->executed_flops);
    out->set_overhead_pct(q->overhead_percent);
    gemms.push_back({.shape = shape, .tile = tile, .count = call.count() == 0 ? 1 : call.count()});
  }
  absl::StatusOr<core::TileQuantization> total = core::ComputeTileQuantization(gemms);
  if (!total.ok()) return absl::InvalidArgumentError(total.status().message());
  response->set_total_overhead_pct(total->overhead_percent);
  if (request.has_ofu()) {
    absl::StatusOr<double> adjusted = core::AdjustedOfu(request.ofu(), *total);
    if (!adjusted.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("ofu: ", adjusted.status().message()));
    }
    response->set_adjusted_ofu(*adjusted);
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* OfuServiceImpl::GetJobOfu(grpc::CallbackServerContext* context,
                                                    const v1::GetJobOfuRequest* request,
                                                    v1::GetJobOfuResponse* response) {
  if (absl::Status s = platform::CallScope::Of(context).CheckJob(request->job().cluster(),
                                                                 request->job().job_id());
      !s.ok()) {
    return FinishUnary(context, s);
  }
  return FinishUnary(context, DoGetJobOfu(*request, response));
}

grpc::ServerWriteReactor<v1::StreamJobOfuResponse>* OfuServiceImpl::StreamJobOfu(
    grpc::CallbackServerContext* context, const v1::StreamJobOfuRequest* request) {
  const auto failed = platform::FailedStream<v1::StreamJobOfuResponse>;
  if (absl::Status s = CheckJobKey(request->job(), "job"); !s.ok()) return failed(s);
  if (absl::Status s = platform::CallScope::Of(context).CheckJob(request->job().cluster(),
                                                                 request->job().job_id());
      !s.ok()) {
    return failed(s);
  }
  absl::StatusOr<JobRow> job = store_->FindJob(request->job().cluster(), request->job().job_id());
  if (!job.ok()) return failed(job.status());
  // Replay: windows from replay_from, or the latest one.
  int64_t from_ms = 0;
  if (request->has_replay_from()) {
    from_ms = api::TimestampToUnixMs(request->replay_from());
  } else {
    absl::StatusOr<std::optional<int64_t>> latest = store_->LatestWindowStart(job->id);
    if (!latest.ok()) return failed(latest.status());
    from_ms = latest->value_or(kLatestMs);
  }
  std::vector<v1::StreamJobOfuResponse> replay;
  absl::StatusOr<std::vector<StoredWindow>> windows =
      store_->Windows(job->id, false, from_ms, kLatestMs, 0);
  if (!windows.ok()) return failed(windows.status());
  absl::StatusOr<std::vector<StoredWindow>> gpus = std::vector<StoredWindow>{};
  if (request->include_per_gpu() && !windows->empty()) {
    gpus = store_->Windows(job->id, true, from_ms, kLatestMs, 0);
    if (!gpus.ok()) return failed(gpus.status());
  }
  size_t g = 0;
  for (const StoredWindow& w : *windows) {
    v1::StreamJobOfuResponse r;
    *r.mutable_window() = WindowToProto(w.result, w.window_s, w.revision, job->cluster, job->job_id,
                                        job->workload_fingerprint);
    while (g < gpus->size() && (*gpus)[g].result.start_ms < w.result.start_ms) ++g;
    for (; g < gpus->size() && (*gpus)[g].result.start_ms == w.result.start_ms; ++g) {
      *r.add_gpu_windows() =
          WindowToProto((*gpus)[g].result, (*gpus)[g].window_s, (*gpus)[g].revision, job->cluster,
                        job->job_id, job->workload_fingerprint);
    }
    replay.push_back(std::move(r));
  }
  return new JobStream(hub_, job->id, request->include_per_gpu(), std::move(replay));
}

grpc::ServerUnaryReactor* OfuServiceImpl::GetLatestOfu(grpc::CallbackServerContext* context,
                                                       const v1::GetLatestOfuRequest* request,
                                                       v1::GetLatestOfuResponse* response) {
  const platform::CallScope scope = platform::CallScope::Of(context);
  for (const v1::JobKey& key : request->jobs()) {
    if (absl::Status s = scope.CheckJob(key.cluster(), key.job_id()); !s.ok()) {
      return FinishUnary(context, s);
    }
  }
  return FinishUnary(context, DoGetLatestOfu(*request, response));
}

grpc::ServerUnaryReactor* OfuServiceImpl::ListFaultEvents(grpc::CallbackServerContext* context,
                                                          const v1::ListFaultEventsRequest* request,
                                                          v1::ListFaultEventsResponse* response) {
  return FinishUnary(context, DoListFaultEvents(*request, response, context));
}

grpc::ServerUnaryReactor* OfuServiceImpl::GetJobSummary(grpc::CallbackServerContext* context,
                                                        const v1::GetJobSummaryRequest* request,
                                                        v1::GetJobSummaryResponse* response) {
  if (absl::Status s = platform::CallScope::Of(context).CheckJob(request->job().cluster(),
                                                                 request->job().job_id());
      !s.ok()) {
    return FinishUnary(context, s);
  }
  return FinishUnary(context, DoGetJobSummary(*request, response));
}

grpc::ServerUnaryReactor* OfuServiceImpl::GetFleetSummary(grpc::CallbackServerContext* context,
                                                          const v1::GetFleetSummaryRequest* request,
                                                          v1::GetFleetSummaryResponse* response) {
  // A scoped token sums the jobs of its cluster, user and team only.
  v1::GetFleetSummaryRequest scoped = *request;
  if (absl::Status s = platform::CallScope::Of(context).NarrowFilters(
          "GetFleetSummary", scoped.mutable_cluster(), scoped.mutable_user(),
          scoped.mutable_team());
      !s.ok()) {
    return FinishUnary(context, s);
  }
  return FinishUnary(context, DoGetFleetSummary(scoped, response));
}

grpc::ServerUnaryReactor* OfuServiceImpl::ListGpuSpecs(grpc::CallbackServerContext* context,
                                                       const v1::ListGpuSpecsRequest* request,
                                                       v1::ListGpuSpecsResponse* response) {
  return FinishUnary(context, DoListGpuSpecs(*request, response));
}

grpc::ServerUnaryReactor* OfuServiceImpl::EstimateGemmOverhead(
    grpc::CallbackServerContext* context, const v1::EstimateGemmOverheadRequest* request,
    v1::EstimateGemmOverheadResponse* response) {
  return FinishUnary(context, DoEstimateGemmOverhead(*request, response));
}

}  // namespace goodput::ofu
