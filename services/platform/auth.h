// Role-based API authentication with bearer tokens.
//
// Every deployment maps tokens to one of four roles: `scheduler` (job registration),
// `telemetry` (sample ingestion), `sdk` (framework MFU reports) and `operator` (everything).
// Each service declares which roles may call which of its methods; a call carries
// `authorization: Bearer <token>` metadata. A missing or unknown token is UNAUTHENTICATED, a
// known token whose role is not allowed is PERMISSION_DENIED. gRPC health checking and
// reflection are always open, so probes and tooling work without tokens.
//
// The check runs before the call reaches any service code. gRPC C++ server interceptors cannot
// end a call with a status, so the policy is enforced by an auth metadata processor attached to
// the server's (plaintext) credentials; grpc_server.h wires it in when auth is enabled.
//
// A token may be scoped (auth.token_file lines `TOKEN ROLE clusters=a,b user=alice team=ml`):
// to clusters, to a user and to a team, whose jobs alone it reads and writes. How each RPC
// names what it acts on is its ScopeKind (platform's one table, scope.h kScopeTable, beside
// the roles of its `allowed_roles` option): the policy refuses a scoped token the RPCs it cannot
// reach at all (fleet- wide ones, telemetry for a user- or team-limited token), and the services
// check the rest with scope.h (CallScope) against the request. Refusals name the scope, never the
// token.
//
//   auto policy = AuthPolicy::Create(config.auth);
//   (*policy)->AllowService("goodput.v1.JobService", {Role::kScheduler});
//   (*policy)->AllowMethod("/goodput.v1.IngestService/PushSamples", {Role::kTelemetry});
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpc/grpc_security.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"
#include "services/platform/config.h"

namespace goodput::platform {

class MetricsRegistry;

// kService is for goodput's own service-to-service calls (ingest -> ofu -> mfu -> alerting),
// so that a deployment can give its services a token that reaches only the internal RPCs.
enum class Role { kScheduler, kTelemetry, kSdk, kOperator, kService };

inline constexpr std::array<absl::string_view, 5> kRoleNames = {"scheduler", "telemetry", "sdk",
                                                                "operator", "service"};

// How an RPC's request names what it acts on (scope.h): nothing of a tenant (kNone), a
// cluster's telemetry (kCluster), jobs (kJob), a list, stream or sum filtered to the caller
// (kFiltered), the whole fleet or goodput's own service-to-service calls (kFleet).
enum class ScopeKind { kUndeclared, kNone, kCluster, kJob, kFiltered, kFleet };

inline constexpr std::array<absl::string_view, 6> kScopeKindNames = {
    "undeclared", "none", "cluster", "job", "filtered", "fleet"};

// "scheduler" -> Role::kScheduler; INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<Role> ParseRole(absl::string_view name);
absl::string_view RoleName(Role role);

// Who a token belongs to and what it may reach.
struct Identity {
  Role role = Role::kOperator;
  // Clusters the token may act on (push samples for, register or end jobs of); empty = all.
  std::vector<std::string> clusters = {};
  // The user whose jobs alone the token reads and writes; empty = all users. The operator
  // role is never limited to a user or team (it administers every job).
  std::string user = {};
  // The team (Job.team: team, project or Slurm account) whose jobs alone the token reads and
  // writes; empty = all teams.
  std::string team = {};

