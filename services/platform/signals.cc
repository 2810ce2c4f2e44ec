#include "services/platform/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace goodput::platform {
namespace {

// Lock-free atomics are async-signal-safe; -1 = no watcher installed.
std::atomic<int> g_signal_write_fd{-1};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void WriteSignalToPipe(int signal_number) {
  int saved_errno = errno;
  int fd = g_signal_write_fd.load();
  if (fd >= 0) {
    unsigned char byte = static_cast<unsigned char>(signal_number);
    // A full pipe already holds a wake-up; dropping this byte loses nothing.
    [[maybe_unused]] ssize_t written = write(fd, &byte, 1);
  }
  errno = saved_errno;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SignalWatcher>> SignalWatcher::Install(std::vector<int> signals) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("signal pipe: ", std::strerror(errno)));
  }
  fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
  int expected = -1;
  if (!g_signal_write_fd.compare_exchange_strong(expected, fds[1])) {
    close(fds[0]);
    close(fds[1]);
    return absl::FailedPreconditionError("a signal watcher is already installed in this process");
  }
  std::vector<struct sigaction> previous(signals.size());
  for (size_t i = 0; i < signals.size(); ++i) {
    struct sigaction action {};
    action.sa_handler = WriteSignalToPipe;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    sigaction(signals[i], &action, &previous[i]);
  }
  return std::unique_ptr<SignalWatcher>(
      new SignalWatcher(fds[0], fds[1], std::move(signals), std::move(previous)));
}

SignalWatcher::SignalWatcher(int read_fd, int write_fd, std::vector<int> signals,
                             std::vector<struct sigaction> previous)
    : read_fd_(read_fd),
      write_fd_(write_fd),
      signals_(std::move(signals)),
      previous_(std::move(previous)) {}

SignalWatcher::~SignalWatcher() {
  for (size_t i = 0; i < signals_.size(); ++i) sigaction(signals_[i], &previous_[i], nullptr);
  g_signal_write_fd.store(-1);
  close(read_fd_);
  close(write_fd_);
}

int SignalWatcher::Wait() {
  unsigned char byte = 0;
  while (true) {
    ssize_t n = read(read_fd_, &byte, 1);
    if (n == 1) return byte;
    if (n < 0 && errno == EINTR) continue;
    return 0;
  }
}

void SignalWatcher::Notify() {
  unsigned char byte = 0;
  [[maybe_unused]] ssize_t written = write(write_fd_, &byte, 1);
}

}  // namespace goodput::platform
