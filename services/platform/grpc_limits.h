// Bounds on what gRPC clients can make a server hold, whatever they do: streams per
// connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS), a resource quota for the transport's
// memory and the threads of synchronous handlers, keepalive pings that find dead peers, and a
// maximum connection age after which a connection is drained and closed (so an abandoned
// stream cannot live forever). `StreamSlots` bounds a service's long-lived streams: beyond
// the bound a new stream takes the slot of the one idle longest, if that one has been idle
// long enough, or is refused with RESOURCE_EXHAUSTED and a retry hint.
//
//   ASSIGN_OR_RETURN(GrpcLimits limits, GrpcLimitsFrom(config, "ingest.grpc"));
//   ctx.grpc->ConfigureBuilder([limits](grpc::ServerBuilder& b) { ApplyGrpcLimits(limits, b); });
//   StreamSlots slots({.max_streams = limits.max_streams, ...});
//   // in a reactor: slot_ = slots.Acquire(context); if (!slot_) Finish(StreamSlots::Refusal());
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "services/platform/config.h"

namespace goodput::platform {

struct GrpcLimits {
  int max_streams_per_connection = 128;
  // Long-lived streams (e.g. PushSamples) open at once, over all connections.
  int64_t max_streams = 1024;
  // A stream idle (waiting for its client's next message) at least this long may be cancelled
  // to make room for a new one when every slot is taken.
  absl::Duration evict_idle_after = absl::Seconds(30);
  // Resource quota: transport memory (buffers, flow-control windows) and threads.
  int64_t max_memory_bytes = 512 << 20;
  int max_threads = 64;
  absl::Duration keepalive = absl::Seconds(60);
  absl::Duration keepalive_timeout = absl::Seconds(20);
  absl::Duration max_connection_age = absl::Minutes(30);
  absl::Duration max_connection_age_grace = absl::Minutes(1);
  // Seconds a refused client is asked to wait before retrying.
  int retry_after_s = 1;
};

// Reads `<prefix>.max_streams_per_connection`, `.max_streams`, `.evict_idle_after_s`,
// `.max_memory_bytes`, `.max_threads`, `.keepalive_s`, `.keepalive_timeout_s`,
// `.max_connection_age_s`, `.max_connection_age_grace_s`, `.retry_after_s` (defaults as in
// GrpcLimits). INVALID_ARGUMENT naming the key for a value out of range.
absl::StatusOr<GrpcLimits> GrpcLimitsFrom(const ConfigTree& config, absl::string_view prefix);

// Sets the channel arguments and resource quota of `limits` on `builder`.
void ApplyGrpcLimits(const GrpcLimits& limits, grpc::ServerBuilder& builder);

// The long-lived streams of a service, at most `max_streams` at once.
class StreamSlots {
 public:
  struct Options {
    int64_t max_streams = 1024;
    absl::Duration evict_idle_after = absl::Seconds(30);
    int retry_after_s = 1;
    // What the refusal names as the limit.
    std::string config_key = "max_streams";
  };
  class Slot;

  explicit StreamSlots(Options options) : options_(std::move(options)) {}

  // A slot for the stream of `context`, taken idle (waiting for a message). When none is free,
  // the stream idle longest is cancelled and its slot taken if it has been idle at least
  // `evict_idle_after`; otherwise null: finish the stream with Refusal(). Call from the
  // reactor's constructor.
  std::shared_ptr<Slot> Acquire(grpc::CallbackServerContext* context);
  // The stream is working on a message (never evicted) / waiting for the next one again.
  void Busy(Slot& slot);
  void Idle(Slot& slot);
  // Frees the slot; call from the reactor's OnDone, before the context goes away.
  void Release(Slot& slot);

  // RESOURCE_EXHAUSTED naming the limit, with a `retry-after` (seconds) trailer on `context`.
  grpc::Status Refusal(grpc::CallbackServerContext* context) const;

  int64_t open() const;
  int64_t evicted() const;

 private:
  const Options options_;
  mutable absl::Mutex mu_;
  // Open streams, least recently idle first among the idle ones is found by a scan (evictions
  // happen only when every slot is taken).
  std::list<Slot*> slots_ ABSL_GUARDED_BY(mu_);
  int64_t evicted_ ABSL_GUARDED_BY(mu_) = 0;
};

// A stream's hold on a StreamSlots slot (fields guarded by the StreamSlots' mutex).
class StreamSlots::Slot {
 private:
  friend class StreamSlots;
  grpc::CallbackServerContext* context = nullptr;
  std::list<Slot*>::iterator position;
  absl::Time idle_since;
  bool busy = false;
  bool held = true;  // false once released or evicted
};

}  // namespace goodput::platform
