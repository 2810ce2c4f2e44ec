#pragma once

// A simulated fleet sent through the platform's APIs as a real one arrives: each job
// registered (JobService.RegisterJob) at its first samples, samples in batches
// (IngestService.PushSamples), the framework's MFU reports through the C++ SDK (one Reporter
// per job), and the epilog's EndJob. Header-only, for the programs that link the simulator,
// its proto conversion and the SDK (the demo, the dashboard's end-to-end test, the scale-out
// test).
//
//   PlatformSink sink({.cluster = "demo", .ingest = {channel}, .mfu_endpoints = {"host:port"},
//                      .on_error = [](const std::string& e) { std::cerr << e << "\n"; }});
//   while (fleet->Step(&sink)) {}
//   sink.Flush();
//   ... wait for the platform to catch up ...
//   sink.EndJobs();  // unless end_at_job_end

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "goodput/v1/ingest.grpc.pb.h"
#include "goodput/v1/job.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "sdk/cpp/reporter.h"
#include "tools/fleetsim/fleet_proto.h"
#include "tools/fleetsim/fleet_sim.h"
#include "tools/fleetsim/sdk_figure.h"

namespace goodput::sim {

struct PlatformSinkOptions {
  std::string cluster = {};
  // goodput-ingest replicas: batch n and the calls after it go to ingest[n % size].
  std::vector<std::shared_ptr<grpc::Channel>> ingest = {};
  // goodput-mfu targets for the SDK, job i's reporter on [i % size]; with `mfu_channels`
  // (same size) the reporters use those channels. Empty: no MFU reports are sent.
  std::vector<std::string> mfu_endpoints = {};
  std::vector<std::shared_ptr<grpc::Channel>> mfu_channels = {};
  std::string token = {};  // bearer token for every call (and the SDK)
  std::string source = "goodput-fleetsim";
  std::string batch_id_prefix = "fleetsim/";
  int batch_samples = 2000;
  // Sends the figure in the form the framework reported it (MFU, TFLOP/s, FLOPs per step);
  // false: always as MFU.
  bool mfu_as_reported = true;
  std::string framework = "megatron-lm";
  absl::Duration reporter_initial_backoff = absl::Milliseconds(100);
  absl::Duration reporter_max_backoff = absl::Seconds(30);
  absl::Duration reporter_close_timeout = absl::Seconds(10);
  // Deadline of each call.
  absl::Duration rpc_timeout = absl::Seconds(30);
  // Calls answered UNAVAILABLE or RESOURCE_EXHAUSTED are retried this many times, pausing
  // retry_pause × the attempt (at most 2 s): batch ids and job keys make retries safe.
  int retries = 20;
  absl::Duration retry_pause = absl::Milliseconds(100);
  // True: EndJob as the simulator ends a job. False: collected for EndJobs(), to be sent once
  // the platform has caught up (hours of simulated time pass in seconds, and alerting opens
  // alerts for running jobs only, as it should live).
  bool end_at_job_end = false;
  // Jobs whose end is never reported (still running when looked at).
  std::set<std::string> still_running = {};
  // Changes a registration before it is sent (names with markup, labels).
  std::function<void(v1::RegisterJobRequest&)> customize_registration = {};
  // Called after each batch is stored, with the number of batches so far.
  std::function<void(int64_t)> after_batch = {};
  // A call that failed, in words (MFU reports that did not go: mfu_error()).
  std::function<void(const std::string&)> on_error = {};
};

class PlatformSink : public FleetSink {
 public:
  explicit PlatformSink(PlatformSinkOptions options) : options_(std::move(options)) {
    for (const auto& channel : options_.ingest) {
      jobs_.push_back(v1::JobService::NewStub(channel));
      ingest_.push_back(v1::IngestService::NewStub(channel));
    }
  }

  void OnJobStart(const JobTruth&) override { ++jobs_started_; }

