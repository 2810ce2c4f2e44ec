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
// A session is as good as its token: each use identifies the token it was opened with again
// (the token files are re-read within a second of changing), so a session ends as soon as
// its token is removed or rotated, and follows a changed role or user. Sign-in is same-site
// only: POST /login with an Origin other than the dashboard's own, or with Sec-Fetch-Site
// other than same-origin or none, is refused 403 (login CSRF). Every request but /healthz
// must name an allowed host in its Host header (DNS rebinding): 421 otherwise, 400 without one.
//
//   SignIn signin({.token_file = "/etc/goodput/dashboard.tokens"});
//   signin.Install(http);                 // routes and the guard
//   ... in a route: if (auto scope = ViewerScope()) { scope->NarrowFilters(...) ... }
#pragma once

#include <functional>
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
  // The host names and addresses requests may name in their Host header (any port); empty:
  // any. DefaultAllowedHosts gives the addresses the dashboard listens on and localhost.
  std::vector<std::string> allowed_hosts = {};
  absl::Duration session_ttl = absl::Hours(12);
  std::function<absl::Time()> now = [] { return absl::Now(); };
};

// The hosts a dashboard listening on `listen_host` answers to: that address (every address of
// the machine's interfaces for 0.0.0.0 or ::), localhost, localhost.localdomain, 127.0.0.1
// and ::1.
std::vector<std::string> DefaultAllowedHosts(const std::string& listen_host);

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

  // Registers GET/POST /login and POST /logout and guards every other request of `http`
  // (with sign-in off, only the Host check guards, when there is an allow-list).
  void Install(platform::HttpServer& http);

  // The viewer of `request`; nullopt when it is not signed in (or, for a token that may not
  // sign in, with `refusal` saying why).
  std::optional<Viewer> Identify(const httplib::Request& request, std::string* refusal);

 private:
  explicit SignIn(SignInOptions options) : options_(std::move(options)) {}
  // Answers a request without a viewer or with a Host not allowed; true when it did.
  bool Guard(const httplib::Request& request, httplib::Response& response);
  // Answers a request whose Host header is missing or not allowed; true when it did.
  bool RefuseHost(const httplib::Request& request, httplib::Response& response) const;
  // Answers a sign-in posted from another site; true when it did.
  bool RefuseCrossSite(const httplib::Request& request, httplib::Response& response) const;
  // The viewer a token signs in as; nullopt (with `refusal`) when it is unknown or may not.
  std::optional<Viewer> ViewerOf(const std::string& token, std::string* refusal) const;
  void Login(const httplib::Request& request, httplib::Response& response);
  void Logout(const httplib::Request& request, httplib::Response& response);
  std::string NewSession(Viewer viewer, std::string token);
  std::optional<Viewer> Session(const std::string& id);
  // Whether the request's `authorization` (a bearer header), its `session` or the trusted
  // proxy (`via_proxy`) still signs it in, as Identify would.
  bool StillSignedIn(const std::string& authorization, const std::string& session, bool via_proxy);

  struct SessionEntry {
    Viewer viewer;
    absl::Time expires;
    std::string token;  // identified again on each use (memory only, like the token files)
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
// Whether the credential that signed in the current request still does (its token is still
// in the token files, its session open): long-lived responses (the event stream) ask it now
// and then and end when it no longer holds. Always true when sign-in is off.
std::function<bool()> ViewerStillSignedIn();

}  // namespace goodput::dashboard
