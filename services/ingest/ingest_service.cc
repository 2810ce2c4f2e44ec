#include "services/ingest/ingest_service.h"

#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "services/ingest/exposition.h"
#include "services/ingest/proto_convert.h"
#include "services/ingest/validation.h"
#include "services/platform/status_convert.h"
#include "services/platform/unimplemented.h"

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
                               platform::MetricsRegistry* metrics)
    : store_(store),
      catalog_(catalog),
      options_(options),
      now_unix_ms_(std::move(now_unix_ms)),
      limiter_(options.max_inflight_samples) {
  if (metrics != nullptr) {
    stored_ = &metrics
                   ->AddCounter("goodput_ingest_samples_stored_total",
                                "GPU samples committed to PostgreSQL.")
                   .WithLabels({});
    refused_ = &metrics
                    ->AddCounter("goodput_ingest_samples_refused_total",
                                 "GPU samples or exposition lines refused as invalid.")
                    .WithLabels({});
    unattributed_ = &metrics
                         ->AddCounter("goodput_ingest_samples_unattributed_total",
                                      "Stored samples no job could be attributed to yet.")
                         .WithLabels({});
    duplicate_batches_ = &metrics
                              ->AddCounter("goodput_ingest_duplicate_batches_total",
                                           "Retried batches acknowledged without storing.")
                              .WithLabels({});
    saturated_ = &metrics
                      ->AddCounter("goodput_ingest_saturated_total",
                                   "Batches refused with RESOURCE_EXHAUSTED (backpressure).")
                      .WithLabels({});
  }
}

ValidationOptions IngestPipeline::validation_options() const {
  return ValidationOptions{.catalog = catalog_,
                           .now_unix_ms = now_unix_ms_(),
                           .max_future_skew_ms = options_.max_future_skew_ms,
                           .max_age_ms = options_.retention_ms};
}

absl::StatusOr<BatchOutcome> IngestPipeline::Ingest(
    const std::string& cluster, const std::string& batch_id, const std::string& source,
    std::vector<Sample> samples, bool already_validated, std::vector<Refusal> pre_refusals,
    int64_t pre_refused_count) {
  if (batch_id.empty()) return absl::InvalidArgumentError("batch_id is empty; it is required");
  if (cluster.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("batch ", batch_id, ": cluster is empty"));
  }
  const int64_t weight = std::max<int64_t>(1, static_cast<int64_t>(samples.size()));
  if (!limiter_.TryAcquire(weight)) {
    if (saturated_ != nullptr) saturated_->Increment();
    return absl::ResourceExhaustedError(absl::StrCat(
        "ingest is saturated: ", limiter_.inflight(), " samples in flight (limit ",
        limiter_.limit(), "); batch ", batch_id, " was not stored, retry with backoff"));
  }
  absl::Cleanup release = [&] { limiter_.Release(weight); };

  BatchOutcome outcome;
  outcome.batch_id = batch_id;
  outcome.refusals = std::move(pre_refusals);
  std::vector<const Sample*> kept;
  int64_t refused = pre_refused_count;
  if (already_validated) {
    kept.reserve(samples.size());
    for (const Sample& s : samples) kept.push_back(&s);
  } else {
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
  if (!kept.empty()) {
    absl::StatusOr<Attributor> attributor = store_->LoadAttributor(cluster, kept);
    if (!attributor.ok()) return attributor.status();
    write.job_row_ids.reserve(kept.size());
    for (const Sample* s : kept) write.job_row_ids.push_back(attributor->Attribute(*s));
  }
  write.samples = std::move(kept);
  absl::StatusOr<BatchWriteResult> result = store_->WriteBatch(write);
  if (!result.ok()) return result.status();
  outcome.result = *result;
  if (result->duplicate) {
    // The first delivery's refusals were already reported to the sender.
    outcome.refusals.clear();
    if (duplicate_batches_ != nullptr) duplicate_batches_->Increment();
  } else if (stored_ != nullptr) {
    stored_->Increment(static_cast<double>(result->stored_count));
    refused_->Increment(static_cast<double>(result->refused_count));
    unattributed_->Increment(static_cast<double>(result->unattributed_count));
  }
  return outcome;
}

