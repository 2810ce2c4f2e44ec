#include "sdk/cpp/reporter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace goodput::sdk {
namespace {

using goodput::v1::MfuReport;

bool IsRetryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
         code == grpc::StatusCode::DEADLINE_EXCEEDED || code == grpc::StatusCode::ABORTED;
}

struct Target {
  std::string address;
  bool tls = false;
};

absl::StatusOr<Target> ParseEndpoint(absl::string_view endpoint) {
  Target target;
  absl::string_view value = endpoint;
  if (absl::ConsumePrefix(&value, "https://")) {
    target.tls = true;
  } else {
    absl::ConsumePrefix(&value, "http://");
  }
  while (absl::ConsumeSuffix(&value, "/")) {
  }
  if (value.empty() || value.front() == ':' || absl::StrContains(value, "/")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "endpoint=\"", endpoint, "\" is not host:port, http://host:port or https://host[:port]"));
  }
  target.address = std::string(value);
  absl::string_view after_bracket = value.substr(std::min(value.size(), value.rfind(']') + 1));
  if (target.tls && !absl::StrContains(after_bracket, ":")) {
    absl::StrAppend(&target.address, ":443");
  }
  return target;
}

std::string Env(const std::function<const char*(const char*)>& getenv, const char* name) {
  const char* value = getenv(name);
  return value == nullptr ? std::string() : std::string(absl::StripAsciiWhitespace(value));
}

// A measurement in exactly one form; INVALID_ARGUMENT naming the forms otherwise.
absl::Status FillMeasurement(const MfuFigure& figure, MfuReport& report) {
  int forms = 0;
  if (figure.mfu) {
    ++forms;
    report.set_mfu(*figure.mfu);
  }
  if (figure.tflops_per_gpu) {
    ++forms;
    report.set_model_tflops_per_gpu(*figure.tflops_per_gpu);
  }
  if (figure.total_tflops) {
    ++forms;
    if (!figure.gpu_count) return absl::InvalidArgumentError("total_tflops needs gpu_count");
    report.mutable_total_throughput()->set_total_tflops(*figure.total_tflops);
    report.mutable_total_throughput()->set_gpu_count(*figure.gpu_count);
  }
  if (figure.flops_per_step) {
    ++forms;
    if (!figure.step_time_s) return absl::InvalidArgumentError("flops_per_step needs step_time_s");
    report.mutable_step_flops()->set_flops_per_step(*figure.flops_per_step);
    report.mutable_step_flops()->set_step_time_s(*figure.step_time_s);
    if (figure.gpu_count) report.mutable_step_flops()->set_gpu_count(*figure.gpu_count);
  }
  if (forms != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("measurement: ", forms,
                     " given; set exactly one of mfu, tflops_per_gpu, "
                     "total_tflops+gpu_count, flops_per_step+step_time_s"));
  }
  return absl::OkStatus();
}

void SetTimestamp(absl::Time time, google::protobuf::Timestamp& out) {
  const int64_t ns = absl::ToUnixNanos(time);
  out.set_seconds(ns / 1000000000);
  out.set_nanos(static_cast<int32_t>(ns % 1000000000));
}

// Exponential backoff with "equal jitter": half the delay fixed, half random.
absl::Duration BackoffDelay(const ReporterOptions& options, int attempt, absl::BitGen& gen) {
  absl::Duration ceiling = options.initial_backoff;
  for (int i = 0; i < attempt && ceiling < options.max_backoff; ++i) ceiling *= 2;
  ceiling = std::min(ceiling, options.max_backoff);
  return ceiling / 2 + absl::Uniform(gen, 0.0, 1.0) * (ceiling / 2);
}

}  // namespace

ReporterOptions WithEnvironment(ReporterOptions options,
                                const std::function<const char*(const char*)>& getenv) {
  const std::function<const char*(const char*)> get =
      getenv ? getenv : [](const char* name) -> const char* { return std::getenv(name); };
  if (options.endpoint.empty()) options.endpoint = Env(get, "GOODPUT_ENDPOINT");
  if (options.token.empty()) options.token = Env(get, "GOODPUT_TOKEN");
  if (options.cluster.empty()) {
    options.cluster = Env(get, "GOODPUT_CLUSTER");
    if (options.cluster.empty()) options.cluster = Env(get, "SLURM_CLUSTER_NAME");
  }
  if (options.job_id.empty()) {
    options.job_id = Env(get, "GOODPUT_JOB_ID");
    const std::string array_job = Env(get, "SLURM_ARRAY_JOB_ID");
    const std::string array_task = Env(get, "SLURM_ARRAY_TASK_ID");
    if (options.job_id.empty() && !array_job.empty() && !array_task.empty()) {
      options.job_id = absl::StrCat(array_job, "_", array_task);
    }
    if (options.job_id.empty()) options.job_id = Env(get, "SLURM_JOB_ID");
    if (options.job_id.empty()) options.job_id = Env(get, "OSMO_WORKFLOW_ID");
  }
  return options;
}

