// Setup and scheduler commands: migrate, health, register-job, end-job, jobs list|show.
#include <algorithm>
#include <iostream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "services/api/api_convert.h"
#include "services/platform/install_paths.h"
#include "services/platform/migrations.h"
#include "services/platform/tls.h"
#include "tools/goodputctl/commands.h"
#include "tools/goodputctl/format.h"

namespace goodput::ctl {
namespace {

int Migrate(const Args& args) {
  std::optional<std::string> dsn = args.Flag("dsn");
  if (!dsn) {
    if (const char* env = std::getenv("GOODPUT_POSTGRES__DSN")) dsn = env;
  }
  if (!dsn || dsn->empty()) return UsageError("migrate needs --dsn (or GOODPUT_POSTGRES__DSN)");
  std::string dir = args.Flag("dir").value_or(platform::DefaultMigrationsDir());
  Progress progress(!args.json);
  progress.Show(absl::StrCat("applying migrations from ", dir, " ..."));
  absl::StatusOr<platform::MigrationReport> report = platform::ApplyMigrations(*dsn, dir);
  progress.Done();
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
  return kExitOk;
}

int Health(const Args& args) {
  std::optional<std::string> addr = args.Flag("addr");
  if (!addr) return UsageError("health needs --addr HOST:PORT");
  std::string service = args.Flag("service").value_or("");
  double wait_s = 0;
  if (std::optional<std::string> wait = args.Flag("wait");
      wait && (!absl::SimpleAtod(*wait, &wait_s) || wait_s < 0)) {
    return UsageError(absl::StrCat("--wait: \"", *wait, "\" is not a number of seconds"));
  }
  auto stub = grpc::health::v1::Health::NewStub(platform::MakeChannel(
      *addr,
      platform::ClientTlsFromEnvironment([](const char* name) { return std::getenv(name); })));
  absl::Time deadline = absl::Now() + absl::Seconds(wait_s);
  std::string state = "UNREACHABLE";
  std::string detail;
  Progress progress(!args.json && wait_s > 0);
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
    progress.Show(absl::StrCat("waiting for ", *addr, ": ", state, " (",
                               ShortDuration(deadline - absl::Now()), " left)"));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  progress.Done();
  if (args.json) {
    std::cout << nlohmann::json{{"addr", *addr}, {"service", service}, {"status", state}}.dump()
              << "\n";
  } else {
    std::cout << *addr << (service.empty() ? "" : " " + service) << ": " << state
              << (detail.empty() ? "" : " (" + detail + ")") << "\n";
  }
  return state == "SERVING" ? kExitOk : kExitFailed;
}

std::unique_ptr<v1::JobService::Stub> JobStub(const Args& args) {
  return v1::JobService::NewStub(ChannelTo(args, Service::kIngest));
}

absl::StatusOr<google::protobuf::Timestamp> TimeFlag(const Args& args, const std::string& flag) {
  absl::StatusOr<absl::Time> t = ParseTimeFlag(flag, args.Flag(flag).value_or("now"), absl::Now());
  if (!t.ok()) return t.status();
  return ToProto(*t);
}

absl::StatusOr<v1::JobState> ParseJobState(const std::string& value) {
  v1::JobState state = api::JobStateFromName(value);
  if (state == v1::JOB_STATE_UNSPECIFIED) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--state: \"", value,
        "\" is not a job state (pending, running, completed, failed, cancelled, timed_out, "
        "preempted, ended)"));
  }
  return state;
}

std::string TimeText(const google::protobuf::Timestamp& ts) { return FormatUtc(FromProto(ts)); }

std::string GpuText(const v1::GpuRef& gpu) {
  std::string text = gpu.host();
  if (gpu.has_gpu_index()) absl::StrAppend(&text, ":", gpu.gpu_index());
  if (!gpu.uuid().empty()) absl::StrAppend(&text, gpu.has_gpu_index() ? " " : ":", gpu.uuid());
  if (gpu.has_mig()) {
    absl::StrAppend(&text, " MIG instance ", gpu.mig().gpu_instance_id());
    if (!gpu.mig().profile().empty()) absl::StrAppend(&text, " (", gpu.mig().profile(), ")");
  }
  return text;
}

std::string OrDash(const std::string& s) { return s.empty() ? "-" : s; }

// "inference (inferred)", "training (registered)", "- (read as training)".
std::string KindText(const v1::Job& job) {
  if (job.workload_kind() == v1::WORKLOAD_KIND_UNSPECIFIED) return "- (read as training)";
  const std::string source = api::WorkloadKindSourceName(job.workload_kind_source());
  return absl::StrCat(api::WorkloadKindName(job.workload_kind()),
                      source.empty() ? "" : absl::StrCat(" (", source, ")"));
}

