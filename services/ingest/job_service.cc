#include "services/ingest/job_service.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "services/ingest/job_checks.h"
#include "services/platform/auth.h"
#include "services/platform/status_convert.h"

namespace goodput::ingest {

using platform::ToGrpcStatus;

v1::Job JobServiceImpl::CanonicalHosts(const v1::Job& job) const {
  v1::Job out = job;
  for (v1::GpuAllocation& a : *out.mutable_allocations()) {
    a.mutable_gpu()->set_host(CanonicalHost(a.gpu().host(), identity_));
  }
  return out;
}

namespace {

grpc::Status Saturated(const JobWorkers& workers) {
  return grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      absl::StrCat("JobService is busy: ", workers.max_pending(),
                   " calls are queued or running (ingest.jobs.max_pending); retry with backoff"));
}

}  // namespace

grpc::ServerUnaryReactor* JobServiceImpl::Offload(grpc::CallbackServerContext* context,
                                                  std::function<grpc::Status()> call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (workers_ == nullptr) {
    reactor->Finish(call());
  } else if (!workers_->TrySubmit([reactor, call = std::move(call)] { reactor->Finish(call()); })) {
    reactor->Finish(Saturated(*workers_));
  }
  return reactor;
}

grpc::Status JobServiceImpl::RunAndWait(const std::function<grpc::Status()>& call) {
  if (workers_ == nullptr) return call();
  grpc::Status status;
  absl::Notification done;
  if (!workers_->TrySubmit([&] {
        status = call();
        done.Notify();
      })) {
    return Saturated(*workers_);
  }
  done.WaitForNotification();
  return status;
}

namespace {

// OK when the caller may see `job`: a token limited to a user sees only that user's jobs.
// In-process callers (jobs_http.h) pass no context, or one without a caller: they check the
// caller's scope themselves.
absl::Status CheckCluster(const grpc::ServerContextBase* context, const std::string& cluster) {
  return context == nullptr ? absl::OkStatus() : platform::CheckCallCluster(*context, cluster);
}

absl::Status CheckUserScope(const grpc::ServerContextBase* context, const v1::Job& job) {
  if (context == nullptr) return absl::OkStatus();
  std::optional<platform::Identity> caller = platform::CallIdentity(*context);
  if (!caller.has_value()) return absl::OkStatus();
  std::optional<std::string> user = caller->UserScope();
  if (!user.has_value() || job.user() == *user) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("the ", platform::RoleName(caller->role), " token of user ", *user,
                   " sees only that user's jobs; job ", job.key().cluster(), "/",
                   job.key().job_id(), " is outside its scope"));
}

}  // namespace

grpc::Status JobServiceImpl::DoRegisterJob(grpc::ServerContextBase* context,
                                         const v1::RegisterJobRequest* request,
                                         v1::RegisterJobResponse* response) {
  if (absl::Status s = CheckJobRequestSize(*request, "RegisterJob", limits_); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s = CheckJob(request->job(), catalog_, limits_); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = CheckCluster(context, request->job().key().cluster());
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<RegisterJobResult> result =
      store_->Register(CanonicalHosts(request->job()), now_unix_ms_());
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response->mutable_job() = std::move(result->job);
  response->set_created(result->created);
  response->set_attached_sample_count(result->attached_sample_count);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::DoUpdateJob(grpc::ServerContextBase* context,
                                       const v1::UpdateJobRequest* request,
                                       v1::UpdateJobResponse* response) {
  std::vector<std::string> paths(request->update_mask().paths().begin(),
                                 request->update_mask().paths().end());
  if (absl::Status s = CheckJobRequestSize(*request, "UpdateJob", limits_); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s = CheckJob(request->job(), catalog_, limits_); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = CheckCluster(context, request->job().key().cluster());
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<v1::Job> job =
      store_->Update(CanonicalHosts(request->job()), paths, now_unix_ms_());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::DoEndJob(grpc::ServerContextBase* context, const v1::EndJobRequest* request,
                                    v1::EndJobResponse* response) {
  if (absl::Status s = CheckJobEnd(*request); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = CheckCluster(context, request->key().cluster()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  std::optional<int64_t> end_ms;
  if (request->has_end_time()) {
    end_ms = request->end_time().seconds() * 1000 + request->end_time().nanos() / 1000000;
  }
  absl::StatusOr<v1::Job> job =
      store_->End(request->key(), end_ms, request->final_state(), now_unix_ms_());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::DoGetJob(grpc::ServerContextBase* context, const v1::GetJobRequest* request,
                                    v1::GetJobResponse* response) {
  if (absl::Status s = CheckJobKey(request->key(), "key"); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<v1::Job> job = store_->Get(request->key());
  if (!job.ok()) return ToGrpcStatus(job.status());
  if (absl::Status s = CheckUserScope(context, *job); !s.ok()) return ToGrpcStatus(s);
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::DoListJobs(grpc::ServerContextBase* context,
                                      const v1::ListJobsRequest* request,
                                      v1::ListJobsResponse* response) {
  // A token limited to a user lists that user's jobs only.
  v1::ListJobsRequest scoped = *request;
  if (std::optional<platform::Identity> caller =
          context == nullptr ? std::nullopt : platform::CallIdentity(*context)) {
    if (std::optional<std::string> user = caller->UserScope()) {
      if (!scoped.user().empty() && scoped.user() != *user) {
        return ToGrpcStatus(absl::PermissionDeniedError(absl::StrCat(
            "the ", platform::RoleName(caller->role), " token of user ", *user,
            " lists only that user's jobs; user \"", scoped.user(), "\" is outside its scope")));
      }
      scoped.set_user(*user);
    }
  }
  absl::StatusOr<ListJobsResult> result = store_->List(scoped);
  if (!result.ok()) return ToGrpcStatus(result.status());
  for (v1::Job& job : result->jobs) *response->add_jobs() = std::move(job);
  response->set_next_page_token(result->next_page_token);
  return grpc::Status::OK;
}

}  // namespace goodput::ingest
