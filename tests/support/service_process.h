// A goodput service binary started for a test: its configuration written to a file in a
// temporary folder, started with ChildProcess, and considered up once it has written its
// ready file (see services/platform/service_main.h), which also tells its ports.
//
//   ASSERT_OK_AND_ASSIGN(auto ofu, ServiceProcess::Start({
//       .binary = BuiltBinary("services/ofu/goodput-ofu"),
//       .config_yaml = "postgres: {dsn: '...'}\n"}));
//   auto stub = goodput::v1::OfuService::NewStub(ofu->Channel());
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "tests/support/child_process.h"
#include "tests/support/temp_dir.h"

namespace goodput::testing {

// The path of a program built in this build tree, e.g. "services/ofu/goodput-ofu".
std::filesystem::path BuiltBinary(absl::string_view relative_path);

// The repository's source folder (for migrations/, scripts/).
std::filesystem::path SourceDir();

struct ServiceProcessOptions {
  std::filesystem::path binary = {};
  // Written to config.yaml and passed with --config; grpc/http ports default to 0 (free).
  std::string config_yaml = {};
  std::vector<std::string> extra_args = {};
  std::vector<std::pair<std::string, std::string>> env = {};
  absl::Duration ready_timeout = absl::Seconds(60);
};

class ServiceProcess {
 public:
  // Starts the binary and waits for its ready file. FAILED_PRECONDITION with the log tail if
  // it exits first, DEADLINE_EXCEEDED if it is not ready in time.
  static absl::StatusOr<std::unique_ptr<ServiceProcess>> Start(ServiceProcessOptions options);

  int grpc_port() const { return grpc_port_; }
  int http_port() const { return http_port_; }
  std::string grpc_address() const;
  // A new insecure channel to the service's gRPC port.
  std::shared_ptr<grpc::Channel> Channel() const;
  ChildProcess& process() { return *process_; }
  const std::filesystem::path& dir() const { return dir_.path(); }

 private:
  ServiceProcess(TempDir dir) : dir_(std::move(dir)) {}

  TempDir dir_;
  std::unique_ptr<ChildProcess> process_;
  int grpc_port_ = 0;
  int http_port_ = 0;
};

// Runs a program to completion (up to `timeout`) and returns how it ended and what it printed.
struct ProgramResult {
  ExitStatus exit;
  std::string output;  // stdout and stderr together
};
absl::StatusOr<ProgramResult> RunProgram(std::vector<std::string> argv,
                                         std::vector<std::pair<std::string, std::string>> env = {},
                                         absl::Duration timeout = absl::Seconds(60));

}  // namespace goodput::testing
