// The words of an alert: a one-line summary a person reads first, and a few sentences saying
// what happened, how sure we are and what to look at first, per kind. Pure: times come in as
// unix seconds and are shown in UTC; `now_s` (for "last week") is passed in.
//
//   Message m = Describe(finding, {.cluster = "eos", .job_id = "4711", .now_s = now});
//   // m.summary: "OFU fell 2.5× at 14:02 UTC (58% → 23%)"
#pragma once

#include <cstdint>
#include <string>

#include "services/alerting/job_detectors.h"

namespace goodput::alerting {

struct MessageContext {
  std::string cluster = {};
  std::string job_id = {};
  std::string job_name = {};
  std::string gpu_model = {};
  int64_t now_s = 0;
};

struct Message {
  std::string summary;
  std::string description;
};

Message Describe(const Finding& finding, const MessageContext& context);

// "58%" for 0.58; "0.4%" below 1%.
std::string Percent(double fraction);
// "14:02 UTC" (same day as now) or "Nov 20 14:02 UTC".
std::string ClockTime(int64_t unix_s, int64_t now_s);
// How long ago, in words: "2 hours ago", "yesterday", "last week", "3 weeks ago".
std::string Ago(int64_t unix_s, int64_t now_s);

// The dashboard's job page (web/src/pages/common.ts): <base>/#/job/<cluster>/<job id>, each
// part percent-encoded as encodeURIComponent does; "" when `base` is empty.
std::string DashboardUrl(const std::string& base, const std::string& cluster,
                         const std::string& job_id);

}  // namespace goodput::alerting
