#include "services/platform/redis_client.h"

#include <hiredis/hiredis.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace goodput::platform {

struct RedisClient::Connection {
  redisContext* ctx = nullptr;
  absl::Time last_used = absl::InfinitePast();
  bool broken = false;
  bool fresh = true;  // not yet used for a command

  Connection() = default;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (ctx != nullptr) redisFree(ctx);
  }
};

// Returns the borrowed connection to the client when it goes out of scope.
class RedisClient::Lease {
 public:
  Lease(RedisClient* client, std::unique_ptr<Connection> conn)
      : client_(client), conn_(std::move(conn)) {}
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() {
    if (conn_ != nullptr) client_->Return(std::move(conn_));
  }
  Connection& operator*() { return *conn_; }
  Connection* operator->() { return conn_.get(); }

 private:
  RedisClient* client_;
  std::unique_ptr<Connection> conn_;
};

namespace {

timeval TimeoutTimeval(absl::Duration d) {
  const int64_t us = std::max<int64_t>(1000, absl::ToInt64Microseconds(d));
  return timeval{static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)};
}

std::string TypeName(const RedisReply& reply) {
  switch (reply.value.index()) {
    case 0:
      return "nil";
    case 1:
      return "integer";
    case 2:
      return "string";
    case 3:
      return "status";
    default:
      return "array";
  }
}

RedisReply Convert(const redisReply* reply) {
  RedisReply out;
  switch (reply->type) {
    case REDIS_REPLY_INTEGER:
      out.value = static_cast<int64_t>(reply->integer);
      break;
    case REDIS_REPLY_STRING:
      out.value = std::string(reply->str, reply->len);
      break;
    case REDIS_REPLY_STATUS:
      out.value = RedisReply::Status{std::string(reply->str, reply->len)};
      break;
    case REDIS_REPLY_ARRAY: {
      std::vector<RedisReply> items;
      items.reserve(reply->elements);
      for (size_t i = 0; i < reply->elements; ++i) items.push_back(Convert(reply->element[i]));
      out.value = std::move(items);
      break;
    }
    default:
      out.value = RedisReply::Nil{};
  }
  return out;
}

absl::Status ErrorReplyToStatus(absl::string_view text, absl::string_view command) {
  const std::string message = absl::StrCat("redis ", command, ": ", text);
  // The server is starting, busy or failing over: try again later.
  for (absl::string_view transient : {"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"}) {
    if (absl::StartsWith(text, transient)) return absl::UnavailableError(message);
  }
  if (absl::StartsWith(text, "NOAUTH") || absl::StartsWith(text, "WRONGPASS")) {
    return absl::PermissionDeniedError(message);
  }
  return absl::FailedPreconditionError(message);
}

// True if the peer has closed the socket (e.g. the server restarted) while it sat idle.
bool PeerClosed(const redisContext* ctx) {
  char byte;
  const ssize_t n = recv(ctx->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  if (n < 0) return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  return false;  // unexpected pending data; the reply reader will sort it out
}

absl::Status ValidateTtl(absl::Duration ttl, absl::string_view field) {
  if (ttl < absl::Milliseconds(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis: ", field, "=", absl::FormatDuration(ttl), " must be at least 1ms"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> RedisReply::AsInt() const {
  if (const auto* v = std::get_if<int64_t>(&value)) return *v;
  return absl::InvalidArgumentError(
      absl::StrCat("redis reply is ", TypeName(*this), ", not an integer"));
}

absl::StatusOr<std::string> RedisReply::AsString() const {
  if (const auto* v = std::get_if<std::string>(&value)) return *v;
  if (const auto* v = std::get_if<Status>(&value)) return v->text;
  return absl::InvalidArgumentError(
      absl::StrCat("redis reply is ", TypeName(*this), ", not a string"));
}

absl::StatusOr<std::vector<RedisReply>> RedisReply::AsArray() const {
  if (const auto* v = std::get_if<std::vector<RedisReply>>(&value)) return *v;
  return absl::InvalidArgumentError(
      absl::StrCat("redis reply is ", TypeName(*this), ", not an array"));
}

absl::StatusOr<std::unique_ptr<RedisClient>> RedisClient::Create(RedisClientOptions options) {
  if (options.host.empty()) return absl::InvalidArgumentError("RedisClient: host is empty");
  if (options.port <= 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("RedisClient: port=", options.port, " is not in [1, 65535]"));
  }
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RedisClient: max_connections=", options.max_connections, " must be at least 1"));
  }
  if (options.database < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("RedisClient: database=", options.database, " is negative"));
  }
  if (options.min_reconnect_backoff <= absl::ZeroDuration() ||
      options.max_reconnect_backoff < options.min_reconnect_backoff) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RedisClient: reconnect backoff min=", absl::FormatDuration(options.min_reconnect_backoff),
        " max=", absl::FormatDuration(options.max_reconnect_backoff),
        " must satisfy 0 < min <= max"));
  }
  return std::unique_ptr<RedisClient>(new RedisClient(std::move(options)));
}

