#include "services/platform/auth.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpc/grpc_security.h"
#include "services/platform/metrics.h"

namespace goodput::platform {
namespace {

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
void ProcessMetadata(void* state_ptr, grpc_auth_context* /*context*/, const grpc_metadata* md,
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
  absl::Status status = state->policy->Authorize(method, authorization);
  if (status.ok()) {
    done(user_data, nullptr, 0, nullptr, 0, GRPC_STATUS_OK, nullptr);
    return;
  }
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
  explicit AuthenticatingServerCredentials(std::unique_ptr<ProcessorState> state)
      : creds_(grpc_insecure_server_credentials_create()) {
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
    policy->tokens_.emplace_back(token, *role);
  }
  return policy;
}

void AuthPolicy::AllowMethod(absl::string_view method, std::vector<Role> roles) {
  auto& allowed = method_roles_[std::string(method)];
  allowed.insert(allowed.end(), roles.begin(), roles.end());
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

std::optional<Role> AuthPolicy::Authenticate(absl::string_view authorization_value) const {
  absl::string_view value = absl::StripAsciiWhitespace(authorization_value);
  constexpr absl::string_view kScheme = "bearer ";
  if (value.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(value.substr(0, kScheme.size()), kScheme)) {
    return std::nullopt;
  }
  absl::string_view token = absl::StripLeadingAsciiWhitespace(value.substr(kScheme.size()));
  // Look at every token, without stopping at the first match, so that timing reveals nothing.
  std::optional<Role> match;
  for (const auto& [secret, role] : tokens_) {
    if (ConstantTimeEquals(secret, token)) match = role;
  }
  return match;
}

absl::Status AuthPolicy::Authorize(absl::string_view method,
                                   std::optional<absl::string_view> authorization_value) const {
  if (IsAlwaysOpen(method)) return absl::OkStatus();
  if (!authorization_value.has_value()) {
    return absl::UnauthenticatedError(
        absl::StrCat(method, " needs \"authorization: Bearer <token>\" metadata"));
  }
  std::optional<Role> role = Authenticate(*authorization_value);
  if (!role.has_value()) {
    return absl::UnauthenticatedError(
        absl::StrCat(method, ": the bearer token is not a known token"));
  }
  if (*role == Role::kOperator) return absl::OkStatus();
  std::vector<Role> allowed;
  if (auto it = method_roles_.find(method); it != method_roles_.end()) allowed = it->second;
  if (auto it = service_roles_.find(ServiceOf(method)); it != service_roles_.end()) {
    allowed.insert(allowed.end(), it->second.begin(), it->second.end());
  }
  if (std::find(allowed.begin(), allowed.end(), *role) != allowed.end()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat(
      method, " is not allowed for role ", RoleName(*role), " (allowed: ", RoleList(allowed), ")"));
}

std::optional<HttpRefusal> AuthorizeHttp(const AuthPolicy& policy, absl::string_view route,
                                         absl::string_view authorization_header) {
  std::optional<absl::string_view> value;
  if (!authorization_header.empty()) value = authorization_header;
  absl::Status s = policy.Authorize(route, value);
  if (s.ok()) return std::nullopt;
  if (s.code() == absl::StatusCode::kPermissionDenied) {
    return HttpRefusal{403, std::string(s.message())};
  }
  std::string message(s.message());
  if (!value.has_value()) {
    message = absl::StrCat(route, " needs an \"Authorization: Bearer <token>\" header");
  }
  return HttpRefusal{401, std::move(message)};
}

std::shared_ptr<grpc::ServerCredentials> MakeAuthenticatingServerCredentials(
    std::shared_ptr<const AuthPolicy> policy, MetricsRegistry* metrics) {
  auto state = std::make_unique<ProcessorState>();
  state->policy = std::move(policy);
  if (metrics != nullptr) {
    auto& refusals = metrics->AddCounter("goodput_grpc_auth_refusals_total",
                                         "gRPC calls refused by bearer-token auth.", {"code"});
    state->unauthenticated = &refusals.WithLabels({"UNAUTHENTICATED"});
    state->permission_denied = &refusals.WithLabels({"PERMISSION_DENIED"});
  }
  return std::make_shared<AuthenticatingServerCredentials>(std::move(state));
}

}  // namespace goodput::platform
