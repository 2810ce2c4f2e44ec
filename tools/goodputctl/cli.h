// The client layer every goodputctl command shares: the command line (flags, positional
// words), where each service is (flags, then GOODPUT_<SERVICE>_ADDR, then the local stack's
// default port), the bearer token, call contexts, JSON output, progress on stderr, and the
// errors a user reads (one line on stderr, exit code 1 for a failed operation, 2 for a bad
// command line).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "goodput/v1/common.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/timestamp.pb.h"
#include "grpcpp/grpcpp.h"

namespace goodput::ctl {

namespace v1 = ::goodput::v1;

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;  // the operation failed (server error, not found, ...)
inline constexpr int kExitUsage = 2;   // the command line was wrong

// The parsed command line: positional words and --flags (--name value, --name=value, or a
// bare --name for the boolean flags).
struct Args {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> flags;
  bool json = false;
  bool help = false;

  std::optional<std::string> Flag(const std::string& name) const;
  std::vector<std::string> Flags(const std::string& name) const;
  bool Has(const std::string& name) const { return flags.count(name) > 0; }
  // Positional word `i` (0 is the command), or "".
  std::string Word(size_t i) const { return i < positional.size() ? positional[i] : ""; }
};

// Flags that never take a value (a bare --name sets them).
bool IsBooleanFlag(absl::string_view name);
Args ParseArgs(int argc, char** argv);

// Prints "goodputctl: MESSAGE" to stderr and returns the exit code.
int UsageError(absl::string_view message);
int Failure(absl::string_view message);

// The four services and how goodputctl finds them.
enum class Service { kIngest, kOfu, kMfu, kAlerting };
// "goodput-ofu".
std::string ServiceBinaryName(Service service);
// The address of `service`: --<name>-addr, then --addr when the command talks to that service,
// then $GOODPUT_<NAME>_ADDR, then 127.0.0.1:710x (the local stack's ports).
std::string Address(const Args& args, Service service);

// A client context with a deadline and, when --token or $GOODPUT_TOKEN is set, the bearer
// token.
std::unique_ptr<grpc::ClientContext> CallContext(const Args& args,
                                                 absl::Duration timeout = absl::Seconds(30));
std::shared_ptr<grpc::Channel> ChannelTo(const Args& args, Service service);

// Turns a failed call into the one line a user reads and returns exit code 1:
//   UNIMPLEMENTED -> "alerts list: goodput-alerting does not serve ListAlerts yet (...)"
//   UNAVAILABLE   -> "alerts list: cannot reach goodput-alerting at ADDR (...)"
//   other         -> "alerts list: NOT_FOUND: ... (goodput-alerting at ADDR)"
int RpcFailure(absl::string_view command, const Args& args, Service service,
               absl::string_view method, const grpc::Status& status);
// The same sentence without printing (for summaries that go on after a failure).
std::string RpcFailureText(const Args& args, Service service, absl::string_view method,
                           const grpc::Status& status);

// Writes `message` as protobuf JSON (proto field names, enums by name) on one line.
void PrintJson(const google::protobuf::Message& message);

// Time conversions.
absl::Time FromProto(const google::protobuf::Timestamp& ts);
google::protobuf::Timestamp ToProto(absl::Time t);

// The time range of --since DURATION (default `default_since`) or --from/--to; the end is
// "now" unless --to is given. INVALID_ARGUMENT naming the flag.
absl::StatusOr<v1::TimeRange> TimeRangeFlags(const Args& args, absl::string_view default_since);

// The optional window of a job query: --since D | --from T [--to T] (a range only when one of
// them is given, the end "now" unless --to) and --resolution D. INVALID_ARGUMENT naming the flag.
struct JobWindowFlags {
  std::optional<v1::TimeRange> range;
  std::optional<int32_t> resolution_s;
};
absl::StatusOr<JobWindowFlags> ParseJobWindowFlags(const Args& args);

// Sets `request`'s time_range and resolution_s from ParseJobWindowFlags, leaving unset what
// the command line does not give.
template <class Request>
absl::Status SetJobWindow(const Args& args, Request& request) {
  absl::StatusOr<JobWindowFlags> flags = ParseJobWindowFlags(args);
  if (!flags.ok()) return flags.status();
  if (flags->range) *request.mutable_time_range() = *flags->range;
  if (flags->resolution_s) request.set_resolution_s(*flags->resolution_s);
  return absl::OkStatus();
}

// An enum value's name without its prefix, lower case: ("VERDICT_SAME_JOB", "VERDICT_") ->
// "same_job".
std::string EnumShort(std::string name, absl::string_view prefix);

// The job of a command: positional word `index` as CLUSTER/JOB, or --cluster and --job-id.
absl::StatusOr<v1::JobKey> JobArg(const Args& args, size_t index);

// Progress of a long operation on one line of stderr, shown only when stderr is a terminal
// (scripts and --json output stay clean).
class Progress {
 public:
  explicit Progress(bool enabled);
  ~Progress();
  // Replaces the line with `text`.
  void Show(absl::string_view text);
  // Clears the line.
  void Done();

 private:
  bool enabled_;
  bool shown_ = false;
};

}  // namespace goodput::ctl
