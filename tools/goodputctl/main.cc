// goodputctl: the command-line client of goodput.
//
//   goodputctl migrate --dsn DSN [--dir migrations]
//   goodputctl health --addr HOST:PORT [--service NAME] [--wait SECONDS]
//   goodputctl register-job --cluster C --job-id J --gpus host:0,host:1 [...]
//   goodputctl end-job --cluster C --job-id J [--state completed]
//   goodputctl jobs list [--cluster C] [--state running] [--user U] ...
//   goodputctl jobs show --cluster C --job-id J
//
// Human-readable output by default, `--json` for scripts. Errors go to stderr and the exit
// code is non-zero (2 for a bad command line, 1 when the operation failed).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "goodput/v1/job.grpc.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "services/api/api_convert.h"
#include "services/platform/migrations.h"
#include "services/platform/status_convert.h"

namespace goodput::ctl {
namespace {

namespace v1 = ::goodput::v1;

constexpr char kUsage[] = R"(usage: goodputctl <command> [flags]

commands:
  migrate   apply pending database migrations
              --dsn DSN          PostgreSQL connection string (or GOODPUT_POSTGRES__DSN)
              --dir DIR          folder of numbered .sql files [migrations]
  health    ask a goodput server for its gRPC health
              --addr HOST:PORT   the server's gRPC address
              --service NAME     one service, e.g. goodput.v1.JobService ["" = whole server]
              --wait SECONDS     keep asking until SERVING or the time is up [0]

  register-job  register a job and the GPUs it holds (Slurm prolog, Osmo, operators);
                re-registering merges GPUs, so every node may register its own
              --cluster C --job-id J     the job key (required)
              --gpus LIST                host:index or host:uuid, comma-separated
              --scheduler KIND           slurm|osmo|kubernetes|other [other]
              --user U --team T --name N --gpu-model MODEL --fingerprint F
              --label k=v                repeatable
              --start TIME               RFC 3339 or "now" [now]
  end-job       mark a job ended and release its GPUs; idempotent
              --cluster C --job-id J [--state completed|failed|cancelled|timed_out|preempted]
              [--end TIME]
  jobs list     jobs, newest first
              [--cluster C] [--state S] [--user U] [--team T] [--fingerprint F] [--limit N]
  jobs show     one job with its GPUs
              --cluster C --job-id J

global flags:
  --addr HOST:PORT   goodput-ingest's gRPC address [$GOODPUT_INGEST_ADDR or 127.0.0.1:7101]
  --token TOKEN      bearer token when auth is on [$GOODPUT_TOKEN]
  --json             machine-readable output
  --help             this text
)";

// Flags of the form --name value or --name=value; bare --flag is "true".
struct Args {
  std::vector<std::string> positional;  // command words: "jobs", "list"
  std::multimap<std::string, std::string> flags;
  bool json = false;
  std::string command() const { return positional.empty() ? "" : positional[0]; }
};

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (!absl::StartsWith(arg, "--")) {
      args.positional.push_back(arg);
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
      args.flags.emplace(name, value);
    }
  }
  return args;
}

