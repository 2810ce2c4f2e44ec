#include "services/ingest/ingest_service.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "services/api/api_convert.h"
#include "services/ingest/exposition.h"
#include "services/ingest/proto_convert.h"
#include "services/ingest/validation.h"
#include "services/platform/auth.h"
#include "services/platform/status_convert.h"

namespace goodput::ingest {

bool InflightLimiter::TryAcquire(int64_t n) {
  int64_t current = inflight_.load();
  while (true) {
    if (current > 0 && current + n > limit_) return false;
    if (inflight_.compare_exchange_weak(current, current + n)) return true;
  }
}

IngestPipeline::IngestPipeline(SampleStore* store, const core::GpuCatalog* catalog,
                               IngestOptions options, std::function<int64_t()> now_unix_ms,
                               platform::MetricsRegistry* metrics, platform::Logger logger)
    : store_(store),
      catalog_(catalog),
      options_(options),
      now_unix_ms_(std::move(now_unix_ms)),
      limiter_(options.max_inflight_samples),
      logger_(std::move(logger)) {
  if (metrics != nullptr) {
    stored_ = &metrics->AddCounter("goodput_ingest_samples_stored_total",
                                   "GPU samples committed to PostgreSQL, by source.", {"source"});
    refused_ = &metrics->AddCounter(
        "goodput_ingest_samples_refused_total",
        "GPU samples or exposition lines refused as invalid, by source and reason.",
        {"source", "reason"});
    unattributed_ = &metrics->AddCounter(
        "goodput_ingest_samples_unattributed_total",
        "Stored samples no job could be attributed to yet, by source.", {"source"});
    ignored_ = &metrics->AddCounter(
        "goodput_ingest_lines_ignored_total",
        "Exposition lines or series samples of metrics goodput does not use, by source.",
        {"source"});
    blank_ = &metrics->AddCounter(
        "goodput_ingest_dcgm_blank_values_total",
        "DCGM blank values (field not readable, not found, not supported) kept as missing "
        "values, by source.",
        {"source"});
    ha_standby_ = &metrics->AddCounter(
        "goodput_ingest_ha_standby_samples_total",
        "Samples dropped because they came from the standby replica of a Prometheus HA pair, "
        "by source.",
        {"source"});
    duplicate_batches_ = &metrics->AddCounter(
        "goodput_ingest_duplicate_batches_total",
        "Retried batches acknowledged without storing, by source.", {"source"});
    saturated_ = &metrics->AddCounter(
        "goodput_ingest_saturated_total",
        "Batches refused with RESOURCE_EXHAUSTED (backpressure), by source.", {"source"});
    failed_batches_ = &metrics->AddCounter(
        "goodput_ingest_batches_failed_total",
        "Batches not stored because PostgreSQL failed (the sender retries), by source.",
        {"source"});
    fault_events_ = &metrics->AddCounter(
        "goodput_ingest_fault_events_total",
        "GPU fault events (XID, ECC, row remapping, NVLink, PCIe, slowdowns) derived from "
        "stored batches, by source.",
        {"source"});
  }
}

void IngestPipeline::CountSetAside(absl::string_view source, int64_t ignored_lines,
                                   int64_t blank_values, int64_t ha_standby_samples) {
  if (ignored_ == nullptr) return;
  if (ha_standby_samples > 0) {
    ha_standby_->WithLabels({source}).Increment(static_cast<double>(ha_standby_samples));
  }
  if (ignored_lines > 0) {
    ignored_->WithLabels({source}).Increment(static_cast<double>(ignored_lines));
  }
  if (blank_values > 0) blank_->WithLabels({source}).Increment(static_cast<double>(blank_values));
}

ValidationOptions IngestPipeline::validation_options() const {
  return ValidationOptions{.catalog = catalog_,
                           .now_unix_ms = now_unix_ms_(),
                           .max_future_skew_ms = options_.max_future_skew_ms,
                           .max_age_ms = options_.retention_ms,
                           .max_labels = options_.max_labels_per_series,
                           .max_label_name_bytes = options_.max_label_name_bytes,
                           .max_label_value_bytes = options_.max_label_value_bytes};
}

namespace {

// The `reason` label of a refusal: the API's code name, short ("REFUSAL_CODE_OUT_OF_RANGE"
// -> "out_of_range"), so metrics, replies and docs name a reason the same way.
std::string RefusalReasonLabel(RefusalCode code) {
  const std::string& name = v1::RefusalCode_Name(static_cast<v1::RefusalCode>(code));
  return name.empty() ? "other"
                      : absl::AsciiStrToLower(absl::StripPrefix(name, "REFUSAL_CODE_"));
}

}  // namespace

void IngestPipeline::NewHostForms(BatchWrite& write) {
  // Most batches come from exporters printing canonical names: no lock for them.
  const bool any_form =
      std::any_of(write.samples.begin(), write.samples.end(), [](const Sample* s) {
        return s->labels.contains("hostname_as_reported");
      });
  if (!any_form) return;
  absl::MutexLock lock(&hosts_seen_mu_);
  absl::flat_hash_set<std::string> in_batch;
  for (size_t i = 0; i < write.samples.size(); ++i) {
    if (!write.job_row_ids[i].has_value()) continue;
    const auto form = write.samples[i]->labels.find("hostname_as_reported");
    if (form == write.samples[i]->labels.end()) continue;
    std::string key =
        absl::StrCat(*write.job_row_ids[i], "|", write.samples[i]->gpu.host, "|", form->second);
    if (hosts_seen_.contains(key) || !in_batch.insert(std::move(key)).second) continue;
    write.hosts_seen.push_back({.job_row_id = *write.job_row_ids[i],
                                .host = write.samples[i]->gpu.host,
                                .reported_as = form->second});
  }
}

absl::StatusOr<BatchOutcome> IngestPipeline::Ingest(
    const std::string& cluster, const std::string& batch_id, const std::string& source,
    std::vector<Sample> samples, bool already_validated, std::vector<Refusal> pre_refusals,
    int64_t pre_refused_count) {
  // Permanent refusals of the whole batch: INVALID_ARGUMENT, never a retryable code.
  if (batch_id.empty()) return absl::InvalidArgumentError("batch_id is empty; it is required");
  if (auto reason = CheckText(batch_id, api::kMaxBatchIdBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("batch_id=\"", TruncateForRefusal(batch_id), "\" ", *reason));
  }
  if (cluster.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", batch_id, ": cluster is empty"));
  }
  if (auto reason = CheckText(cluster, api::kMaxClusterBytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch ", batch_id, ": cluster=\"", TruncateForRefusal(cluster), "\" ", *reason));
  }
  const int64_t weight = std::max<int64_t>(1, static_cast<int64_t>(samples.size()));
  if (!limiter_.TryAcquire(weight)) {
    if (saturated_ != nullptr) saturated_->WithLabels({source}).Increment();
    return absl::ResourceExhaustedError(absl::StrCat(
        "ingest is saturated: ", limiter_.inflight(), " samples in flight (limit ",
        limiter_.limit(), "); batch ", batch_id, " was not stored, retry with backoff"));
  }
  absl::Cleanup release = [&] { limiter_.Release(weight); };

