#include "services/platform/auth.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpc/grpc_security.h"
#include "grpcpp/security/auth_context.h"
#include "services/platform/logging.h"
#include "services/platform/metrics.h"

namespace goodput::platform {
namespace {

// The policy of the process's authenticating server, which CallIdentity consults. The auth
// context cannot carry a call's identity: it belongs to the connection, which calls with
// different tokens share.
absl::Mutex g_call_policy_mu(absl::kConstInit);
std::shared_ptr<const AuthPolicy>* g_call_policy ABSL_GUARDED_BY(g_call_policy_mu) = nullptr;

// The caller of the in-process calls this thread makes (ScopedCaller).
thread_local std::optional<Identity> t_in_process_caller;

constexpr absl::string_view kOpenServices[] = {
    "/grpc.health.v1.Health/",
    "/grpc.reflection.v1alpha.ServerReflection/",
    "/grpc.reflection.v1.ServerReflection/",
};

// Equal iff same length and bytes; the time taken depends only on the lengths.
bool ConstantTimeEquals(absl::string_view secret, absl::string_view candidate) {
  volatile unsigned char diff = secret.size() == candidate.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    unsigned char c = i < candidate.size() ? static_cast<unsigned char>(candidate[i]) : 0;
    diff = diff | (static_cast<unsigned char>(secret[i]) ^ c);
  }
  return diff == 0;
}

std::string ServiceOf(absl::string_view method) {
  // "/package.Service/Method" -> "package.Service"
  if (!method.empty() && method.front() == '/') method.remove_prefix(1);
  size_t slash = method.find('/');
  return std::string(slash == absl::string_view::npos ? method : method.substr(0, slash));
}

std::string RoleList(const std::vector<Role>& roles) {
  std::vector<absl::string_view> names;
  for (Role role : roles) names.push_back(RoleName(role));
  names.push_back(RoleName(Role::kOperator));
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return absl::StrJoin(names, ", ");
}

absl::string_view SliceView(const grpc_slice& slice) {
  return absl::string_view(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(slice)),
                           GRPC_SLICE_LENGTH(slice));
}

struct ProcessorState {
  std::shared_ptr<const AuthPolicy> policy;
  Counter* unauthenticated = nullptr;
  Counter* permission_denied = nullptr;
};

// Runs on a gRPC transport thread; the policy check never blocks, so it answers inline.
void ProcessMetadata(void* state_ptr, grpc_auth_context* context, const grpc_metadata* md,
                     size_t num_md, grpc_process_auth_metadata_done_cb done, void* user_data) {
  const auto* state = static_cast<const ProcessorState*>(state_ptr);
  absl::string_view method;
  std::optional<absl::string_view> authorization;
  for (size_t i = 0; i < num_md; ++i) {
    absl::string_view key = SliceView(md[i].key);
    if (key == ":path") {
      method = SliceView(md[i].value);
    } else if (key == "authorization") {
      authorization = SliceView(md[i].value);
    }
  }
  absl::StatusOr<Identity> identity = state->policy->Check(method, authorization);
  if (identity.ok()) {
    done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_OK, nullptr);
    return;
  }
  const absl::Status& status = identity.status();
  Counter* counter = status.code() == absl::StatusCode::kUnauthenticated ? state->unauthenticated
                                                                         : state->permission_denied;
  if (counter != nullptr) counter->Increment();
  std::string message(status.message());
  done(user_data, nullptr, 0, nullptr, 0, static_cast<grpc_status_code>(status.code()),
       message.c_str());
}

void DestroyProcessorState(void* state) { delete static_cast<ProcessorState*>(state); }

class AuthenticatingServerCredentials final : public grpc::ServerCredentials {
 public:
  // Takes `base`; without `state` no processor runs.
  AuthenticatingServerCredentials(grpc_server_credentials* base,
                                  std::unique_ptr<ProcessorState> state)
      : creds_(base) {
    if (state == nullptr) return;
    grpc_auth_metadata_processor processor{ProcessMetadata, DestroyProcessorState, state.release()};
    grpc_server_credentials_set_auth_metadata_processor(creds_, processor);
  }
  ~AuthenticatingServerCredentials() override { grpc_server_credentials_release(creds_); }

  // grpc::ServerCredentials
  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& /*processor*/) override {
    // The processor is fixed at construction; the policy is the only one these credentials run.
  }

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override {
    return grpc_server_add_http2_port(server, addr.c_str(), creds_);
  }

  grpc_server_credentials* creds_;
};

}  // namespace