  void OnSamples(const JobTruth& job, int64_t, int64_t,
                 const std::vector<GpuSample>& samples) override {
    if (!registered_.contains(job.job_id)) Register(job, samples);
    for (const GpuSample& s : samples) SampleToProto(s, job.gpu_model, batch_.add_samples());
    pushed_per_job_[job.job_id] += static_cast<int64_t>(samples.size());
    if (batch_.samples_size() >= options_.batch_samples) Flush();
  }

  void OnMfuReport(const JobTruth& job, const MfuReport& report) override {
    if (options_.mfu_endpoints.empty()) return;
    sdk::Reporter* reporter = ReporterFor(job);
    if (reporter == nullptr) return;
    MfuReport sent = report;
    if (!options_.mfu_as_reported) sent.form = "mfu";
    reporter->Report(SdkFigure(sent));
    ++mfu_reports_;
  }

  void OnJobEnd(const JobTruth& job) override {
    Flush();
    if (auto it = reporters_.find(job.job_id); it != reporters_.end()) {
      if (!it->second->Close(options_.reporter_close_timeout)) {
        MfuError(absl::StrCat("MFU reports of ", job.job_id, ": not all sent within ",
                              absl::FormatDuration(options_.reporter_close_timeout)));
      }
      const sdk::ReporterStats stats = it->second->Stats();
      const int64_t lost = stats.refused + stats.failed + stats.abandoned + stats.dropped;
      mfu_not_taken_ += lost;
      if (lost > 0) {
        MfuError(absl::StrCat("MFU reports of ", job.job_id, ": ", lost,
                              " not taken by the MFU service (see its log)"));
      }
      reporters_.erase(it);
    }
    if (!registered_.contains(job.job_id) || options_.still_running.contains(job.job_id)) return;
    ended_.emplace_back(job.job_id, job.end_s);
    if (options_.end_at_job_end) EndJobs();
  }

  // Sends the EndJob of every job the simulator ended since the last call.
  void EndJobs() {
    for (const auto& [job_id, end_s] : ended_) {
      v1::EndJobRequest request;
      request.mutable_key()->set_cluster(options_.cluster);
      request.mutable_key()->set_job_id(job_id);
      request.mutable_end_time()->set_seconds(end_s);
      request.set_final_state(v1::JOB_STATE_COMPLETED);
      grpc::Status status = Call([&](int client) {
        v1::EndJobResponse response;
        return jobs_[client]->EndJob(Context().get(), request, &response);
      });
      if (!status.ok()) Error("EndJob " + job_id, status);
    }
    ended_.clear();
  }

  // Sends the samples batched so far.
  void Flush() {
    if (batch_.samples_size() == 0) return;
    batch_.set_batch_id(absl::StrCat(options_.batch_id_prefix, batch_seq_));
    batch_.set_cluster(options_.cluster);
    batch_.set_source(options_.source);
    v1::PushSamplesResponse response;
    grpc::Status status = Call([&](int client) {
      response.Clear();
      auto ctx = Context();
      auto writer = ingest_[client]->PushSamples(ctx.get(), &response);
      writer->Write(batch_);
      writer->WritesDone();
      return writer->Finish();
    });
    if (status.ok()) {
      stored_ += response.stored_count();
      refused_ += response.refused_count();
      for (const v1::Refusal& r : response.refusals()) {
        if (refusal_examples_.size() < 3) refusal_examples_.push_back(r.ShortDebugString());
      }
    } else {
      Error("PushSamples", status);
      lost_ += batch_.samples_size();
    }
    ++batch_seq_;
    batch_.clear_samples();
    if (options_.after_batch) options_.after_batch(batch_seq_);
  }

  int64_t stored() const { return stored_; }
  int64_t refused() const { return refused_; }
  int64_t lost() const { return lost_; }
  int64_t errors() const { return errors_; }
  int64_t jobs_started() const { return jobs_started_; }
  int64_t mfu_reports() const { return mfu_reports_; }
  // Reports the MFU service refused or the SDK gave up on or dropped; the first MFU problem.
  int64_t mfu_not_taken() const { return mfu_not_taken_; }
  const std::string& mfu_error() const { return mfu_error_; }
  const std::vector<std::string>& refusal_examples() const { return refusal_examples_; }
  // GPU samples sent per job.
  const std::map<std::string, int64_t>& pushed_per_job() const { return pushed_per_job_; }

