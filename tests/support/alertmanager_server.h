#pragma once

// A private Prometheus Alertmanager for one test: 127.0.0.1 on a free port, storage in a
// temporary folder, clustering off, and a configuration given by the test (default: one
// receiver that sends nothing). The destructor stops it and removes the folder.
//
//   ASSERT_OK_AND_ASSIGN(auto am, AlertmanagerServer::Create());
//   // POST am->Url() + "/api/v2/alerts", GET am->Url() + "/api/v2/alerts"

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace goodput::testing {

struct AlertmanagerServerOptions {
  // alertmanager.yml; empty = a route to a receiver without integrations.
  std::string config_yaml = {};
  absl::Duration start_timeout = absl::Seconds(30);
};

class AlertmanagerServer {
 public:
  // Starts prometheus-alertmanager (or alertmanager) found in PATH; waits for /-/ready.
  static absl::StatusOr<std::unique_ptr<AlertmanagerServer>> Create(
      AlertmanagerServerOptions options = {});

  AlertmanagerServer(const AlertmanagerServer&) = delete;
  AlertmanagerServer& operator=(const AlertmanagerServer&) = delete;
  ~AlertmanagerServer() = default;

  int port() const { return port_; }
  // "http://127.0.0.1:<port>"
  std::string Url() const;
  const std::filesystem::path& dir() const { return dir_.path(); }
  std::string LogTail() const { return process_ ? process_->LogTail() : ""; }

 private:
  explicit AlertmanagerServer(TempDir dir) : dir_(std::move(dir)) {}

  TempDir dir_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace goodput::testing