namespace {

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

grpc::Status IngestServiceImpl::PushSamples(grpc::ServerContext* context,
                                            grpc::ServerReader<v1::PushSamplesRequest>* reader,
                                            v1::PushSamplesResponse* response) {
  v1::PushSamplesRequest request;
  const int64_t max_samples = pipeline_->options().max_batch_samples;
  while (reader->Read(&request)) {
    if (request.samples_size() > max_samples) {
      return platform::ToGrpcStatus(absl::ResourceExhaustedError(absl::StrCat(
          "batch ", request.batch_id(), " has ", request.samples_size(), " samples; the limit is ",
          max_samples, " samples per batch (ingest.max_batch_samples): split it")));
    }
    std::vector<Sample> samples;
    samples.reserve(request.samples_size());
    for (const v1::GpuSample& p : request.samples()) samples.push_back(SampleFromProto(p));
    absl::StatusOr<BatchOutcome> outcome =
        pipeline_->Ingest(request.cluster(), request.batch_id(), "grpc", std::move(samples),
                          /*already_validated=*/false, {}, 0);
    if (!outcome.ok()) return platform::ToGrpcStatus(outcome.status());
    v1::BatchOutcome* batch = response->add_batches();
    batch->set_batch_id(outcome->batch_id);
    batch->set_stored_count(outcome->result.stored_count);
    batch->set_refused_count(outcome->result.refused_count);
    batch->set_unattributed_count(outcome->result.unattributed_count);
    batch->set_duplicate(outcome->result.duplicate);
    if (!outcome->result.duplicate) {
      response->set_stored_count(response->stored_count() + outcome->result.stored_count);
      response->set_refused_count(response->refused_count() + outcome->result.refused_count);
      response->set_unattributed_count(response->unattributed_count() +
                                       outcome->result.unattributed_count);
    }
    AddRefusals(outcome->refusals, pipeline_->options().max_listed_refusals, response);
    if (context->IsCancelled()) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the stream");
    }
  }
  return grpc::Status::OK;
}

grpc::Status IngestServiceImpl::PushExposition(grpc::ServerContext* context,
                                               const v1::PushExpositionRequest* request,
                                               v1::PushExpositionResponse* response) {
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
  ExpositionResult parsed = ParseDcgmExposition(request->body(), options);

  std::vector<Sample> samples;
  samples.reserve(parsed.samples.size());
  for (ExpositionSample& s : parsed.samples) samples.push_back(std::move(s.sample));
  absl::StatusOr<BatchOutcome> outcome = pipeline_->Ingest(
      request->cluster(), request->batch_id(), "exposition", std::move(samples),
      /*already_validated=*/true, std::move(parsed.refusals), parsed.refused_line_count);
  if (!outcome.ok()) return platform::ToGrpcStatus(outcome.status());
  response->set_stored_count(outcome->result.stored_count);
  response->set_refused_count(outcome->result.refused_count);
  response->set_unattributed_count(outcome->result.unattributed_count);
  response->set_duplicate(outcome->result.duplicate);
  response->set_ignored_line_count(parsed.ignored_line_count);
  AddRefusals(outcome->refusals, pipeline_->options().max_listed_refusals, response);
  return grpc::Status::OK;
}

grpc::Status IngestServiceImpl::ListScrapeTargets(grpc::ServerContext* context,
                                                  const v1::ListScrapeTargetsRequest* request,
                                                  v1::ListScrapeTargetsResponse* response) {
  return platform::UnimplementedStatus(
      "/goodput.v1.IngestService/ListScrapeTargets",
      "Ingest service and job registry: every way telemetry and jobs arrive, durable before "
      "acknowledged");
}

}  // namespace goodput::ingest
