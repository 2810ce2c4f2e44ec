#include "services/platform/pg_pool.h"

#include <algorithm>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace goodput::platform {

struct PgPool::Slot {
  std::unique_ptr<pqxx::connection> conn;
  absl::Time last_used = absl::InfinitePast();
  bool broken = false;
};

namespace {

std::string QuoteConnValue(absl::string_view value) {
  return absl::StrCat("'", absl::StrReplaceAll(value, {{"\\", "\\\\"}, {"'", "\\'"}}), "'");
}

// Adds the pool's connection parameters to a keyword/value string or a URI.
std::string BuildConninfo(const PgPoolOptions& options) {
  const int64_t connect_timeout_s =
      std::max<int64_t>(2, absl::ToInt64Seconds(options.connect_timeout));
  const std::vector<std::pair<std::string, std::string>> params = {
      {"connect_timeout", absl::StrCat(connect_timeout_s)},
      {"keepalives", "1"},
      {"keepalives_idle", "15"},
      {"keepalives_interval", "5"},
      {"keepalives_count", "3"},
      {"application_name", options.application_name},
      // PostgreSQL compiles a query with JIT once its estimated cost passes jit_above_cost,
      // which estimates from missing or stale statistics (a fleet registered since the last
      // ANALYZE) easily do: hundreds of milliseconds of compiling for a lookup that runs in
      // a few. Every query here is short; a DSN with its own `options` keeps its setting.
      {"options", "-c jit=off"},
  };
  std::string conninfo = options.dsn;
  const bool is_uri =
      absl::StartsWith(conninfo, "postgresql://") || absl::StartsWith(conninfo, "postgres://");
  for (const auto& [key, value] : params) {
    if (absl::StrContains(options.dsn, absl::StrCat(key, "="))) continue;  // the caller's wins
    if (is_uri) {
      absl::StrAppend(&conninfo, absl::StrContains(conninfo, "?") ? "&" : "?", key, "=",
                      absl::StrReplaceAll(value, {{"%", "%25"}, {" ", "%20"}, {"=", "%3D"},
                                                  {"&", "%26"}}));
    } else {
      absl::StrAppend(&conninfo, " ", key, "=", QuoteConnValue(value));
    }
  }
  return conninfo;
}

std::string SqlState(const std::exception& e) {
  if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e); sql != nullptr)
    return sql->sqlstate();
  return "";
}

std::string OneLine(absl::string_view text) {
  std::string line(absl::StripTrailingAsciiWhitespace(text));
  std::replace(line.begin(), line.end(), '\n', ' ');
  return line;
}

}  // namespace

bool IsPgConnectionFailure(const std::exception& e) {
  if (dynamic_cast<const pqxx::broken_connection*>(&e) != nullptr) return true;
  const std::string state = SqlState(e);
  // 08: connection exception; 57P01-57P03: admin/crash shutdown, cannot connect now.
  return absl::StartsWith(state, "08") || state == "57P01" || state == "57P02" || state == "57P03";
}

absl::Status PgExceptionToStatus(const std::exception& e, absl::string_view context) {
  const std::string state = SqlState(e);
  const std::string what = OneLine(e.what());
  const std::string message = state.empty()
                                  ? absl::StrCat(context, ": ", what)
                                  : absl::StrCat(context, ": SQLSTATE ", state, ": ", what);
  if (dynamic_cast<const pqxx::in_doubt_error*>(&e) != nullptr ||
      dynamic_cast<const pqxx::statement_completion_unknown*>(&e) != nullptr) {
    return absl::UnknownError(
        absl::StrCat(message, " (outcome unknown: the commit may have happened)"));
  }
  if (IsPgConnectionFailure(e)) return absl::UnavailableError(message);
  if (state == "23505") return absl::AlreadyExistsError(message);
  if (absl::StartsWith(state, "23")) return absl::FailedPreconditionError(message);
  if (absl::StartsWith(state, "22")) return absl::InvalidArgumentError(message);
  if (state == "40001" || state == "40P01") return absl::AbortedError(message);
  if (state == "57014") return absl::DeadlineExceededError(message);
  if (state == "55P03") return absl::UnavailableError(message);  // lock not available
  if (absl::StartsWith(state, "53")) return absl::ResourceExhaustedError(message);
  if (state == "42P01" || state == "42883" || state == "42703")
    return absl::FailedPreconditionError(message);
  return absl::InternalError(message);
}

// ---- Lease ----

PgPool::Lease::Lease(PgPool* pool, std::unique_ptr<Slot> slot)
    : pool_(pool), slot_(std::move(slot)) {}

