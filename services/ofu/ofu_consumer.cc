#include "services/ofu/ofu_consumer.h"

#include <algorithm>
#include <chrono>
#include <tuple>
#include <utility>

#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/clock.h"

namespace goodput::ofu {

OfuConsumer::OfuConsumer(OfuStore* store, const core::GpuCatalog* catalog,
                         EngineOptions engine_options, ConsumerOptions options, Listener listener,
                         platform::Logger logger, Clock clock)
    : store_(store),
      catalog_(catalog),
      engine_options_(std::move(engine_options)),
      options_(options),
      listener_(std::move(listener)),
      logger_(std::move(logger)),
      clock_(clock ? std::move(clock) : Clock([] { return absl::ToUnixMillis(absl::Now()); })),
      engine_(std::make_unique<WindowEngine>(catalog_, engine_options_)) {}

OfuConsumer::~OfuConsumer() { Stop(); }

absl::Status OfuConsumer::Restore() {
  absl::StatusOr<ConsumerState> state = store_->LoadState();
  if (!state.ok()) return state.status();
  absl::StatusOr<std::vector<std::pair<JobRecord, std::vector<Sample>>>> open =
      store_->LoadOpenJobs(*state, RestoreLookbackMs(engine_options_));
  if (!open.ok()) return open.status();
  absl::MutexLock lock(&engine_mu_);
  engine_ = std::make_unique<WindowEngine>(catalog_, engine_options_);
  jobs_.clear();
  state_ = *state;
  int64_t restored = 0;
  for (auto& [rec, samples] : *open) {
    for (const Sample& s : samples) engine_->Restore(rec.info, s);
    restored += static_cast<int64_t>(samples.size());
    engine_->RestoreDone(rec.info.job);
    jobs_[rec.info.job] = rec;
  }
  // Restoring must not be reported as progress or emitted as new windows.
  engine_->TakeProgress();
  logger_.Info("ofu consumer restored", {{"open_jobs", static_cast<int64_t>(open->size())},
                                         {"restored_samples", restored},
                                         {"xid_done", state_.xid_done},
                                         {"seq_floor", state_.seq_floor}});
  return absl::OkStatus();
}

absl::Status OfuConsumer::Feed(const std::vector<ConsumedSample>& page, int64_t now_ms) {
  std::vector<int64_t> unknown;
  for (const ConsumedSample& c : page) {
    if (!jobs_.contains(c.job)) unknown.push_back(c.job);
  }
  std::sort(unknown.begin(), unknown.end());
  unknown.erase(std::unique(unknown.begin(), unknown.end()), unknown.end());
  if (!unknown.empty()) {
    absl::StatusOr<absl::flat_hash_map<int64_t, JobRecord>> loaded = store_->LoadJobs(unknown);
    if (!loaded.ok()) return loaded.status();
    for (auto& [id, rec] : *loaded) jobs_[id] = std::move(rec);
  }
  int64_t late = 0;
  for (const ConsumedSample& c : page) {
    auto it = jobs_.find(c.job);
    if (it == jobs_.end()) continue;  // job deleted meanwhile
    JobRecord& rec = it->second;
    if (rec.info.gpu_model.empty()) rec.info.gpu_model = c.sample_gpu_model;
    if (engine_->Add(rec.info, c.sample, now_ms) == AddOutcome::kLate) ++late;
  }
  absl::MutexLock lock(&mu_);
  stats_.late_samples += late;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> OfuConsumer::RecomputeLate(std::vector<LateCount>& late,
                                                   std::vector<WindowResult>& windows) {
  if (options_.recompute_gpu_windows <= 0 || late.empty()) return 0;
  absl::btree_map<int64_t, std::vector<int64_t>> starts;
  for (const LateCount& l : late) starts[l.job].push_back(l.window_start_ms);
  const int64_t window_ms = engine_options_.window_ms;
  std::vector<WindowResult> recomputed;
  absl::flat_hash_set<int64_t> done;
  for (auto& [job, job_starts] : starts) {
    const std::optional<WindowEngine::Standing> standing = engine_->StandingOf(job);
    auto rec = jobs_.find(job);
    if (!standing.has_value() || rec == jobs_.end()) continue;
    JobInfo info = rec->second.info;
    info.max_event_ms = standing->max_event_ms;
    const int gpus = static_cast<int>(std::max<size_t>(1, standing->gpus));
    const int max_windows = std::clamp(options_.recompute_gpu_windows / gpus, 1,
                                       static_cast<int>(3'600'000 / window_ms));
    for (const RecomputeSpan& span :
         LateRecomputeSpans(job_starts, standing->final_before_ms, window_ms, max_windows)) {
      absl::StatusOr<std::vector<Sample>> samples =
          store_->LoadJobSamples(job, span.from_ms, RecomputeSampleRange(span, engine_options_));
      if (!samples.ok()) return samples.status();
      for (WindowResult& w :
           RecomputeFinalWindows(catalog_, engine_options_, info, *std::move(samples), span)) {
        recomputed.push_back(std::move(w));
      }
    }
    done.insert(job);
  }
  for (LateCount& l : late) l.recomputed = done.contains(l.job);
  // A window the engine finalized in this round can be a late window's neighbour: the
  // recomputation, which has every sample, replaces it.
  absl::flat_hash_set<std::tuple<int64_t, std::string, int64_t>> keys;
  int64_t job_windows = 0;
  for (const WindowResult& w : recomputed) {
    keys.insert({w.job, w.gpu, w.start_ms});
    if (w.gpu.empty()) ++job_windows;
  }
  std::erase_if(windows, [&](const WindowResult& w) {
    return keys.contains(std::make_tuple(w.job, w.gpu, w.start_ms));
  });
  for (WindowResult& w : recomputed) windows.push_back(std::move(w));
  // Job-level windows first, then per-GPU ones, each in time order (TakeResults' order).
  std::stable_sort(windows.begin(), windows.end(), [](const WindowResult& a, const WindowResult& b) {
    return std::make_pair(!a.gpu.empty(), a.start_ms) < std::make_pair(!b.gpu.empty(), b.start_ms);
  });
  return job_windows;
}

absl::StatusOr<bool> OfuConsumer::StepOnce() {
  ConsumerState next = state_;
  if (absl::Status s = store_->BeginRound(next); !s.ok()) return s;
  absl::StatusOr<std::vector<ConsumedSample>> page = store_->ReadPage(next, options_.page_limit);
  if (!page.ok()) return page.status();
  const int64_t now_ms = clock_();
  CommittedWindows committed;
  absl::Status status;
  {
    absl::MutexLock lock(&engine_mu_);
    status = Feed(*page, now_ms);
    if (status.ok()) {
      store_->AdvanceState(next, *page, options_.page_limit);
      engine_->Advance(now_ms);
      committed.windows = engine_->TakeResults();
      std::vector<LateCount> late = engine_->TakeLateCounts();
      absl::StatusOr<int64_t> recomputed = RecomputeLate(late, committed.windows);
      if (!recomputed.ok()) status = recomputed.status();
      std::vector<JobProgress> progress = engine_->TakeProgress();
      const bool job_level = std::any_of(committed.windows.begin(), committed.windows.end(),
                                         [](const WindowResult& w) { return w.gpu.empty(); });
      if (job_level || !late.empty()) ++next.commit_seq;
      const bool unchanged =
          page->empty() && committed.windows.empty() && late.empty() && progress.empty() &&
          next.xid_done == state_.xid_done && next.xid_round_end == state_.xid_round_end &&
          next.seq_cursor == state_.seq_cursor && next.seq_floor == state_.seq_floor;
      if (!unchanged && status.ok()) {
        status = store_->Commit(committed.windows, late, progress, next,
                                engine_options_.window_ms / 1000);
      }
      if (status.ok() && *recomputed > 0) {
        absl::MutexLock lock(&mu_);
        stats_.windows_recomputed += *recomputed;
      }
    }
  }
  if (!status.ok()) {
    {
      absl::MutexLock lock(&mu_);
      ++stats_.commit_failures;
    }
    // The engine has seen samples that were not committed: rebuild it from the last commit.
    if (absl::Status r = Restore(); !r.ok()) {
      logger_.Error("ofu consumer could not restore after a failed commit",
                    {{"error", r.ToString()}});
    }
    return status;
  }
  state_ = next;
  {
    // Jobs the engine flushed are reloaded (with their persisted progress) if they send again.
    absl::MutexLock lock(&engine_mu_);
    for (const WindowResult& w : committed.windows) {
      if (!w.gpu.empty() || committed.job_keys.contains(w.job)) continue;
      auto it = jobs_.find(w.job);
      if (it != jobs_.end()) {
        committed.job_keys[w.job] = {it->second.cluster, it->second.job_id};
      }
    }
    absl::erase_if(jobs_, [&](const auto& entry) { return !engine_->Knows(entry.first); });
  }
  const bool round_done = !state_.in_round();
  {
    absl::MutexLock lock(&mu_);
    stats_.samples_consumed += static_cast<int64_t>(page->size());
    stats_.windows_written += static_cast<int64_t>(committed.windows.size());
    if (round_done) ++stats_.rounds_completed;
  }
  if (listener_ && !committed.windows.empty()) listener_(committed);
  return round_done;
}

void OfuConsumer::Run() {
  // Restore first, retrying while PostgreSQL is unreachable or not migrated yet.
  while (true) {
    absl::Status restored = Restore();
    if (restored.ok()) break;
    logger_.Warn("ofu consumer cannot restore yet; retrying", {{"error", restored.ToString()}});
    absl::MutexLock lock(&mu_);
    auto stopped = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stopped), options_.retry_backoff)) return;
  }
  while (true) {
    absl::StatusOr<bool> done = StepOnce();
    absl::Duration wait = absl::ZeroDuration();
    if (!done.ok()) {
      logger_.Warn("ofu consumer step failed; retrying", {{"error", done.status().ToString()}});
      wait = options_.retry_backoff;
    } else if (*done) {
      wait = options_.poll_interval;
    }
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    if (wait > absl::ZeroDuration()) {
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || wake_; };
      mu_.AwaitWithTimeout(absl::Condition(&ready), wait);
      wake_ = false;
      if (stop_) return;
    }
  }
}

absl::Status OfuConsumer::Start() {
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void OfuConsumer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void OfuConsumer::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

bool OfuConsumer::WaitForFreshRound(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  // A round that starts after now must complete: two completions from here cover the case
  // of a round already under way.
  const int64_t target = stats_.rounds_completed + 2;
  wake_ = true;
  auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return stop_ || stats_.rounds_completed >= target;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout) && !stop_;
}

ConsumerStats OfuConsumer::Stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

size_t OfuConsumer::EngineMemoryBytes() const {
  absl::MutexLock lock(&engine_mu_);
  return engine_->MemoryBytes();
}

}  // namespace goodput::ofu
