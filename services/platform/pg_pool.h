#pragma once

// A bounded pool of PostgreSQL connections (libpqxx) that survives server restarts.
//
// Connections are opened lazily, up to `max_connections`. A borrower waits up to
// `acquire_timeout` for a free one and then gets RESOURCE_EXHAUSTED; if PostgreSQL cannot
// be reached it gets UNAVAILABLE at once. Connections that turn out broken are dropped
// (with every idle one, since a restart breaks them all) and new ones are opened, with an
// exponential backoff between failed connection attempts, so the process recovers by itself
// when the server comes back. No exception leaves this layer.
//
//   auto pool = PgPool::Create({.dsn = "host=127.0.0.1 port=5432 dbname=goodput"});
//   absl::Status s = (*pool)->RunTransaction([&](pqxx::work& txn) {
//     txn.exec_params("INSERT INTO t VALUES ($1)", 42);
//     return absl::OkStatus();
//   });
//
// RunTransaction retries the function on a fresh connection when the connection failed
// before COMMIT was sent (nothing was committed), and on serialization failures and
// deadlocks; a failure while committing is reported as UNKNOWN ("outcome unknown"),
// never retried, because the transaction may have committed.
//
// Nullable values: libpqxx 6.4 takes std::optional<T> in exec_params/exec_prepared
// arguments and pqxx::stream_to (COPY) rows; std::nullopt is written as NULL.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace goodput::platform {

struct PgPoolOptions {
  // libpq connection string: "host=... port=... dbname=... user=..." or a postgresql:// URI.
  std::string dsn = {};
  // Upper bound of open connections.
  int max_connections = 8;
  // How long Acquire waits for a connection when all are in use.
  absl::Duration acquire_timeout = absl::Seconds(5);
  // TCP connect timeout for a new connection (libpq rounds to whole seconds, at least 2).
  absl::Duration connect_timeout = absl::Seconds(5);
  // Server-side statement_timeout for every statement; zero means none.
  absl::Duration statement_timeout = absl::Seconds(60);
  // An idle connection older than this is checked with a round trip before it is lent.
  absl::Duration validate_after_idle = absl::Seconds(10);
  // Backoff between failed connection attempts: doubles from min to max.
  absl::Duration min_reconnect_backoff = absl::Milliseconds(50);
  absl::Duration max_reconnect_backoff = absl::Seconds(2);
  // Attempts RunTransaction makes when failures are safe to retry (at least 1).
  int max_attempts = 4;
  // Statements prepared on every new connection: {name, sql}; run them with
  // txn.exec_prepared(name, args...).
  std::vector<std::pair<std::string, std::string>> prepared_statements = {};
  // Shown in pg_stat_activity.
  std::string application_name = "goodput";
};

// Counters for /metrics and tests.
struct PgPoolStats {
  int open_connections = 0;
  int idle_connections = 0;
  int64_t connects = 0;          // successful connection attempts
  int64_t connect_failures = 0;  // failed connection attempts
  int64_t broken_dropped = 0;    // connections dropped because they were broken
  int64_t retries = 0;           // RunTransaction attempts beyond the first
};

class PgPool {
 private:
  struct Slot;

 public:
  // A borrowed connection; returned to the pool when destroyed. The pool must outlive it.
  class Lease {
   public:
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();

    pqxx::connection& connection();
    // Tells the pool not to reuse this connection (it saw a connection error).
    void MarkBroken();

   private:
    friend class PgPool;
    Lease(PgPool* pool, std::unique_ptr<Slot> slot);
    void Release();

    PgPool* pool_ = nullptr;
    std::unique_ptr<Slot> slot_;
  };

  // Checks the options (INVALID_ARGUMENT naming the field); opens no connection yet.
  static absl::StatusOr<std::unique_ptr<PgPool>> Create(PgPoolOptions options);

  PgPool(const PgPool&) = delete;
  PgPool& operator=(const PgPool&) = delete;
  ~PgPool();

  // Borrows a connection: RESOURCE_EXHAUSTED if none frees up within `acquire_timeout`
  // (or `timeout` when given), UNAVAILABLE if a new connection cannot be opened.
  absl::StatusOr<Lease> Acquire(std::optional<absl::Duration> timeout = std::nullopt);

  // Runs `fn` in a read-committed transaction and commits if it returns OK (rolls back
  // otherwise and returns its status unchanged). `fn` must let libpqxx exceptions propagate
  // so that connection failures are seen; it may run more than once (see above).
  absl::Status RunTransaction(const std::function<absl::Status(pqxx::work&)>& fn);

  // RunTransaction for functions that produce a value.
  template <typename T>
  absl::StatusOr<T> RunTransactionFor(const std::function<absl::StatusOr<T>(pqxx::work&)>& fn) {
    std::optional<T> value;
    absl::Status status = RunTransaction([&](pqxx::work& txn) -> absl::Status {
      value.reset();
      absl::StatusOr<T> result = fn(txn);
      if (!result.ok()) return result.status();
      value.emplace(*std::move(result));
      return absl::OkStatus();
    });
    if (!status.ok()) return status;
    return *std::move(value);
  }

  // Runs one or more statements outside an explicit transaction (DDL that must not run in
  // one, VACUUM, ...); retried like RunTransaction when the connection fails.
  absl::Status Execute(absl::string_view sql);

  // One round trip to the server: OK, or why it is unreachable.
  absl::Status Ping();

  PgPoolStats Stats() const;
  const PgPoolOptions& options() const { return options_; }

 private:
  explicit PgPool(PgPoolOptions options);
  absl::StatusOr<std::unique_ptr<Slot>> Connect();
  void Return(std::unique_ptr<Slot> slot);
  absl::Status RunWithRetry(
      const std::function<absl::Status(pqxx::connection&, bool* commit_sent)>& body);

  const PgPoolOptions options_;
  const std::string conninfo_;

  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<Slot>> idle_ ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time next_connect_attempt_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Duration backoff_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  std::string last_connect_error_ ABSL_GUARDED_BY(mu_);
  PgPoolStats counters_ ABSL_GUARDED_BY(mu_);
};

// Maps a libpqxx (or other) exception to a status: SQLSTATE classes to codes
// (23505 ALREADY_EXISTS, 23xxx FAILED_PRECONDITION, 22xxx INVALID_ARGUMENT, 40001/40P01
// ABORTED, 57014 DEADLINE_EXCEEDED, 53xxx RESOURCE_EXHAUSTED, 08xxx/57P0x and broken
// connections UNAVAILABLE, in-doubt commits UNKNOWN, anything else INTERNAL). The message
// starts with `context` and carries the SQLSTATE and the server's message.
absl::Status PgExceptionToStatus(const std::exception& e, absl::string_view context);

// True for failures of the connection itself (the connection must be dropped).
bool IsPgConnectionFailure(const std::exception& e);

}  // namespace goodput::platform