absl::StatusOr<Role> ParseRole(absl::string_view name) {
  for (size_t i = 0; i < kRoleNames.size(); ++i) {
    if (kRoleNames[i] == name) return static_cast<Role>(i);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", name, "\" is not a role (", absl::StrJoin(kRoleNames, ", "), ")"));
}

absl::string_view RoleName(Role role) { return kRoleNames[static_cast<size_t>(role)]; }

absl::Status Identity::CheckCluster(absl::string_view cluster) const {
  if (clusters.empty()) return absl::OkStatus();
  for (const std::string& allowed : clusters) {
    if (allowed == cluster) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "the ", RoleName(role), " token is limited to cluster", clusters.size() > 1 ? "s " : " ",
      absl::StrJoin(clusters, ", "), "; cluster \"", cluster, "\" is outside its scope"));
}

std::optional<std::string> Identity::UserScope() const {
  if (role == Role::kOperator || user.empty()) return std::nullopt;
  return user;
}

std::optional<std::string> Identity::TeamScope() const {
  if (role == Role::kOperator || team.empty()) return std::nullopt;
  return team;
}

std::string Identity::Describe() const {
  std::vector<std::string> parts;
  if (!clusters.empty()) {
    parts.push_back(
        absl::StrCat("cluster", clusters.size() > 1 ? "s " : " ", absl::StrJoin(clusters, ", ")));
  }
  if (std::optional<std::string> u = UserScope()) parts.push_back(absl::StrCat("user ", *u));
  if (std::optional<std::string> t = TeamScope()) parts.push_back(absl::StrCat("team ", *t));
  if (parts.empty()) return absl::StrCat("the ", RoleName(role), " token");
  return absl::StrCat("the ", RoleName(role), " token limited to ", absl::StrJoin(parts, ", "));
}

absl::Status Identity::CheckJob(absl::string_view cluster, absl::string_view job_id,
                                absl::string_view job_user, absl::string_view job_team) const {
  if (absl::Status s = CheckCluster(cluster); !s.ok()) return s;
  std::optional<std::string> u = UserScope();
  std::optional<std::string> t = TeamScope();
  if ((!u.has_value() || *u == job_user) && (!t.has_value() || *t == job_team)) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat(Describe(), " acts on ", u.has_value() ? "that user's" : "that team's",
                   " jobs only; job ", cluster, "/", job_id, " is outside its scope"));
}

absl::Status Identity::NarrowFilters(absl::string_view what, std::string* cluster,
                                     std::string* user, std::string* team) const {
  if (!clusters.empty()) {
    if (cluster == nullptr) {
      return absl::PermissionDeniedError(
          absl::StrCat(what, " reads every cluster; ", Describe(), " cannot"));
    }
    if (cluster->empty()) {
      if (clusters.size() > 1) {
        return absl::PermissionDeniedError(absl::StrCat(
            what, ": ", Describe(), " names one of its clusters (cluster=", clusters.front(), ")"));
      }
      *cluster = clusters.front();
    }
    if (absl::Status s = CheckCluster(*cluster); !s.ok()) return s;
  }
  auto narrow = [&](const std::optional<std::string>& scope, std::string* filter,
                    absl::string_view kind) -> absl::Status {
    if (!scope.has_value()) return absl::OkStatus();
    if (filter == nullptr) {
      return absl::PermissionDeniedError(absl::StrCat(what, " reads figures of every ", kind, "; ",
                                                      Describe(), " reads its own jobs only"));
    }
    if (filter->empty()) *filter = *scope;
    if (*filter == *scope) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat(what, ": ", Describe(), "; ", kind, " \"",
                                                    *filter, "\" is outside its scope"));
  };
  if (absl::Status s = narrow(UserScope(), user, "user"); !s.ok()) return s;
  return narrow(TeamScope(), team, "team");
}

