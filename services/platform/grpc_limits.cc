#include "services/platform/grpc_limits.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/resource_quota.h"

namespace goodput::platform {

absl::StatusOr<GrpcLimits> GrpcLimitsFrom(const ConfigTree& config, absl::string_view prefix) {
  GrpcLimits limits;
  auto key = [&](absl::string_view name) { return absl::StrCat(prefix, ".", name); };
  auto integer = [&](absl::string_view name, int64_t fallback, int64_t min,
                     int64_t max) -> absl::StatusOr<int64_t> {
    return config.GetIntInRange(key(name), fallback, min, max);
  };
  auto seconds = [&](absl::string_view name, absl::Duration fallback,
                     absl::Duration min) -> absl::StatusOr<absl::Duration> {
    absl::StatusOr<absl::Duration> d =
        config.GetSeconds(key(name), absl::ToDoubleSeconds(fallback));
    if (d.ok() && *d < min) {
      return absl::InvalidArgumentError(absl::StrCat("config key ", key(name), " must be at least ",
                                                     absl::ToDoubleSeconds(min), " s"));
    }
    return d;
  };
  absl::StatusOr<int64_t> per_connection =
      integer("max_streams_per_connection", limits.max_streams_per_connection, 1, 1 << 20);
  if (!per_connection.ok()) return per_connection.status();
  limits.max_streams_per_connection = static_cast<int>(*per_connection);
  absl::StatusOr<int64_t> streams = integer("max_streams", limits.max_streams, 1, 1 << 24);
  if (!streams.ok()) return streams.status();
  limits.max_streams = *streams;
  absl::StatusOr<absl::Duration> evict =
      seconds("evict_idle_after_s", limits.evict_idle_after, absl::ZeroDuration());
  if (!evict.ok()) return evict.status();
  limits.evict_idle_after = *evict;
  absl::StatusOr<int64_t> memory =
      integer("max_memory_bytes", limits.max_memory_bytes, 16 << 20, int64_t{1} << 40);
  if (!memory.ok()) return memory.status();
  limits.max_memory_bytes = *memory;
  absl::StatusOr<int64_t> threads = integer("max_threads", limits.max_threads, 4, 1 << 16);
  if (!threads.ok()) return threads.status();
  limits.max_threads = static_cast<int>(*threads);
  absl::StatusOr<absl::Duration> keepalive =
      seconds("keepalive_s", limits.keepalive, absl::Seconds(1));
  if (!keepalive.ok()) return keepalive.status();
  limits.keepalive = *keepalive;
  absl::StatusOr<absl::Duration> keepalive_timeout =
      seconds("keepalive_timeout_s", limits.keepalive_timeout, absl::Seconds(1));
  if (!keepalive_timeout.ok()) return keepalive_timeout.status();
  limits.keepalive_timeout = *keepalive_timeout;
  absl::StatusOr<absl::Duration> age =
      seconds("max_connection_age_s", limits.max_connection_age, absl::Seconds(1));
  if (!age.ok()) return age.status();
  limits.max_connection_age = *age;
  absl::StatusOr<absl::Duration> grace =
      seconds("max_connection_age_grace_s", limits.max_connection_age_grace, absl::Seconds(1));
  if (!grace.ok()) return grace.status();
  limits.max_connection_age_grace = *grace;
  absl::StatusOr<int64_t> retry = integer("retry_after_s", limits.retry_after_s, 1, 3600);
  if (!retry.ok()) return retry.status();
  limits.retry_after_s = static_cast<int>(*retry);
  return limits;
}

void ApplyGrpcLimits(const GrpcLimits& limits, grpc::ServerBuilder& builder) {
  auto ms = [](absl::Duration d) {
    return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(d), INT32_MAX));
  };
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, limits.max_streams_per_connection);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, ms(limits.keepalive));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms(limits.keepalive_timeout));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_MS, ms(limits.max_connection_age));
  builder.AddChannelArgument(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS,
                             ms(limits.max_connection_age_grace));
  grpc::ResourceQuota quota("goodput-grpc");
  quota.Resize(static_cast<size_t>(limits.max_memory_bytes));
  quota.SetMaxThreads(limits.max_threads);
  builder.SetResourceQuota(quota);
}

std::shared_ptr<StreamSlots::Slot> StreamSlots::Acquire(grpc::CallbackServerContext* context) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  if (static_cast<int64_t>(slots_.size()) >= options_.max_streams) {
    Slot* oldest = nullptr;
    for (Slot* s : slots_) {
      if (!s->busy && (oldest == nullptr || s->idle_since < oldest->idle_since)) oldest = s;
    }
    if (oldest == nullptr || now - oldest->idle_since < options_.evict_idle_after) return nullptr;
    // Reactions run after this callback returns, never inside TryCancel here, so the victim's
    // Release (which takes mu_) cannot run while it is held.
    slots_.erase(oldest->position);
    oldest->held = false;
    oldest->context->TryCancel();
    ++evicted_;
  }
  auto slot = std::make_shared<Slot>();
  slot->context = context;
  slot->idle_since = now;
  slots_.push_back(slot.get());
  slot->position = std::prev(slots_.end());
  return slot;
}

void StreamSlots::Busy(Slot& slot) {
  absl::MutexLock lock(&mu_);
  slot.busy = true;
}

void StreamSlots::Idle(Slot& slot) {
  absl::MutexLock lock(&mu_);
  slot.busy = false;
  slot.idle_since = absl::Now();
}

void StreamSlots::Release(Slot& slot) {
  absl::MutexLock lock(&mu_);
  if (!slot.held) return;
  slots_.erase(slot.position);
  slot.held = false;
}

grpc::Status StreamSlots::Refusal(grpc::CallbackServerContext* context) const {
  context->AddTrailingMetadata("retry-after", absl::StrCat(options_.retry_after_s));
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      absl::StrCat(open(), " streams are open (the limit is ", options_.max_streams,
                                   ", ", options_.config_key, ") and none has been idle for ",
                                   absl::FormatDuration(options_.evict_idle_after), "; retry in ",
                                   options_.retry_after_s, " s"));
}

int64_t StreamSlots::open() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(slots_.size());
}

int64_t StreamSlots::evicted() const {
  absl::MutexLock lock(&mu_);
  return evicted_;
}

}  // namespace goodput::platform
