// The JSON the dashboard's pages read, built from the services' protobuf answers. One
// function per shape; the page code (web/src/api.ts) mirrors these names. Conventions:
// utilizations stay fractions in [0, 1], times are Unix milliseconds (null when unset),
// enum values are their lower-case short names ("regression_in_job", "firing").
//
//   nlohmann::json window = OfuPointJson(response.windows(0));
//   nlohmann::json alerts = UnavailableSection(status);   // {"available": false, ...}
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "goodput/v1/alert.pb.h"
#include "goodput/v1/job.pb.h"
#include "goodput/v1/mfu.pb.h"
#include "goodput/v1/ofu.pb.h"
#include "goodput/v1/report.pb.h"
#include "grpcpp/support/status.h"
#include "nlohmann/json.hpp"

namespace goodput::dashboard {

namespace v1 = ::goodput::v1;
using Json = nlohmann::json;

// "ALERT_KIND_REGRESSION_IN_JOB" with prefix "ALERT_KIND_" -> "regression_in_job".
std::string EnumShortName(absl::string_view full_name, absl::string_view prefix);

// "host:3", "host:GPU-…" when only the UUID is known, with "/mig<gi>" for a MIG slice.
std::string GpuLabel(const v1::GpuRef& gpu);

// Unix ms, or null for an unset timestamp.
Json TimeMs(const google::protobuf::Timestamp& t);

// A page section that a service could not provide: {"available": false, "message": …,
// "not_built": true for UNIMPLEMENTED}. The page shows "not available yet" for not_built.
Json UnavailableSection(const grpc::Status& status);

// One fleet group (cluster, GPU model or the total), with wasted GPU-hours (allocated minus
// effective).
Json FleetGroupJson(const v1::FleetGroup& group);

// A job row of the registry; the efficiency fields (ofu, steady_state_ofu, latest_ofu,
// gpu_hours, wasted_gpu_hours, open_alerts) start null and are filled by the caller.
Json JobRowJson(const v1::Job& job);

// One job-level window as a chart point.
Json OfuPointJson(const v1::OfuWindow& window);

// Job windows and per-GPU series (one series per GPU, time order).
Json JobOfuJson(const v1::GetJobOfuResponse& response);

// Whole-job figures.
Json JobSummaryJson(const v1::JobOfuSummary& summary);

// Verdict, points, framework.
Json ReconciliationJson(const v1::GetReconciliationResponse& response);

// An alert with the evidence numbers the pages show.
Json AlertJson(const v1::Alert& alert);

// A job-end report for the job page: the report as protobuf JSON (proto field names) under
// "report", and under "text" the summary as `goodputctl report` prints it.
Json JobReportJson(const v1::JobReport& report);

// Compact JSON text; invalid UTF-8 in strings is replaced, never an error.
std::string DumpJson(const Json& value);

// One Server-Sent Events message: "event: <name>\ndata: <json>\n\n".
std::string SseMessage(absl::string_view event, const Json& data);

}  // namespace goodput::dashboard
