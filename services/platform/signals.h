// Turns SIGTERM/SIGINT into a wake-up of an ordinary thread, so that shutdown work (health
// NOT_SERVING, draining RPCs, closing pools) never runs inside a signal handler.
//
// The handler only write()s the signal number to a pipe (async-signal-safe); Wait() reads it.
// One watcher may be installed per process at a time.
//
//   auto watcher = SignalWatcher::Install();
//   int signal_number = (*watcher)->Wait();  // blocks until SIGTERM/SIGINT or Notify()
#pragma once

#include <csignal>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"

namespace goodput::platform {

class SignalWatcher {
 public:
  // Installs handlers for `signals`; FAILED_PRECONDITION when a watcher is already installed.
  static absl::StatusOr<std::unique_ptr<SignalWatcher>> Install(std::vector<int> signals = {
                                                                    SIGTERM, SIGINT});
  // Restores the previous handlers.
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  // Blocks until a watched signal arrives (returns its number) or Notify() is called (returns 0).
  // A signal that arrived before the call is not lost.
  int Wait();
  // Wakes Wait() from any thread.
  void Notify();

 private:
  SignalWatcher(int read_fd, int write_fd, std::vector<int> signals,
                std::vector<struct sigaction> previous);

  int read_fd_;
  int write_fd_;
  std::vector<int> signals_;
  std::vector<struct sigaction> previous_;
};

}  // namespace goodput::platform