absl::StatusOr<std::unique_ptr<Reporter>> Reporter::Create(ReporterOptions options) {
  if (options.endpoint.empty()) {
    return absl::InvalidArgumentError("endpoint is empty: set it or GOODPUT_ENDPOINT");
  }
  absl::StatusOr<Target> target = ParseEndpoint(options.endpoint);
  if (!target.ok()) return target.status();
  grpc::ChannelArguments args;
  const int initial_ms = static_cast<int>(absl::ToInt64Milliseconds(options.initial_backoff)) + 1;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, initial_ms);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, initial_ms);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(options.max_backoff)) + 1);
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  auto credentials = target->tls ? grpc::SslCredentials(grpc::SslCredentialsOptions())
                                 : grpc::InsecureChannelCredentials();
  return Create(std::move(options), grpc::CreateCustomChannel(target->address, credentials, args));
}

absl::StatusOr<std::unique_ptr<Reporter>> Reporter::Create(
    ReporterOptions options, std::shared_ptr<grpc::ChannelInterface> channel) {
  if (options.job_id.empty()) {
    return absl::InvalidArgumentError(
        "job_id is empty: set it, GOODPUT_JOB_ID, or run under Slurm or Osmo");
  }
  if (options.queue_capacity == 0 || options.batch_size == 0 || options.max_batches_per_call == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "queue_capacity=", options.queue_capacity, ", batch_size=", options.batch_size,
        ", max_batches_per_call=", options.max_batches_per_call, ": each must be > 0"));
  }
  if (options.initial_backoff <= absl::ZeroDuration() ||
      options.max_backoff < options.initial_backoff) {
    return absl::InvalidArgumentError(absl::StrCat(
        "initial_backoff=", absl::FormatDuration(options.initial_backoff), ", max_backoff=",
        absl::FormatDuration(options.max_backoff), ": need 0 < initial_backoff <= max_backoff"));
  }
  return std::unique_ptr<Reporter>(new Reporter(std::move(options), std::move(channel)));
}

Reporter::Reporter(ReporterOptions options, std::shared_ptr<grpc::ChannelInterface> channel)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(goodput::v1::MfuService::NewStub(channel_)),
      previous_end_(absl::Now()) {
  reporter_id_ = absl::StrFormat("%016x", absl::Uniform<uint64_t>(bitgen_));
  template_.mutable_job()->set_cluster(options_.cluster);
  template_.mutable_job()->set_job_id(options_.job_id);
  template_.set_framework(options_.framework);
  template_.set_framework_version(options_.framework_version);
  template_.set_flops_formula(options_.flops_formula);
  template_.set_source(options_.source);
  sender_ = std::thread([this] { Run(); });
}

Reporter::~Reporter() {
  Close(options_.close_timeout);
  if (sender_.joinable()) sender_.join();
}

std::string Reporter::NewReportId() {
  // A random (version 4) UUID.
  const uint64_t hi = (absl::Uniform<uint64_t>(bitgen_) & ~uint64_t{0xF000}) | 0x4000;
  const uint64_t lo =
      (absl::Uniform<uint64_t>(bitgen_) & ~(uint64_t{0xC} << 60)) | (uint64_t{0x8} << 60);
  return absl::StrFormat("%08x-%04x-%04x-%04x-%012x", hi >> 32, (hi >> 16) & 0xFFFF, hi & 0xFFFF,
                         lo >> 48, lo & 0xFFFFFFFFFFFFull);
}

