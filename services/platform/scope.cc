#include "services/platform/scope.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace goodput::platform {
namespace {

// Beyond this many cached owners the cache starts over (a bound, not an eviction policy: the
// entries live seconds).
constexpr size_t kMaxCachedOwners = 100000;

absl::Mutex g_owners_mu(absl::kConstInit);
std::shared_ptr<JobOwners>* g_owners ABSL_GUARDED_BY(g_owners_mu) = nullptr;

std::string CacheKey(const std::string& cluster, const std::string& job_id) {
  return absl::StrCat(cluster.size(), ":", cluster, job_id);
}

}  // namespace

// clang-format off
const ScopeTableEntry kScopeTable[] = {
    // ingest: JobService (and its HTTP form, POST /api/v1/jobs:register and :end)
    {"/goodput.v1.JobService/RegisterJob", ScopeKind::kJob},
    {"/goodput.v1.JobService/UpdateJob", ScopeKind::kJob},
    {"/goodput.v1.JobService/EndJob", ScopeKind::kJob},
    {"/goodput.v1.JobService/GetJob", ScopeKind::kJob},
    {"/goodput.v1.JobService/ListJobs", ScopeKind::kFiltered},
    // ingest: IngestService (and POST /api/v1/write)
    {"/goodput.v1.IngestService/PushSamples", ScopeKind::kCluster},
    {"/goodput.v1.IngestService/PushExposition", ScopeKind::kCluster},
    {"/goodput.v1.IngestService/ListScrapeTargets", ScopeKind::kFleet},
    {"POST /api/v1/write", ScopeKind::kCluster},
    // ofu: OfuService
    {"/goodput.v1.OfuService/GetJobOfu", ScopeKind::kJob},
    {"/goodput.v1.OfuService/StreamJobOfu", ScopeKind::kJob},
    {"/goodput.v1.OfuService/GetLatestOfu", ScopeKind::kJob},
    {"/goodput.v1.OfuService/GetJobSummary", ScopeKind::kJob},
    {"/goodput.v1.OfuService/GetFleetSummary", ScopeKind::kFiltered},
    {"/goodput.v1.OfuService/ListFaultEvents", ScopeKind::kFiltered},
    {"/goodput.v1.OfuService/ListGpuSpecs", ScopeKind::kNone},
    {"/goodput.v1.OfuService/EstimateGemmOverhead", ScopeKind::kNone},
    // job-end reports: ReportService
    {"/goodput.v1.ReportService/GetJobReport", ScopeKind::kJob},
    {"/goodput.v1.ReportService/ListJobReports", ScopeKind::kFiltered},
    // mfu: MfuService
    {"/goodput.v1.MfuService/ReportMfu", ScopeKind::kJob},
    {"/goodput.v1.MfuService/StreamMfuReports", ScopeKind::kJob},
    {"/goodput.v1.MfuService/ListMfuReports", ScopeKind::kFiltered},
    {"/goodput.v1.MfuService/GetReconciliation", ScopeKind::kJob},
    {"/goodput.v1.MfuService/GetFleetReport", ScopeKind::kFleet},
    {"/goodput.v1.MfuService/PushOfuWindows", ScopeKind::kFleet},
    // alerting: AlertService
    {"/goodput.v1.AlertService/ListAlerts", ScopeKind::kFiltered},
    {"/goodput.v1.AlertService/GetAlert", ScopeKind::kJob},
    {"/goodput.v1.AlertService/AckAlert", ScopeKind::kJob},
    {"/goodput.v1.AlertService/CreateSilence", ScopeKind::kFleet},
    {"/goodput.v1.AlertService/DeleteSilence", ScopeKind::kFleet},
    {"/goodput.v1.AlertService/ListSilences", ScopeKind::kFleet},
    {"/goodput.v1.AlertService/SubscribeAlerts", ScopeKind::kFiltered},
    {"/goodput.v1.AlertService/PushWindows", ScopeKind::kFleet},
    {"/goodput.v1.AlertService/PushDivergenceEvents", ScopeKind::kFleet},
    {"/goodput.v1.AlertService/ListPolicyActions", ScopeKind::kFleet},
    {"/goodput.v1.AlertService/GetPolicyAction", ScopeKind::kFleet},
    {"/goodput.v1.AlertService/UndoPolicyAction", ScopeKind::kFleet},
};
// clang-format on
const size_t kScopeTableSize = sizeof(kScopeTable) / sizeof(kScopeTable[0]);

ScopeKind DeclaredScope(absl::string_view method) {
  for (const ScopeTableEntry& entry : kScopeTable) {
    if (entry.method == method) return entry.scope;
  }
  return ScopeKind::kUndeclared;
}

JobOwners::JobOwners(PgPool* pg, absl::Duration ttl) : pg_(pg), ttl_(ttl) {}