RedisClient::RedisClient(RedisClientOptions options) : options_(std::move(options)) {}

RedisClient::~RedisClient() {
  absl::MutexLock lock(&mu_);
  idle_.clear();
}

std::string RedisClient::Key(absl::string_view key) const {
  return absl::StrCat(options_.key_prefix, key);
}

absl::StatusOr<std::unique_ptr<RedisClient::Connection>> RedisClient::Connect() {
  auto conn = std::make_unique<Connection>();
  const std::string where = absl::StrCat(options_.host, ":", options_.port);
  conn->ctx = redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                      TimeoutTimeval(options_.connect_timeout));
  if (conn->ctx == nullptr)
    return absl::ResourceExhaustedError("redis: cannot allocate a connection");
  if (conn->ctx->err != 0) {
    return absl::UnavailableError(absl::StrCat("redis at ", where, ": ", conn->ctx->errstr));
  }
  if (redisSetTimeout(conn->ctx, TimeoutTimeval(options_.command_timeout)) != REDIS_OK) {
    return absl::UnavailableError(
        absl::StrCat("redis at ", where, ": setting the timeout: ", conn->ctx->errstr));
  }
  redisEnableKeepAlive(conn->ctx);
  std::vector<std::vector<std::string>> setup;
  if (!options_.password.empty()) setup.push_back({"AUTH", options_.password});
  if (options_.database != 0) setup.push_back({"SELECT", absl::StrCat(options_.database)});
  if (!setup.empty()) {
    auto replies = RunOn(*conn, setup);
    if (!replies.ok()) return replies.status();
  }
  conn->last_used = absl::Now();
  return conn;
}

absl::StatusOr<std::unique_ptr<RedisClient::Connection>> RedisClient::Borrow() {
  const absl::Time deadline = absl::Now() + options_.acquire_timeout;
  while (true) {
    std::unique_ptr<Connection> conn;
    {
      absl::MutexLock lock(&mu_);
      auto can_proceed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !idle_.empty() || open_ < options_.max_connections;
      };
      if (!mu_.AwaitWithDeadline(absl::Condition(&can_proceed), deadline)) {
        return absl::ResourceExhaustedError(
            absl::StrCat("redis: all ", options_.max_connections, " connections in use for ",
                         absl::FormatDuration(options_.acquire_timeout)));
      }
      if (!idle_.empty()) {
        conn = std::move(idle_.back());
        idle_.pop_back();
      } else {
        const absl::Time now = absl::Now();
        if (now < next_connect_attempt_) {
          return absl::UnavailableError(
              absl::StrCat("redis unreachable (", last_connect_error_, "); next attempt in ",
                           absl::FormatDuration(next_connect_attempt_ - now)));
        }
        ++open_;
      }
    }
    if (conn != nullptr) {
      if (!PeerClosed(conn->ctx)) return conn;
      conn->broken = true;
      Return(std::move(conn));  // drops the other idle ones as well
      continue;
    }
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
      return connected.status();
    }
    ++counters_.connects;
    backoff_ = absl::ZeroDuration();
    next_connect_attempt_ = absl::InfinitePast();
    return connected;
  }
}

void RedisClient::Return(std::unique_ptr<Connection> conn) {
  std::vector<std::unique_ptr<Connection>> to_close;  // closed after the lock is released
  absl::MutexLock lock(&mu_);
  if (conn->broken || conn->ctx->err != 0) {
    ++counters_.broken_dropped;
    // A restarted server broke every connection; do not hand the idle ones out.
    open_ -= 1 + static_cast<int>(idle_.size());
    to_close = std::move(idle_);
    idle_.clear();
    to_close.push_back(std::move(conn));
  } else {
    conn->last_used = absl::Now();
    conn->fresh = false;
    idle_.push_back(std::move(conn));
  }
}

