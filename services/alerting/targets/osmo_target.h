// Osmo target: tags the job's workflow through Osmo's REST API, and optionally cancels it.
//
//   firing:   POST <url>/api/workflow/<name>/tag?add=<tag>
//   resolved: POST <url>/api/workflow/<name>/tag?remove=<tag>
//   cancel (off by default; firing alerts at or above cancel_min_severity):
//             POST <url>/api/workflow/<name>/cancel
// <tag> is tag_prefix + the alert kind with '_' written as '-' ("goodput-regression-in-job").
// The workflow name is the value of the first of `workflow_label_keys` present in the job's
// labels; a job without any of them is a permanent error naming the keys. The name is
// percent-encoded into one path segment whatever it holds (quotes, `$()`, `/`, `?`); "." and
// "..", which URL resolution would turn into another path, are a permanent error. Adding or removing
// a tag twice leaves the same set of tags, so a retry changes nothing at the peer; a cancel
// of a workflow that already stopped (409) counts as done.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "services/alerting/targets/target.h"

namespace goodput::alerting {

struct OsmoTargetConfig {
  std::string name = {};
  // The cluster whose jobs' workflows it acts on (required in configuration): rows of other
  // clusters are skipped by the worker and refused by Send (permanent).
  std::string cluster = {};
  std::string url = {};  // base, e.g. https://osmo.example.org
  std::vector<std::pair<std::string, std::string>> headers = {};  // e.g. Authorization
  absl::Duration timeout = absl::Seconds(10);
  std::vector<std::string> workflow_label_keys = {"osmo.workflow_id", "workflow"};
  std::string tag_prefix = "goodput-";
  bool cancel = false;
  std::string cancel_min_severity = "critical";
};

// The tag for alerts of `kind`.
std::string OsmoTag(const std::string& tag_prefix, const std::string& kind);

class OsmoTarget final : public Target {
 public:
  explicit OsmoTarget(OsmoTargetConfig config) : config_(std::move(config)) {}

  // Target:
  const std::string& name() const override { return config_.name; }
  const char* kind() const override { return "osmo"; }
  const std::string& cluster() const override { return config_.cluster; }
  absl::Status Send(const SendRequest& request) override;

  // Its peer, for the policy stage's workflow cancels (policy_actuator.h).
  const OsmoTargetConfig& config() const { return config_; }

 private:
  absl::Status Post(const std::string& path_and_query, const std::string& what);

  OsmoTargetConfig config_;
};

// Orders severities: info < warning < critical; unknown names rank below info.
int SeverityRank(const std::string& severity);

}  // namespace goodput::alerting
