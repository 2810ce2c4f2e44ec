#include "services/alerting/targets/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace goodput::alerting {
namespace {

constexpr size_t kMaxResponseBytes = 1 << 20;
constexpr size_t kErrorBodyChars = 300;

size_t AppendBody(char* data, size_t size, size_t count, void* user) {
  auto* out = static_cast<std::string*>(user);
  const size_t n = size * count;
  if (out->size() + n > kMaxResponseBytes) return 0;  // aborts the transfer
  out->append(data, n);
  return n;
}

}  // namespace

void CurlGlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

absl::StatusOr<HttpResponse> PerformHttp(const HttpRequest& request) {
  CurlGlobalInitOnce();
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return absl::InternalError("curl_easy_init failed");
  HttpResponse response;
  char error[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  for (const auto& [name, value] : request.headers) {
    headers = curl_slist_append(headers, absl::StrCat(name, ": ", value).c_str());
  }
  // libcurl adds "Expect: 100-continue" to larger POSTs; peers answer faster without it.
  headers = curl_slist_append(headers, "Expect:");
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(
      curl, CURLOPT_TIMEOUT_MS,
      static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(request.timeout))));
  curl_easy_setopt(curl, CURLOPT_USERAGENT, "goodput-alerting");
  if (!request.unix_socket.empty()) {
    curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, request.unix_socket.c_str());
  }
  if (request.method == "POST") {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(request.body.size()));
  }
  const CURLcode rc = curl_easy_perform(curl);
  long http_status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &http_status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  if (rc != CURLE_OK) {
    const std::string message = absl::StrCat(request.method, " ", request.url, ": ",
                                             error[0] != 0 ? error : curl_easy_strerror(rc));
    if (rc == CURLE_OPERATION_TIMEDOUT) return absl::DeadlineExceededError(message);
    return absl::UnavailableError(message);
  }
  response.status = static_cast<int>(http_status);
  return response;
}

absl::Status HttpStatusToStatus(const HttpResponse& response, const std::string& what) {
  const int code = response.status;
  if (code >= 200 && code < 300) return absl::OkStatus();
  std::string body = response.body.substr(0, kErrorBodyChars);
  std::replace(body.begin(), body.end(), '\n', ' ');
  const std::string message = absl::StrCat(what, " answered HTTP ", code, body.empty() ? "" : ": ",
                                           absl::StripAsciiWhitespace(body));
  if (code == 408 || code == 429 || code >= 500) return absl::UnavailableError(message);
  if (code == 401) return absl::UnauthenticatedError(message);
  if (code == 403) return absl::PermissionDeniedError(message);
  if (code == 404) return absl::NotFoundError(message);
  if (code >= 400) return absl::InvalidArgumentError(message);
  return absl::UnknownError(message);  // 1xx/3xx: redirects are not followed on purpose
}

std::string UrlEscape(const std::string& text) {
  CurlGlobalInitOnce();
  char* escaped = curl_easy_escape(nullptr, text.data(), static_cast<int>(text.size()));
  if (escaped == nullptr) return text;
  std::string out = escaped;
  curl_free(escaped);
  return out;
}

}  // namespace goodput::alerting
