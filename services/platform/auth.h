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
//   auto policy = AuthPolicy::Create(config.auth.tokens);
//   (*policy)->AllowService("goodput.v1.JobService", {Role::kScheduler});
//   (*policy)->AllowMethod("/goodput.v1.IngestService/PushSamples", {Role::kTelemetry});
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/server_credentials.h"

namespace goodput::platform {

class MetricsRegistry;

// kService is for goodput's own service-to-service calls (ingest -> ofu -> mfu -> alerting),
// so that a deployment can give its services a token that reaches only the internal RPCs.
enum class Role { kScheduler, kTelemetry, kSdk, kOperator, kService };

inline constexpr std::array<absl::string_view, 5> kRoleNames = {"scheduler", "telemetry", "sdk",
                                                                "operator", "service"};

// "scheduler" -> Role::kScheduler; INVALID_ARGUMENT naming the value otherwise.
absl::StatusOr<Role> ParseRole(absl::string_view name);
absl::string_view RoleName(Role role);

// Token table plus the per-method role table. Configure (Allow*) before the server starts;
// afterwards it is read-only and safe to use from any thread.
class AuthPolicy {
 public:
  // `tokens` are (token, role name) pairs, e.g. ServiceConfig::auth.tokens. Refuses empty
  // tokens, tokens with whitespace and unknown roles (never echoing the token).
  static absl::StatusOr<std::unique_ptr<AuthPolicy>> Create(
      const std::vector<std::pair<std::string, std::string>>& tokens);

  // Lets `roles` call one method, named as gRPC names it: "/package.Service/Method".
  void AllowMethod(absl::string_view method, std::vector<Role> roles);
  // Lets `roles` call every method of a service ("package.Service").
  void AllowService(absl::string_view service, std::vector<Role> roles);

  // The role of `authorization_value` ("Bearer <token>"); nullopt when missing or unknown.
  // Compares against every configured token in constant time per token length.
  std::optional<Role> Authenticate(absl::string_view authorization_value) const;

  // OK, UNAUTHENTICATED (missing/unknown token) or PERMISSION_DENIED (role not allowed for
  // `method`). `authorization_value` is nullopt when the call carried no such metadata.
  absl::Status Authorize(absl::string_view method,
                         std::optional<absl::string_view> authorization_value) const;

  // True for methods that never need a token (health checking, reflection).
  static bool IsAlwaysOpen(absl::string_view method);

 private:
  AuthPolicy() = default;

  std::vector<std::pair<std::string, Role>> tokens_;
  absl::flat_hash_map<std::string, std::vector<Role>> method_roles_;
  absl::flat_hash_map<std::string, std::vector<Role>> service_roles_;
};

// Plaintext server credentials that run `policy` on the initial metadata of every call and
// fail refused calls before they reach a service. Refusals are counted in
// `goodput_grpc_auth_refusals_total{code}` when `metrics` is given (it must outlive the server).
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

std::shared_ptr<grpc::ServerCredentials> MakeAuthenticatingServerCredentials(
    std::shared_ptr<const AuthPolicy> policy, MetricsRegistry* metrics = nullptr);

}  // namespace goodput::platform
