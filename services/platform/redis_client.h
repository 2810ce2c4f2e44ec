#pragma once

// A Redis client (hiredis, synchronous) for what the services keep in Redis: caches,
// dedup and idempotency keys, rate-limit counters and leases. Thread-safe: it keeps a
// small pool of connections, each used by one caller at a time. A connection that fails
// (server restart, timeout) is dropped and a new one is opened on the next call, with a
// backoff while the server stays unreachable, so the process recovers by itself.
// Errors are statuses: UNAVAILABLE when Redis cannot be reached or is loading, DEADLINE_
// EXCEEDED on a command timeout, FAILED_PRECONDITION for an error reply (WRONGTYPE, ...).
//
//   auto redis = RedisClient::Create({.host = "127.0.0.1", .port = 6379});
//   (*redis)->Set("ofu:latest:job42", payload, absl::Minutes(5));
//   absl::StatusOr<bool> mine = (*redis)->AcquireLease("alerting:shard:3", replica_id,
//   absl::Seconds(15));
//
// Redis holds only what can be rebuilt: callers treat UNAVAILABLE as "slower", not "lost".

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

struct redisContext;

namespace goodput::platform {

struct RedisClientOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  // Optional AUTH password and logical database.
  std::string password = {};
  int database = 0;
  // Upper bound of open connections; callers beyond it wait up to `acquire_timeout`.
  int max_connections = 4;
  absl::Duration connect_timeout = absl::Seconds(2);
  // Read/write timeout of one command.
  absl::Duration command_timeout = absl::Seconds(2);
  absl::Duration acquire_timeout = absl::Seconds(2);
  // Backoff between failed connection attempts: doubles from min to max.
  absl::Duration min_reconnect_backoff = absl::Milliseconds(50);
  absl::Duration max_reconnect_backoff = absl::Seconds(2);
  // Prefixed to every key the convenience functions touch ("goodput:"), so that several
  // deployments can share one Redis.
  std::string key_prefix = {};
};

// A parsed reply. Error replies never appear here: they become statuses.
struct RedisReply {
  struct Nil {};
  struct Status {
    std::string text;  // e.g. "OK"
  };
  std::variant<Nil, int64_t, std::string, Status, std::vector<RedisReply>> value;

  bool IsNil() const { return std::holds_alternative<Nil>(value); }
  // The value as an integer, string or array; INVALID_ARGUMENT naming the actual type.
  absl::StatusOr<int64_t> AsInt() const;
  absl::StatusOr<std::string> AsString() const;  // bulk string or status text
  absl::StatusOr<std::vector<RedisReply>> AsArray() const;
};

struct RedisClientStats {
  int open_connections = 0;
  int64_t connects = 0;
  int64_t connect_failures = 0;
  int64_t broken_dropped = 0;
};

class RedisClient {
 public:
  // Checks the options (INVALID_ARGUMENT naming the field); connects lazily.
  static absl::StatusOr<std::unique_ptr<RedisClient>> Create(RedisClientOptions options);

  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;
  ~RedisClient();

  // Sends one command (binary-safe arguments, e.g. {"SET", key, value}) and returns its
  // reply. Keys are used as given (no prefix). A command that fails on a connection that
  // had been idle is retried once on a fresh connection if it is safe to repeat
  // (`idempotent`); otherwise the failure is returned.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string>& args, bool idempotent = false);
  // Sends several commands in one round trip and returns their replies in order; the
  // first error reply fails the whole call.
  absl::StatusOr<std::vector<RedisReply>> Pipeline(
      const std::vector<std::vector<std::string>>& commands);

  // PING: OK when Redis answers.
  absl::Status Ping();

  // --- Conveniences; `key` gets `key_prefix` prepended. ---

  // The value, or nullopt if the key does not exist.
  absl::StatusOr<std::optional<std::string>> Get(absl::string_view key);
  // SET, with an expiry when `ttl` is given (millisecond precision).
  absl::Status Set(absl::string_view key, absl::string_view value,
                   std::optional<absl::Duration> ttl = std::nullopt);
  // SET NX: true if the key was created (a dedup key seen for the first time).
  absl::StatusOr<bool> SetIfAbsent(absl::string_view key, absl::string_view value,
                                   std::optional<absl::Duration> ttl = std::nullopt);
  // PEXPIRE: true if the key exists and got the expiry.
  absl::StatusOr<bool> Expire(absl::string_view key, absl::Duration ttl);
  // DEL: how many of the keys existed.
  absl::StatusOr<int64_t> Delete(const std::vector<std::string>& keys);
  // INCRBY: the new value.
  absl::StatusOr<int64_t> Increment(absl::string_view key, int64_t by = 1);
  // Fixed-window counter for rate limits: INCRBY, and the window's expiry set when the
  // key is new (PEXPIRE NX), in one round trip. Returns the count in the window.
  absl::StatusOr<int64_t> IncrementInWindow(absl::string_view key, absl::Duration window,
                                            int64_t by = 1);

  // Leases (SET NX PX, checked with WATCH/MULTI so no Lua is needed).
  // Takes the lease if free: true if `owner` now holds it for `ttl`.
  absl::StatusOr<bool> AcquireLease(absl::string_view key, absl::string_view owner,
                                    absl::Duration ttl);
  // Extends the lease if `owner` still holds it: false if it expired or another holds it.
  absl::StatusOr<bool> RenewLease(absl::string_view key, absl::string_view owner,
                                  absl::Duration ttl);
  // Gives the lease up if `owner` holds it: false if it did not.
  absl::StatusOr<bool> ReleaseLease(absl::string_view key, absl::string_view owner);

  RedisClientStats Stats() const;
  const RedisClientOptions& options() const { return options_; }

 private:
  struct Connection;
  class Lease;
  explicit RedisClient(RedisClientOptions options);
  absl::StatusOr<std::unique_ptr<Connection>> Connect();
  absl::StatusOr<std::unique_ptr<Connection>> Borrow();
  void Return(std::unique_ptr<Connection> conn);
  // Runs commands on one connection in order, one round trip.
  absl::StatusOr<std::vector<RedisReply>> RunOn(
      Connection& conn, const std::vector<std::vector<std::string>>& commands);
  absl::StatusOr<std::vector<RedisReply>> Run(const std::vector<std::vector<std::string>>& commands,
                                              bool idempotent);
  // Compare-and-act for leases: under WATCH, runs `action` only if the key holds `owner`.
  absl::StatusOr<bool> IfOwner(absl::string_view key, absl::string_view owner,
                               const std::vector<std::string>& action);
  std::string Key(absl::string_view key) const;

  const RedisClientOptions options_;
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_connect_attempt_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration backoff_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  std::string last_connect_error_ ABSL_GUARDED_BY(mu_);
  RedisClientStats counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace goodput::platform
