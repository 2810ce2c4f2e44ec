// Conversions between the API's enums and timestamps (goodput.v1) and the names and types
// the services store and the core library uses. One place, so that every service and tool
// spells a scheduler, a job state or a precision the same way in PostgreSQL, logs and output.
//
//   std::string name = SchedulerKindName(v1::SCHEDULER_KIND_SLURM);   // "slurm"
//   v1::SchedulerKind kind = SchedulerKindFromName("osmo");          // SCHEDULER_KIND_OSMO
//   v1::Precision p = PrecisionToProto(core::Precision::kBf16);       // PRECISION_BF16
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "goodput/v1/common.pb.h"
#include "goodput/v1/job.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "services/core/gpu_catalog.h"

namespace goodput::api {

namespace v1 = ::goodput::v1;

// "slurm", "osmo", "kubernetes", "other"; "" for UNSPECIFIED.
std::string SchedulerKindName(v1::SchedulerKind kind);
// The inverse; SCHEDULER_KIND_UNSPECIFIED for a name that is none of the four.
v1::SchedulerKind SchedulerKindFromName(absl::string_view name);

// "training", "inference", "interactive", "other"; "" for UNSPECIFIED.
std::string WorkloadKindName(v1::WorkloadKind kind);
// The inverse (case-insensitive, surrounding blanks ignored), also taking the words a site's
// labels use: "train"/"training", "inference"/"serving"/"service", "interactive"/"notebook",
// "other"/"batch". WORKLOAD_KIND_UNSPECIFIED for anything else.
v1::WorkloadKind WorkloadKindFromName(absl::string_view name);
// "registered", "label", "inferred"; "" for UNSPECIFIED.
std::string WorkloadKindSourceName(v1::WorkloadKindSource source);
v1::WorkloadKindSource WorkloadKindSourceFromName(absl::string_view name);

// "running", "completed", "timed_out", ...; "" for UNSPECIFIED.
std::string JobStateName(v1::JobState state);
// The inverse (case-insensitive); JOB_STATE_UNSPECIFIED for an unknown name.
v1::JobState JobStateFromName(absl::string_view name);

// Core precision <-> API precision. PRECISION_UNSPECIFIED maps to nullopt.
v1::Precision PrecisionToProto(core::Precision precision);
std::optional<core::Precision> PrecisionFromProto(v1::Precision precision);

// Unix milliseconds <-> Timestamp (millisecond precision, floor for negative times).
int64_t TimestampToUnixMs(const google::protobuf::Timestamp& t);
google::protobuf::Timestamp UnixMsToTimestamp(int64_t unix_ms);

// Unix microseconds <-> Timestamp (microsecond precision, floor for negative times): what
// PostgreSQL keeps, so a time stored as `timestamptz 'epoch' + $n * interval '1 microsecond'`
// and read back as `(extract(epoch FROM t) * 1000000)::bigint` is not rounded on the way.
int64_t TimestampToUnixMicros(const google::protobuf::Timestamp& t);
google::protobuf::Timestamp UnixMicrosToTimestamp(int64_t unix_us);

}  // namespace goodput::api
