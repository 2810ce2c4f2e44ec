// Runs a command-line tool (scontrol, sacct) from an argv, never through a shell, with a
// deadline, and returns its exit code and output.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace goodput::platform {

struct CommandResult {
  int exit_code = -1;       // -1 when killed by a signal
  std::string output = {};  // stdout and stderr together
};

// Runs `argv` (argv[0] looked up in PATH when it has no slash) with `env` added to this
// process's environment. NOT_FOUND when it cannot be started; DEADLINE_EXCEEDED (the
// process is killed) after `timeout`.
absl::StatusOr<CommandResult> RunCommand(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& env, absl::Duration timeout);

}  // namespace goodput::platform
