// Tenancy: holding a scoped token to its scope in every RPC. Two tables say who may call
// what and on which data: the roles each RPC admits (its `goodput.v1.allowed_roles` method
// option in the API) and, here, how each RPC's request names what it acts on (kScopeTable,
// keyed by method). service_main.cc applies both to the AuthPolicy. The policy refuses what a
// scoped token cannot reach at all before the call reaches a service (kFleet, a method missing
// from the table, kCluster for a user- or team-limited token); each handler then checks its
// request with the call's CallScope:
//
//   kCluster    scope.CheckCluster(request.cluster())
//   kJob        scope.CheckJob(key.cluster(), key.job_id())   // cluster, then the owner
//   kFiltered   scope.NarrowFilters("ListJobs", &cluster, &user, &team)
//               or, for requests that name a job rather than a user: NarrowToJob
//
// A job's owner (user and team) is read from the jobs table of the shared PostgreSQL
// (JobOwners) and cached for a few seconds; a service that changes an owner forgets it
// (JobOwners::Forget). With auth off every call is unrestricted.
//
//   platform::CallScope scope = platform::CallScope::Of(context);
//   if (absl::Status s = scope.CheckJob(req.job().cluster(), req.job().job_id()); !s.ok()) ...
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "services/platform/auth.h"
#include "services/platform/pg_pool.h"

namespace goodput::platform {

// The scope of every RPC of every service, by full method name ("/goodput.v1.JobService/
// RegisterJob"), and of the HTTP routes that take data. A new RPC needs its line here: until
// then every scoped token is refused it (and the scope matrix test fails).
struct ScopeTableEntry {
  absl::string_view method;
  ScopeKind scope;
};
extern const ScopeTableEntry kScopeTable[];
extern const size_t kScopeTableSize;
// The scope `method` declares in kScopeTable; kUndeclared when it is not there.
ScopeKind DeclaredScope(absl::string_view method);

// Who a job belongs to, as registered.
struct JobOwner {
  std::string user;
  std::string team;
};

// Owners of registered jobs, read from the jobs table (`user_name`, `team`) by key and cached
// for `ttl`. Thread-safe.
class JobOwners {
 public:
  explicit JobOwners(PgPool* pg, absl::Duration ttl = absl::Seconds(5));

  // The owner of job `cluster`/`job_id`; nullopt for a job not registered (never cached).
  absl::StatusOr<std::optional<JobOwner>> Find(const std::string& cluster,
                                               const std::string& job_id);
  // Drops the cached owner of a job whose owner may have changed.
  void Forget(const std::string& cluster, const std::string& job_id);

 private:
  struct Entry {
    JobOwner owner;
    absl::Time expires;
  };
  PgPool* pg_;
  absl::Duration ttl_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> cache_ ABSL_GUARDED_BY(mu_);
};

// The process's owner lookup, used by every CallScope (RunServiceMain installs one when auth
// is on and PostgreSQL is configured). Null: none.
void SetJobOwners(std::shared_ptr<JobOwners> owners);
std::shared_ptr<JobOwners> GetJobOwners();

// What one call may reach.
class CallScope {
 public:
  // The scope of the call `context` (null: an in-process call with no caller, unrestricted):
  // its token's identity, or the ScopedCaller of this thread for an in-process call.
  static CallScope Of(const grpc::ServerContextBase* context);
  // An explicit caller (nullopt: unrestricted).
  explicit CallScope(std::optional<Identity> caller) : caller_(std::move(caller)) {}

  // Nullopt when the call is unrestricted (auth off, or an in-process call without a caller).
  const std::optional<Identity>& caller() const { return caller_; }
  bool restricted() const { return unknown_token_ || (caller_ && caller_->Restricted()); }
  bool owner_scoped() const { return caller_ && caller_->OwnerScoped(); }

  // kCluster: OK when the call may act on `cluster`.
  absl::Status CheckCluster(absl::string_view cluster) const;
  // kJob: OK when the call may act on job `cluster`/`job_id`: its cluster is within the
  // token's clusters and, for a token limited to a user or team, the registered job is that
  // user's or team's. A job that is not registered is let through when `unregistered_ok`
  // (the service then answers NOT_FOUND, or registers it), else refused to a user- or
  // team-limited token (nobody owns it yet).
  absl::Status CheckJob(const std::string& cluster, const std::string& job_id,
                        bool unregistered_ok = true) const;
  // kFiltered with cluster/user/team filters: Identity::NarrowFilters of the caller.
  absl::Status NarrowFilters(absl::string_view what, std::string* cluster, std::string* user,
                             std::string* team) const;
  // kFiltered for requests that can name a cluster and a job but no user (alerts, MFU
  // reports): a named job is checked as CheckJob does; without one, a user- or team-limited
  // token is refused (it names one of its jobs) and a cluster-limited one narrowed to its
  // cluster (`cluster` null: the request has no cluster filter, so it must name a job).
  absl::Status NarrowToJob(absl::string_view what, std::string* cluster,
                           const std::string& job_cluster, const std::string& job_id) const;

 private:
  absl::Status Unknown() const;

  std::optional<Identity> caller_;
  bool unknown_token_ = false;  // the call's token is no longer known (the file changed)
};

}  // namespace goodput::platform
