#include "tools/goodputctl/cli.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "services/platform/tls.h"
#include "tools/goodputctl/format.h"

namespace goodput::ctl {

std::optional<std::string> Args::Flag(const std::string& name) const {
  auto it = flags.find(name);
  if (it == flags.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Args::Flags(const std::string& name) const {
  std::vector<std::string> values;
  auto [begin, end] = flags.equal_range(name);
  for (auto it = begin; it != end; ++it) values.push_back(it->second);
  return values;
}

bool IsBooleanFlag(absl::string_view name) {
  static const std::set<std::string, std::less<>> kBoolean = {
      "json", "help", "all", "per-gpu", "jobs", "windows", "no-progress", "quiet"};
  return kBoolean.contains(name);
}

Args ParseArgs(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h") arg = "--help";
    if (!absl::StartsWith(arg, "--") || arg == "--") {
      args.positional.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value = "true";
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else if (!IsBooleanFlag(name) && i + 1 < argc && !absl::StartsWith(argv[i + 1], "--")) {
      value = argv[++i];
    }
    if (name == "json") {
      args.json = true;
    } else if (name == "help") {
      args.help = true;
    } else {
      args.flags.emplace(name, value);
    }
  }
  return args;
}

int UsageError(absl::string_view message) {
  std::cerr << "goodputctl: " << message << "\n";
  return kExitUsage;
}

int Failure(absl::string_view message) {
  std::cerr << "goodputctl: " << message << "\n";
  return kExitFailed;
}

namespace {

struct ServiceInfo {
  const char* name;      // "ofu"
  const char* env;       // "GOODPUT_OFU_ADDR"
  const char* fallback;  // the local stack's port
};

ServiceInfo Info(Service service) {
  switch (service) {
    case Service::kIngest:
      return {"ingest", "GOODPUT_INGEST_ADDR", "127.0.0.1:7101"};
    case Service::kOfu:
      return {"ofu", "GOODPUT_OFU_ADDR", "127.0.0.1:7102"};
    case Service::kMfu:
      return {"mfu", "GOODPUT_MFU_ADDR", "127.0.0.1:7103"};
    case Service::kAlerting:
      return {"alerting", "GOODPUT_ALERTING_ADDR", "127.0.0.1:7104"};
  }
  return {"ingest", "GOODPUT_INGEST_ADDR", "127.0.0.1:7101"};
}

}  // namespace

std::string ServiceBinaryName(Service service) {
  return absl::StrCat("goodput-", Info(service).name);
}

std::string Address(const Args& args, Service service) {
  ServiceInfo info = Info(service);
  if (auto addr = args.Flag(absl::StrCat(info.name, "-addr"))) return *addr;
  if (auto addr = args.Flag("addr")) return *addr;
  if (const char* env = std::getenv(info.env); env != nullptr && *env != '\0') return env;
  return info.fallback;
}

std::unique_ptr<grpc::ClientContext> CallContext(const Args& args, absl::Duration timeout) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  std::optional<std::string> token = args.Flag("token");
  if (!token) {
    if (const char* env = std::getenv("GOODPUT_TOKEN")) token = env;
  }
  if (token && !token->empty()) ctx->AddMetadata("authorization", absl::StrCat("Bearer ", *token));
  return ctx;
}

std::shared_ptr<grpc::Channel> ChannelTo(const Args& args, Service service) {
  return platform::MakeChannel(
      Address(args, service),
      platform::ClientTlsFromEnvironment([](const char* name) { return std::getenv(name); }));
}

std::string RpcFailureText(const Args& args, Service service, absl::string_view method,
                           const grpc::Status& status) {
  const std::string binary = ServiceBinaryName(service);
  const std::string addr = Address(args, service);
  switch (status.error_code()) {
    case grpc::StatusCode::UNIMPLEMENTED:
      return absl::StrCat(binary, " does not serve ", method, " yet (", status.error_message(),
                          ")");
    case grpc::StatusCode::UNAVAILABLE:
      return absl::StrCat("cannot reach ", binary, " at ", addr, " (", status.error_message(),
                          "); set --addr or ", Info(service).env);
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::PERMISSION_DENIED:
      return absl::StrCat(status.error_message(), " (", binary, " at ", addr,
                          "; give a token with --token or GOODPUT_TOKEN)");
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return absl::StrCat(binary, " at ", addr, " did not answer in time");
    default:
      return absl::StrCat(status.error_message(), " (", binary, " at ", addr, ")");
  }
}

int RpcFailure(absl::string_view command, const Args& args, Service service,
               absl::string_view method, const grpc::Status& status) {
  return Failure(absl::StrCat(command, ": ", RpcFailureText(args, service, method, status)));
}

void PrintJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  std::cout << json << "\n";
}

absl::Time FromProto(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

google::protobuf::Timestamp ToProto(absl::Time t) {
  google::protobuf::Timestamp ts;
  int64_t s = absl::ToUnixSeconds(t);
  ts.set_seconds(s);
  ts.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(s))));
  return ts;
}

