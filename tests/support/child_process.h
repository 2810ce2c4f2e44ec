#pragma once

// A child process for tests: started from an argv and extra environment variables, its
// stdout and stderr appended to a log file, running in its own process group so that
// everything it forks is stopped with it. The destructor terminates the group (SIGTERM,
// then SIGKILL after a grace period), so a failing test never leaves servers behind; the
// child also receives SIGKILL if the test process dies.
//
//   ASSIGN_OR_RETURN(auto proc, ChildProcess::Start({.argv = {"redis-server", "--port", "0"},
//                                                    .log_path = dir.Path() / "redis.log"}));
//   ...
//   proc->Terminate(absl::Seconds(10));
//
// Start it from a long-lived thread (the test's main thread): the death signal is tied to
// the thread that forked it.

#include <sys/types.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace goodput::testing {

struct ChildProcessOptions {
  // argv[0] is looked up in PATH when it has no slash.
  std::vector<std::string> argv = {};
  // Added to (or replacing entries of) the parent's environment.
  std::vector<std::pair<std::string, std::string>> env = {};
  // stdout and stderr are appended here; empty means /dev/null.
  std::filesystem::path log_path = {};
  // Working directory of the child; empty means the parent's.
  std::filesystem::path working_dir = {};
  // When set, the child drops to this user (and its groups) before exec; needs root.
  std::optional<uid_t> uid = std::nullopt;
  std::optional<gid_t> gid = std::nullopt;
};

// How a child ended: an exit code or the signal that killed it.
struct ExitStatus {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;      // 0 when it exited
  bool Success() const { return exit_code == 0; }
  std::string ToString() const;
};

class ChildProcess {
 public:
  // Forks and execs; fails with INTERNAL if fork fails and with NOT_FOUND (message holds the
  // log tail) if the program cannot be executed.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(ChildProcessOptions options);

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // Terminates the process group (see Terminate) if it is still running.
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  const ChildProcessOptions& options() const { return options_; }

  // True until the child has exited and been reaped.
  bool IsRunning();
  // Sends `signal` to the child's whole process group.
  absl::Status Signal(int signal);
  // Sends `signal` to the child alone (servers that shut their own children down).
  absl::Status SignalLeader(int signal);
  // Waits until the child exits or `timeout` passes (DEADLINE_EXCEEDED; it keeps running).
  absl::StatusOr<ExitStatus> Wait(absl::Duration timeout);
  // SIGTERM to the group, wait up to `grace`, then SIGKILL; returns how the child ended.
  ExitStatus Terminate(absl::Duration grace = absl::Seconds(10), int first_signal = 15);
  // The last `max_bytes` of the log file, for failure messages.
  std::string LogTail(size_t max_bytes = 4096) const;

 private:
  ChildProcess(ChildProcessOptions options, pid_t pid) : options_(std::move(options)), pid_(pid) {}
  // Reaps the child without blocking; true when it has exited.
  bool TryReap();

  ChildProcessOptions options_;
  pid_t pid_;
  std::optional<ExitStatus> exit_;
};

// Reads the last `max_bytes` of a file (empty if it does not exist).
std::string ReadFileTail(const std::filesystem::path& path, size_t max_bytes = 4096);

// Polls `condition` every `interval` until it returns true or `timeout` passes.
bool PollUntil(const std::function<bool()>& condition, absl::Duration timeout,
               absl::Duration interval = absl::Milliseconds(20));

}  // namespace goodput::testing