absl::StatusOr<std::vector<RedisReply>> RedisClient::RunOn(
    Connection& conn, const std::vector<std::vector<std::string>>& commands) {
  for (const auto& args : commands) {
    std::vector<const char*> argv;
    std::vector<size_t> argv_len;
    for (const auto& arg : args) {
      argv.push_back(arg.data());
      argv_len.push_back(arg.size());
    }
    if (redisAppendCommandArgv(conn.ctx, static_cast<int>(argv.size()), argv.data(),
                               argv_len.data()) != REDIS_OK) {
      conn.broken = true;
      return absl::UnavailableError(
          absl::StrCat("redis: sending ", args.empty() ? "" : args[0], ": ", conn.ctx->errstr));
    }
  }
  std::vector<RedisReply> replies;
  absl::Status first_error;
  for (const auto& args : commands) {
    void* raw = nullptr;
    if (redisGetReply(conn.ctx, &raw) != REDIS_OK || raw == nullptr) {
      conn.broken = true;
      const bool timed_out =
          conn.ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
      const std::string message =
          absl::StrCat("redis ", args.empty() ? "" : args[0], " at ", options_.host, ":",
                       options_.port, ": ", conn.ctx->errstr);
      if (timed_out) {
        return absl::DeadlineExceededError(absl::StrCat(
            message, " (no reply within ", absl::FormatDuration(options_.command_timeout), ")"));
      }
      return absl::UnavailableError(message);
    }
    auto* reply = static_cast<redisReply*>(raw);
    if (reply->type == REDIS_REPLY_ERROR) {
      if (first_error.ok()) {
        first_error = ErrorReplyToStatus(absl::string_view(reply->str, reply->len),
                                         args.empty() ? "" : args[0]);
      }
      replies.push_back(RedisReply{});
    } else {
      replies.push_back(Convert(reply));
    }
    freeReplyObject(reply);
  }
  if (!first_error.ok()) return first_error;
  return replies;
}

absl::StatusOr<std::vector<RedisReply>> RedisClient::Run(
    const std::vector<std::vector<std::string>>& commands, bool idempotent) {
  for (int attempt = 0;; ++attempt) {
    auto conn = Borrow();
    if (!conn.ok()) return conn.status();
    Lease lease(this, *std::move(conn));
    const bool reused = !lease->fresh;
    auto replies = RunOn(*lease, commands);
    // A reused connection may have died since its last use; a fresh one will not have.
    if (!replies.ok() && lease->broken && reused && idempotent && attempt == 0) continue;
    return replies;
  }
}

absl::StatusOr<RedisReply> RedisClient::Command(const std::vector<std::string>& args,
                                                bool idempotent) {
  if (args.empty()) return absl::InvalidArgumentError("redis: empty command");
  auto replies = Run({args}, idempotent);
  if (!replies.ok()) return replies.status();
  return std::move((*replies)[0]);
}

absl::StatusOr<std::vector<RedisReply>> RedisClient::Pipeline(
    const std::vector<std::vector<std::string>>& commands) {
  for (const auto& args : commands) {
    if (args.empty()) return absl::InvalidArgumentError("redis: empty command in pipeline");
  }
  return Run(commands, /*idempotent=*/false);
}

absl::Status RedisClient::Ping() {
  auto reply = Command({"PING"}, /*idempotent=*/true);
  return reply.ok() ? absl::OkStatus() : reply.status();
}

absl::StatusOr<std::optional<std::string>> RedisClient::Get(absl::string_view key) {
  auto reply = Command({"GET", Key(key)}, /*idempotent=*/true);
  if (!reply.ok()) return reply.status();
  if (reply->IsNil()) return std::optional<std::string>();
  auto value = reply->AsString();
  if (!value.ok()) return value.status();
  return std::optional<std::string>(*std::move(value));
}

absl::Status RedisClient::Set(absl::string_view key, absl::string_view value,
                              std::optional<absl::Duration> ttl) {
  std::vector<std::string> args = {"SET", Key(key), std::string(value)};
  if (ttl.has_value()) {
    if (auto s = ValidateTtl(*ttl, "ttl"); !s.ok()) return s;
    args.push_back("PX");
    args.push_back(absl::StrCat(absl::ToInt64Milliseconds(*ttl)));
  }
  auto reply = Command(args, /*idempotent=*/true);
  return reply.ok() ? absl::OkStatus() : reply.status();
}

