// JobService: the job registry's RPCs, translated onto JobStore (job_store.h).
#pragma once

#include <cstdint>
#include <functional>

#include "goodput/v1/job.grpc.pb.h"
#include "services/core/gpu_catalog.h"
#include "services/ingest/identity_rules.h"
#include "services/ingest/job_checks.h"
#include "services/ingest/job_store.h"

namespace goodput::ingest {

// Served with the callback API (no thread per call); each callback method runs the
// synchronous-signature method of the same name, which in-process callers (jobs_http.h) use.
class JobServiceImpl final : public v1::JobService::CallbackService {
 public:
  // `store` and `catalog` (may be null: any GPU model) must outlive the service;
  // `now_unix_ms` is the clock. Requests are checked with job_checks.h before the store.
  // Allocation hosts are stored as CanonicalHost names under `identity`, as samples are.
  // `limits` bound what a job and a request may carry (job_checks.h).
  JobServiceImpl(JobStore* store, std::function<int64_t()> now_unix_ms,
                 const core::GpuCatalog* catalog = nullptr, IdentityRules identity = {},
                 JobLimits limits = {})
      : store_(store),
        now_unix_ms_(std::move(now_unix_ms)),
        catalog_(catalog),
        identity_(std::move(identity)),
        limits_(limits) {}

  // Synchronous signatures, for in-process callers (jobs_http.h): `context` carries no caller.
  grpc::Status RegisterJob(grpc::ServerContext* context, const v1::RegisterJobRequest* request,
                      v1::RegisterJobResponse* response) override {
    return DoRegisterJob(context, request, response);
  }
  grpc::Status UpdateJob(grpc::ServerContext* context, const v1::UpdateJobRequest* request,
                      v1::UpdateJobResponse* response) override {
    return DoUpdateJob(context, request, response);
  }
  grpc::Status EndJob(grpc::ServerContext* context, const v1::EndJobRequest* request,
                      v1::EndJobResponse* response) override {
    return DoEndJob(context, request, response);
  }
  grpc::Status GetJob(grpc::ServerContext* context, const v1::GetJobRequest* request,
                      v1::GetJobResponse* response) override {
    return DoGetJob(context, request, response);
  }
  grpc::Status ListJobs(grpc::ServerContext* context, const v1::ListJobsRequest* request,
                      v1::ListJobsResponse* response) override {
    return DoListJobs(context, request, response);
  }

  // JobService (callback API): the caller's token scope comes from the call's context.
  grpc::ServerUnaryReactor* RegisterJob(grpc::CallbackServerContext* context,
                                     const v1::RegisterJobRequest* request,
                                     v1::RegisterJobResponse* response) override {
    return Done(context, DoRegisterJob(context, request, response));
  }
  grpc::ServerUnaryReactor* UpdateJob(grpc::CallbackServerContext* context,
                                     const v1::UpdateJobRequest* request,
                                     v1::UpdateJobResponse* response) override {
    return Done(context, DoUpdateJob(context, request, response));
  }
  grpc::ServerUnaryReactor* EndJob(grpc::CallbackServerContext* context,
                                     const v1::EndJobRequest* request,
                                     v1::EndJobResponse* response) override {
    return Done(context, DoEndJob(context, request, response));
  }
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                     const v1::GetJobRequest* request,
                                     v1::GetJobResponse* response) override {
    return Done(context, DoGetJob(context, request, response));
  }
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override {
    return Done(context, DoListJobs(context, request, response));
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
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context,
                                        const grpc::Status& status) {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }

  // `job` with its allocation hosts canonical.
  v1::Job CanonicalHosts(const v1::Job& job) const;

  JobStore* store_;
  std::function<int64_t()> now_unix_ms_;
  const core::GpuCatalog* catalog_;
  IdentityRules identity_;
  JobLimits limits_;
};

}  // namespace goodput::ingest
