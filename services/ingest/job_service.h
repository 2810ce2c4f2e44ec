// JobService: the job registry's RPCs, translated onto JobStore (job_store.h).
#pragma once

#include <cstdint>
#include <functional>

#include "goodput/v1/job.grpc.pb.h"
#include "services/core/gpu_catalog.h"
#include "services/ingest/identity_rules.h"
#include "services/ingest/job_checks.h"
#include "services/ingest/job_store.h"
#include "services/ingest/job_workers.h"

namespace goodput::ingest {

// Served with the callback API (no thread per call); each callback method runs the
// synchronous-signature method of the same name, which in-process callers (jobs_http.h) use.
// With `workers`, every call runs on those threads (job_workers.h), never on gRPC's callback
// threads, which PushSamples needs; a call beyond their pending bound is RESOURCE_EXHAUSTED.
class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  // `store` and `catalog` (may be null: any GPU model) must outlive the service;
  // `now_unix_ms` is the clock. Requests are checked with job_checks.h before the store.
  // Allocation hosts are stored as CanonicalHost names under `identity`, as samples are.
  // `limits` bound what a job and a request may carry (job_checks.h). `workers` (may be
  // null: calls run on the caller's thread) must outlive the service.
  JobServiceImpl(JobStore* store, std::function<int64_t()> now_unix_ms,
                 const core::GpuCatalog* catalog = nullptr, IdentityRules identity = {},
                 JobLimits limits = {}, JobWorkers* workers = nullptr)
      : store_(store),
        now_unix_ms_(std::move(now_unix_ms)),
        catalog_(catalog),
        identity_(std::move(identity)),
        limits_(limits),
        workers_(workers) {}

  // Synchronous signatures, for in-process callers (jobs_http.h): `context` carries no caller.
  grpc::Status RegisterJob(grpc::ServerContext* context, const v1::RegisterJobRequest* request,
                      v1::RegisterJobResponse* response) override {
    return RunAndWait([&] { return DoRegisterJob(context, request, response); });
  }
  grpc::Status UpdateJob(grpc::ServerContext* context, const v1::UpdateJobRequest* request,
                      v1::UpdateJobResponse* response) override {
    return RunAndWait([&] { return DoUpdateJob(context, request, response); });
  }
  grpc::Status EndJob(grpc::ServerContext* context, const v1::EndJobRequest* request,
                      v1::EndJobResponse* response) override {
    return RunAndWait([&] { return DoEndJob(context, request, response); });
  }
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::GetJobResponse* response) override {
    return RunAndWait([&] { return DoGetJob(context, request, response); });
  }
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                      v1::ListJobsResponse* response) override {
    return RunAndWait([&] { return DoListJobs(context, request, response); });
  }

  // JobService (callback API): the caller's token scope comes from the call's context.
  grpc::ServerUnaryReactor* RegisterJob(grpc::CallbackServerContext* context,
                                     const v1::RegisterJobRequest* request,
                                     v1::RegisterJobResponse* response) override {
    return Offload(context, [=, this] { return DoRegisterJob(context, request, response); });
  }
  grpc::ServerUnaryReactor* UpdateJob(grpc::CallbackServerContext* context,
                                     const v1::UpdateJobRequest* request,
                                     v1::UpdateJobResponse* response) override {
    return Offload(context, [=, this] { return DoUpdateJob(context, request, response); });
  }
  grpc::ServerUnaryReactor* EndJob(grpc::CallbackServerContext* context,
                                     const v1::EndJobRequest* request,
                                     v1::EndJobResponse* response) override {
    return Offload(context, [=, this] { return DoEndJob(context, request, response); });
  }
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                     const v1::GetJobRequest* request,
                                     v1::GetJobResponse* response) override {
    return Offload(context, [=, this] { return DoGetJob(context, request, response); });
  }
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override {
    return Offload(context, [=, this] { return DoListJobs(context, request, response); });
  }

 private:
  // The RPCs; `context` may be null (no caller to check).
  grpc::Status DoRegisterJob(grpc::ServerContextBase* context, const v1::RegisterJobRequest* request,
                      v1::RegisterJobResponse* response);
  grpc::Status DoUpdateJob(grpc::ServerContextBase* context, const v1::UpdateJobRequest* request,
                      v1::UpdateJobResponse* response);
  grpc::Status DoEndJob(grpc::ServerContextBase* context, const v1::EndJobRequest* request,
                      v1::EndJobResponse* response);
  grpc::Status DoGetJob(grpc::ServerContextBase* context, const v1::GetJobRequest* request,
                      v1::GetJobResponse* response);
  grpc::Status DoListJobs(grpc::ServerContextBase* context, const v1::ListJobsRequest* request,
                      v1::ListJobsResponse* response);
  // Runs `call` on a worker (inline without workers) and finishes the call with its status;
  // RESOURCE_EXHAUSTED at once when the workers' pending bound is reached.
  grpc::ServerUnaryReactor* Offload(grpc::CallbackServerContext* context,
                                    std::function<grpc::Status()> call);
  // Runs `call` on a worker and waits for it (inline without workers).
  grpc::Status RunAndWait(const std::function<grpc::Status()>& call);

  // `job` with its allocation hosts canonical.
  v1::Job CanonicalHosts(const v1::Job& job) const;

  JobStore* store_;
  std::function<int64_t()> now_unix_ms_;
  const core::GpuCatalog* catalog_;
  IdentityRules identity_;
  JobLimits limits_;
  JobWorkers* workers_;
};

}  // namespace goodput::ingest