  // OK, or PERMISSION_DENIED naming the token's clusters (never the token) when `cluster` is
  // outside them.
  absl::Status CheckCluster(absl::string_view cluster) const;
  // The user whose jobs this identity may see; nullopt = every job.
  std::optional<std::string> UserScope() const;
  // The team whose jobs this identity may see; nullopt = every team.
  std::optional<std::string> TeamScope() const;
  // Limited to a user or a team: it acts on jobs it owns only.
  bool OwnerScoped() const { return UserScope().has_value() || TeamScope().has_value(); }
  // Limited in any way (clusters, user or team).
  bool Restricted() const { return !clusters.empty() || OwnerScoped(); }
  // "the scheduler token limited to cluster a, user alice" (never the token).
  std::string Describe() const;
  // OK when a job of `cluster` registered with `user` and `team` is within the scope;
  // PERMISSION_DENIED naming the scope and the job (`cluster`/`job_id`) otherwise.
  absl::Status CheckJob(absl::string_view cluster, absl::string_view job_id, absl::string_view user,
                        absl::string_view team) const;
  // Narrows the filters of a list or aggregate request to the scope: an empty filter takes the
  // scope's value, one outside the scope is PERMISSION_DENIED naming it. A null filter is one
  // the request does not have: a scope it cannot express is refused (a token of several
  // clusters must name one, as a filter holds one value). `what` names the request.
  absl::Status NarrowFilters(absl::string_view what, std::string* cluster, std::string* user,
                             std::string* team) const;
};

struct TokenGrant {
  std::string token;
  Identity identity;
};

// Reads a token file. With `role`, each line is one token of that role (the
// auth.token_files.<role> form); without, each line is
// `TOKEN ROLE [clusters=A,B] [user=NAME] [team=NAME]` (the auth.token_file form). Blank lines and
// '#' comments are skipped. INVALID_ARGUMENT names the file and line, never the token.
absl::StatusOr<std::vector<TokenGrant>> ReadTokenFile(const std::string& path,
                                                      std::optional<Role> role);

// Token table plus the per-method role table. Configure (Allow*) before the server starts;
// afterwards it is safe to use from any thread. Tokens from files are re-read when a file
// changes (checked at most once a second, on use); a file that no longer parses leaves the
// previous tokens in force.
class AuthPolicy {
 public:
  // `tokens` are (token, role name) pairs. Refuses empty tokens, tokens with whitespace and
  // unknown roles (never echoing the token).
  static absl::StatusOr<std::unique_ptr<AuthPolicy>> Create(
      const std::vector<std::pair<std::string, std::string>>& tokens);
  // The inline tokens of `config` plus its token files, which are watched.
  static absl::StatusOr<std::unique_ptr<AuthPolicy>> Create(const AuthConfig& config);

  // Lets `roles` call one method, named as gRPC names it: "/package.Service/Method", or an
  // HTTP route ("POST /api/v1/write"); `scope` is how its request names what it acts on.
  // A method without a declared scope refuses every scoped token.
  void AllowMethod(absl::string_view method, std::vector<Role> roles,
                   ScopeKind scope = ScopeKind::kUndeclared);
  // The scope `method` declared (kUndeclared when none).
  ScopeKind MethodScope(absl::string_view method) const;
  // Lets `roles` call every method of a service ("package.Service").
  void AllowService(absl::string_view service, std::vector<Role> roles);

  // True when AllowMethod gave `method` roles (an HTTP route name such as
  // "POST /api/v1/write": HttpServer checks such a route's token before reading its body).
  bool Governs(absl::string_view method) const { return method_roles_.contains(method); }

  // The identity of `authorization_value` ("Bearer <token>"); nullopt when missing or
  // unknown. Compares against every configured token in constant time per token length.
  std::optional<Identity> Identify(absl::string_view authorization_value) const;
  // Identify's role.
  std::optional<Role> Authenticate(absl::string_view authorization_value) const;

  // The caller's identity, or UNAUTHENTICATED (missing/unknown token) or PERMISSION_DENIED
  // (role not allowed for `method`, or a scoped token on a method its scope cannot reach:
  // kFleet or undeclared for any scoped token, kCluster for one limited to a user or
  // team). `authorization_value` is nullopt when the call carried no
  // such metadata. Always-open methods give an operator identity.
  absl::StatusOr<Identity> Check(absl::string_view method,
                                 std::optional<absl::string_view> authorization_value) const;
  // Check without the identity.
  absl::Status Authorize(absl::string_view method,
                         std::optional<absl::string_view> authorization_value) const;

  // True for methods that never need a token (health checking, reflection).
  static bool IsAlwaysOpen(absl::string_view method);

 private:
  struct WatchedFile {
    std::string path;
    std::optional<Role> role = {};
    std::pair<int64_t, uint64_t> stamp = {};  // mtime (ns), inode
    std::vector<TokenGrant> grants = {};
  };

