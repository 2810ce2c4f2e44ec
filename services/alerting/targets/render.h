// How a notification reads at each peer: the one-line message a person sees on a job's
// stderr or comment, Alertmanager's alert name, RFC 3339 times.
#pragma once

#include <cstddef>
#include <string>

#include "absl/time/time.h"
#include "services/alerting/outbox.h"

namespace goodput::alerting {

// "2026-11-23T14:02:00.000Z".
std::string Rfc3339(absl::Time t);
absl::Time ToAbslTime(std::chrono::system_clock::time_point t);

// `text` on one line (newlines, tabs and every other control character become spaces, runs
// of spaces collapse), cut to at
// most `max_chars` bytes at a character boundary with "..." when cut.
std::string OneLine(const std::string& text, size_t max_chars);

// What a person reads first, on one line:
//   "goodput critical: OFU fell 2.5x at 14:02 (58% -> 23%); look for debug settings ...
//    https://goodput/jobs/..."
//   "goodput resolved: OFU fell 2.5x at 14:02 (58% -> 23%)"
std::string HumanMessage(const Notification& n, size_t max_chars);

// "regression_in_job" -> "GoodputRegressionInJob".
std::string AlertName(const std::string& kind);

}  // namespace goodput::alerting
