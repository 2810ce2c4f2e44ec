#include "services/alerting/delivery_policy.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace goodput::alerting {

absl::Status ValidateRetryPolicy(const RetryPolicy& p) {
  if (p.initial_backoff <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "alerting.delivery.initial_backoff_s: ", absl::ToDoubleSeconds(p.initial_backoff),
        " must be > 0"));
  }
  if (p.max_backoff < p.initial_backoff) {
    return absl::InvalidArgumentError(
        absl::StrCat("alerting.delivery.max_backoff_s: ", absl::ToDoubleSeconds(p.max_backoff),
                     " is below initial_backoff_s ", absl::ToDoubleSeconds(p.initial_backoff)));
  }
  if (!(p.jitter >= 0 && p.jitter <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("alerting.delivery.jitter: ", p.jitter, " is outside [0, 1]"));
  }
  if (p.max_attempts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("alerting.delivery.max_attempts: ", p.max_attempts, " must be >= 1"));
  }
  if (p.max_age <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "alerting.delivery.max_age_s: ", absl::ToDoubleSeconds(p.max_age), " must be > 0"));
  }
  return absl::OkStatus();
}

absl::Duration BackoffDelay(const RetryPolicy& p, int attempt, double uniform01) {
  const double initial_s = absl::ToDoubleSeconds(p.initial_backoff);
  const double max_s = absl::ToDoubleSeconds(p.max_backoff);
  // 2^62 seconds overflows nothing in double; the cap keeps the result sane.
  const double doubled_s = initial_s * std::pow(2.0, std::clamp(attempt - 1, 0, 62));
  const double delay_s = std::min(doubled_s, max_s);
  const double u = std::clamp(uniform01, 0.0, 1.0);
  return absl::Seconds(delay_s * (1.0 - p.jitter) + delay_s * p.jitter * u);
}

bool ShouldGiveUp(const RetryPolicy& p, int attempts, absl::Time created, absl::Time now) {
  return attempts >= p.max_attempts || now - created >= p.max_age;
}

bool IsPermanentError(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

std::optional<absl::Duration> TokenBucket::Take(absl::Time now) {
  if (tokens_ < 0) {
    tokens_ = burst_;
    last_ = now;
  }
  if (now > last_) {
    tokens_ = std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * rate_per_s_);
    last_ = now;
  }
  if (tokens_ >= 1.0) {
    tokens_ -= 1.0;
    return std::nullopt;
  }
  return absl::Seconds((1.0 - tokens_) / rate_per_s_);
}

}  // namespace goodput::alerting