PgPool::Lease::Lease(Lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), slot_(std::move(other.slot_)) {}

PgPool::Lease& PgPool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    pool_ = std::exchange(other.pool_, nullptr);
    slot_ = std::move(other.slot_);
  }
  return *this;
}

PgPool::Lease::~Lease() { Release(); }

void PgPool::Lease::Release() {
  if (pool_ != nullptr && slot_ != nullptr) pool_->Return(std::move(slot_));
  pool_ = nullptr;
}

pqxx::connection& PgPool::Lease::connection() { return *slot_->conn; }

void PgPool::Lease::MarkBroken() {
  if (slot_ != nullptr) slot_->broken = true;
}

// ---- PgPool ----

absl::StatusOr<std::unique_ptr<PgPool>> PgPool::Create(PgPoolOptions options) {
  if (options.dsn.empty()) return absl::InvalidArgumentError("PgPool: dsn is empty");
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PgPool: max_connections=", options.max_connections, " must be at least 1"));
  }
  if (options.max_attempts < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PgPool: max_attempts=", options.max_attempts, " must be at least 1"));
  }
  if (options.acquire_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PgPool: acquire_timeout=", absl::FormatDuration(options.acquire_timeout), " is negative"));
  }
  if (options.min_reconnect_backoff <= absl::ZeroDuration() ||
      options.max_reconnect_backoff < options.min_reconnect_backoff) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PgPool: reconnect backoff min=", absl::FormatDuration(options.min_reconnect_backoff),
        " max=", absl::FormatDuration(options.max_reconnect_backoff),
        " must satisfy 0 < min <= max"));
  }
  return std::unique_ptr<PgPool>(new PgPool(std::move(options)));
}

PgPool::PgPool(PgPoolOptions options)
    : options_(std::move(options)), conninfo_(BuildConninfo(options_)) {}

PgPool::~PgPool() {
  absl::MutexLock lock(&mu_);
  idle_.clear();
}

absl::StatusOr<std::unique_ptr<PgPool::Slot>> PgPool::Connect() {
  auto slot = std::make_unique<Slot>();
  try {
    slot->conn = std::make_unique<pqxx::connection>(conninfo_);
    // The pool replaces broken connections itself; libpqxx must not silently reconnect one
    // (that would lose session state such as prepared statements mid-transaction).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    slot->conn->inhibit_reactivation(true);
#pragma GCC diagnostic pop
    pqxx::nontransaction setup(*slot->conn);
    setup.exec("SET client_min_messages = warning");
    setup.exec(absl::StrCat("SET statement_timeout = ",
                            absl::ToInt64Milliseconds(options_.statement_timeout)));
    setup.commit();
    for (const auto& [name, sql] : options_.prepared_statements) {
      slot->conn->prepare(name, sql);
    }
  } catch (const std::exception& e) {
    return PgExceptionToStatus(e, "connecting to PostgreSQL");
  }
  slot->last_used = absl::Now();
  return slot;
}

absl::StatusOr<PgPool::Lease> PgPool::Acquire(std::optional<absl::Duration> timeout) {
  const absl::Time deadline = absl::Now() + timeout.value_or(options_.acquire_timeout);
  while (true) {
    std::unique_ptr<Slot> slot;
    bool open_new = false;
    {
      absl::MutexLock lock(&mu_);
      auto can_proceed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !idle_.empty() || open_ < options_.max_connections;
      };
      if (!mu_.AwaitWithDeadline(absl::Condition(&can_proceed), deadline)) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "PostgreSQL pool: all ", options_.max_connections, " connections in use for ",
            absl::FormatDuration(timeout.value_or(options_.acquire_timeout))));
      }
      if (!idle_.empty()) {
        slot = std::move(idle_.back());  // most recently used: the one most likely alive
        idle_.pop_back();
      } else {
        const absl::Time now = absl::Now();
        if (now < next_connect_attempt_) {
          return absl::UnavailableError(
              absl::StrCat("PostgreSQL unreachable (", last_connect_error_, "); next attempt in ",
                           absl::FormatDuration(next_connect_attempt_ - now)));
        }
        ++open_;  // reserve the place while connecting without the lock
        open_new = true;
      }
    }
    if (open_new) {
      auto connected = Connect();
      absl::MutexLock lock(&mu_);
      if (!connected.ok()) {
        --open_;
        ++counters_.connect_failures;
        backoff_ = backoff_ == absl::ZeroDuration()
                       ? options_.min_reconnect_backoff
                       : std::min(backoff_ * 2, options_.max_reconnect_backoff);
        next_connect_attempt_ = absl::Now() + backoff_;
        last_connect_error_ = std::string(connected.status().message());
        return absl::UnavailableError(connected.status().message());
      }
      ++counters_.connects;
      backoff_ = absl::ZeroDuration();
      next_connect_attempt_ = absl::InfinitePast();
      return Lease(this, *std::move(connected));
    }
    // An idle connection: check it with a round trip if it sat for a while.
    if (absl::Now() - slot->last_used < options_.validate_after_idle && slot->conn->is_open()) {
      return Lease(this, std::move(slot));
    }
    bool alive = slot->conn->is_open();
    if (alive) {
      try {
        pqxx::nontransaction check(*slot->conn);
        check.exec("SELECT 1");
      } catch (const std::exception&) {
        alive = false;
      }
    }
    if (alive) return Lease(this, std::move(slot));
    slot->broken = true;
    Return(std::move(slot));  // counts it and drops the other idle ones too
  }
}

