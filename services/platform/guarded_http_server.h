// An httplib::Server whose connections are read by goodput's own loop, so that HttpLimits
// (config.h) hold for every request whatever the client does: a bounded pool of connection
// threads (overflow answered 503 with Retry-After at once, from the accepting thread), a
// deadline for the whole request and for each silence (408), a header budget (431), a body
// budget enforced while reading (413 on a Content-Length above it before reading anything, a
// chunked body cut off at the limit), control characters and ".." segments refused in paths
// (400), and compressed request bodies refused (415: httplib would inflate them past any
// limit). A refused request's connection is closed after its answer, draining what the
// client still sends for a moment so that it reads the answer rather than a reset; that
// draining happens on a thread of its own, not on a connection thread.
//
//   GuardedHttpServer server(limits);
//   server.SetBodyLimit("/api/v1/write", 16 << 20, "ingest.remote_write.max_body_bytes");
//   server.Post("/api/v1/write", handler);
//   absl::StatusOr<int> port = server.Start("127.0.0.1", 0);
//   ...
//   server.Shutdown();
//
// The limits use httplib's task queue, pre-routing, error and Expect: 100-continue handlers:
// do not replace them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <regex>
#include <string>
#include <thread>
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

  // Runs `guard` on every request once its headers are in, before any route or static file:
  // a guard that answers the request (sign-in, auth) returns true and nothing else runs.
  // Before Start().
  using RequestGuard = std::function<bool(const httplib::Request&, httplib::Response&)>;
  void SetRequestGuard(RequestGuard guard) { guard_ = std::move(guard); }

  // Serves HTTPS with `https`'s current context (tls.h): every connection does a TLS
  // handshake (within HttpLimits::read_timeout) before its first request; a connection beyond
  // the pool is closed without an answer. Before Start().
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

  // httplib::Server
  bool process_and_close_socket(socket_t sock) override;

  // Decides, once a request's headers are read, what of its body may be read.
  void Admit(const httplib::Request& request, http_internal::Connection& connection) const;
  // Answers 503 without reading (the pool is full) and closes.
  void RefuseOverloaded(socket_t sock);
  // The server side of a TLS handshake on `sock`; null (nothing sent) when it fails.
  SSL* Handshake(socket_t sock);

  HttpLimits limits_;
  std::vector<BodyLimit> body_limits_;
  std::unique_ptr<http_internal::LingeringCloser> closer_;
  std::shared_ptr<HttpsContext> https_;
  RequestGuard guard_;
  std::thread thread_;
};

}  // namespace goodput::platform