// --kind: training|inference|interactive|other.
absl::StatusOr<v1::WorkloadKind> KindFlag(const Args& args) {
  std::optional<std::string> text = args.Flag("kind");
  if (!text) return v1::WORKLOAD_KIND_UNSPECIFIED;
  v1::WorkloadKind kind = api::WorkloadKindFromName(*text);
  if (kind == v1::WORKLOAD_KIND_UNSPECIFIED) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kind: \"", *text, "\" is not training, inference, interactive or other"));
  }
  return kind;
}

void PrintJob(const v1::Job& job) {
  std::cout << "job        " << job.key().cluster() << "/" << job.key().job_id() << "\n"
            << "state      " << api::JobStateName(job.state()) << "\n"
            << "scheduler  " << api::SchedulerKindName(job.scheduler()) << "\n"
            << "user/team  " << Printable(OrDash(job.user())) << " / "
            << Printable(OrDash(job.team())) << "\n"
            << "name       " << Printable(OrDash(job.name())) << "\n"
            << "workload   " << Printable(OrDash(job.workload_fingerprint())) << "\n"
            << "kind       " << KindText(job) << "\n"
            << "gpu model  " << Printable(OrDash(job.gpu_model())) << "\n"
            << "start/end  " << TimeText(job.start_time()) << " / " << TimeText(job.end_time())
            << "\n"
            << "gpus       " << (job.gpu_count() > 0 ? job.gpu_count() : job.allocations_size())
            << "\n";
  for (const v1::GpuAllocation& a : job.allocations()) {
    std::cout << "  " << GpuText(a.gpu()) << "  " << TimeText(a.start_time()) << " - "
              << TimeText(a.end_time()) << "\n";
  }
  for (const v1::HostSeen& h : job.hosts_seen()) {
    std::cout << "host seen  " << Printable(h.host()) << " as "
              << Printable(absl::StrJoin(h.reported_as(), ", ")) << "\n";
  }
  for (const auto& [k, v] : job.labels()) {
    std::cout << "label      " << Printable(k) << "=" << Printable(v) << "\n";
  }
  std::cout << "\nOFU: goodputctl ofu " << job.key().cluster() << "/" << job.key().job_id()
            << "    MFU vs OFU: goodputctl reconcile " << job.key().cluster() << "/"
            << job.key().job_id() << "\n";
}

// "host:3" (index) or "host:GPU-uuid" (UUID), either followed by "/migN" for MIG instance
// N (GPU_I_ID); INVALID_ARGUMENT naming the entry otherwise.
absl::StatusOr<v1::GpuRef> ParseGpu(absl::string_view entry) {
  size_t colon = entry.rfind(':');
  if (colon == absl::string_view::npos || colon == 0 || colon + 1 == entry.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpus: \"", entry, "\" is not host:index or host:uuid (optionally /migN)"));
  }
  v1::GpuRef gpu;
  gpu.set_host(std::string(entry.substr(0, colon)));
  absl::string_view rest = entry.substr(colon + 1);
  if (size_t slash = rest.rfind("/mig"); slash != absl::string_view::npos) {
    int instance = 0;
    if (!absl::SimpleAtoi(rest.substr(slash + 4), &instance) || instance < 0 || slash == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--gpus: \"", entry, "\" names no MIG instance after /mig"));
    }
    gpu.mutable_mig()->set_gpu_instance_id(instance);
    rest = rest.substr(0, slash);
  }
  int index = 0;
  if (absl::SimpleAtoi(rest, &index) && index >= 0) {
    gpu.set_gpu_index(index);
  } else {
    gpu.set_uuid(std::string(rest));
  }
  return gpu;
}