absl::StatusOr<std::vector<TokenGrant>> ReadTokenFile(const std::string& path,
                                                      std::optional<Role> role) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("token file \"", path, "\" cannot be read"));
  }
  std::vector<TokenGrant> grants;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text.front() == '#') continue;
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(
          absl::StrCat("token file \"", path, "\" line ", number, ": ", what));
    };
    std::vector<absl::string_view> fields = absl::StrSplit(text, ' ', absl::SkipWhitespace());
    TokenGrant grant;
    grant.token = std::string(fields[0]);
    if (role.has_value()) {
      if (fields.size() != 1)
        return bad("holds more than one word; the file holds one token a line");
      grant.identity.role = *role;
      grants.push_back(std::move(grant));
      continue;
    }
    if (fields.size() < 2) {
      return bad("names no role (TOKEN ROLE [clusters=A,B] [user=NAME] [team=NAME])");
    }
    absl::StatusOr<Role> parsed = ParseRole(fields[1]);
    if (!parsed.ok()) return bad(parsed.status().message());
    grant.identity.role = *parsed;
    for (size_t i = 2; i < fields.size(); ++i) {
      absl::string_view field = fields[i];
      if (absl::ConsumePrefix(&field, "clusters=") || absl::ConsumePrefix(&field, "cluster=")) {
        for (absl::string_view cluster : absl::StrSplit(field, ',', absl::SkipEmpty())) {
          grant.identity.clusters.emplace_back(cluster);
        }
        if (grant.identity.clusters.empty()) return bad("clusters= names no cluster");
      } else if (absl::ConsumePrefix(&field, "user=")) {
        if (field.empty()) return bad("user= names no user");
        grant.identity.user = std::string(field);
      } else if (absl::ConsumePrefix(&field, "team=")) {
        if (field.empty()) return bad("team= names no team");
        grant.identity.team = std::string(field);
      } else {
        return bad(absl::StrCat("\"", fields[i],
                                "\" is not clusters=A,B, user=NAME or team=NAME (TOKEN ROLE "
                                "[clusters=A,B] [user=NAME] [team=NAME])"));
      }
    }
    if (grant.identity.role == Role::kOperator &&
        (!grant.identity.user.empty() || !grant.identity.team.empty())) {
      return bad(
          "an operator token administers every job: user= and team= do not apply to it (give "
          "a token limited to a user or team another role)");
    }
    grants.push_back(std::move(grant));
  }
  return grants;
}

namespace {

std::pair<int64_t, uint64_t> FileStamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {0, 0};
  return {static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
          static_cast<uint64_t>(st.st_ino)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<AuthPolicy>> AuthPolicy::Create(
    const std::vector<std::pair<std::string, std::string>>& tokens) {
  std::unique_ptr<AuthPolicy> policy(new AuthPolicy());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto& [token, role_name] = tokens[i];
    absl::StatusOr<Role> role = ParseRole(role_name);
    if (!role.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("auth token ", i + 1, ": role ", role.status().message()));
    }
    bool has_space =
        std::any_of(token.begin(), token.end(), [](char c) { return absl::ascii_isspace(c); });
    if (token.empty() || has_space) {
      return absl::InvalidArgumentError(absl::StrCat("auth token ", i + 1, " for role ", role_name,
                                                     " is empty or contains whitespace"));
    }
    policy->tokens_.push_back({token, Identity{.role = *role}});
  }
  return policy;
}

absl::StatusOr<std::unique_ptr<AuthPolicy>> AuthPolicy::Create(const AuthConfig& config) {
  std::vector<std::pair<std::string, std::string>> inline_tokens(
      config.tokens.begin(),
      config.tokens.begin() + std::min(config.inline_tokens, config.tokens.size()));
  absl::StatusOr<std::unique_ptr<AuthPolicy>> policy = Create(inline_tokens);
  if (!policy.ok()) return policy.status();
  absl::MutexLock lock(&(*policy)->files_mu_);
  for (const AuthConfig::TokenFile& file : config.files) {
    WatchedFile watched{.path = file.path, .stamp = FileStamp(file.path)};
    if (!file.role.empty()) {
      absl::StatusOr<Role> role = ParseRole(file.role);
      if (!role.ok()) return role.status();
      watched.role = *role;
    }
    absl::StatusOr<std::vector<TokenGrant>> grants = ReadTokenFile(file.path, watched.role);
    if (!grants.ok()) return grants.status();
    watched.grants = *std::move(grants);
    (*policy)->files_.push_back(std::move(watched));
  }
  return policy;
}

void AuthPolicy::MaybeReload() const {
  const int64_t now_ns = absl::GetCurrentTimeNanos();
  int64_t next = next_check_ns_.load(std::memory_order_relaxed);
  if (now_ns < next) return;
  // One caller a second looks at the files; the others go on with the tokens in force.
  if (!next_check_ns_.compare_exchange_strong(next, now_ns + 1000000000)) return;
  absl::MutexLock lock(&files_mu_);
  for (WatchedFile& file : files_) {
    std::pair<int64_t, uint64_t> stamp = FileStamp(file.path);
    if (stamp == file.stamp) continue;
    absl::StatusOr<std::vector<TokenGrant>> grants = ReadTokenFile(file.path, file.role);
    if (!grants.ok()) {
      // Half-written or broken: keep the tokens in force and look again once it changes.
      Logger().Warn("token file not reloaded; the previous tokens stay in force",
                    {{"error", std::string(grants.status().message())}});
      file.stamp = stamp;
      continue;
    }
    file.stamp = stamp;
    file.grants = *std::move(grants);
    Logger().Info("token file reloaded",
                  {{"path", file.path}, {"tokens", static_cast<int64_t>(file.grants.size())}});
  }
}

