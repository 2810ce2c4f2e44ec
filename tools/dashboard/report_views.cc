// The job-end report on the job page (views.h: JobReportJson).
#include "google/protobuf/util/json_util.h"
#include "services/api/job_report.h"
#include "tools/dashboard/views.h"

namespace goodput::dashboard {

Json JobReportJson(const v1::JobReport& report) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  Json out{{"available", true}, {"text", api::RenderSummaryText(report.summary())}};
  if (google::protobuf::util::MessageToJsonString(report, &json, options).ok()) {
    out["report"] = Json::parse(json, nullptr, /*allow_exceptions=*/false);
  }
  return out;
}

}  // namespace goodput::dashboard
