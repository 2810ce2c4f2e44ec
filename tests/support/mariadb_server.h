#pragma once

// A private MariaDB server for one test, as slurmdbd's accounting storage: the distribution's
// mariadbd run as a plain process (no system service) on a data folder that
// mariadb-install-db prepares in a temporary directory, TCP on 127.0.0.1 on a free port and a
// unix socket in the folder. root connects through the socket without a password; clients
// that use TCP get a user of their own (CreateUser).
//
//   ASSERT_OK_AND_ASSIGN(auto db, MariaDbServer::Create());
//   ASSERT_OK(db->CreateUser("slurm", "secret"));   // slurm@127.0.0.1, all privileges
//   // StorageHost=127.0.0.1 StoragePort=db->port() StorageUser=slurm StoragePass=secret
//
// The destructor stops the server and removes its folder.

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace goodput::testing {

struct MariaDbServerOptions {
  // How long Create may take (mariadb-install-db and the server's start) before it gives up.
  absl::Duration start_timeout = absl::Seconds(60);
};

class MariaDbServer {
 public:
  // Prepares a data folder and starts the server.
  static absl::StatusOr<std::unique_ptr<MariaDbServer>> Create(MariaDbServerOptions options = {});

  MariaDbServer(const MariaDbServer&) = delete;
  MariaDbServer& operator=(const MariaDbServer&) = delete;
  ~MariaDbServer();

  const std::string& host() const { return host_; }
  int port() const { return port_; }
  const std::filesystem::path& socket() const { return socket_; }

  // Runs `sql` (one or more statements) as root; the client's error on failure.
  absl::Status Execute(const std::string& sql);
  // Creates `name`@127.0.0.1 with password `password` and every privilege (name and password:
  // letters, digits, underscore).
  absl::Status CreateUser(const std::string& name, const std::string& password);

 private:
  explicit MariaDbServer(TempDir dir) : dir_(std::move(dir)) {}
  absl::Status Start(const MariaDbServerOptions& options);

  TempDir dir_;
  std::string host_ = "127.0.0.1";
  int port_ = 0;
  std::filesystem::path socket_;
  std::unique_ptr<ChildProcess> server_;
};

}  // namespace goodput::testing
