// goodputctl: the command-line client of goodput.
//
//   goodputctl migrate --dsn DSN [--dir migrations]
//   goodputctl health --addr HOST:PORT [--service NAME] [--wait SECONDS]
//
// Human-readable output by default, `--json` for scripts. Errors go to stderr and the exit
// code is non-zero (2 for a bad command line, 1 when the operation failed).
#include <chrono>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "services/platform/migrations.h"

namespace goodput::ctl {
namespace {

constexpr char kUsage[] = R"(usage: goodputctl <command> [flags]

commands:
  migrate   apply pending database migrations
              --dsn DSN          PostgreSQL connection string (or GOODPUT_POSTGRES__DSN)
              --dir DIR          folder of numbered .sql files [migrations]
  health    ask a goodput server for its gRPC health
              --addr HOST:PORT   the server's gRPC address
              --service NAME     one service, e.g. goodput.v1.JobService ["" = whole server]
              --wait SECONDS     keep asking until SERVING or the time is up [0]

global flags:
  --json     machine-readable output
  --help     this text
)";

// Flags of the form --name value or --name=value; bare --flag is "true".
struct Args {
  std::string command;
  std::map<std::string, std::string> flags;
  bool json = false;
};

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!absl::StartsWith(arg, "--")) {
      if (!args.command.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
      }
      args.command = arg;
      continue;
    }
    std::string name = arg.substr(2);
    std::string value = "true";
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (name != "json" && name != "help" && i + 1 < argc &&
               !absl::StartsWith(argv[i + 1], "--")) {
      value = argv[++i];
    }
    if (name == "json") {
      args.json = true;
    } else {
      args.flags[name] = value;
    }
  }
  return args;
}

std::optional<std::string> Flag(const Args& args, const std::string& name) {
  auto it = args.flags.find(name);
  if (it == args.flags.end()) return std::nullopt;
  return it->second;
}

int UsageError(absl::string_view message) {
  std::cerr << "goodputctl: " << message << "\n";
  return 2;
}

int Failure(absl::string_view message) {
  std::cerr << "goodputctl: " << message << "\n";
  return 1;
}

int Migrate(const Args& args) {
  std::optional<std::string> dsn = Flag(args, "dsn");
  if (!dsn) {
    if (const char* env = std::getenv("GOODPUT_POSTGRES__DSN")) dsn = env;
  }
  if (!dsn || dsn->empty()) return UsageError("migrate needs --dsn (or GOODPUT_POSTGRES__DSN)");
  std::string dir = Flag(args, "dir").value_or("migrations");
  absl::StatusOr<platform::MigrationReport> report = platform::ApplyMigrations(*dsn, dir);
  if (!report.ok()) return Failure(absl::StrCat("migrate: ", report.status().message()));
  if (args.json) {
    nlohmann::json out = {{"applied", nlohmann::json::array()},
                          {"already_applied", report->already_applied.size()}};
    for (const auto& m : report->applied) out["applied"].push_back(m.FileName());
    std::cout << out.dump() << "\n";
  } else {
    for (const auto& m : report->applied) std::cout << "applied  " << m.FileName() << "\n";
    std::cout << report->applied.size() << " applied, " << report->already_applied.size()
              << " already applied\n";
  }
  return 0;
}

int Health(const Args& args) {
  std::optional<std::string> addr = Flag(args, "addr");
  if (!addr) return UsageError("health needs --addr HOST:PORT");
  std::string service = Flag(args, "service").value_or("");
  double wait_s = 0;
  if (std::optional<std::string> wait = Flag(args, "wait");
      wait && (!absl::SimpleAtod(*wait, &wait_s) || wait_s < 0)) {
    return UsageError(absl::StrCat("--wait: \"", *wait, "\" is not a number of seconds"));
  }
  auto channel = grpc::CreateChannel(*addr, grpc::InsecureChannelCredentials());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  absl::Time deadline = absl::Now() + absl::Seconds(wait_s);
  std::string state = "UNREACHABLE";
  std::string detail;
  while (true) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status status = stub->Check(&ctx, request, &response);
    if (status.ok()) {
      state = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
      detail.clear();
    } else {
      state = status.error_code() == grpc::StatusCode::NOT_FOUND ? "SERVICE_UNKNOWN"
                                                                  : "UNREACHABLE";
      detail = status.error_message();
    }
    if (state == "SERVING" || state == "SERVICE_UNKNOWN" || absl::Now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  if (args.json) {
    std::cout << nlohmann::json{{"addr", *addr}, {"service", service}, {"status", state}}.dump()
              << "\n";
  } else {
    std::cout << *addr << (service.empty() ? "" : " " + service) << ": " << state
              << (detail.empty() ? "" : " (" + detail + ")") << "\n";
  }
  return state == "SERVING" ? 0 : 1;
}

}  // namespace
}  // namespace goodput::ctl

int main(int argc, char** argv) {
  using namespace goodput::ctl;
  absl::StatusOr<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) return UsageError(args.status().message());
  if (args->command.empty() || args->command == "help" || args->flags.count("help")) {
    std::cout << kUsage;
    return args->command.empty() && !args->flags.count("help") ? 2 : 0;
  }
  if (args->command == "migrate") return Migrate(*args);
  if (args->command == "health") return Health(*args);
  return UsageError(absl::StrCat("unknown command '", args->command, "' (see goodputctl --help)"));
}