int RegisterJob(const Args& args) {
  absl::StatusOr<v1::JobKey> key = JobArg(args, 1);
  if (!key.ok()) return UsageError(key.status().message());
  v1::RegisterJobRequest request;
  v1::Job* job = request.mutable_job();
  *job->mutable_key() = *key;
  v1::SchedulerKind kind =
      api::SchedulerKindFromName(absl::AsciiStrToLower(args.Flag("scheduler").value_or("other")));
  if (kind == v1::SCHEDULER_KIND_UNSPECIFIED) {
    return UsageError(absl::StrCat("--scheduler: \"", *args.Flag("scheduler"),
                                   "\" is not slurm, osmo, kubernetes or other"));
  }
  job->set_scheduler(kind);
  job->set_user(args.Flag("user").value_or(""));
  job->set_team(args.Flag("team").value_or(""));
  job->set_name(args.Flag("name").value_or(""));
  job->set_gpu_model(args.Flag("gpu-model").value_or(""));
  job->set_workload_fingerprint(args.Flag("fingerprint").value_or(""));
  absl::StatusOr<v1::WorkloadKind> workload_kind = KindFlag(args);
  if (!workload_kind.ok()) return UsageError(workload_kind.status().message());
  job->set_workload_kind(*workload_kind);
  job->set_state(v1::JOB_STATE_RUNNING);
  absl::StatusOr<google::protobuf::Timestamp> start = TimeFlag(args, "start");
  if (!start.ok()) return UsageError(start.status().message());
  *job->mutable_start_time() = *start;
  for (const std::string& list : args.Flags("gpus")) {
    for (absl::string_view entry : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
      absl::StatusOr<v1::GpuRef> gpu = ParseGpu(absl::StripAsciiWhitespace(entry));
      if (!gpu.ok()) return UsageError(gpu.status().message());
      v1::GpuAllocation* allocation = job->add_allocations();
      *allocation->mutable_gpu() = *gpu;
      *allocation->mutable_start_time() = *start;
    }
  }
  for (const std::string& label : args.Flags("label")) {
    size_t eq = label.find('=');
    if (eq == std::string::npos || eq == 0) {
      return UsageError(absl::StrCat("--label: \"", label, "\" is not key=value"));
    }
    (*job->mutable_labels())[label.substr(0, eq)] = label.substr(eq + 1);
  }
  v1::RegisterJobResponse response;
  grpc::Status status = JobStub(args)->RegisterJob(CallContext(args).get(), request, &response);
  if (!status.ok()) {
    return RpcFailure("register-job", args, Service::kIngest, "RegisterJob", status);
  }
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
  return kExitOk;
}

int EndJob(const Args& args) {
  absl::StatusOr<v1::JobKey> key = JobArg(args, 1);
  if (!key.ok()) return UsageError(key.status().message());
  v1::EndJobRequest request;
  *request.mutable_key() = *key;
  absl::StatusOr<v1::JobState> state = ParseJobState(args.Flag("state").value_or("completed"));
  if (!state.ok()) return UsageError(state.status().message());
  request.set_final_state(*state);
  absl::StatusOr<google::protobuf::Timestamp> end = TimeFlag(args, "end");
  if (!end.ok()) return UsageError(end.status().message());
  *request.mutable_end_time() = *end;
  v1::EndJobResponse response;
  grpc::Status status = JobStub(args)->EndJob(CallContext(args).get(), request, &response);
  if (!status.ok()) return RpcFailure("end-job", args, Service::kIngest, "EndJob", status);
  if (args.json) {
    PrintJson(response);
  } else {
    std::cout << "ended " << key->cluster() << "/" << key->job_id() << " ("
              << api::JobStateName(response.job().state()) << ")\n";
  }
  return kExitOk;
}

int ListJobs(const Args& args) {
  v1::ListJobsRequest request;
  request.set_cluster(args.Flag("cluster").value_or(""));
  request.set_user(args.Flag("user").value_or(""));
  request.set_team(args.Flag("team").value_or(""));
  request.set_workload_fingerprint(args.Flag("fingerprint").value_or(""));
  absl::StatusOr<v1::WorkloadKind> workload_kind = KindFlag(args);
  if (!workload_kind.ok()) return UsageError(workload_kind.status().message());
  request.set_workload_kind(*workload_kind);
  for (const std::string& value : args.Flags("state")) {
    absl::StatusOr<v1::JobState> state = ParseJobState(value);
    if (!state.ok()) return UsageError(state.status().message());
    request.add_states(*state);
  }
  int limit = 50;
  if (std::optional<std::string> text = args.Flag("limit");
      text && (!absl::SimpleAtoi(*text, &limit) || limit <= 0)) {
    return UsageError(absl::StrCat("--limit: \"", *text, "\" is not a positive number"));
  }
  auto stub = JobStub(args);
  std::vector<v1::Job> jobs;
  Progress progress(!args.json);
  while (static_cast<int>(jobs.size()) < limit) {
    request.set_page_size(std::min(limit - static_cast<int>(jobs.size()), 1000));
    v1::ListJobsResponse response;
    grpc::Status status = stub->ListJobs(CallContext(args).get(), request, &response);
    if (!status.ok()) return RpcFailure("jobs list", args, Service::kIngest, "ListJobs", status);
    jobs.insert(jobs.end(), response.jobs().begin(), response.jobs().end());
    if (response.next_page_token().empty()) break;
    request.set_page_token(response.next_page_token());
    progress.Show(absl::StrCat("fetched ", jobs.size(), " jobs ..."));
  }
  progress.Done();
  if (args.json) {
    v1::ListJobsResponse all;
    for (const v1::Job& job : jobs) *all.add_jobs() = job;
    PrintJson(all);
    return kExitOk;
  }
  Table table({{"CLUSTER"},
               {"JOB"},
               {"STATE"},
               {"KIND"},
               {"USER"},
               {"TEAM"},
               {"GPUS", Align::kRight},
               {"GPU MODEL"},
               {"START (UTC)"},
               {"WORKLOAD"}});
  for (const v1::Job& job : jobs) {
    table.AddRow(
        {job.key().cluster(), job.key().job_id(), api::JobStateName(job.state()),
         OrDash(api::WorkloadKindName(job.workload_kind())), OrDash(job.user()), OrDash(job.team()),
         absl::StrCat(job.gpu_count() > 0 ? job.gpu_count() : job.allocations_size()),
         OrDash(job.gpu_model()), TimeText(job.start_time()), OrDash(job.workload_fingerprint())});
  }
  std::cout << table.Render() << jobs.size() << " jobs\n";
  return kExitOk;
}

