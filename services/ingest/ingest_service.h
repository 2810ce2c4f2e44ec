// IngestService: telemetry in over gRPC. `IngestPipeline` is the path every source shares
// (validate, attribute, store durably, count); `IngestServiceImpl` wires it to the
// PushSamples (client streaming) and PushExposition RPCs.
//
// Limits: a PushSamples batch above `max_batch_samples` or an exposition body above
// `max_exposition_bytes` is RESOURCE_EXHAUSTED naming the limit. Work in flight is bounded
// by `max_inflight_samples`: when PostgreSQL is slow and the bound is reached, new batches
// get RESOURCE_EXHAUSTED ("retry with backoff") instead of queueing in memory. A batch is
// acknowledged only after its transaction committed.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "services/core/gpu_catalog.h"
#include "services/ingest/exposition.h"
#include "services/ingest/identity_rules.h"
#include "services/ingest/sample.h"
#include "services/ingest/sample_store.h"
#include "services/ingest/validation.h"
#include "services/platform/grpc_limits.h"
#include "services/platform/logging.h"
#include "services/platform/metrics.h"

namespace goodput::ingest {

struct IngestOptions {
  int64_t max_batch_samples = 100'000;
  int64_t max_exposition_bytes = 16 << 20;
  int64_t max_inflight_samples = 1'000'000;
  int64_t max_future_skew_ms = 5 * 60 * 1000;
  int64_t retention_ms = 30LL * 86'400'000;  // samples older than this are refused
  int max_listed_refusals = 1000;
  // Host canonicalization and pod label pairs (identity_rules.h).
  IdentityRules identity;
  // PushExposition and scraped lines with more labels are refused alone.
  size_t max_labels_per_series = kDefaultMaxLabelsPerSeries;
  // Label sizes a sample may carry (ingest.limits.*, validation.h).
  size_t max_label_name_bytes = api::kMaxLabelNameBytes;
  size_t max_label_value_bytes = api::kMaxLabelValueBytes;
};

// Counts samples admitted for processing; refuses admission above a bound.
class InflightLimiter {
 public:
  explicit InflightLimiter(int64_t limit) : limit_(limit) {}
  // True (and counted) when `n` more fit under the limit; a single request larger than the
  // limit is admitted when nothing else is in flight, so it can never starve.
  bool TryAcquire(int64_t n);
  void Release(int64_t n) { inflight_.fetch_sub(n); }
  int64_t inflight() const { return inflight_.load(); }
  int64_t limit() const { return limit_; }

 private:
  const int64_t limit_;
  std::atomic<int64_t> inflight_{0};
};

// The outcome of one batch and the refusals of its items.
struct BatchOutcome {
  std::string batch_id;
  BatchWriteResult result;
  std::vector<Refusal> refusals;
};

class IngestPipeline {
 public:
  // `store` and `catalog` must outlive the pipeline; `now_unix_ms` is the clock.
  // `logger` hears of batches that could not be stored.
  IngestPipeline(SampleStore* store, const core::GpuCatalog* catalog, IngestOptions options,
                 std::function<int64_t()> now_unix_ms, platform::MetricsRegistry* metrics,
                 platform::Logger logger = platform::Logger());

  // Validates `samples`, attributes the good ones, and stores them as batch `batch_id`.
  // `pre_refusals` (e.g. from parsing) are reported with the batch. RESOURCE_EXHAUSTED when
  // saturated; storage errors as the store reports them (UNAVAILABLE, ...).
  absl::StatusOr<BatchOutcome> Ingest(const std::string& cluster, const std::string& batch_id,
                                      const std::string& source, std::vector<Sample> samples,
                                      bool already_validated, std::vector<Refusal> pre_refusals,
                                      int64_t pre_refused_count);

  // Counts what a parser set aside without refusing it: lines of metrics goodput does not use,
  // DCGM blank values and samples of a standby HA replica, per source, on /metrics.
  void CountSetAside(absl::string_view source, int64_t ignored_lines, int64_t blank_values,
                     int64_t ha_standby_samples = 0);

  ValidationOptions validation_options() const;

  const IngestOptions& options() const { return options_; }
  int64_t NowUnixMs() const { return now_unix_ms_(); }
  InflightLimiter& limiter() { return limiter_; }

 private:
  static constexpr size_t kMaxHostFormsCached = 100'000;
  // Adds to `write.hosts_seen` the printed host names of its attributed samples that are not
  // recorded yet.
  void NewHostForms(BatchWrite& write);
  void LogFailure(absl::string_view source, absl::string_view batch_id,
                  const absl::Status& status);

  SampleStore* store_;
  const core::GpuCatalog* catalog_;
  IngestOptions options_;
  std::function<int64_t()> now_unix_ms_;
  InflightLimiter limiter_;
  // Per-source families (label `source`; refusals also by `reason`); null without metrics.
  platform::CounterFamily* stored_ = nullptr;
  platform::CounterFamily* refused_ = nullptr;
  platform::CounterFamily* unattributed_ = nullptr;
  platform::CounterFamily* ignored_ = nullptr;
  platform::CounterFamily* blank_ = nullptr;
  platform::CounterFamily* ha_standby_ = nullptr;
  platform::CounterFamily* duplicate_batches_ = nullptr;
  platform::CounterFamily* saturated_ = nullptr;
  platform::CounterFamily* failed_batches_ = nullptr;
  platform::CounterFamily* fault_events_ = nullptr;
  platform::Logger logger_;
  // Storage failures are logged at most once per 10 s, with how many were not logged.
  std::atomic<int64_t> last_failure_log_ms_{0};
  std::atomic<int64_t> unlogged_failures_{0};
  // "job|host|form" already recorded in job_hosts_seen (bounded: cleared when full).
  absl::Mutex hosts_seen_mu_;
  absl::flat_hash_set<std::string> hosts_seen_ ABSL_GUARDED_BY(hosts_seen_mu_);
};

// Trailing metadata of a PushSamples stream that fails after some of its batches were
// committed (an unreadable message, PostgreSQL down, backpressure): the serialized
// PushSamplesResponse of the batches before the failure, so the sender knows what not to
// resend. Its status message says the same in words.
inline constexpr char kCommittedBatchesMetadata[] = "goodput-committed-batches-bin";

// The IngestService RPCs over IngestPipeline. PushSamples is served with the callback API on
// raw messages, so that a message the server cannot parse fails the stream with
// INVALID_ARGUMENT naming its position instead of looking like the end of the stream. With
// `streams`, each PushSamples stream holds one of its slots while open: beyond the bound a new
// stream evicts the one idle longest (idle long enough) or is refused RESOURCE_EXHAUSTED.
class IngestServiceImpl {
 public:
  // `pipeline` and `streams` (may be null: no bound) must outlive the service.
  explicit IngestServiceImpl(IngestPipeline* pipeline, platform::StreamSlots* streams = nullptr)
      : pipeline_(pipeline), streams_(streams) {}

  grpc::ServerReadReactor<grpc::ByteBuffer>* PushSamples(grpc::CallbackServerContext* context,
                                                         grpc::ByteBuffer* response);
  grpc::Status PushExposition(grpc::ServerContextBase* context,
                              const v1::PushExpositionRequest* request,
                              v1::PushExpositionResponse* response);

  // Stores one PushSamples message and adds its outcome to `response`.
  absl::Status PushBatch(const v1::PushSamplesRequest& request, v1::PushSamplesResponse* response);

  platform::StreamSlots* streams() const { return streams_; }

 private:
  IngestPipeline* pipeline_;
  platform::StreamSlots* streams_;
};

}  // namespace goodput::ingest
