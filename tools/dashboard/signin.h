// Dashboard sign-in when authentication is on. A request is signed in by
//   - an `Authorization: Bearer <token>` header (scripts, curl),
//   - the session cookie POST /login sets once a token was entered in the login page
//     (browsers): HttpOnly, SameSite=Strict, Secure when the dashboard serves HTTPS,
//   - or, only from the trusted proxy's address, the proxy's user header (X-Forwarded-User
//     by default): an OAuth2 proxy in front of the dashboard doing single sign-on.
// Tokens are read from a token file in the services' form (`TOKEN ROLE [clusters=..]
// [user=NAME] [team=NAME]`, auth.h), re-read when it changes. A viewer sees what its token
// would reach through the services' own scope rules (scope.h; the dashboard calls them with
// its own token and filters for the viewer with the same Identity checks): an operator token
// everything (of its clusters), a token limited to a user or team that user's or team's jobs;
// other tokens cannot sign in. A proxy user sees its own jobs unless it is one of the
// operator users.
//
// Everything but /login, /logout and /healthz needs a signed-in viewer: the API and the
// event stream answer 401 (JSON), pages redirect to /login. Tokens are never logged or
// echoed; sessions live in memory (a restart signs everyone out).
//
//   SignIn signin({.token_file = "/etc/goodput/dashboard.tokens"});
//   signin.Install(http);                 // routes and the guard
//   ... in a route: if (auto scope = ViewerScope()) { scope->NarrowFilters(...) ... }
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "httplib.h"
#include "services/platform/auth.h"
#include "services/platform/http_server.h"

namespace goodput::dashboard {

struct SignInOptions {
  // The token files, comma-separated: PATH in the scoped form, ROLE:PATH for a file of one
  // token a line of ROLE (the services' auth.token_files). Empty: sign-in is off and every
  // request is an operator's.
  std::string token_file = {};
  // The address (as the dashboard sees the connection's peer) of the proxy whose user header
  // is believed; empty: none.
  std::string trusted_proxy = {};
  std::string user_header = "X-Forwarded-User";
  // Proxy users with the operator role.
  std::vector<std::string> operator_users = {};
  // Mark the cookie Secure (the dashboard serves HTTPS).
  bool secure_cookie = false;
  absl::Duration session_ttl = absl::Hours(12);
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

// Who is looking.
struct Viewer {
  std::string user = {};  // empty for an operator token without a user
  bool is_operator = false;
  // What the viewer may see: its token's identity (clusters, user, team), an operator's for
  // a proxy operator user, a user's for another proxy user.
  platform::Identity scope = {};
};

class SignIn {
 public:
  // INVALID_ARGUMENT naming the file and line when the token file cannot be used.
  static absl::StatusOr<std::unique_ptr<SignIn>> Create(SignInOptions options);

  bool enabled() const { return policy_ != nullptr; }

  // Registers GET/POST /login and POST /logout and guards every other request of `http`.
  void Install(platform::HttpServer& http);

  // The viewer of `request`; nullopt when it is not signed in (or, for a token that may not
  // sign in, with `refusal` saying why).
  std::optional<Viewer> Identify(const httplib::Request& request, std::string* refusal);

 private:
  explicit SignIn(SignInOptions options) : options_(std::move(options)) {}
  // Answers a request without a viewer; true when it did.
  bool Guard(const httplib::Request& request, httplib::Response& response);
  void Login(const httplib::Request& request, httplib::Response& response);
  void Logout(const httplib::Request& request, httplib::Response& response);
  std::string NewSession(Viewer viewer);
  std::optional<Viewer> Session(const std::string& id);

  struct SessionEntry {
    Viewer viewer;
    absl::Time expires;
  };

  SignInOptions options_;
  std::unique_ptr<platform::AuthPolicy> policy_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, SessionEntry> sessions_ ABSL_GUARDED_BY(mu_);
};

// The viewer of the request the calling thread is serving (set by the sign-in guard before
// any route runs); nullopt when sign-in is off.
std::optional<Viewer> CurrentViewer();
// The user whose jobs alone the current viewer may see; nullopt: every job.
std::optional<std::string> ViewerUserScope();
// The scope of the current viewer; nullopt when sign-in is off (everything).
std::optional<platform::Identity> ViewerScope();

}  // namespace goodput::dashboard