 private:
  std::unique_ptr<grpc::ClientContext> Context() const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
    if (!options_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + options_.token);
    return ctx;
  }

  // `call` on client batch mod replicas, retried while the platform is busy or restarting.
  grpc::Status Call(const std::function<grpc::Status(int)>& call) {
    const int client = static_cast<int>(batch_seq_ % static_cast<int64_t>(ingest_.size()));
    grpc::Status status;
    for (int attempt = 0;; ++attempt) {
      status = call(client);
      const bool busy = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                        status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
      if (!busy || attempt >= options_.retries) return status;
      absl::SleepFor(std::min(options_.retry_pause * (attempt + 1), absl::Seconds(2)));
    }
  }

  void Register(const JobTruth& job, const std::vector<GpuSample>& samples) {
    v1::RegisterJobRequest request = RegisterJobRequestFor(options_.cluster, job, samples);
    if (options_.customize_registration) options_.customize_registration(request);
    grpc::Status status = Call([&](int client) {
      v1::RegisterJobResponse response;
      return jobs_[client]->RegisterJob(Context().get(), request, &response);
    });
    if (!status.ok()) Error("RegisterJob " + job.job_id, status);
    registered_.insert(job.job_id);
  }

  sdk::Reporter* ReporterFor(const JobTruth& job) {
    if (auto it = reporters_.find(job.job_id); it != reporters_.end()) return it->second.get();
    const size_t target = static_cast<size_t>(job.index) % options_.mfu_endpoints.size();
    sdk::ReporterOptions reporter_options{.endpoint = options_.mfu_endpoints[target],
                                          .token = options_.token,
                                          .cluster = options_.cluster,
                                          .job_id = job.job_id,
                                          .framework = options_.framework,
                                          .flops_formula = "6N + attention",
                                          .initial_backoff = options_.reporter_initial_backoff,
                                          .max_backoff = options_.reporter_max_backoff};
    absl::StatusOr<std::unique_ptr<sdk::Reporter>> reporter =
        options_.mfu_channels.empty()
            ? sdk::Reporter::Create(std::move(reporter_options))
            : sdk::Reporter::Create(std::move(reporter_options), options_.mfu_channels[target]);
    if (!reporter.ok()) {
      MfuError(absl::StrCat("MFU reporter of ", job.job_id, ": ", reporter.status().message()));
      return nullptr;
    }
    return reporters_.emplace(job.job_id, *std::move(reporter)).first->second.get();
  }

  void Error(const std::string& what, const grpc::Status& status) {
    Error(absl::StrCat(what, ": ", status.error_message()));
  }
  void Error(const std::string& message) {
    ++errors_;
    if (options_.on_error) options_.on_error(message);
  }
  void MfuError(const std::string& message) {
    if (mfu_error_.empty()) mfu_error_ = message;
  }

  PlatformSinkOptions options_;
  std::vector<std::unique_ptr<v1::JobService::Stub>> jobs_;
  std::vector<std::unique_ptr<v1::IngestService::Stub>> ingest_;
  std::set<std::string> registered_;
  std::map<std::string, std::unique_ptr<sdk::Reporter>> reporters_;
  std::map<std::string, int64_t> pushed_per_job_;
  std::vector<std::pair<std::string, int64_t>> ended_;  // job id, end (s)
  std::vector<std::string> refusal_examples_;
  std::string mfu_error_;
  v1::PushSamplesRequest batch_;
  int64_t batch_seq_ = 0;
  int64_t stored_ = 0, refused_ = 0, lost_ = 0, errors_ = 0, jobs_started_ = 0, mfu_reports_ = 0,
          mfu_not_taken_ = 0;
};

}  // namespace goodput::sim