  AuthPolicy() = default;
  void MaybeReload() const;

  std::vector<TokenGrant> tokens_;
  mutable absl::Mutex files_mu_;
  mutable std::vector<WatchedFile> files_ ABSL_GUARDED_BY(files_mu_);
  mutable std::atomic<int64_t> next_check_ns_{0};
  absl::flat_hash_map<std::string, std::vector<Role>> method_roles_;
  absl::flat_hash_map<std::string, std::vector<Role>> service_roles_;
  absl::flat_hash_map<std::string, ScopeKind> method_scopes_;
};

// The identity of a server call: its own `authorization` metadata, identified by the policy
// of the process's authenticating server (the auth context cannot hold it: it belongs to the
// connection, which calls with different tokens share). A call that did not come over the
// network (the HTTP job endpoints calling the service in-process) is the caller a
// ScopedCaller (scope.h) names on the calling thread. nullopt when auth is off, or for an
// in-process call without a ScopedCaller.
std::optional<Identity> CallIdentity(const grpc::ServerContextBase& context);
// The caller of a server call as CallScope (scope.h) needs it: whether auth is on, whether
// the call carried a token, and whose it is (nullopt for a token no longer known).
struct CallCaller {
  bool auth_on = false;
  bool has_token = false;
  std::optional<Identity> identity = {};
};
CallCaller LookupCallCaller(const grpc::ServerContextBase& context);

// Names, for the lifetime of this object, the caller of the in-process calls the calling
// thread makes (an HTTP route calling a gRPC service object directly with a bare context):
// CallIdentity and CallScope see `caller` for them, as if it had sent its token.
class ScopedCaller {
 public:
  // The caller a ScopedCaller names on the calling thread (nullopt: none). Work handed to
  // another thread takes it along: `ScopedCaller` it again there.
  static std::optional<Identity> Current();

  explicit ScopedCaller(Identity caller);
  ~ScopedCaller();
  ScopedCaller(const ScopedCaller&) = delete;
  ScopedCaller& operator=(const ScopedCaller&) = delete;

 private:
  std::optional<Identity> previous_;
};

// OK when the call may act on `cluster`; PERMISSION_DENIED naming the scope otherwise.
absl::Status CheckCallCluster(const grpc::ServerContextBase& context, absl::string_view cluster);

// How an HTTP route answers a refused request: 401 for a missing or unknown token (send
// `WWW-Authenticate: Bearer`), 403 for a role the route does not allow; the message names the
// route and the role, never the token.
struct HttpRefusal {
  int status = 401;
  std::string message;
};

// Checks an HTTP request's `Authorization` header value ("" when absent) for `route`, a name
// registered with AllowMethod such as "POST /api/v1/write", exactly as Authorize checks a
// gRPC method; nullopt when the request may proceed.
std::optional<HttpRefusal> AuthorizeHttp(const AuthPolicy& policy, absl::string_view route,
                                         absl::string_view authorization_header);
// The same, giving the caller's identity when the request may proceed.
absl::StatusOr<Identity> CheckHttp(const AuthPolicy& policy, absl::string_view route,
                                   absl::string_view authorization_header, HttpRefusal* refusal);

// Plaintext server credentials that run `policy` on the initial metadata of every call and
// fail refused calls before they reach a service. Refusals are counted in
// `goodput_grpc_auth_refusals_total{code}` when `metrics` is given (it must outlive the server).
std::shared_ptr<grpc::ServerCredentials> MakeAuthenticatingServerCredentials(
    std::shared_ptr<const AuthPolicy> policy, MetricsRegistry* metrics = nullptr);

// The same over `base`, C-core credentials whose ownership it takes (the TLS ones of tls.h):
// the policy runs on every call whatever the transport. A null `policy` lets every call in.
std::shared_ptr<grpc::ServerCredentials> WrapServerCredentials(
    grpc_server_credentials* base, std::shared_ptr<const AuthPolicy> policy,
    MetricsRegistry* metrics = nullptr);

}  // namespace goodput::platform
