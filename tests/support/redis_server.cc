#include "tests/support/redis_server.h"

#include <hiredis/hiredis.h>
#include <signal.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/support/free_port.h"

namespace goodput::testing {
namespace {

bool Pings(int port) {
  timeval timeout{1, 0};
  redisContext* ctx = redisConnectWithTimeout("127.0.0.1", port, timeout);
  if (ctx == nullptr) return false;
  bool ok = false;
  if (ctx->err == 0) {
    redisSetTimeout(ctx, timeout);
    auto* reply = static_cast<redisReply*>(redisCommand(ctx, "PING"));
    ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS && std::string(reply->str) == "PONG";
    if (reply != nullptr) freeReplyObject(reply);
  }
  redisFree(ctx);
  return ok;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Create(RedisServerOptions options) {
  auto dir = TempDir::Create("goodput-redis");
  if (!dir.ok()) return dir.status();
  auto server = std::unique_ptr<RedisServer>(new RedisServer(std::move(*dir), std::move(options)));
  server->log_path_ = server->dir_.path() / "redis.log";
  absl::Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto port = FreePort();
    if (!port.ok()) return port.status();
    server->port_ = *port;
    last = server->StartOnce();
    if (last.ok()) return server;
    if (!absl::StrContains(last.message(), "in use")) break;
  }
  return last;
}

RedisServer::~RedisServer() { Stop().IgnoreError(); }

absl::Status RedisServer::StartOnce() {
  std::vector<std::string> argv = {"redis-server",
                                   "--port",
                                   absl::StrCat(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--dir",
                                   dir_.path().string(),
                                   "--daemonize",
                                   "no",
                                   "--protected-mode",
                                   "no",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   options_.persistence ? "yes" : "no"};
  for (const auto& [name, value] : options_.settings) {
    argv.push_back(absl::StrCat("--", name));
    argv.push_back(value);
  }
  auto proc = ChildProcess::Start(
      {.argv = std::move(argv), .log_path = log_path_, .working_dir = dir_.path()});
  if (!proc.ok()) return proc.status();
  process_ = std::move(*proc);
  bool exited = false;
  const bool ready = PollUntil(
      [&] {
        if (!process_->IsRunning()) {
          exited = true;
          return true;
        }
        return Pings(port_);
      },
      options_.start_timeout, absl::Milliseconds(20));
  if (ready && !exited) return absl::OkStatus();
  process_->Terminate(absl::Seconds(5));
  process_.reset();
  return absl::UnavailableError(absl::StrCat(
      "redis-server on port ", port_, exited ? " exited during start-up" : " did not answer PING",
      "; log ", log_path_.string(), ":\n", ReadFileTail(log_path_, 8192)));
}

absl::Status RedisServer::Start() {
  if (IsRunning()) return absl::OkStatus();
  return StartOnce();
}

absl::Status RedisServer::Stop() {
  if (process_ == nullptr) return absl::OkStatus();
  process_->Terminate(absl::Seconds(30), SIGTERM);
  process_.reset();
  return absl::OkStatus();
}

absl::Status RedisServer::Restart() {
  if (auto s = Stop(); !s.ok()) return s;
  return StartOnce();
}

bool RedisServer::IsRunning() { return process_ != nullptr && process_->IsRunning(); }

std::string RedisServer::Address() const { return absl::StrCat("127.0.0.1:", port_); }

}  // namespace goodput::testing