  // One name per machine, whichever form the exporter printed; the printed form is kept.
  for (Sample& s : samples) {
    std::string canonical = CanonicalHost(s.gpu.host, options_.identity);
    if (canonical == s.gpu.host) continue;
    // A host that cannot be stored keeps its form: validation refuses it by name below.
    if (!CheckText(s.gpu.host, api::kMaxHostBytes).has_value()) {
      s.labels.try_emplace("hostname_as_reported", std::move(s.gpu.host));
      s.gpu.host = std::move(canonical);
    }
  }

  // Time-sliced GPUs: samples several pods reported for one GPU at one time are marked, so
  // that fleet figures count the GPU once.
  MarkSharedGpus(samples);

  BatchOutcome outcome;
  outcome.batch_id = batch_id;
  outcome.refusals = std::move(pre_refusals);
  std::vector<const Sample*> kept;
  int64_t refused = pre_refused_count;
  if (already_validated) {
    kept.reserve(samples.size());
    for (const Sample& s : samples) kept.push_back(&s);
  } else {
    int64_t blanks = 0;
    for (Sample& s : samples) blanks += DropDcgmBlanks(s);
    CountSetAside(source, 0, blanks);
    BatchValidation validation = ValidateBatch(samples, batch_id, validation_options());
    kept.reserve(validation.kept.size());
    for (size_t i : validation.kept) kept.push_back(&samples[i]);
    refused += static_cast<int64_t>(validation.refusals.size());
    for (Refusal& r : validation.refusals) outcome.refusals.push_back(std::move(r));
  }

