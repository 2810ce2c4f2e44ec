#pragma once

// A private Redis server for one test: 127.0.0.1 on a free port, working folder in a
// temporary directory, no persistence unless asked for. The destructor stops it and
// removes the folder.
//
//   ASSERT_OK_AND_ASSIGN(auto redis, RedisServer::Create());
//   RedisClient client({.host = redis->host(), .port = redis->port()});
//   ASSERT_OK(redis->Restart());   // same port

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace goodput::testing {

struct RedisServerOptions {
  // Append-only file on, so data survives Restart.
  bool persistence = false;
  // Extra `--name value` arguments.
  std::vector<std::pair<std::string, std::string>> settings = {};
  absl::Duration start_timeout = absl::Seconds(30);
};

class RedisServer {
 public:
  // Starts redis-server (found in PATH) on a free port.
  static absl::StatusOr<std::unique_ptr<RedisServer>> Create(RedisServerOptions options = {});

  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;
  ~RedisServer();

  // Starts the server (again) on the same port; OK if it is running.
  absl::Status Start();
  // Stops the server (SIGTERM, then SIGKILL); OK if it is not running.
  absl::Status Stop();
  // Stop then Start, same port.
  absl::Status Restart();
  bool IsRunning();

  std::string host() const { return "127.0.0.1"; }
  int port() const { return port_; }
  // "127.0.0.1:<port>"
  std::string Address() const;
  const std::filesystem::path& dir() const { return dir_.path(); }
  const std::filesystem::path& log_path() const { return log_path_; }

 private:
  RedisServer(TempDir dir, RedisServerOptions options)
      : dir_(std::move(dir)), options_(std::move(options)) {}
  absl::Status StartOnce();

  TempDir dir_;
  RedisServerOptions options_;
  std::filesystem::path log_path_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace goodput::testing