std::optional<std::string> Flag(const Args& args, const std::string& name) {
  auto it = args.flags.find(name);
  if (it == args.flags.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Flags(const Args& args, const std::string& name) {
  std::vector<std::string> values;
  auto [begin, end] = args.flags.equal_range(name);
  for (auto it = begin; it != end; ++it) values.push_back(it->second);
  return values;
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
      state =
          status.error_code() == grpc::StatusCode::NOT_FOUND ? "SERVICE_UNKNOWN" : "UNREACHABLE";
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

// --- jobs -------------------------------------------------------------------------------

std::string IngestAddr(const Args& args) {
  if (std::optional<std::string> addr = Flag(args, "addr")) return *addr;
  if (const char* env = std::getenv("GOODPUT_INGEST_ADDR")) return env;
  return "127.0.0.1:7101";
}

// A client context with a deadline and, when given, the bearer token.
std::unique_ptr<grpc::ClientContext> CallContext(const Args& args) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  std::optional<std::string> token = Flag(args, "token");
  if (!token) {
    if (const char* env = std::getenv("GOODPUT_TOKEN")) token = env;
  }
  if (token && !token->empty()) ctx->AddMetadata("authorization", absl::StrCat("Bearer ", *token));
  return ctx;
}

std::unique_ptr<v1::JobService::Stub> JobStub(const Args& args) {
  return v1::JobService::NewStub(
      grpc::CreateChannel(IngestAddr(args), grpc::InsecureChannelCredentials()));
}

int RpcFailure(absl::string_view what, const std::string& addr, const grpc::Status& status) {
  return Failure(
      absl::StrCat(what, " at ", addr, ": ", platform::FromGrpcStatus(status).ToString()));
}

absl::StatusOr<google::protobuf::Timestamp> ParseTimeFlag(absl::string_view flag,
                                                          const std::string& value) {
  absl::Time t = absl::Now();
  std::string error;
  if (value != "now" && !absl::ParseTime(absl::RFC3339_full, value, &t, &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": \"", value, "\" is not an RFC 3339 time or \"now\""));
  }
  google::protobuf::Timestamp ts;
  ts.set_seconds(absl::ToUnixSeconds(t));
  ts.set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(ts.seconds()))));
  return ts;
}

absl::StatusOr<v1::JobKey> KeyFlags(const Args& args) {
  std::optional<std::string> cluster = Flag(args, "cluster");
  std::optional<std::string> job_id = Flag(args, "job-id");
  if (!cluster || cluster->empty()) return absl::InvalidArgumentError("--cluster is required");
  if (!job_id || job_id->empty()) return absl::InvalidArgumentError("--job-id is required");
  v1::JobKey key;
  key.set_cluster(*cluster);
  key.set_job_id(*job_id);
  return key;
}

absl::StatusOr<v1::JobState> ParseJobState(const std::string& value) {
  v1::JobState state = api::JobStateFromName(value);
  if (state == v1::JOB_STATE_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat("--state: \"", value, "\" is not a job state"));
  }
  return state;
}

std::string FormatTime(const google::protobuf::Timestamp& ts) {
  if (ts.seconds() == 0 && ts.nanos() == 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixSeconds(ts.seconds()),
                          absl::UTCTimeZone());
}

void PrintJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  std::cout << json << "\n";
}

std::string GpuText(const v1::GpuRef& gpu) {
  std::string text = gpu.host();
  if (gpu.has_gpu_index()) absl::StrAppend(&text, ":", gpu.gpu_index());
  if (!gpu.uuid().empty()) absl::StrAppend(&text, gpu.has_gpu_index() ? " " : ":", gpu.uuid());
  return text;
}

void PrintJob(const v1::Job& job) {
  std::cout << "job        " << job.key().cluster() << "/" << job.key().job_id() << "\n"
            << "state      " << api::JobStateName(job.state()) << "\n"
            << "scheduler  " << api::SchedulerKindName(job.scheduler()) << "\n"
            << "user/team  " << (job.user().empty() ? "-" : job.user()) << " / "
            << (job.team().empty() ? "-" : job.team()) << "\n"
            << "name       " << (job.name().empty() ? "-" : job.name()) << "\n"
            << "workload   "
            << (job.workload_fingerprint().empty() ? "-" : job.workload_fingerprint()) << "\n"
            << "gpu model  " << (job.gpu_model().empty() ? "-" : job.gpu_model()) << "\n"
            << "start/end  " << FormatTime(job.start_time()) << " / " << FormatTime(job.end_time())
            << "\n"
            << "gpus       " << job.allocations_size() << "\n";
  for (const v1::GpuAllocation& a : job.allocations()) {
    std::cout << "  " << GpuText(a.gpu()) << "  " << FormatTime(a.start_time()) << " - "
              << FormatTime(a.end_time()) << "\n";
  }
  for (const auto& [k, v] : job.labels()) std::cout << "label      " << k << "=" << v << "\n";
}