  BatchWrite write;
  write.batch_id = batch_id;
  write.cluster = cluster;
  write.source = source;
  write.refused_count = refused;
  absl::StatusOr<BatchWriteResult> result = [&]() -> absl::StatusOr<BatchWriteResult> {
    if (!kept.empty()) {
      absl::StatusOr<Attributor> attributor =
          store_->LoadAttributor(cluster, kept, options_.identity);
      if (!attributor.ok()) return attributor.status();
      write.job_row_ids.reserve(kept.size());
      for (const Sample* s : kept) write.job_row_ids.push_back(attributor->Attribute(*s));
    }
    write.samples = std::move(kept);
    NewHostForms(write);
    return store_->WriteBatch(write);
  }();
  if (!result.ok()) {
    // The sender learns what to do, not PostgreSQL's internals (those go to the log).
    LogFailure(source, batch_id, result.status());
    const absl::StatusCode code = result.status().code();
    const bool retry = code == absl::StatusCode::kUnavailable ||
                       code == absl::StatusCode::kResourceExhausted ||
                       code == absl::StatusCode::kAborted ||
                       code == absl::StatusCode::kDeadlineExceeded;
    return absl::Status(
        code, absl::StrCat("batch ", TruncateForRefusal(batch_id), " was not stored: ",
                           retry ? "the database is unavailable or overloaded, retry with backoff"
                                 : "the database refused it (the cause is in goodput-ingest's "
                                   "log)"));
  }
  outcome.result = *result;
  if (!result->duplicate && !write.hosts_seen.empty()) {
    absl::MutexLock lock(&hosts_seen_mu_);
    if (hosts_seen_.size() > kMaxHostFormsCached) hosts_seen_.clear();
    for (const BatchWrite::HostSeen& h : write.hosts_seen) {
      hosts_seen_.insert(absl::StrCat(h.job_row_id, "|", h.host, "|", h.reported_as));
    }
  }
  if (result->duplicate) {
    // The first delivery's refusals were already reported to the sender.
    outcome.refusals.clear();
    if (duplicate_batches_ != nullptr) duplicate_batches_->WithLabels({source}).Increment();
  } else if (stored_ != nullptr) {
    stored_->WithLabels({source}).Increment(static_cast<double>(result->stored_count));
    fault_events_->WithLabels({source}).Increment(static_cast<double>(result->fault_event_count));
    unattributed_->WithLabels({source}).Increment(
        static_cast<double>(result->unattributed_count));
    // By reason where the refusals are listed; the rest (parsers count more than they list
    // when a body is huge) as "other".
    absl::flat_hash_map<RefusalCode, int64_t> by_code;
    for (const Refusal& r : outcome.refusals) ++by_code[r.code];
    int64_t by_reason = 0;
    for (const auto& [code, count] : by_code) {
      refused_->WithLabels({source, RefusalReasonLabel(code)})
          .Increment(static_cast<double>(count));
      by_reason += count;
    }
    if (result->refused_count > by_reason) {
      refused_->WithLabels({source, "other"})
          .Increment(static_cast<double>(result->refused_count - by_reason));
    }
  }
  return outcome;
}

void IngestPipeline::LogFailure(absl::string_view source, absl::string_view batch_id,
                                const absl::Status& status) {
  if (failed_batches_ != nullptr) failed_batches_->WithLabels({source}).Increment();
  constexpr int64_t kLogEveryMs = 10'000;
  const int64_t now = now_unix_ms_();
  int64_t last = last_failure_log_ms_.load();
  if (now - last < kLogEveryMs || !last_failure_log_ms_.compare_exchange_strong(last, now)) {
    unlogged_failures_.fetch_add(1);
    return;
  }
  logger_.Error("batch not stored; the sender is told to retry",
                {{"source", std::string(source)},
                 {"batch_id", TruncateForRefusal(batch_id)},
                 {"code", absl::StatusCodeToString(status.code())},
                 {"error", TruncateForRefusal(status.message())},
                 {"failures_not_logged", unlogged_failures_.exchange(0)}});
}

