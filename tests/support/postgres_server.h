#pragma once

// A private PostgreSQL server for one test: its own data folder in a temporary directory,
// TCP on 127.0.0.1 on a free port, no unix socket, trust authentication for the superuser
// `postgres`. initdb runs once per build tree into a cached template (guarded by a file
// lock, so parallel tests share it); each server starts from a copy of it. When the tests
// run as root the server runs as the `postgres` system user, as PostgreSQL requires.
//
//   ASSERT_OK_AND_ASSIGN(auto pg, PostgresServer::Create());
//   ASSERT_OK(pg->CreateDatabase("goodput"));
//   auto pool = PgPool::Create({.dsn = pg->Dsn("goodput")});
//   ASSERT_OK(pg->Restart());   // same port, same data
//
// The destructor stops the server and removes its folder.

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace goodput::testing {

struct PostgresServerOptions {
  // Extra server settings, passed as `-c name=value`.
  std::vector<std::pair<std::string, std::string>> settings = {};
  // How long Start may take before it gives up.
  absl::Duration start_timeout = absl::Seconds(60);
};

class PostgresServer {
 public:
  // Prepares a data folder from the template and starts the server.
  static absl::StatusOr<std::unique_ptr<PostgresServer>> Create(PostgresServerOptions options = {});

  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;
  ~PostgresServer();

  // Starts the server (again) on the same port and data; OK if it is already running.
  absl::Status Start();
  // Fast shutdown (open sessions are disconnected); OK if it is not running.
  absl::Status Stop();
  // Stop then Start: same port, same data.
  absl::Status Restart();
  bool IsRunning();

  // Creates database `name` (letters, digits, underscore); ALREADY_EXISTS if it exists.
  absl::Status CreateDatabase(const std::string& name);
  // Runs `sql` (one or more statements) in database `db`; the server's error on failure.
  absl::Status Execute(const std::string& db, const std::string& sql);
  // Runs `sql` and returns the first column of the first row ("" for NULL); NOT_FOUND if
  // it returned no rows.
  absl::StatusOr<std::string> QueryValue(const std::string& db, const std::string& sql);

  // libpq connection string for database `db` as the superuser.
  std::string Dsn(const std::string& db = "postgres") const;
  int port() const { return port_; }
  const std::filesystem::path& data_dir() const { return data_dir_; }
  const std::filesystem::path& log_path() const { return log_path_; }
  // The folder holding initdb, postgres and pg_ctl.
  const std::filesystem::path& bin_dir() const { return bin_dir_; }

 private:
  PostgresServer(TempDir dir, PostgresServerOptions options)
      : dir_(std::move(dir)), options_(std::move(options)) {}
  absl::Status StartOnce();

  TempDir dir_;
  PostgresServerOptions options_;
  std::filesystem::path bin_dir_;
  std::filesystem::path data_dir_;
  std::filesystem::path log_path_;
  int port_ = 0;
  std::optional<uid_t> run_as_uid_;
  std::optional<gid_t> run_as_gid_;
  std::unique_ptr<ChildProcess> process_;
};

// The PostgreSQL server binaries folder: $GOODPUT_PG_BINDIR, else `pg_config --bindir`
// when it holds `postgres`, else the newest /usr/lib/postgresql/<major>/bin. NOT_FOUND
// with what was tried otherwise.
absl::StatusOr<std::filesystem::path> FindPostgresBinDir();

}  // namespace goodput::testing
