// A small synchronous HTTP client (libcurl) for the delivery targets: one request, a
// deadline, optional unix-domain socket (slurmrestd), and the mapping of HTTP answers to
// statuses that the worker's retry rules understand.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace goodput::alerting {

struct HttpRequest {
  std::string method = "POST";  // GET or POST
  std::string url = {};
  std::vector<std::pair<std::string, std::string>> headers = {};
  std::string body = {};
  absl::Duration timeout = absl::Seconds(10);
  std::string unix_socket = {};  // connect here instead of the URL's host when set
};

struct HttpResponse {
  int status = 0;
  std::string body = {};
};

// Performs the request. UNAVAILABLE (connection refused, DNS) or DEADLINE_EXCEEDED (timeout)
// when no answer came; any HTTP answer is returned as it is.
absl::StatusOr<HttpResponse> PerformHttp(const HttpRequest& request);

// libcurl's process-wide initialization, once; every target that uses libcurl calls it
// before its first handle.
void CurlGlobalInitOnce();

// OK for 2xx; otherwise a status that says what `what` got back, with the start of the body:
// 408, 429 and 5xx UNAVAILABLE; 401 UNAUTHENTICATED and 403 PERMISSION_DENIED (retried: a
// credential can be fixed); 404 NOT_FOUND; other 4xx INVALID_ARGUMENT (permanent).
absl::Status HttpStatusToStatus(const HttpResponse& response, const std::string& what);

// Percent-encodes a path segment or query value.
std::string UrlEscape(const std::string& text);

}  // namespace goodput::alerting