namespace {

// The outcome of one stored batch, in a BatchOutcome or a PushExpositionResponse.
template <typename Message>
void SetBatchCounts(const BatchWriteResult& result, Message* out) {
  out->set_stored_count(result.stored_count);
  out->set_refused_count(result.refused_count);
  out->set_unattributed_count(result.unattributed_count);
  out->set_duplicate(result.duplicate);
  if (result.duplicate && result.first_received_unix_ms > 0) {
    *out->mutable_duplicate_of_received_at() = api::UnixMsToTimestamp(result.first_received_unix_ms);
  }
}

template <typename Response>
void AddRefusals(const std::vector<Refusal>& refusals, int limit, Response* response) {
  for (const Refusal& r : refusals) {
    if (response->refusals_size() < limit) {
      RefusalToProto(r, response->add_refusals());
    } else {
      response->set_refusals_omitted_count(response->refusals_omitted_count() + 1);
    }
  }
}

}  // namespace

absl::Status IngestServiceImpl::PushBatch(const v1::PushSamplesRequest& request,
                                          v1::PushSamplesResponse* response) {
  const int64_t max_samples = pipeline_->options().max_batch_samples;
  if (request.samples_size() > max_samples) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "batch ", TruncateForRefusal(request.batch_id()), " has ", request.samples_size(),
        " samples; the limit is ", max_samples, " samples per batch (ingest.max_batch_samples): "
        "split it"));
  }
  std::vector<Sample> samples;
  samples.reserve(request.samples_size());
  for (const v1::GpuSample& p : request.samples()) samples.push_back(SampleFromProto(p));
  absl::StatusOr<BatchOutcome> outcome =
      pipeline_->Ingest(request.cluster(), request.batch_id(), "grpc", std::move(samples),
                        /*already_validated=*/false, {}, 0);
  if (!outcome.ok()) return outcome.status();
  v1::BatchOutcome* batch = response->add_batches();
  batch->set_batch_id(outcome->batch_id);
  SetBatchCounts(outcome->result, batch);
  if (!outcome->result.duplicate) {
    response->set_stored_count(response->stored_count() + outcome->result.stored_count);
    response->set_refused_count(response->refused_count() + outcome->result.refused_count);
    response->set_unattributed_count(response->unattributed_count() +
                                     outcome->result.unattributed_count);
  }
  AddRefusals(outcome->refusals, pipeline_->options().max_listed_refusals, response);
  return absl::OkStatus();
}