absl::StatusOr<bool> RedisClient::SetIfAbsent(absl::string_view key, absl::string_view value,
                                              std::optional<absl::Duration> ttl) {
  std::vector<std::string> args = {"SET", Key(key), std::string(value), "NX"};
  if (ttl.has_value()) {
    if (auto s = ValidateTtl(*ttl, "ttl"); !s.ok()) return s;
    args.push_back("PX");
    args.push_back(absl::StrCat(absl::ToInt64Milliseconds(*ttl)));
  }
  auto reply = Command(args);
  if (!reply.ok()) return reply.status();
  return !reply->IsNil();
}

absl::StatusOr<bool> RedisClient::Expire(absl::string_view key, absl::Duration ttl) {
  if (auto s = ValidateTtl(ttl, "ttl"); !s.ok()) return s;
  auto reply = Command({"PEXPIRE", Key(key), absl::StrCat(absl::ToInt64Milliseconds(ttl))},
                       /*idempotent=*/true);
  if (!reply.ok()) return reply.status();
  auto n = reply->AsInt();
  if (!n.ok()) return n.status();
  return *n == 1;
}

absl::StatusOr<int64_t> RedisClient::Delete(const std::vector<std::string>& keys) {
  if (keys.empty()) return 0;
  std::vector<std::string> args = {"DEL"};
  for (const auto& key : keys) args.push_back(Key(key));
  auto reply = Command(args);
  if (!reply.ok()) return reply.status();
  return reply->AsInt();
}

absl::StatusOr<int64_t> RedisClient::Increment(absl::string_view key, int64_t by) {
  auto reply = Command({"INCRBY", Key(key), absl::StrCat(by)});
  if (!reply.ok()) return reply.status();
  return reply->AsInt();
}

absl::StatusOr<int64_t> RedisClient::IncrementInWindow(absl::string_view key, absl::Duration window,
                                                       int64_t by) {
  if (auto s = ValidateTtl(window, "window"); !s.ok()) return s;
  const std::string k = Key(key);
  auto replies = Pipeline({{"INCRBY", k, absl::StrCat(by)},
                           {"PEXPIRE", k, absl::StrCat(absl::ToInt64Milliseconds(window)), "NX"}});
  if (!replies.ok()) return replies.status();
  return (*replies)[0].AsInt();
}

absl::StatusOr<bool> RedisClient::AcquireLease(absl::string_view key, absl::string_view owner,
                                               absl::Duration ttl) {
  if (owner.empty()) return absl::InvalidArgumentError("redis lease: owner is empty");
  return SetIfAbsent(key, owner, ttl);
}

absl::StatusOr<bool> RedisClient::IfOwner(absl::string_view key, absl::string_view owner,
                                          const std::vector<std::string>& action) {
  const std::string k = Key(key);
  auto conn = Borrow();
  if (!conn.ok()) return conn.status();
  Lease lease(this, *std::move(conn));
  auto watched = RunOn(*lease, {{"WATCH", k}, {"GET", k}});
  if (!watched.ok()) {
    // An error reply (e.g. WRONGTYPE) leaves the WATCH active on a usable connection.
    if (!lease->broken) RunOn(*lease, {{"UNWATCH"}}).IgnoreError();
    return watched.status();
  }
  const RedisReply& current = (*watched)[1];
  auto value = current.AsString();
  if (current.IsNil() || !value.ok() || *value != owner) {
    auto unwatched = RunOn(*lease, {{"UNWATCH"}});
    if (!unwatched.ok()) return unwatched.status();
    return false;
  }
  auto exec = RunOn(*lease, {{"MULTI"}, action, {"EXEC"}});
  if (!exec.ok()) return exec.status();
  // EXEC answers nil when the key changed after WATCH: someone else took the lease.
  const RedisReply& result = (*exec)[2];
  if (result.IsNil()) return false;
  auto items = result.AsArray();
  if (!items.ok() || items->empty()) return false;
  auto n = (*items)[0].AsInt();
  return n.ok() ? *n == 1 : true;
}

absl::StatusOr<bool> RedisClient::RenewLease(absl::string_view key, absl::string_view owner,
                                             absl::Duration ttl) {
  if (auto s = ValidateTtl(ttl, "ttl"); !s.ok()) return s;
  return IfOwner(key, owner, {"PEXPIRE", Key(key), absl::StrCat(absl::ToInt64Milliseconds(ttl))});
}

absl::StatusOr<bool> RedisClient::ReleaseLease(absl::string_view key, absl::string_view owner) {
  return IfOwner(key, owner, {"DEL", Key(key)});
}

RedisClientStats RedisClient::Stats() const {
  absl::MutexLock lock(&mu_);
  RedisClientStats stats = counters_;
  stats.open_connections = open_;
  return stats;
}

}  // namespace goodput::platform
