// libFuzzer target: arbitrary bytes as a JobService request, both as protobuf (gRPC) and as
// protobuf JSON (the HTTP job endpoints, jobs_http.h), through the checks RegisterJob and
// EndJob run before the store (job_checks.h). What the checks accept must be storable: job
// ids and hosts of their allowed characters, text PostgreSQL holds; what they refuse must say
// so in a message that can be shown as is.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "goodput/v1/job.pb.h"
#include "google/protobuf/util/json_util.h"
#include "services/api/api_checks.h"
#include "services/core/gpu_catalog.h"
#include "services/ingest/fuzz_pipeline.h"
#include "services/ingest/identity_rules.h"
#include "services/ingest/job_checks.h"

namespace {

using namespace goodput;

void CheckOutcome(const absl::Status& s) {
  if (s.ok()) return;
  if (s.code() != absl::StatusCode::kInvalidArgument &&
      s.code() != absl::StatusCode::kResourceExhausted) {
    std::abort();
  }
  // Refusals quote the value escaped; the message may hold valid UTF-8 of the input.
  ingest::fuzz::CheckShowable(std::string(s.message()));
}

void Register(const v1::RegisterJobRequest& request) {
  const ingest::JobLimits limits;
  absl::Status s = ingest::CheckJobRequestSize(request, "RegisterJob", limits);
  if (s.ok()) s = ingest::CheckJob(request.job(), &core::GpuCatalog::BuiltIn(), limits);
  CheckOutcome(s);
  if (!s.ok()) return;
  const v1::Job& job = request.job();
  if (api::CheckJobIdChars(job.key().job_id()) || api::CheckText(job.key().cluster(), 128)) {
    std::abort();
  }
  for (const v1::GpuAllocation& a : job.allocations()) {
    if (api::CheckHostChars(a.gpu().host())) std::abort();
    // Stored canonical, as JobServiceImpl does.
    const std::string host = ingest::CanonicalHost(a.gpu().host(), {});
    if (api::CheckText(host, api::kMaxHostBytes)) std::abort();
  }
}

void End(const v1::EndJobRequest& request) {
  absl::Status s = ingest::CheckJobEnd(request);
  CheckOutcome(s);
  if (s.ok() && api::CheckJobIdChars(request.key().job_id())) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  if (v1::RegisterJobRequest request; request.ParseFromString(input)) Register(request);
  if (v1::EndJobRequest request; request.ParseFromString(input)) End(request);
  google::protobuf::util::JsonParseOptions json;
  json.ignore_unknown_fields = false;
  if (v1::RegisterJobRequest request;
      google::protobuf::util::JsonStringToMessage(input, &request, json).ok()) {
    Register(request);
  }
  if (v1::EndJobRequest request;
      google::protobuf::util::JsonStringToMessage(input, &request, json).ok()) {
    End(request);
  }
  return 0;
}
