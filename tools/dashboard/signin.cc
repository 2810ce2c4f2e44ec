#include "tools/dashboard/signin.h"

#include <sys/random.h>

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace goodput::dashboard {
namespace {

constexpr char kCookie[] = "goodput_session";
constexpr char kJson[] = "application/json; charset=utf-8";

thread_local std::optional<Viewer> t_viewer;

// The login page: a form posting the token; no script, so any Content-Security-Policy holds.
std::string LoginPage(absl::string_view message) {
  return absl::StrCat(
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>goodput: sign in</title>"
      "</head><body><h1>goodput</h1>",
      message.empty() ? "" : absl::StrCat("<p role=\"alert\">", message, "</p>"),
      "<form method=\"post\" action=\"/login\"><label>Token <input type=\"password\" "
      "name=\"token\" autocomplete=\"current-password\" autofocus></label> "
      "<button type=\"submit\">Sign in</button></form></body></html>\n");
}

// application/x-www-form-urlencoded value of `name` in `body`, decoded.
std::string FormValue(absl::string_view body, absl::string_view name) {
  for (absl::string_view pair : absl::StrSplit(body, '&')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(pair, absl::MaxSplits('=', 1));
    if (kv.first != name) continue;
    std::string out;
    for (size_t i = 0; i < kv.second.size(); ++i) {
      char c = kv.second[i];
      if (c == '+') {
        out.push_back(' ');
      } else if (c == '%' && i + 2 < kv.second.size() && absl::ascii_isxdigit(kv.second[i + 1]) &&
                 absl::ascii_isxdigit(kv.second[i + 2])) {
        out += absl::HexStringToBytes(kv.second.substr(i + 1, 2));
        i += 2;
      } else {
        out.push_back(c);
      }
    }
    return out;
  }
  return "";
}

// The value of cookie `name` in a Cookie header.
std::string CookieValue(absl::string_view header, absl::string_view name) {
  for (absl::string_view part : absl::StrSplit(header, ';')) {
    part = absl::StripAsciiWhitespace(part);
    if (absl::ConsumePrefix(&part, name) && absl::ConsumePrefix(&part, "=")) {
      return std::string(part);
    }
  }
  return "";
}

void SendJsonError(httplib::Response& response, int status, const std::string& message) {
  response.status = status;
  response.set_header("Cache-Control", "no-store");
  if (status == 401) response.set_header("WWW-Authenticate", "Bearer");
  response.set_content(nlohmann::json{{"error", message}}.dump() + "\n", kJson);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SignIn>> SignIn::Create(SignInOptions options) {
  std::unique_ptr<SignIn> signin(new SignIn(std::move(options)));
  if (signin->options_.token_file.empty()) return signin;
  platform::AuthConfig config;
  config.enabled = true;
  for (absl::string_view entry :
       absl::StrSplit(signin->options_.token_file, ',', absl::SkipWhitespace())) {
    // ROLE:PATH is a file of one token a line of that role; PATH alone the scoped form.
    std::pair<absl::string_view, absl::string_view> role_path =
        absl::StrSplit(entry, absl::MaxSplits(':', 1));
    if (!role_path.second.empty() && platform::ParseRole(role_path.first).ok()) {
      config.files.push_back({std::string(role_path.second), std::string(role_path.first)});
    } else {
      config.files.push_back({std::string(entry), ""});
    }
  }
  absl::StatusOr<std::unique_ptr<platform::AuthPolicy>> policy =
      platform::AuthPolicy::Create(config);
  if (!policy.ok()) return policy.status();
  signin->policy_ = *std::move(policy);
  return signin;
}

void SignIn::Install(platform::HttpServer& http) {
  if (!enabled()) return;
  http.native().Get("/login", [](const httplib::Request&, httplib::Response& response) {
    response.set_header("Cache-Control", "no-store");
    response.set_content(LoginPage(""), "text/html; charset=utf-8");
  });
  http.native().Post("/login", [this](const httplib::Request& request,
                                      httplib::Response& response) { Login(request, response); });
  http.native().Post("/logout", [this](const httplib::Request& request,
                                       httplib::Response& response) { Logout(request, response); });
  http.AddRouteName("GET /login");
  http.AddRouteName("POST /login");
  http.AddRouteName("POST /logout");
  http.SetRequestGuard([this](const httplib::Request& request, httplib::Response& response) {
    return Guard(request, response);
  });
}

std::optional<Viewer> SignIn::Identify(const httplib::Request& request, std::string* refusal) {
  if (!enabled()) return Viewer{.is_operator = true};
  auto from_identity = [&](const platform::Identity& identity) -> std::optional<Viewer> {
    if (identity.role == platform::Role::kOperator) {
      return Viewer{.user = identity.user, .is_operator = true, .scope = identity};
    }
    if (identity.OwnerScoped()) {
      return Viewer{.user = identity.user, .is_operator = false, .scope = identity};
    }
    *refusal = absl::StrCat("a ", platform::RoleName(identity.role),
                            " token without a user or team cannot sign in to the dashboard (an "
                            "operator token, or a token limited to a user or team, can)");
    return std::nullopt;
  };
  const std::string authorization = request.get_header_value("Authorization");
  if (!authorization.empty()) {
    std::optional<platform::Identity> identity = policy_->Identify(authorization);
    if (!identity.has_value()) {
      *refusal = "the bearer token is not a known token";
      return std::nullopt;
    }
    return from_identity(*identity);
  }
  const std::string session = CookieValue(request.get_header_value("Cookie"), kCookie);
  if (!session.empty()) {
    if (std::optional<Viewer> viewer = Session(session)) return viewer;
  }
  if (!options_.trusted_proxy.empty() && request.remote_addr == options_.trusted_proxy) {
    const std::string user =
        std::string(absl::StripAsciiWhitespace(request.get_header_value(options_.user_header)));
    if (!user.empty()) {
      const bool is_operator =
          std::find(options_.operator_users.begin(), options_.operator_users.end(), user) !=
          options_.operator_users.end();
      platform::Identity scope;  // an operator's
      if (!is_operator)
        scope = platform::Identity{.role = platform::Role::kScheduler, .user = user};
      return Viewer{.user = user, .is_operator = is_operator, .scope = std::move(scope)};
    }
  }
  *refusal = "sign in first: POST /login with a token, or send \"Authorization: Bearer <token>\"";
  return std::nullopt;
}

bool SignIn::Guard(const httplib::Request& request, httplib::Response& response) {
  t_viewer.reset();
  if (request.path == "/login" || request.path == "/logout" || request.path == "/healthz") {
    return false;
  }
  std::string refusal;
  std::optional<Viewer> viewer = Identify(request, &refusal);
  if (viewer.has_value()) {
    t_viewer = std::move(viewer);
    return false;
  }
  const bool known_token_refused = absl::StrContains(refusal, "cannot sign in");
  if (absl::StartsWith(request.path, "/api/") || request.has_header("Authorization")) {
    SendJsonError(response, known_token_refused ? 403 : 401, refusal);
  } else {
    response.status = 303;
    response.set_header("Location", "/login");
    response.set_header("Cache-Control", "no-store");
  }
  return true;
}

void SignIn::Login(const httplib::Request& request, httplib::Response& response) {
  response.set_header("Cache-Control", "no-store");
  const std::string token = FormValue(request.body, "token");
  std::string refusal = "the token is not a known token";
  std::optional<platform::Identity> identity;
  if (!token.empty()) identity = policy_->Identify(absl::StrCat("Bearer ", token));
  std::optional<Viewer> viewer;
  if (identity.has_value()) {
    if (identity->role == platform::Role::kOperator) {
      viewer = Viewer{.user = identity->user, .is_operator = true, .scope = *identity};
    } else if (identity->OwnerScoped()) {
      viewer = Viewer{.user = identity->user, .is_operator = false, .scope = *identity};
    } else {
      refusal = "this token has no user or team and is not an operator's: it cannot sign in";
    }
  }
  if (!viewer.has_value()) {
    response.status = 401;
    response.set_content(LoginPage(refusal), "text/html; charset=utf-8");
    return;
  }
  const std::string id = NewSession(*std::move(viewer));
  response.status = 303;
  response.set_header("Location", "/");
  response.set_header(
      "Set-Cookie", absl::StrCat(kCookie, "=", id, "; Path=/; HttpOnly; SameSite=Strict; Max-Age=",
                                 absl::ToInt64Seconds(options_.session_ttl),
                                 options_.secure_cookie ? "; Secure" : ""));
}

void SignIn::Logout(const httplib::Request& request, httplib::Response& response) {
  const std::string session = CookieValue(request.get_header_value("Cookie"), kCookie);
  if (!session.empty()) {
    absl::MutexLock lock(&mu_);
    sessions_.erase(session);
  }
  response.status = 303;
  response.set_header("Location", "/login");
  response.set_header("Set-Cookie",
                      absl::StrCat(kCookie, "=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
                                   options_.secure_cookie ? "; Secure" : ""));
}

std::string SignIn::NewSession(Viewer viewer) {
  std::array<unsigned char, 32> bytes{};
  size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t n = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (n > 0) filled += static_cast<size_t>(n);
  }
  std::string id = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  const absl::Time now = options_.now();
  absl::MutexLock lock(&mu_);
  // Forget expired sessions as new ones come.
  absl::erase_if(sessions_, [now](const auto& entry) { return entry.second.expires <= now; });
  sessions_[id] = SessionEntry{std::move(viewer), now + options_.session_ttl};
  return id;
}

std::optional<Viewer> SignIn::Session(const std::string& id) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second.expires <= options_.now()) return std::nullopt;
  return it->second.viewer;
}

std::optional<Viewer> CurrentViewer() { return t_viewer; }

std::optional<std::string> ViewerUserScope() {
  if (!t_viewer.has_value()) return std::nullopt;
  return t_viewer->scope.UserScope();
}

std::optional<platform::Identity> ViewerScope() {
  if (!t_viewer.has_value()) return std::nullopt;
  return t_viewer->scope;
}

}  // namespace goodput::dashboard