absl::StatusOr<std::optional<JobOwner>> JobOwners::Find(const std::string& cluster,
                                                        const std::string& job_id) {
  const std::string key = CacheKey(cluster, job_id);
  const absl::Time now = absl::Now();
  {
    absl::MutexLock lock(&mu_);
    auto it = cache_.find(key);
    if (it != cache_.end() && it->second.expires > now) return it->second.owner;
  }
  absl::StatusOr<std::optional<JobOwner>> found = pg_->RunTransactionFor<std::optional<JobOwner>>(
      [&](pqxx::work& txn) -> absl::StatusOr<std::optional<JobOwner>> {
        pqxx::result rows = txn.exec_params(
            "SELECT user_name, team FROM jobs WHERE cluster = $1 AND job_id = $2", cluster, job_id);
        if (rows.empty()) return std::optional<JobOwner>();
        return std::optional<JobOwner>(
            JobOwner{rows[0][0].as<std::string>(), rows[0][1].as<std::string>()});
      });
  if (!found.ok()) {
    return absl::Status(found.status().code(),
                        absl::StrCat("the owner of job ", cluster, "/", job_id,
                                     " could not be read: ", found.status().message()));
  }
  if (found->has_value()) {
    absl::MutexLock lock(&mu_);
    if (cache_.size() >= kMaxCachedOwners) cache_.clear();
    cache_[key] = Entry{**found, now + ttl_};
  }
  return found;
}

void JobOwners::Forget(const std::string& cluster, const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  cache_.erase(CacheKey(cluster, job_id));
}

void SetJobOwners(std::shared_ptr<JobOwners> owners) {
  absl::MutexLock lock(&g_owners_mu);
  if (g_owners == nullptr) g_owners = new std::shared_ptr<JobOwners>();
  *g_owners = std::move(owners);
}

std::shared_ptr<JobOwners> GetJobOwners() {
  absl::MutexLock lock(&g_owners_mu);
  return g_owners == nullptr ? nullptr : *g_owners;
}

CallScope CallScope::Of(const grpc::ServerContextBase* context) {
  if (context == nullptr) return CallScope(std::nullopt);
  CallCaller caller = LookupCallCaller(*context);
  CallScope scope(caller.identity);
  scope.unknown_token_ = caller.has_token && !caller.identity.has_value();
  return scope;
}

absl::Status CallScope::Unknown() const {
  return absl::UnauthenticatedError("the bearer token is not a known token");
}

absl::Status CallScope::CheckCluster(absl::string_view cluster) const {
  if (unknown_token_) return Unknown();
  if (!caller_.has_value()) return absl::OkStatus();
  return caller_->CheckCluster(cluster);
}

absl::Status CallScope::CheckJob(const std::string& cluster, const std::string& job_id,
                                 bool unregistered_ok) const {
  if (unknown_token_) return Unknown();
  if (!restricted()) return absl::OkStatus();
  if (cluster.empty() || job_id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job: cluster=\"", cluster, "\" and job_id=\"",
                                                   job_id, "\" must both be set; ",
                                                   caller_->Describe(), " acts on named jobs"));
  }
  if (absl::Status s = CheckCluster(cluster); !s.ok()) return s;
  if (!owner_scoped()) return absl::OkStatus();
  std::shared_ptr<JobOwners> owners = GetJobOwners();
  if (owners == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(caller_->Describe(), " needs the job registry to check job ", cluster, "/",
                     job_id, ", and this process has none"));
  }
  absl::StatusOr<std::optional<JobOwner>> owner = owners->Find(cluster, job_id);
  if (!owner.ok()) return owner.status();
  if (!owner->has_value()) {
    if (unregistered_ok) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat(caller_->Describe(),
                                                    " acts on its own registered jobs only; job ",
                                                    cluster, "/", job_id, " is not registered"));
  }
  return caller_->CheckJob(cluster, job_id, (*owner)->user, (*owner)->team);
}

absl::Status CallScope::NarrowFilters(absl::string_view what, std::string* cluster,
                                      std::string* user, std::string* team) const {
  if (unknown_token_) return Unknown();
  if (!caller_.has_value()) return absl::OkStatus();
  return caller_->NarrowFilters(what, cluster, user, team);
}

absl::Status CallScope::NarrowToJob(absl::string_view what, std::string* cluster,
                                    const std::string& job_cluster,
                                    const std::string& job_id) const {
  if (unknown_token_) return Unknown();
  if (!restricted()) return absl::OkStatus();
  if (!job_id.empty()) {
    if (cluster != nullptr && !cluster->empty() && *cluster != job_cluster) {
      if (absl::Status s = CheckCluster(*cluster); !s.ok()) return s;
    }
    return CheckJob(job_cluster, job_id);
  }
  if (owner_scoped()) {
    return absl::PermissionDeniedError(absl::StrCat(what, " without a job reads every user's; ",
                                                    caller_->Describe(),
                                                    " names one of its jobs (job)"));
  }
  if (cluster == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat(what, " without a job reads every cluster; ",
                                                    caller_->Describe(),
                                                    " names one of its jobs (job)"));
  }
  return caller_->NarrowFilters(what, cluster, nullptr, nullptr);
}

}  // namespace goodput::platform
