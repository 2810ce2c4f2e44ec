#include "services/ofu/ofu_live.h"

#include "absl/strings/str_cat.h"
#include "services/ofu/proto_convert.h"

namespace goodput::ofu {

std::string LatestCache::Key(const std::string& cluster, const std::string& job_id) {
  return absl::StrCat("ofu:latest:", cluster, "/", job_id);
}

void LatestCache::Publish(const CommittedWindows& c, int32_t window_s) {
  if (redis_ == nullptr) return;
  absl::flat_hash_map<int64_t, const WindowResult*> newest;
  for (const WindowResult& w : c.windows) {
    if (!w.gpu.empty()) continue;
    const WindowResult*& n = newest[w.job];
    if (n == nullptr || w.start_ms >= n->start_ms) n = &w;
  }
  for (const auto& [job, w] : newest) {
    auto key = c.job_keys.find(job);
    if (key == c.job_keys.end()) continue;
    {
      absl::MutexLock lock(&mu_);
      auto [it, inserted] = newest_start_ms_.try_emplace(job, w->start_ms);
      if (!inserted && it->second > w->start_ms) continue;
      it->second = w->start_ms;
    }
    const v1::OfuWindow proto =
        WindowToProto(*w, window_s, 0, key->second.first, key->second.second, "");
    (void)redis_->Set(Key(key->second.first, key->second.second), proto.SerializeAsString(), ttl_);
  }
}

std::optional<v1::OfuWindow> LatestCache::Get(const std::string& cluster,
                                              const std::string& job_id) {
  if (redis_ == nullptr) return std::nullopt;
  absl::StatusOr<std::optional<std::string>> v = redis_->Get(Key(cluster, job_id));
  if (!v.ok() || !v->has_value()) return std::nullopt;
  v1::OfuWindow w;
  if (!w.ParseFromString(**v)) return std::nullopt;
  return w;
}

int64_t StreamHub::Subscribe(int64_t job, bool include_per_gpu, Sink sink) {
  absl::MutexLock lock(&mu_);
  const int64_t id = next_id_++;
  subscribers_[id] = {job, include_per_gpu, std::move(sink)};
  return id;
}

void StreamHub::Unsubscribe(int64_t id) {
  absl::MutexLock lock(&mu_);
  subscribers_.erase(id);
}

void StreamHub::Publish(const CommittedWindows& c, int32_t window_s) {
  absl::MutexLock lock(&mu_);
  if (subscribers_.empty()) return;
  // Job-level windows in order, each with the per-GPU windows of the same start.
  for (const WindowResult& w : c.windows) {
    if (!w.gpu.empty()) continue;
    auto key = c.job_keys.find(w.job);
    if (key == c.job_keys.end()) continue;
    v1::StreamJobOfuResponse plain;
    v1::StreamJobOfuResponse with_gpus;
    bool built = false;
    for (auto& [id, s] : subscribers_) {
      if (s.job != w.job) continue;
      if (!built) {
        *plain.mutable_window() =
            WindowToProto(w, window_s, 0, key->second.first, key->second.second, "");
        with_gpus = plain;
        for (const WindowResult& g : c.windows) {
          if (g.job == w.job && !g.gpu.empty() && g.start_ms == w.start_ms) {
            *with_gpus.add_gpu_windows() =
                WindowToProto(g, window_s, 0, key->second.first, key->second.second, "");
          }
        }
        built = true;
      }
      s.sink(s.include_per_gpu ? with_gpus : plain);
    }
  }
}

}  // namespace goodput::ofu