bool Reporter::Report(const MfuFigure& figure) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_ || queue_.size() >= options_.queue_capacity) {
      ++counts_.dropped;
      return false;
    }
  }
  MfuReport report = template_;
  if (!FillMeasurement(figure, report).ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    ++counts_.invalid;
    return false;
  }
  if (figure.step) report.set_step(*figure.step);
  if (figure.tokens_per_s) report.set_tokens_per_s(*figure.tokens_per_s);
  report.set_precision(figure.precision);
  for (const auto& [precision, share] : figure.precision_mix) {
    auto* entry = report.add_precision_mix();
    entry->set_precision(precision);
    entry->set_flops_share(share);
  }
  const std::size_t first_step_time =
      figure.step_times_s.size() > 1000 ? figure.step_times_s.size() - 1000 : 0;
  for (std::size_t i = first_step_time; i < figure.step_times_s.size(); ++i) {
    report.add_step_times_s(figure.step_times_s[i]);
  }
  const absl::Time end = figure.end_time.value_or(absl::Now());
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || queue_.size() >= options_.queue_capacity) {
    ++counts_.dropped;
    return false;
  }
  absl::Time start = previous_end_;
  if (figure.interval_s && std::isfinite(*figure.interval_s) && *figure.interval_s > 0) {
    start = end - absl::Seconds(*figure.interval_s);
  }
  if (start >= end) start = end - absl::Microseconds(1);
  previous_end_ = std::max(previous_end_, end);
  SetTimestamp(start, *report.mutable_interval()->mutable_start_time());
  SetTimestamp(end, *report.mutable_interval()->mutable_end_time());
  report.set_report_id(NewReportId());
  queue_.push_back(std::move(report));
  if (queue_.size() >= options_.batch_size && !wake_) {
    wake_ = true;
    wake_cv_.notify_one();
  }
  return true;
}

bool Reporter::Flush(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::unique_lock<std::mutex> lock(mu_);
  while (!queue_.empty() || in_flight_ > 0) {
    if (sender_done_) return false;
    const absl::Time now = absl::Now();
    if (now >= deadline) return false;
    wake_ = true;
    wake_cv_.notify_one();
    progress_cv_.wait_for(
        lock, absl::ToChronoMilliseconds(std::min(deadline - now, absl::Milliseconds(500))) +
                  std::chrono::milliseconds(1));
  }
  return true;
}

bool Reporter::Close(absl::Duration timeout) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return counts_.abandoned == 0;
    closed_ = true;
  }
  const bool delivered = Flush(timeout);
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    if (!delivered) {
      counts_.abandoned += static_cast<int64_t>(queue_.size() + in_flight_);
      queue_.clear();
      in_flight_ = 0;
      halt_ = true;
      if (current_call_ != nullptr) current_call_->TryCancel();
      std::fprintf(stderr, "goodput_sdk: %lld reports for job %s/%s not delivered within %s\n",
                   static_cast<long long>(counts_.abandoned), options_.cluster.c_str(),
                   options_.job_id.c_str(), absl::FormatDuration(timeout).c_str());
    }
    wake_ = true;
  }
  wake_cv_.notify_all();
  if (sender_.joinable()) sender_.join();
  return delivered;
}

ReporterStats Reporter::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  ReporterStats stats = counts_;
  stats.queued = static_cast<int64_t>(queue_.size() + in_flight_);
  return stats;
}

void Reporter::Run() {
  std::vector<MfuReport> pending;
  int attempt = 0;
  const std::size_t max_per_call = options_.batch_size * options_.max_batches_per_call;
  std::unique_lock<std::mutex> lock(mu_);
  while (!halt_) {
    if (pending.empty()) {
      wake_cv_.wait_for(lock, absl::ToChronoMilliseconds(options_.flush_interval),
                        [this] { return wake_ || halt_ || closing_; });
      wake_ = false;
      while (!queue_.empty() && pending.size() < max_per_call) {
        pending.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      in_flight_ = pending.size();
      if (pending.empty()) {
        progress_cv_.notify_all();
        if (closing_ || halt_) break;
        continue;
      }
    }
    lock.unlock();
    const Outcome outcome = Send(pending);
    lock.lock();
    if (outcome == Outcome::kHalted || halt_) break;
    if (outcome == Outcome::kRetry) {
      ++counts_.retries;
      const absl::Duration delay = BackoffDelay(options_, attempt++, bitgen_);
      wake_cv_.wait_for(lock, absl::ToChronoMilliseconds(delay) + std::chrono::milliseconds(1),
                        [this] { return halt_; });
      continue;
    }
    attempt = 0;
    in_flight_ = pending.size();
    progress_cv_.notify_all();
    if (!queue_.empty()) wake_ = true;
  }
  sender_done_ = true;
  progress_cv_.notify_all();
}

bool Reporter::BeginCall(grpc::ClientContext& context) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  if (!options_.token.empty()) {
    context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.token));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (halt_) return false;
  ++counts_.rpcs;
  current_call_ = &context;
  return true;
}

void Reporter::EndCall() {
  std::lock_guard<std::mutex> lock(mu_);
  current_call_ = nullptr;
}