// "host:3" (index) or "host:GPU-uuid" (UUID); INVALID_ARGUMENT naming the entry otherwise.
absl::StatusOr<v1::GpuRef> ParseGpu(absl::string_view entry) {
  size_t colon = entry.rfind(':');
  if (colon == absl::string_view::npos || colon == 0 || colon + 1 == entry.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpus: \"", entry, "\" is not host:index or host:uuid"));
  }
  v1::GpuRef gpu;
  gpu.set_host(std::string(entry.substr(0, colon)));
  absl::string_view rest = entry.substr(colon + 1);
  int index = 0;
  if (absl::SimpleAtoi(rest, &index) && index >= 0) {
    gpu.set_gpu_index(index);
  } else {
    gpu.set_uuid(std::string(rest));
  }
  return gpu;
}

int RegisterJob(const Args& args) {
  absl::StatusOr<v1::JobKey> key = KeyFlags(args);
  if (!key.ok()) return UsageError(key.status().message());
  v1::RegisterJobRequest request;
  v1::Job* job = request.mutable_job();
  *job->mutable_key() = *key;
  v1::SchedulerKind kind =
      api::SchedulerKindFromName(absl::AsciiStrToLower(Flag(args, "scheduler").value_or("other")));
  if (kind == v1::SCHEDULER_KIND_UNSPECIFIED) {
    return UsageError(absl::StrCat("--scheduler: \"", *Flag(args, "scheduler"),
                                   "\" is not slurm, osmo, kubernetes or other"));
  }
  job->set_scheduler(kind);
  job->set_user(Flag(args, "user").value_or(""));
  job->set_team(Flag(args, "team").value_or(""));
  job->set_name(Flag(args, "name").value_or(""));
  job->set_gpu_model(Flag(args, "gpu-model").value_or(""));
  job->set_workload_fingerprint(Flag(args, "fingerprint").value_or(""));
  job->set_state(v1::JOB_STATE_RUNNING);
  absl::StatusOr<google::protobuf::Timestamp> start =
      ParseTimeFlag("start", Flag(args, "start").value_or("now"));
  if (!start.ok()) return UsageError(start.status().message());
  *job->mutable_start_time() = *start;
  for (const std::string& list : Flags(args, "gpus")) {
    for (absl::string_view entry : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
      absl::StatusOr<v1::GpuRef> gpu = ParseGpu(absl::StripAsciiWhitespace(entry));
      if (!gpu.ok()) return UsageError(gpu.status().message());
      v1::GpuAllocation* allocation = job->add_allocations();
      *allocation->mutable_gpu() = *gpu;
      *allocation->mutable_start_time() = *start;
    }
  }
  for (const std::string& label : Flags(args, "label")) {
    size_t eq = label.find('=');
    if (eq == std::string::npos || eq == 0) {
      return UsageError(absl::StrCat("--label: \"", label, "\" is not key=value"));
    }
    (*job->mutable_labels())[label.substr(0, eq)] = label.substr(eq + 1);
  }
  v1::RegisterJobResponse response;
  grpc::Status status = JobStub(args)->RegisterJob(CallContext(args).get(), request, &response);
  if (!status.ok()) return RpcFailure("register-job", IngestAddr(args), status);
  if (args.json) {
    PrintJson(response);
  } else {
    std::cout << (response.created() ? "registered " : "updated ") << key->cluster() << "/"
              << key->job_id() << " (" << response.job().allocations_size() << " GPUs";
    if (response.attached_sample_count() > 0) {
      std::cout << ", " << response.attached_sample_count() << " earlier samples attached";
    }
    std::cout << ")\n";
  }
  return 0;
}

int EndJob(const Args& args) {
  absl::StatusOr<v1::JobKey> key = KeyFlags(args);
  if (!key.ok()) return UsageError(key.status().message());
  v1::EndJobRequest request;
  *request.mutable_key() = *key;
  absl::StatusOr<v1::JobState> state = ParseJobState(Flag(args, "state").value_or("completed"));
  if (!state.ok()) return UsageError(state.status().message());
  request.set_final_state(*state);
  absl::StatusOr<google::protobuf::Timestamp> end =
      ParseTimeFlag("end", Flag(args, "end").value_or("now"));
  if (!end.ok()) return UsageError(end.status().message());
  *request.mutable_end_time() = *end;
  v1::EndJobResponse response;
  grpc::Status status = JobStub(args)->EndJob(CallContext(args).get(), request, &response);
  if (!status.ok()) return RpcFailure("end-job", IngestAddr(args), status);
  if (args.json) {
    PrintJson(response);
  } else {
    std::cout << "ended " << key->cluster() << "/" << key->job_id() << " ("
              << api::JobStateName(response.job().state()) << ")\n";
  }
  return 0;
}

