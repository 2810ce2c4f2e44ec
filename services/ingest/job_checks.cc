#include "services/ingest/job_checks.h"

#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "services/api/api_checks.h"

namespace goodput::ingest {
namespace {

absl::Status Refuse(absl::string_view field, absl::string_view value, absl::string_view reason) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, "=\"", api::Sanitize(value), "\" ", reason));
}

absl::Status CheckTextField(absl::string_view field, absl::string_view value, size_t max_bytes,
                            api::TextKind kind = api::TextKind::kIdentity) {
  if (auto reason = api::CheckText(value, max_bytes, kind)) return Refuse(field, value, *reason);
  return absl::OkStatus();
}

absl::Status CheckTime(absl::string_view field, bool present,
                       const google::protobuf::Timestamp& t) {
  if (!present) return absl::OkStatus();
  if (auto reason = api::CheckApiTime(t)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " ", *reason));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckJobKey(const v1::JobKey& key, absl::string_view field) {
  if (key.cluster().empty()) return absl::InvalidArgumentError(absl::StrCat(field, ".cluster is empty"));
  if (key.job_id().empty()) return absl::InvalidArgumentError(absl::StrCat(field, ".job_id is empty"));
  if (absl::Status s =
          CheckTextField(absl::StrCat(field, ".cluster"), key.cluster(), api::kMaxClusterBytes);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          CheckTextField(absl::StrCat(field, ".job_id"), key.job_id(), api::kMaxJobIdBytes);
      !s.ok()) {
    return s;
  }
  if (auto reason = api::CheckJobIdChars(key.job_id())) {
    return Refuse(absl::StrCat(field, ".job_id"), key.job_id(), *reason);
  }
  return absl::OkStatus();
}

absl::Status CheckJobRequestSize(const google::protobuf::Message& request,
                                 absl::string_view method, const JobLimits& limits) {
  const size_t bytes = request.ByteSizeLong();
  if (static_cast<int64_t>(bytes) > limits.max_request_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat(method, " request is ", bytes, " bytes; the limit is ",
                     limits.max_request_bytes, " bytes (ingest.jobs.max_request_bytes)"));
  }
  return absl::OkStatus();
}

absl::Status CheckJob(const v1::Job& job, const core::GpuCatalog* catalog,
                      const JobLimits& limits) {
  if (absl::Status s = CheckJobKey(job.key()); !s.ok()) return s;
  struct Text {
    const char* field;
    const std::string& value;
  };
  for (const Text& t : {Text{"job.user", job.user()}, Text{"job.team", job.team()},
                        Text{"job.name", job.name()},
                        Text{"job.workload_fingerprint", job.workload_fingerprint()}}) {
    if (absl::Status s = CheckTextField(t.field, t.value,
                                        std::min(limits.max_text_bytes, api::kMaxFreeTextBytes),
                                        api::TextKind::kFreeText);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = CheckTextField("job.gpu_model", job.gpu_model(), api::kMaxGpuModelBytes);
      !s.ok()) {
    return s;
  }
  if (!job.gpu_model().empty() && catalog != nullptr && !catalog->Find(job.gpu_model()).ok()) {
    return Refuse("job.gpu_model", job.gpu_model(),
                  "is not a GPU model the catalog knows: leave it empty (the samples' modelName "
                  "is used) or add the model under gpu_catalog.overrides");
  }
  if (!v1::SchedulerKind_IsValid(job.scheduler())) {
    return absl::InvalidArgumentError(
        absl::StrCat("job.scheduler=", job.scheduler(), " is not a SchedulerKind value"));
  }
  if (!v1::WorkloadKind_IsValid(job.workload_kind())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job.workload_kind=", job.workload_kind(),
        " is not a WorkloadKind value (training 1, inference 2, interactive 3, other 4)"));
  }
  if (!v1::JobState_IsValid(job.state())) {
    return absl::InvalidArgumentError(
        absl::StrCat("job.state=", job.state(), " is not a JobState value"));
  }
  if (job.gpu_count() < 0 || job.gpu_count() > kMaxJobGpuCount) {
    return absl::InvalidArgumentError(absl::StrCat("job.gpu_count=", job.gpu_count(),
                                                   " is outside [0, ", kMaxJobGpuCount, "]"));
  }
  if (absl::Status s = CheckTime("job.start_time", job.has_start_time(), job.start_time());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckTime("job.end_time", job.has_end_time(), job.end_time()); !s.ok()) {
    return s;
  }
  if (job.labels_size() > limits.max_labels) {
    return absl::InvalidArgumentError(
        absl::StrCat("job.labels has ", job.labels_size(), " entries; the limit is ",
                     limits.max_labels, " (ingest.limits.max_job_labels)"));
  }
  const size_t max_name = std::min(limits.max_label_name_bytes, api::kMaxLabelNameBytes);
  const size_t max_value = std::min(limits.max_label_value_bytes, api::kMaxLabelValueBytes);
  for (const auto& [name, value] : job.labels()) {
    if (absl::Status s = CheckTextField("job.labels key", name, max_name); !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckTextField(absl::StrCat("job.labels[", api::Sanitize(name), "]"),
                                        value, max_value, api::TextKind::kFreeText);
        !s.ok()) {
      return s;
    }
  }
  if (job.allocations_size() > kMaxJobAllocations) {
    return absl::InvalidArgumentError(absl::StrCat("job.allocations has ",
                                                   job.allocations_size(),
                                                   " entries; the limit is ", kMaxJobAllocations));
  }
  for (int i = 0; i < job.allocations_size(); ++i) {
    const v1::GpuAllocation& a = job.allocations(i);
    const std::string where = absl::StrCat("job.allocations[", i, "]");
    if (absl::Status s =
            CheckTextField(absl::StrCat(where, ".gpu.host"), a.gpu().host(), api::kMaxHostBytes);
        !s.ok()) {
      return s;
    }
    if (auto reason = api::CheckHostChars(a.gpu().host())) {
      return Refuse(absl::StrCat(where, ".gpu.host"), a.gpu().host(), *reason);
    }
    if (absl::Status s =
            CheckTextField(absl::StrCat(where, ".gpu.uuid"), a.gpu().uuid(), api::kMaxUuidBytes);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckTextField(absl::StrCat(where, ".gpu.mig.profile"),
                                        a.gpu().mig().profile(), api::kMaxMigProfileBytes);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            CheckTime(absl::StrCat(where, ".start_time"), a.has_start_time(), a.start_time());
        !s.ok()) {
      return s;
    }
    if (absl::Status s = CheckTime(absl::StrCat(where, ".end_time"), a.has_end_time(), a.end_time());
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CheckJobEnd(const v1::EndJobRequest& request) {
  if (absl::Status s = CheckJobKey(request.key(), "key"); !s.ok()) return s;
  if (!v1::JobState_IsValid(request.final_state())) {
    return absl::InvalidArgumentError(
        absl::StrCat("final_state=", request.final_state(), " is not a JobState value"));
  }
  return CheckTime("end_time", request.has_end_time(), request.end_time());
}

}  // namespace goodput::ingest