void AuthPolicy::AllowMethod(absl::string_view method, std::vector<Role> roles, ScopeKind scope) {
  auto& allowed = method_roles_[std::string(method)];
  allowed.insert(allowed.end(), roles.begin(), roles.end());
  if (scope != ScopeKind::kUndeclared) method_scopes_[std::string(method)] = scope;
}

ScopeKind AuthPolicy::MethodScope(absl::string_view method) const {
  auto it = method_scopes_.find(method);
  return it == method_scopes_.end() ? ScopeKind::kUndeclared : it->second;
}

void AuthPolicy::AllowService(absl::string_view service, std::vector<Role> roles) {
  auto& allowed = service_roles_[std::string(service)];
  allowed.insert(allowed.end(), roles.begin(), roles.end());
}

bool AuthPolicy::IsAlwaysOpen(absl::string_view method) {
  for (absl::string_view prefix : kOpenServices) {
    if (absl::StartsWith(method, prefix)) return true;
  }
  return false;
}

std::optional<Identity> AuthPolicy::Identify(absl::string_view authorization_value) const {
  absl::string_view value = absl::StripAsciiWhitespace(authorization_value);
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    return std::nullopt;
  }
  absl::string_view token = absl::StripLeadingAsciiWhitespace(value.substr(kScheme.size()));
  // Look at every token, without stopping at the first match, so that timing reveals nothing.
  const TokenGrant* match = nullptr;
  for (const TokenGrant& grant : tokens_) {
    if (ConstantTimeEquals(grant.token, token)) match = &grant;
  }
  if (match != nullptr) return match->identity;
  MaybeReload();
  absl::MutexLock lock(&files_mu_);
  for (const WatchedFile& file : files_) {
    for (const TokenGrant& grant : file.grants) {
      if (ConstantTimeEquals(grant.token, token)) match = &grant;
    }
  }
  if (match != nullptr) return match->identity;
  return std::nullopt;
}

std::optional<Role> AuthPolicy::Authenticate(absl::string_view authorization_value) const {
  std::optional<Identity> identity = Identify(authorization_value);
  if (!identity.has_value()) return std::nullopt;
  return identity->role;
}

absl::StatusOr<Identity> AuthPolicy::Check(
    absl::string_view method, std::optional<absl::string_view> authorization_value) const {
  if (IsAlwaysOpen(method)) return Identity{};
  if (!authorization_value.has_value()) {
    return absl::UnauthenticatedError(
        absl::StrCat(method, " needs \"authorization: Bearer <token>\" metadata"));
  }
  std::optional<Identity> identity = Identify(*authorization_value);
  if (!identity.has_value()) {
    return absl::UnauthenticatedError(
        absl::StrCat(method, ": the bearer token is not a known token"));
  }
  if (identity->role != Role::kOperator) {
    std::vector<Role> allowed;
    if (auto it = method_roles_.find(method); it != method_roles_.end()) allowed = it->second;
    if (auto it = service_roles_.find(ServiceOf(method)); it != service_roles_.end()) {
      allowed.insert(allowed.end(), it->second.begin(), it->second.end());
    }
    if (std::find(allowed.begin(), allowed.end(), identity->role) == allowed.end()) {
      return absl::PermissionDeniedError(absl::StrCat(method, " is not allowed for role ",
                                                      RoleName(identity->role),
                                                      " (allowed: ", RoleList(allowed), ")"));
    }
  }
  if (!identity->Restricted()) return *identity;
  // A scoped token: what the method's request can name decides whether it may call at all;
  // the service checks the request itself against the scope (scope.h).
  switch (MethodScope(method)) {
    case ScopeKind::kNone:
    case ScopeKind::kJob:
    case ScopeKind::kFiltered:
      return *identity;
    case ScopeKind::kCluster:
      if (!identity->OwnerScoped()) return *identity;
      return absl::PermissionDeniedError(
          absl::StrCat(method, " writes a cluster's telemetry, which names GPUs rather than jobs; ",
                       identity->Describe(), " cannot call it"));
    case ScopeKind::kFleet:
      return absl::PermissionDeniedError(absl::StrCat(method, " reaches the whole fleet; ",
                                                      identity->Describe(), " cannot call it"));
    case ScopeKind::kUndeclared:
      break;
  }
  return absl::PermissionDeniedError(absl::StrCat(
      method, " declares no scope, so no scoped token may call it; ", identity->Describe()));
}

