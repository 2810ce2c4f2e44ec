#include "services/ingest/job_service.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "services/ingest/job_checks.h"
#include "services/platform/auth.h"
#include "services/platform/scope.h"
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
  // The HTTP job endpoints name their caller on this thread (platform::ScopedCaller): the
  // worker must check the call against the same caller.
  std::optional<platform::Identity> caller = platform::ScopedCaller::Current();
  if (!workers_->TrySubmit([&] {
        std::optional<platform::ScopedCaller> scoped;
        if (caller.has_value()) scoped.emplace(*caller);
        status = call();
        done.Notify();
      })) {
    return Saturated(*workers_);
  }
  done.WaitForNotification();
  return status;
}

namespace {

// A user- or team-limited caller registers jobs of its own user and team only: an empty
// owner field takes the caller's, another is refused naming the scope.
absl::Status OwnJob(const platform::CallScope& scope, v1::Job* job) {
  if (!scope.owner_scoped()) return absl::OkStatus();
  const platform::Identity& caller = *scope.caller();
  auto own = [&](const std::optional<std::string>& mine, std::string* field,
                 absl::string_view name) -> absl::Status {
    if (!mine.has_value()) return absl::OkStatus();
    if (field->empty()) *field = *mine;
    if (*field == *mine) return absl::OkStatus();
    return absl::PermissionDeniedError(
        absl::StrCat(caller.Describe(), " registers jobs of its own ", name, " only; job.", name,
                     "=\"", *field, "\" is outside its scope"));
  };
  if (absl::Status s = own(caller.UserScope(), job->mutable_user(), "user"); !s.ok()) return s;
  return own(caller.TeamScope(), job->mutable_team(), "team");
}

// A user- or team-limited caller may not give a job away: an update of `user` or `team` must
// keep the value the job is registered with.
absl::Status KeepsOwner(const platform::CallScope& scope, const v1::Job& job,
                        const std::vector<std::string>& paths) {
  if (!scope.owner_scoped()) return absl::OkStatus();
  bool touches_owner = false;
  for (const std::string& path : paths) touches_owner |= path == "user" || path == "team";
  if (!touches_owner) return absl::OkStatus();
  std::shared_ptr<platform::JobOwners> owners = platform::GetJobOwners();
  if (owners == nullptr) return absl::FailedPreconditionError("no job registry to check owners");
  // Read afresh: the owner decides.
  owners->Forget(job.key().cluster(), job.key().job_id());
  absl::StatusOr<std::optional<platform::JobOwner>> owner =
      owners->Find(job.key().cluster(), job.key().job_id());
  if (!owner.ok()) return owner.status();
  if (!owner->has_value()) return absl::OkStatus();  // the store answers NOT_FOUND
  for (const std::string& path : paths) {
    const bool user = path == "user";
    if (!user && path != "team") continue;
    const std::string& now = user ? (*owner)->user : (*owner)->team;
    const std::string& wanted = user ? job.user() : job.team();
    if (wanted == now) continue;
    return absl::PermissionDeniedError(
        absl::StrCat(scope.caller()->Describe(), " may not change the owner of job ",
                     job.key().cluster(), "/", job.key().job_id(), ": update_mask path \"", path,
                     "\" would set ", path, " to \"", wanted, "\""));
  }
  return absl::OkStatus();
}

void ForgetOwner(const v1::JobKey& key) {
  if (std::shared_ptr<platform::JobOwners> owners = platform::GetJobOwners()) {
    owners->Forget(key.cluster(), key.job_id());
  }
}

}  // namespace

grpc::Status JobServiceImpl::DoRegisterJob(grpc::ServerContextBase* context,
                                         const v1::RegisterJobRequest* request,
                                         v1::RegisterJobResponse* response) {
  if (absl::Status s = CheckJobRequestSize(*request, "RegisterJob", limits_); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s = CheckJob(request->job(), catalog_, limits_); !s.ok()) return ToGrpcStatus(s);
  const platform::CallScope scope = platform::CallScope::Of(context);
  const v1::JobKey& key = request->job().key();
  if (absl::Status s = scope.CheckJob(key.cluster(), key.job_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  v1::Job job = CanonicalHosts(request->job());
  if (absl::Status s = OwnJob(scope, &job); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<RegisterJobResult> result = store_->Register(job, now_unix_ms_());
  ForgetOwner(key);
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
  const platform::CallScope scope = platform::CallScope::Of(context);
  const v1::JobKey& key = request->job().key();
  if (absl::Status s = scope.CheckJob(key.cluster(), key.job_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s = KeepsOwner(scope, request->job(), paths); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<v1::Job> job =
      store_->Update(CanonicalHosts(request->job()), paths, now_unix_ms_());
  ForgetOwner(key);
  if (!job.ok()) return ToGrpcStatus(job.status());
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::DoEndJob(grpc::ServerContextBase* context, const v1::EndJobRequest* request,
                                    v1::EndJobResponse* response) {
  if (absl::Status s = CheckJobEnd(*request); !s.ok()) return ToGrpcStatus(s);
  if (absl::Status s = platform::CallScope::Of(context).CheckJob(request->key().cluster(),
                                                                 request->key().job_id());
      !s.ok()) {
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
  const platform::CallScope scope = platform::CallScope::Of(context);
  if (absl::Status s = scope.CheckCluster(request->key().cluster()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<v1::Job> job = store_->Get(request->key());
  if (!job.ok()) return ToGrpcStatus(job.status());
  // The job just read decides (no cached owner).
  if (scope.caller().has_value()) {
    if (absl::Status s = scope.caller()->CheckJob(job->key().cluster(), job->key().job_id(),
                                                  job->user(), job->team());
        !s.ok()) {
      return ToGrpcStatus(s);
    }
  }
  *response->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobServiceImpl::DoListJobs(grpc::ServerContextBase* context,
                                      const v1::ListJobsRequest* request,
                                      v1::ListJobsResponse* response) {
  // A scoped token lists the jobs of its cluster, user and team only.
  v1::ListJobsRequest scoped = *request;
  if (absl::Status s = platform::CallScope::Of(context).NarrowFilters(
          "ListJobs", scoped.mutable_cluster(), scoped.mutable_user(), scoped.mutable_team());
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<ListJobsResult> result = store_->List(scoped);
  if (!result.ok()) return ToGrpcStatus(result.status());
  for (v1::Job& job : result->jobs) *response->add_jobs() = std::move(job);
  response->set_next_page_token(result->next_page_token);
  return grpc::Status::OK;
}

}  // namespace goodput::ingest