void PgPool::Return(std::unique_ptr<Slot> slot) {
  const bool broken = slot->broken || !slot->conn->is_open();
  std::vector<std::unique_ptr<Slot>> to_close;
  {
    absl::MutexLock lock(&mu_);
    if (broken) {
      --open_;
      ++counters_.broken_dropped;
      // A server restart breaks every connection; close the idle ones now rather than
      // letting each borrower discover it.
      open_ -= static_cast<int>(idle_.size());
      to_close = std::move(idle_);
      idle_.clear();
      to_close.push_back(std::move(slot));
    } else {
      slot->last_used = absl::Now();
      idle_.push_back(std::move(slot));
    }
  }
  // Closing happens outside the lock: it may wait on the network.
}

absl::Status PgPool::RunWithRetry(
    const std::function<absl::Status(pqxx::connection&, bool* commit_sent)>& body) {
  absl::Status last;
  absl::Duration pause = options_.min_reconnect_backoff;
  for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
    if (attempt > 0) {
      {
        absl::MutexLock lock(&mu_);
        ++counters_.retries;
      }
      std::this_thread::sleep_for(absl::ToChronoNanoseconds(pause));
      pause = std::min(pause * 2, options_.max_reconnect_backoff);
    }
    auto lease = Acquire();
    if (!lease.ok()) {
      if (lease.status().code() == absl::StatusCode::kUnavailable) {
        last = lease.status();
        continue;
      }
      return lease.status();
    }
    bool commit_sent = false;
    try {
      return body(lease->connection(), &commit_sent);
    } catch (const std::exception& e) {
      const bool connection_failure = IsPgConnectionFailure(e);
      if (connection_failure) lease->MarkBroken();
      absl::Status status = PgExceptionToStatus(e, "PostgreSQL transaction");
      if (status.code() == absl::StatusCode::kUnknown) return status;
      if (connection_failure && commit_sent) {
        return absl::UnknownError(
            absl::StrCat(status.message(), " (connection lost while committing: outcome unknown)"));
      }
      if (connection_failure || status.code() == absl::StatusCode::kAborted) {
        last = status;
        continue;
      }
      return status;
    }
  }
  return absl::Status(last.code(), absl::StrCat(last.message(), " (gave up after ",
                                                options_.max_attempts, " attempts)"));
}

absl::Status PgPool::RunTransaction(const std::function<absl::Status(pqxx::work&)>& fn) {
  return RunWithRetry([&](pqxx::connection& conn, bool* commit_sent) -> absl::Status {
    pqxx::work txn(conn);
    absl::Status status = fn(txn);
    if (!status.ok()) {
      txn.abort();
      return status;
    }
    *commit_sent = true;
    txn.commit();
    return absl::OkStatus();
  });
}

absl::Status PgPool::Execute(absl::string_view sql) {
  return RunWithRetry([&](pqxx::connection& conn, bool* commit_sent) -> absl::Status {
    pqxx::nontransaction txn(conn);
    // A statement outside a transaction commits as it runs: a lost connection now leaves
    // its outcome unknown.
    *commit_sent = true;
    txn.exec(std::string(sql));
    return absl::OkStatus();
  });
}

absl::Status PgPool::Ping() {
  return RunWithRetry([](pqxx::connection& conn, bool*) -> absl::Status {
    pqxx::nontransaction txn(conn);
    txn.exec("SELECT 1");
    return absl::OkStatus();
  });
}

PgPoolStats PgPool::Stats() const {
  absl::MutexLock lock(&mu_);
  PgPoolStats stats = counters_;
  stats.open_connections = open_;
  stats.idle_connections = static_cast<int>(idle_.size());
  return stats;
}

}  // namespace goodput::platform
