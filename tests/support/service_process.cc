#include "tests/support/service_process.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace goodput::testing {

std::filesystem::path BuiltBinary(absl::string_view relative_path) {
  return std::filesystem::path(GOODPUT_TESTSUPPORT_BINARY_DIR) / std::string(relative_path);
}

std::filesystem::path SourceDir() { return GOODPUT_TESTSUPPORT_SOURCE_DIR; }

namespace {

std::string ReadWholeFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Parses "grpc_port=N\nhttp_port=M\n"; false until both are there.
bool ParseReadyFile(const std::string& text, int* grpc_port, int* http_port) {
  int found = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(line, '=');
    int value = 0;
    if (!absl::SimpleAtoi(kv.second, &value)) continue;
    if (kv.first == "grpc_port") *grpc_port = value, ++found;
    if (kv.first == "http_port") *http_port = value, ++found;
  }
  return found == 2;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServiceProcess>> ServiceProcess::Start(
    ServiceProcessOptions options) {
  absl::StatusOr<TempDir> dir = TempDir::Create(options.binary.filename().string());
  if (!dir.ok()) return dir.status();
  std::unique_ptr<ServiceProcess> service(new ServiceProcess(*std::move(dir)));
  std::filesystem::path config = service->dir() / "config.yaml";
  std::filesystem::path ready = service->dir() / "ready";
  {
    std::ofstream out(config);
    out << options.config_yaml;
    if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", config.string()));
  }
  std::vector<std::string> argv = {options.binary.string(), "--config", config.string(),
                                   "--ready-file", ready.string()};
  argv.insert(argv.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<std::pair<std::string, std::string>> env = {{"GOODPUT_GRPC__HOST", "127.0.0.1"},
                                                          {"GOODPUT_HTTP__HOST", "127.0.0.1"}};
  env.insert(env.end(), options.env.begin(), options.env.end());
  absl::StatusOr<std::unique_ptr<ChildProcess>> process =
      ChildProcess::Start({.argv = argv, .env = env, .log_path = service->dir() / "service.log"});
  if (!process.ok()) return process.status();
  service->process_ = *std::move(process);

  bool exited = false;
  bool is_ready = PollUntil(
      [&] {
        if (!service->process_->IsRunning()) {
          exited = true;
          return true;
        }
        return ParseReadyFile(ReadWholeFile(ready), &service->grpc_port_, &service->http_port_);
      },
      options.ready_timeout);
  if (exited) {
    return absl::FailedPreconditionError(absl::StrCat(
        options.binary.string(), " exited before it was ready:\n", service->process_->LogTail()));
  }
  if (!is_ready) {
    return absl::DeadlineExceededError(absl::StrCat(options.binary.string(), " not ready after ",
                                                    absl::FormatDuration(options.ready_timeout),
                                                    ":\n", service->process_->LogTail()));
  }
  return service;
}

std::string ServiceProcess::grpc_address() const { return absl::StrCat("127.0.0.1:", grpc_port_); }

std::shared_ptr<grpc::Channel> ServiceProcess::Channel() const {
  return grpc::CreateChannel(grpc_address(), grpc::InsecureChannelCredentials());
}

absl::StatusOr<ProgramResult> RunProgram(std::vector<std::string> argv,
                                         std::vector<std::pair<std::string, std::string>> env,
                                         absl::Duration timeout) {
  absl::StatusOr<TempDir> dir = TempDir::Create("run");
  if (!dir.ok()) return dir.status();
  std::filesystem::path log = dir->path() / "output.log";
  absl::StatusOr<std::unique_ptr<ChildProcess>> process =
      ChildProcess::Start({.argv = std::move(argv), .env = std::move(env), .log_path = log});
  if (!process.ok()) return process.status();
  absl::StatusOr<ExitStatus> exit = (*process)->Wait(timeout);
  if (!exit.ok()) return exit.status();
  return ProgramResult{.exit = *exit, .output = ReadWholeFile(log)};
}

}  // namespace goodput::testing
