// C++ client for goodput's MfuService: a training program reports its own throughput/MFU
// without ever waiting for the network.
//
// Report() builds the report and appends it to a bounded in-memory queue; a background thread
// sends queued reports in batches over StreamMfuReports (unary ReportMfu where streaming is not
// served), retries UNAVAILABLE / RESOURCE_EXHAUSTED / DEADLINE_EXCEEDED / ABORTED with
// exponential backoff and jitter while keeping the batch, and gives up only on permanent
// errors. Every report carries a unique report_id, so a retried batch is not counted twice.
// A full queue drops the new report and counts it. The destructor flushes with a time limit.
//
//   auto reporter = goodput::sdk::Reporter::Create(
//       goodput::sdk::WithEnvironment({.endpoint = "mfu.example.org:7004"}));
//   if (!reporter.ok()) { /* log reporter.status() and train without reporting */ }
//   (*reporter)->Report({.tflops_per_gpu = 412.0, .step = step});
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "goodput/v1/mfu.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace goodput::sdk {

// Where reports go, for which job, and how the queue and retries behave.
struct ReporterOptions {
  // "host:port" or "http://host:port" (plaintext), "https://host[:port]" (TLS).
  std::string endpoint = {};
  // Bearer token with the `sdk` role; empty when authentication is off.
  std::string token = {};
  // The job, as the scheduler registered it.
  std::string cluster = {};
  std::string job_id = {};
  // Copied into every report.
  std::string framework = {};
  std::string framework_version = {};
  std::string flops_formula = {};
  goodput::v1::MfuReportSource source = goodput::v1::MFU_REPORT_SOURCE_SDK;

  std::size_t queue_capacity = 10000;
  // Reports per StreamMfuReports message, and messages per call.
  std::size_t batch_size = 500;
  std::size_t max_batches_per_call = 8;
  // How long a report may wait for a batch to fill before it is sent.
  absl::Duration flush_interval = absl::Seconds(1);
  absl::Duration initial_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(30);
  absl::Duration rpc_timeout = absl::Seconds(10);
  // Time the destructor spends delivering what is still queued.
  absl::Duration close_timeout = absl::Seconds(5);
};

// Fills the empty endpoint, token, cluster and job_id from the environment: GOODPUT_ENDPOINT,
// GOODPUT_TOKEN, GOODPUT_CLUSTER (else SLURM_CLUSTER_NAME), GOODPUT_JOB_ID (else the Slurm
// job id, "<SLURM_ARRAY_JOB_ID>_<SLURM_ARRAY_TASK_ID>" for array tasks, else
// OSMO_WORKFLOW_ID). `getenv` is injectable for tests; it returns nullptr for unset names.
ReporterOptions WithEnvironment(ReporterOptions options,
                                const std::function<const char*(const char*)>& getenv = nullptr);

// One figure a framework reports. Set exactly one measurement: `mfu` (fraction),
// `tflops_per_gpu`, `total_tflops` with `gpu_count`, or `flops_per_step` with `step_time_s`
// (`gpu_count` optional).
struct MfuFigure {
  std::optional<double> mfu = {};
  std::optional<double> tflops_per_gpu = {};
  std::optional<double> total_tflops = {};
  std::optional<int32_t> gpu_count = {};
  std::optional<double> flops_per_step = {};
  std::optional<double> step_time_s = {};
  std::optional<int64_t> step = {};
  std::optional<double> tokens_per_s = {};
  goodput::v1::Precision precision = goodput::v1::PRECISION_UNSPECIFIED;
  // FLOPs share per precision, summing to 1.
  std::vector<std::pair<goodput::v1::Precision, double>> precision_mix = {};
  std::vector<double> step_times_s = {};
  // Seconds covered, ending at end_time; unset: since the previous report (or since Create()).
  std::optional<double> interval_s = {};
  // When the interval ended; unset: now. Set it when replaying figures logged earlier.
  std::optional<absl::Time> end_time = {};
};

// Counters since Create(); same meaning as the Python SDK's ReporterStats.
struct ReporterStats {
  int64_t queued = 0;      // accepted, not yet answered for (queue + in flight)
  int64_t sent = 0;        // acknowledged by the service, duplicates included
  int64_t duplicates = 0;  // part of `sent` the service had stored before
  int64_t dropped = 0;     // not accepted: queue full or reporter closed
  int64_t invalid = 0;     // not accepted: no or several measurements
  int64_t refused = 0;     // refused by the service (INVALID_ARGUMENT); never retried
  int64_t failed = 0;      // given up on a permanent error of the call (e.g. UNAUTHENTICATED)
  int64_t abandoned = 0;   // unsent when Close() ran out of time
  int64_t retries = 0;     // calls repeated after a transient error
  int64_t rpcs = 0;        // calls made
};

class Reporter {
 public:
  // INVALID_ARGUMENT naming the field when the endpoint or job id is missing or malformed.
  static absl::StatusOr<std::unique_ptr<Reporter>> Create(ReporterOptions options);
  // Same, over a caller-made channel (custom credentials, in-process servers).
  static absl::StatusOr<std::unique_ptr<Reporter>> Create(
      ReporterOptions options, std::shared_ptr<grpc::ChannelInterface> channel);

  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;
  // Close(options.close_timeout).
  ~Reporter();

  // Queues one figure; never waits for I/O. False when it was not accepted (queue full,
  // closed, or not exactly one measurement); the reason is counted in Stats().
  bool Report(const MfuFigure& figure);
  // Waits until every report accepted so far has been answered for, or `timeout` passes.
  bool Flush(absl::Duration timeout);
  // Stops accepting, delivers what is queued for at most `timeout`, stops the sender thread.
  // Unsent reports are then counted as abandoned. True when everything was delivered.
  bool Close(absl::Duration timeout);
  ReporterStats Stats() const;

 private:
  enum class Outcome { kDone, kRetry, kHalted, kFallBackToUnary };

  Reporter(ReporterOptions options, std::shared_ptr<grpc::ChannelInterface> channel);
  void Run();
  // One attempt; removes from `pending` what was answered for.
  Outcome Send(std::vector<goodput::v1::MfuReport>& pending);
  Outcome SendStream(std::vector<goodput::v1::MfuReport>& pending);
  Outcome SendUnary(std::vector<goodput::v1::MfuReport>& pending);
  // Prepares `context`; false when the reporter is halting.
  bool BeginCall(grpc::ClientContext& context);
  void EndCall();
  void GiveUp(int64_t count, const grpc::Status& status);
  std::string NewReportId();  // requires mu_

  const ReporterOptions options_;
  std::shared_ptr<grpc::ChannelInterface> channel_;
  std::unique_ptr<goodput::v1::MfuService::Stub> stub_;
  goodput::v1::MfuReport template_;
  std::string reporter_id_;  // names this reporter's batches

  mutable std::mutex mu_;
  std::condition_variable wake_cv_;      // sender: new work, flush, close, halt
  std::condition_variable progress_cv_;  // Flush(): the sender made progress
  std::deque<goodput::v1::MfuReport> queue_;
  std::size_t in_flight_ = 0;
  bool wake_ = false;
  bool closed_ = false;
  bool closing_ = false;
  bool halt_ = false;
  bool use_stream_ = true;
  bool sender_done_ = false;
  grpc::ClientContext* current_call_ = nullptr;
  absl::Time previous_end_;
  absl::BitGen bitgen_;
  int64_t batch_seq_ = 0;
  ReporterStats counts_;
  std::vector<std::string> logged_;  // problems already logged once
  std::thread sender_;
};

}  // namespace goodput::sdk
