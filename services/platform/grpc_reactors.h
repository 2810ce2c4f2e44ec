// Reactor glue shared by the services' callback gRPC handlers: finishing a unary call with an
// absl::Status, a server stream that fails before it starts, and a server stream that writes
// queued messages one at a time.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "services/platform/status_convert.h"

namespace goodput::platform {

// Finishes a unary call with `s` (code and message kept); handlers end with
// `return FinishUnary(context, status);`.
inline grpc::ServerUnaryReactor* FinishUnary(grpc::CallbackServerContext* context,
                                             const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}

// A server stream refused before its first message (bad request, store error).
template <class Response>
grpc::ServerWriteReactor<Response>* FailedStream(const absl::Status& s) {
  class Failed : public grpc::ServerWriteReactor<Response> {
   public:
    explicit Failed(const absl::Status& status) { this->Finish(ToGrpcStatus(status)); }
    void OnDone() override { delete this; }
  };
  return new Failed(s);
}

// A server stream fed by Push from any thread and written one message at a time. A client that
// falls more than `max_queued` messages behind loses the oldest queued ones rather than holding
// the producer back. The stream ends OK when the client goes away and CANCELLED on cancel.
// Subclasses subscribe to their source and implement OnDone (unsubscribe, then delete this).
template <class Response>
class QueuedStreamWriter : public grpc::ServerWriteReactor<Response> {
 public:
  explicit QueuedStreamWriter(size_t max_queued) : max_queued_(max_queued) {}

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (finished_) {
      if (pending_finish_.has_value()) this->Finish(*std::exchange(pending_finish_, std::nullopt));
      return;
    }
    if (!ok) {
      FinishLocked(grpc::Status::OK);
      return;
    }
    WriteNextLocked();
  }
  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

 protected:
  // Queues `r` behind what is queued; dropped once the stream has finished.
  void Push(const Response& r) {
    absl::MutexLock lock(&mu_);
    if (finished_) return;
    if (queue_.size() >= max_queued_) queue_.pop_front();
    queue_.push_back(r);
    WriteNextLocked();
  }
  // Until Start, pushed messages are queued but not written (e.g. while subscribing and
  // taking a snapshot that must come first).
  void Hold() {
    absl::MutexLock lock(&mu_);
    holding_ = true;
  }
  // Puts `first` ahead of everything pushed so far and starts writing; an error in its place
  // ends the stream with that error.
  void Start(absl::StatusOr<std::vector<Response>> first) {
    absl::MutexLock lock(&mu_);
    holding_ = false;
    if (!first.ok()) {
      FinishLocked(ToGrpcStatus(first.status()));
      return;
    }
    for (auto it = first->rbegin(); it != first->rend(); ++it) queue_.push_front(std::move(*it));
    WriteNextLocked();
  }

 private:
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (holding_ || writing_ || finished_ || queue_.empty()) return;
    current_ = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    this->StartWrite(&current_);
  }
  void FinishLocked(grpc::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    if (!writing_) {
      this->Finish(std::move(s));
    } else {
      pending_finish_ = std::move(s);
    }
  }

  const size_t max_queued_;
  absl::Mutex mu_;
  std::deque<Response> queue_ ABSL_GUARDED_BY(mu_);
  Response current_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool holding_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> pending_finish_ ABSL_GUARDED_BY(mu_);
};

}  // namespace goodput::platform
