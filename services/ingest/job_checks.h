// What a scheduler may send about a job, checked before anything is stored: identities that
// PostgreSQL can hold exactly (a NUL byte would cut `job\0x` to `job` and write into another
// job), free text of bounded size, real timestamps, enum values the API defines, a GPU model
// the catalog knows, and counts a listing can show. Each refusal names the field and value.
//
//   if (absl::Status s = CheckJob(request->job(), catalog); !s.ok()) return ToGrpcStatus(s);
#pragma once

#include "absl/status/status.h"
#include "goodput/v1/job.pb.h"
#include "services/api/api_checks.h"
#include "services/core/gpu_catalog.h"

namespace goodput::ingest {

// Labels a job may carry, and GPUs it may declare.
inline constexpr int kMaxJobLabels = 64;
inline constexpr int64_t kMaxJobGpuCount = 1 << 20;
inline constexpr int kMaxJobAllocations = 1 << 17;

// What a job may carry, from configuration (ingest.limits.*, ingest.jobs.max_request_bytes).
// The byte limits are capped at api_checks.h's, what PostgreSQL and its indexes hold.
struct JobLimits {
  int max_labels = kMaxJobLabels;
  size_t max_text_bytes = api::kMaxFreeTextBytes;  // user, team, name, workload fingerprint
  size_t max_label_name_bytes = api::kMaxLabelNameBytes;
  size_t max_label_value_bytes = api::kMaxLabelValueBytes;
  // A JobService request as serialized (gRPC and the HTTP JSON endpoints alike).
  int64_t max_request_bytes = 4 << 20;
};

// A job key: cluster and job id present, identity text within its limits, the job id of
// api::CheckJobIdChars' characters.
absl::Status CheckJobKey(const v1::JobKey& key, absl::string_view field = "job.key");

// A whole job as RegisterJob or UpdateJob receives it. `catalog` (may be null: any model)
// must resolve a non-empty `gpu_model`; an empty one lets the samples' modelName decide.
// Allocation hosts must pass api::CheckHostChars.
absl::Status CheckJob(const v1::Job& job, const core::GpuCatalog* catalog,
                      const JobLimits& limits = {});

// RESOURCE_EXHAUSTED naming `method`, the size and the limit when `request` serializes to
// more than limits.max_request_bytes.
absl::Status CheckJobRequestSize(const google::protobuf::Message& request,
                                 absl::string_view method, const JobLimits& limits);

// EndJob's final state and end time.
absl::Status CheckJobEnd(const v1::EndJobRequest& request);

}  // namespace goodput::ingest