absl::StatusOr<v1::TimeRange> TimeRangeFlags(const Args& args, absl::string_view default_since) {
  const absl::Time now = absl::Now();
  absl::Time end = now;
  if (auto to = args.Flag("to")) {
    absl::StatusOr<absl::Time> t = ParseTimeFlag("to", *to, now);
    if (!t.ok()) return t.status();
    end = *t;
  }
  absl::Time start;
  if (auto from = args.Flag("from")) {
    if (args.Has("since")) {
      return absl::InvalidArgumentError("--since and --from: give one of them, not both");
    }
    absl::StatusOr<absl::Time> t = ParseTimeFlag("from", *from, now);
    if (!t.ok()) return t.status();
    start = *t;
  } else {
    absl::StatusOr<absl::Duration> since =
        ParseDurationFlag("since", args.Flag("since").value_or(std::string(default_since)));
    if (!since.ok()) return since.status();
    start = end - *since;
  }
  if (start >= end) {
    return absl::InvalidArgumentError(
        absl::StrCat("--from ", FormatUtc(start), " is not before --to ", FormatUtc(end)));
  }
  v1::TimeRange range;
  *range.mutable_start_time() = ToProto(start);
  *range.mutable_end_time() = ToProto(end);
  return range;
}

absl::StatusOr<JobWindowFlags> ParseJobWindowFlags(const Args& args) {
  JobWindowFlags out;
  if (args.Has("since") || args.Has("from") || args.Has("to")) {
    absl::StatusOr<v1::TimeRange> range = TimeRangeFlags(args, "24h");
    if (!range.ok()) return range.status();
    out.range = *std::move(range);
  }
  if (std::optional<std::string> res = args.Flag("resolution")) {
    absl::StatusOr<absl::Duration> d = ParseDurationFlag("resolution", *res);
    if (!d.ok()) return d.status();
    out.resolution_s = static_cast<int32_t>(absl::ToInt64Seconds(*d));
  }
  return out;
}

std::string EnumShort(std::string name, absl::string_view prefix) {
  if (absl::StartsWith(name, prefix)) name = name.substr(prefix.size());
  return absl::AsciiStrToLower(name);
}

absl::StatusOr<v1::JobKey> JobArg(const Args& args, size_t index) {
  v1::JobKey key;
  std::string word = args.Word(index);
  if (!word.empty()) {
    absl::StatusOr<std::pair<std::string, std::string>> ref = ParseJobRef(word);
    if (!ref.ok()) return ref.status();
    key.set_cluster(ref->first);
    key.set_job_id(ref->second);
    return key;
  }
  std::optional<std::string> cluster = args.Flag("cluster");
  std::optional<std::string> job_id = args.Flag("job-id");
  if (!cluster || cluster->empty() || !job_id || job_id->empty()) {
    return absl::InvalidArgumentError("give the job as CLUSTER/JOB_ID (or --cluster and --job-id)");
  }
  key.set_cluster(*cluster);
  key.set_job_id(*job_id);
  return key;
}

Progress::Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { Done(); }

void Progress::Show(absl::string_view text) {
  if (!enabled_) return;
  std::fprintf(stderr, "\r\033[K%.*s", static_cast<int>(text.size()), text.data());
  std::fflush(stderr);
  shown_ = true;
}

void Progress::Done() {
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace goodput::ctl