namespace {

// One PushSamples stream: reads a raw message, parses it, stores it (blocking this callback
// thread until PostgreSQL has committed), then reads the next.
class PushSamplesReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  PushSamplesReactor(IngestServiceImpl* service, grpc::CallbackServerContext* context,
                     grpc::ByteBuffer* response)
      : service_(service), context_(context), response_buffer_(response) {
    if (platform::StreamSlots* slots = service_->streams(); slots != nullptr) {
      slot_ = slots->Acquire(context_);
      if (slot_ == nullptr) {
        Finish(slots->Refusal(context_));
        return;
      }
    }
    StartRead(&message_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client half-closed (or went away, or the stream was evicted while idle: Finish
      // then reaches nobody).
      Conclude(grpc::Status::OK);
      return;
    }
    if (slot_ != nullptr) service_->streams()->Busy(*slot_);
    ++position_;
    v1::PushSamplesRequest request;
    if (!grpc::SerializationTraits<v1::PushSamplesRequest>::Deserialize(&message_, &request)
             .ok()) {
      Conclude(Failure(grpc::StatusCode::INVALID_ARGUMENT,
                       absl::StrCat("message ", position_,
                                    " of the stream is not a readable "
                                    "goodput.v1.PushSamplesRequest (corrupt bytes or invalid "
                                    "UTF-8 in a string); it and the messages after it were "
                                    "not stored")));
      return;
    }
    if (absl::Status scope = platform::CheckCallCluster(*context_, request.cluster());
        !scope.ok()) {
      Conclude(Failure(grpc::StatusCode::PERMISSION_DENIED,
                       absl::StrCat("message ", position_, " was not stored: ", scope.message())));
      return;
    }
    absl::Status stored = service_->PushBatch(request, &response_);
    if (!stored.ok()) {
      Conclude(Failure(platform::ToGrpcStatus(stored).error_code(),
                       absl::StrCat("message ", position_, " (batch ",
                                    TruncateForRefusal(request.batch_id()),
                                    ") was not stored: ", stored.message())));
      return;
    }
    if (context_->IsCancelled()) {
      Conclude(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the stream"));
      return;
    }
    if (slot_ != nullptr) service_->streams()->Idle(*slot_);
    StartRead(&message_);
  }

  void OnDone() override {
    if (slot_ != nullptr) service_->streams()->Release(*slot_);
    delete this;
  }

 private:
  // A failure after `position_ - 1` committed messages: says so in words and, as
  // kCommittedBatchesMetadata, with their outcomes.
  grpc::Status Failure(grpc::StatusCode code, std::string what) {
    if (response_.batches_size() > 0) {
      absl::StrAppend(&what, "; the ", response_.batches_size(),
                      " messages before it were committed (their outcomes are in the ",
                      kCommittedBatchesMetadata, " trailer)");
      context_->AddTrailingMetadata(kCommittedBatchesMetadata, response_.SerializeAsString());
    }
    return grpc::Status(code, what);
  }

  void Conclude(grpc::Status status) {
    if (status.ok()) {
      bool own_buffer = false;
      grpc::Status serialized = grpc::SerializationTraits<v1::PushSamplesResponse>::Serialize(
          response_, response_buffer_, &own_buffer);
      if (!serialized.ok()) status = serialized;
    }
    Finish(status);
  }

  IngestServiceImpl* service_;
  grpc::CallbackServerContext* context_;
  grpc::ByteBuffer* response_buffer_;
  grpc::ByteBuffer message_;
  v1::PushSamplesResponse response_;
  int64_t position_ = 0;
  std::shared_ptr<platform::StreamSlots::Slot> slot_;
};

}  // namespace

grpc::ServerReadReactor<grpc::ByteBuffer>* IngestServiceImpl::PushSamples(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new PushSamplesReactor(this, context, response);
}

grpc::Status IngestServiceImpl::PushExposition(grpc::ServerContextBase* context,
                                               const v1::PushExpositionRequest* request,
                                               v1::PushExpositionResponse* response) {
  if (absl::Status s = platform::CheckCallCluster(*context, request->cluster()); !s.ok()) {
    return platform::ToGrpcStatus(s);
  }
  const int64_t max_bytes = pipeline_->options().max_exposition_bytes;
  if (static_cast<int64_t>(request->body().size()) > max_bytes) {
    return platform::ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
        "exposition body of batch ", request->batch_id(), " is ", request->body().size(),
        " bytes; the limit is ", max_bytes, " bytes (ingest.max_exposition_bytes)")));
  }
  if (request->batch_id().empty()) {
    return platform::ToGrpcStatus(absl::InvalidArgumentError("batch_id is empty; it is required"));
  }
  ExpositionOptions options;
  options.batch_id = request->batch_id();
  options.default_host = HostFromEndpoint(request->source_endpoint());
  options.validation = pipeline_->validation_options();
  options.scrape_time_unix_ms = request->scrape_time_unix_ms() > 0 ? request->scrape_time_unix_ms()
                                                                   : options.validation.now_unix_ms;
  for (const auto& [k, v] : request->extra_labels()) options.extra_labels.emplace(k, v);
  options.max_labels_per_series = pipeline_->options().max_labels_per_series;
  ExpositionResult parsed = ParseDcgmExposition(request->body(), options);
  pipeline_->CountSetAside("exposition", parsed.ignored_line_count, parsed.blank_value_count);

  std::vector<Sample> samples;
  samples.reserve(parsed.samples.size());
  for (ExpositionSample& s : parsed.samples) samples.push_back(std::move(s.sample));
  absl::StatusOr<BatchOutcome> outcome = pipeline_->Ingest(
      request->cluster(), request->batch_id(), "exposition", std::move(samples),
      /*already_validated=*/true, std::move(parsed.refusals), parsed.refused_line_count);
  if (!outcome.ok()) return platform::ToGrpcStatus(outcome.status());
  SetBatchCounts(outcome->result, response);
  response->set_blank_value_count(parsed.blank_value_count);
  response->set_ignored_line_count(parsed.ignored_line_count);
  AddRefusals(outcome->refusals, pipeline_->options().max_listed_refusals, response);
  return grpc::Status::OK;
}

}  // namespace goodput::ingest