absl::Status AuthPolicy::Authorize(absl::string_view method,
                                   std::optional<absl::string_view> authorization_value) const {
  return Check(method, authorization_value).status();
}

CallCaller LookupCallCaller(const grpc::ServerContextBase& context) {
  std::shared_ptr<const AuthPolicy> policy;
  {
    absl::MutexLock lock(&g_call_policy_mu);
    if (g_call_policy != nullptr) policy = *g_call_policy;
  }
  CallCaller caller;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (policy != nullptr && it != metadata.end()) {
    caller.auth_on = true;
    caller.has_token = true;
    caller.identity = policy->Identify(absl::string_view(it->second.data(), it->second.size()));
    return caller;
  }
  if (t_in_process_caller.has_value()) {
    // An in-process call on behalf of a caller the HTTP route identified.
    caller.auth_on = true;
    caller.has_token = true;
    caller.identity = t_in_process_caller;
    return caller;
  }
  caller.auth_on = policy != nullptr;
  return caller;
}

std::optional<Identity> CallIdentity(const grpc::ServerContextBase& context) {
  return LookupCallCaller(context).identity;
}

std::optional<Identity> ScopedCaller::Current() { return t_in_process_caller; }

ScopedCaller::ScopedCaller(Identity caller) : previous_(std::move(t_in_process_caller)) {
  t_in_process_caller = std::move(caller);
}

ScopedCaller::~ScopedCaller() { t_in_process_caller = std::move(previous_); }

absl::Status CheckCallCluster(const grpc::ServerContextBase& context, absl::string_view cluster) {
  std::optional<Identity> identity = CallIdentity(context);
  if (!identity.has_value()) return absl::OkStatus();
  return identity->CheckCluster(cluster);
}

absl::StatusOr<Identity> CheckHttp(const AuthPolicy& policy, absl::string_view route,
                                   absl::string_view authorization_header, HttpRefusal* refusal) {
  std::optional<absl::string_view> value;
  if (!authorization_header.empty()) value = authorization_header;
  absl::StatusOr<Identity> identity = policy.Check(route, value);
  if (identity.ok()) return identity;
  const absl::Status& s = identity.status();
  if (s.code() == absl::StatusCode::kPermissionDenied) {
    *refusal = HttpRefusal{403, std::string(s.message())};
    return s;
  }
  std::string message(s.message());
  if (!value.has_value()) {
    message = absl::StrCat(route, " needs an \"Authorization: Bearer <token>\" header");
  }
  *refusal = HttpRefusal{401, std::move(message)};
  return s;
}

std::optional<HttpRefusal> AuthorizeHttp(const AuthPolicy& policy, absl::string_view route,
                                         absl::string_view authorization_header) {
  HttpRefusal refusal;
  if (CheckHttp(policy, route, authorization_header, &refusal).ok()) return std::nullopt;
  return refusal;
}

std::shared_ptr<grpc::ServerCredentials> MakeAuthenticatingServerCredentials(
    std::shared_ptr<const AuthPolicy> policy, MetricsRegistry* metrics) {
  return WrapServerCredentials(grpc_insecure_server_credentials_create(), std::move(policy),
                               metrics);
}

std::shared_ptr<grpc::ServerCredentials> WrapServerCredentials(
    grpc_server_credentials* base, std::shared_ptr<const AuthPolicy> policy,
    MetricsRegistry* metrics) {
  if (policy == nullptr) return std::make_shared<AuthenticatingServerCredentials>(base, nullptr);
  {
    absl::MutexLock lock(&g_call_policy_mu);
    if (g_call_policy == nullptr) g_call_policy = new std::shared_ptr<const AuthPolicy>();
    *g_call_policy = policy;
  }
  auto state = std::make_unique<ProcessorState>();
  state->policy = std::move(policy);
  if (metrics != nullptr) {
    auto& refusals = metrics->AddCounter("goodput_grpc_auth_refusals_total",
                                         "gRPC calls refused by bearer-token auth.", {"code"});
    state->unauthenticated = &refusals.WithLabels({"UNAUTHENTICATED"});
    state->permission_denied = &refusals.WithLabels({"PERMISSION_DENIED"});
  }
  return std::make_shared<AuthenticatingServerCredentials>(base, std::move(state));
}

}  // namespace goodput::platform
