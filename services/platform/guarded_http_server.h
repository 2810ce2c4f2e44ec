// An httplib::Server whose connections are read by goodput's own loop, so that HttpLimits
// (config.h) hold for every request whatever the client does. One readiness loop (epoll)
// accepts connections and reads each request's line and headers without a thread per
// connection: a slow or idle client costs a file descriptor and the bytes it sent, never a
// thread. Headers must arrive within a deadline (408) and a budget (431); a listener holds at
// most http.max_connections connections and http.max_connections_per_client of one address,
// a connection beyond either taking the place of the one that has waited longest for its
// headers (or answered 503 with Retry-After when none waits). A request whose headers are in
// goes to a bounded pool of connection threads (overflow answered 503 with Retry-After at
// once); its body has a deadline for the whole request and for each silence (408) and a
// budget enforced while reading (413 on a Content-Length above it before reading anything, a
// chunked body cut off at the limit). Control characters and ".." segments in paths are
// refused (400), and compressed request bodies (415: httplib would inflate them past any
// limit). The request guard (authentication) runs on the headers: a request it answers never
// has its body read and gets no "100 Continue". A refused request's connection is closed
// after its answer, draining what the client still sends for a moment so that it reads the
// answer rather than a reset; that draining happens on a thread of its own.
//
//   GuardedHttpServer server(limits);
//   server.SetBodyLimit("/api/v1/write", 16 << 20, "ingest.remote_write.max_body_bytes");
//   server.Post("/api/v1/write", handler);
//   absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
//   ...
//   server.Shutdown();
//
// The limits use httplib's pre-routing, error and Expect: 100-continue handlers: do not
// replace them. httplib's own listen() and task queue are not used.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "httplib.h"
#include "services/platform/config.h"
#include "services/platform/tls.h"

typedef struct ssl_st SSL;

namespace goodput::platform {

namespace http_internal {
class Connection;
class LingeringCloser;
class Reactor;
// What becomes of a connection once a connection thread has served it.
enum class Served : int;
}  // namespace http_internal

class GuardedHttpServer : public httplib::Server {
 public:
  explicit GuardedHttpServer(HttpLimits limits);
  // Shuts down.
  ~GuardedHttpServer() override;
  GuardedHttpServer(const GuardedHttpServer&) = delete;
  GuardedHttpServer& operator=(const GuardedHttpServer&) = delete;

  // Requests whose path matches `pattern` (httplib's regex syntax) may carry up to `max_bytes`
  // of body instead of HttpLimits::max_body_bytes; `config_key` names the setting in the 413
  // answer. The first matching pattern wins. Before Start().
  void SetBodyLimit(const std::string& pattern, int64_t max_bytes, std::string config_key);

  // Runs `guard` on every request once its headers are in, before its body is read and
  // before any route or static file: a guard that answers the request (sign-in, auth) returns
  // true and nothing else runs; its body is never read (a client waiting for "100 Continue"
  // gets the answer instead) and, when one was announced, the connection closes after the
  // answer. Before Start().
  using RequestGuard = std::function<bool(const httplib::Request&, httplib::Response&)>;
  void SetRequestGuard(RequestGuard guard) { guard_ = std::move(guard); }

  // Serves HTTPS with `https`'s current context (tls.h): every connection does a TLS
  // handshake (within HttpLimits::header_timeout, in the readiness loop) before its first
  // request. Before Start().
  void ServeTls(std::shared_ptr<HttpsContext> https);

  // Binds host:port (0 = any free port) and serves on a background thread. The bound port,
  // or UNAVAILABLE naming the address.
  absl::StatusOr<int> Start(const std::string& host, int port);
  // Stops accepting, ends the open connections and joins the threads. Idempotent.
  void Shutdown();

 private:
  struct BodyLimit {
    std::regex pattern;
    int64_t max_bytes;
    std::string config_key;
  };

  // Serves the requests of `connection` whose headers are in, on a connection thread.
  http_internal::Served Serve(http_internal::Connection& connection);
  // Decides, once a request's headers are read, what of its body may be read.
  void Admit(const httplib::Request& request, http_internal::Connection& connection) const;

  HttpLimits limits_;
  std::vector<BodyLimit> body_limits_;
  std::unique_ptr<http_internal::LingeringCloser> closer_;
  std::shared_ptr<HttpsContext> https_;
  RequestGuard guard_;
  std::unique_ptr<http_internal::Reactor> reactor_;
};

}  // namespace goodput::platform