int ShowJob(const Args& args) {
  absl::StatusOr<v1::JobKey> key = JobArg(args, 2);
  if (!key.ok()) return UsageError(key.status().message());
  v1::GetJobRequest request;
  *request.mutable_key() = *key;
  v1::GetJobResponse response;
  grpc::Status status = JobStub(args)->GetJob(CallContext(args).get(), request, &response);
  if (!status.ok()) return RpcFailure("jobs show", args, Service::kIngest, "GetJob", status);
  if (args.json) {
    PrintJson(response.job());
  } else {
    PrintJob(response.job());
  }
  return kExitOk;
}

}  // namespace

std::vector<Command> JobCommands() {
  return {
      {.words = {"migrate"},
       .summary = "apply pending database migrations",
       .details = "  --dsn DSN    PostgreSQL connection string [$GOODPUT_POSTGRES__DSN]\n"
                  "  --dir DIR    folder of numbered .sql files [./migrations, else the installed\n"
                  "               /usr/share/goodput/migrations]\n",
       .flags = {"dsn", "dir"},
       .run = Migrate},
      {.words = {"health"},
       .summary = "ask a goodput server for its gRPC health",
       .details = "  --addr HOST:PORT   the server's gRPC address (required)\n"
                  "  --service NAME     one service, e.g. goodput.v1.JobService [whole server]\n"
                  "  --wait SECONDS     keep asking until SERVING or the time is up [0]\n",
       .flags = {"service", "wait"},
       .run = Health},
      {.words = {"register-job"},
       .arguments = "[CLUSTER/JOB_ID]",
       .summary = "register a job and the GPUs it holds (Slurm prolog, Osmo, operators)",
       .details =
           "  Re-registering merges GPUs, so every node may register its own.\n"
           "  --cluster C --job-id J    the job key (or CLUSTER/JOB_ID)\n"
           "  --gpus LIST               host:index or host:uuid, comma-separated (repeatable);\n"
           "                            host:index/migN for MIG instance N (GPU_I_ID)\n"
           "  --scheduler KIND          slurm|osmo|kubernetes|other [other]\n"
           "  --user U --team T --name N --gpu-model MODEL --fingerprint F\n"
           "  --kind K                  training|inference|interactive|other\n"
           "  --label k=v               repeatable\n"
           "  --start TIME              RFC 3339 or \"now\" [now]\n",
       .flags = {"cluster", "job-id", "gpus", "scheduler", "user", "team", "name", "gpu-model",
                 "fingerprint", "label", "start", "kind"},
       .run = RegisterJob},
      {.words = {"end-job"},
       .arguments = "[CLUSTER/JOB_ID]",
       .summary = "mark a job ended and release its GPUs; idempotent",
       .details = "  --cluster C --job-id J    the job key (or CLUSTER/JOB_ID)\n"
                  "  --state S                 completed|failed|cancelled|timed_out|preempted|"
                  "ended [completed]\n"
                  "                            (ended: the caller cannot tell; a later real "
                  "state replaces it)\n"
                  "  --end TIME                RFC 3339 or \"now\" [now]\n",
       .flags = {"cluster", "job-id", "state", "end"},
       .run = EndJob},
      {.words = {"jobs", "list"},
       .summary = "jobs, newest first",
       .details = "  --cluster C --user U --team T --fingerprint F   filters\n"
                  "  --state S      running, completed, ... (repeatable)\n"
                  "  --kind K       training (also jobs with no kind), inference, interactive,\n"
                  "                 other\n"
                  "  --limit N      at most N jobs [50]\n",
       .flags = {"cluster", "state", "user", "team", "fingerprint", "limit", "kind"},
       .run = ListJobs},
      {.words = {"jobs", "show"},
       .arguments = "CLUSTER/JOB_ID",
       .summary = "one job with its GPUs",
       .details = "  (or --cluster C --job-id J)\n",
       .flags = {"cluster", "job-id"},
       .run = ShowJob},
  };
}

}  // namespace goodput::ctl