int ListJobs(const Args& args) {
  v1::ListJobsRequest request;
  request.set_cluster(Flag(args, "cluster").value_or(""));
  request.set_user(Flag(args, "user").value_or(""));
  request.set_team(Flag(args, "team").value_or(""));
  request.set_workload_fingerprint(Flag(args, "fingerprint").value_or(""));
  for (const std::string& value : Flags(args, "state")) {
    absl::StatusOr<v1::JobState> state = ParseJobState(value);
    if (!state.ok()) return UsageError(state.status().message());
    request.add_states(*state);
  }
  int limit = 50;
  if (std::optional<std::string> text = Flag(args, "limit");
      text && (!absl::SimpleAtoi(*text, &limit) || limit <= 0)) {
    return UsageError(absl::StrCat("--limit: \"", *text, "\" is not a positive number"));
  }
  auto stub = JobStub(args);
  std::vector<v1::Job> jobs;
  while (static_cast<int>(jobs.size()) < limit) {
    request.set_page_size(std::min(limit - static_cast<int>(jobs.size()), 1000));
    v1::ListJobsResponse response;
    grpc::Status status = stub->ListJobs(CallContext(args).get(), request, &response);
    if (!status.ok()) return RpcFailure("jobs list", IngestAddr(args), status);
    jobs.insert(jobs.end(), response.jobs().begin(), response.jobs().end());
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
  }
  if (args.json) {
    v1::ListJobsResponse all;
    for (const v1::Job& job : jobs) *all.add_jobs() = job;
    PrintJson(all);
    return 0;
  }
  std::printf("%-12s %-16s %-10s %-12s %-12s %5s  %-19s  %s\n", "CLUSTER", "JOB", "STATE", "USER",
              "TEAM", "GPUS", "START (UTC)", "WORKLOAD");
  for (const v1::Job& job : jobs) {
    std::printf("%-12s %-16s %-10s %-12s %-12s %5d  %-19s  %s\n", job.key().cluster().c_str(),
                job.key().job_id().c_str(), api::JobStateName(job.state()).c_str(),
                job.user().c_str(), job.team().c_str(),
                job.gpu_count() > 0 ? job.gpu_count() : job.allocations_size(),
                FormatTime(job.start_time()).c_str(), job.workload_fingerprint().c_str());
  }
  std::cout << jobs.size() << " jobs\n";
  return 0;
}

int ShowJob(const Args& args) {
  absl::StatusOr<v1::JobKey> key = KeyFlags(args);
  if (!key.ok()) return UsageError(key.status().message());
  v1::GetJobRequest request;
  *request.mutable_key() = *key;
  v1::GetJobResponse response;
  grpc::Status status = JobStub(args)->GetJob(CallContext(args).get(), request, &response);
  if (!status.ok()) return RpcFailure("jobs show", IngestAddr(args), status);
  if (args.json) {
    PrintJson(response.job());
  } else {
    PrintJob(response.job());
  }
  return 0;
}

}  // namespace
}  // namespace goodput::ctl

int main(int argc, char** argv) {
  using namespace goodput::ctl;
  absl::StatusOr<Args> args = ParseArgs(argc, argv);
  if (!args.ok()) return UsageError(args.status().message());
  const std::string command = args->command();
  if (command.empty() || command == "help" || args->flags.count("help")) {
    std::cout << kUsage;
    return command.empty() && !args->flags.count("help") ? 2 : 0;
  }
  if (command == "migrate") return Migrate(*args);
  if (command == "health") return Health(*args);
  if (command == "register-job") return RegisterJob(*args);
  if (command == "end-job") return EndJob(*args);
  if (command == "jobs") {
    std::string sub = args->positional.size() > 1 ? args->positional[1] : "";
    if (sub == "list") return ListJobs(*args);
    if (sub == "show") return ShowJob(*args);
    return UsageError("jobs needs a subcommand: list or show");
  }
  return UsageError(absl::StrCat("unknown command '", command, "' (see goodputctl --help)"));
}
