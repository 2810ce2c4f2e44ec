// The delivery targets from configuration: `alerting.targets`, a list of
//   {name, kind: slurm|osmo|alertmanager|webhook|smtp, rate_limit: {per_minute, burst}, ...}
// with the keys of each kind (services/alerting/README.md, "Delivery"). Everything is
// checked at start-up: an unknown kind or key, a missing URL or secret, a duplicate name or
// an unreadable secret file is an INVALID_ARGUMENT naming the entry, the key and the value.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/alerting/targets/target.h"
#include "services/platform/config.h"

namespace goodput::alerting {

struct RateLimit {
  double per_minute = 0;  // sustained rate
  double burst = 1;       // sends allowed at once after a quiet period
};

struct ConfiguredTarget {
  std::unique_ptr<Target> target = {};
  std::optional<RateLimit> rate_limit = {};
  // A choice the configuration made explicitly that weakens the target's security (an smtp
  // target sending credentials without STARTTLS), logged as a warning at start-up.
  std::string warning = {};
};

// Parses and validates `alerting.targets` (absent: no targets).
absl::StatusOr<std::vector<ConfiguredTarget>> ParseTargets(const platform::ConfigTree& config);

}  // namespace goodput::alerting