Reporter::Outcome Reporter::Send(std::vector<MfuReport>& pending) {
  bool stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stream = use_stream_;
  }
  if (stream) {
    const Outcome outcome = SendStream(pending);
    if (outcome != Outcome::kFallBackToUnary) return outcome;
  }
  return SendUnary(pending);
}

Reporter::Outcome Reporter::SendStream(std::vector<MfuReport>& pending) {
  grpc::ClientContext context;
  if (!BeginCall(context)) return Outcome::kHalted;
  goodput::v1::StreamMfuReportsResponse response;
  std::unique_ptr<grpc::ClientWriter<goodput::v1::StreamMfuReportsRequest>> writer =
      stub_->StreamMfuReports(&context, &response);
  for (std::size_t i = 0; i < pending.size(); i += options_.batch_size) {
    goodput::v1::StreamMfuReportsRequest request;
    request.set_batch_id(absl::StrCat(reporter_id_, "-", ++batch_seq_));
    const std::size_t end = std::min(pending.size(), i + options_.batch_size);
    for (std::size_t j = i; j < end; ++j) *request.add_reports() = pending[j];
    if (!writer->Write(request)) break;  // the call failed; Finish() says why
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  EndCall();

  std::unique_lock<std::mutex> lock(mu_);
  if (halt_) return Outcome::kHalted;
  if (!status.ok()) {
    if (IsRetryable(status.error_code())) return Outcome::kRetry;
    if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      use_stream_ = false;
      return Outcome::kFallBackToUnary;
    }
    // INVALID_ARGUMENT for the call as a whole: isolate the bad report(s) one by one.
    if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      return Outcome::kFallBackToUnary;
    }
    lock.unlock();
    GiveUp(static_cast<int64_t>(pending.size()), status);
    pending.clear();
    return Outcome::kDone;
  }
  counts_.sent += response.stored_count() + response.duplicate_count();
  counts_.duplicates += response.duplicate_count();
  counts_.refused += response.refused_count();
  if (response.refused_count() > 0 &&
      std::find(logged_.begin(), logged_.end(), "refused") == logged_.end()) {
    logged_.push_back("refused");
    std::fprintf(
        stderr, "goodput_sdk: the service refused %lld report(s), e.g.: %s\n",
        static_cast<long long>(response.refused_count()),
        response.refusals().empty() ? "no reason given" : response.refusals(0).message().c_str());
  }
  pending.clear();
  return Outcome::kDone;
}

Reporter::Outcome Reporter::SendUnary(std::vector<MfuReport>& pending) {
  std::size_t done = 0;
  Outcome outcome = Outcome::kDone;
  for (; done < pending.size(); ++done) {
    grpc::ClientContext context;
    if (!BeginCall(context)) {
      outcome = Outcome::kHalted;
      break;
    }
    goodput::v1::ReportMfuRequest request;
    *request.mutable_report() = pending[done];
    goodput::v1::ReportMfuResponse response;
    const grpc::Status status = stub_->ReportMfu(&context, request, &response);
    EndCall();
    std::unique_lock<std::mutex> lock(mu_);
    if (halt_) {
      outcome = Outcome::kHalted;
      break;
    }
    if (status.ok()) {
      ++counts_.sent;
      if (response.duplicate()) ++counts_.duplicates;
    } else if (IsRetryable(status.error_code())) {
      outcome = Outcome::kRetry;
      break;
    } else if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      ++counts_.refused;
      if (std::find(logged_.begin(), logged_.end(), "refused") == logged_.end()) {
        logged_.push_back("refused");
        std::fprintf(stderr, "goodput_sdk: the service refused a report: %s\n",
                     status.error_message().c_str());
      }
    } else {
      lock.unlock();
      GiveUp(static_cast<int64_t>(pending.size() - done), status);
      done = pending.size();
      break;
    }
    in_flight_ = pending.size() - done - 1;
  }
  pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(done));
  return outcome;
}

void Reporter::GiveUp(int64_t count, const grpc::Status& status) {
  std::lock_guard<std::mutex> lock(mu_);
  counts_.failed += count;
  const std::string key = absl::StrCat("failed:", status.error_code());
  if (std::find(logged_.begin(), logged_.end(), key) != logged_.end()) return;
  logged_.push_back(key);
  const bool auth = status.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                    status.error_code() == grpc::StatusCode::PERMISSION_DENIED;
  std::fprintf(stderr, "goodput_sdk: %lld report(s) not delivered to %s: code %d: %s%s\n",
               static_cast<long long>(count), options_.endpoint.c_str(),
               static_cast<int>(status.error_code()), status.error_message().c_str(),
               auth ? " (check GOODPUT_TOKEN)" : "");
}

}  // namespace goodput::sdk
