#include "services/platform/poll_loop.h"

#include <utility>

namespace goodput::platform {

PollLoop::PollLoop(std::function<bool()> step, PollLoopOptions options)
    : step_(std::move(step)), options_(options) {}

PollLoop::~PollLoop() { Stop(); }

void PollLoop::Run() {
  while (true) {
    const bool failed = !step_();
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || wake_; };
    mu_.AwaitWithTimeout(absl::Condition(&ready),
                         failed ? options_.retry_backoff : options_.poll_interval);
    wake_ = false;
    if (stop_) return;
  }
}

void PollLoop::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void PollLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void PollLoop::Wake() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

}  // namespace goodput::platform
