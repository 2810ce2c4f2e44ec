#include "tools/dashboard/routes.h"

#include "services/platform/status_convert.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/dashboard/signin.h"

namespace goodput::dashboard {
namespace {

constexpr char kJson[] = "application/json; charset=utf-8";

void SendJson(httplib::Response& res, const Json& body, int status = 200) {
  res.status = status;
  res.set_header("Cache-Control", "no-store");
  res.set_content(DumpJson(body), kJson);
}

void SendError(httplib::Response& res, const absl::Status& status) {
  SendJson(res, Json{{"error", std::string(status.message())}}, HttpStatusFor(status.code()));
}

// A whole number parameter within [lo, hi], or `fallback` when absent.
absl::StatusOr<int> IntParam(const httplib::Request& req, const char* name, int fallback, int lo,
                             int hi) {
  if (!req.has_param(name)) return fallback;
  std::string text = req.get_param_value(name);
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < lo || value > hi) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", text, " is not a whole number in [", lo, ", ", hi, "]"));
  }
  return value;
}

constexpr int kMaxRangeHours = 24 * 366;

// The time range of a page: from_ms and to_ms (a custom range, both required, at most
// kMaxRangeHours long), else the range_h hours before `now` (default 24).
absl::StatusOr<std::pair<absl::Time, absl::Time>> RangeParams(const httplib::Request& req,
                                                              absl::Time now) {
  if (req.has_param("from_ms") || req.has_param("to_ms")) {
    int64_t from = 0, to = 0;
    const std::string f = req.get_param_value("from_ms"), t = req.get_param_value("to_ms");
    if (!absl::SimpleAtoi(f, &from) || from < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("from_ms=", f, " is not a time in Unix milliseconds"));
    }
    if (!absl::SimpleAtoi(t, &to) || to <= from) {
      return absl::InvalidArgumentError(absl::StrCat(
          "to_ms=", t, " is not a time in Unix milliseconds after from_ms=", from));
    }
    if (to - from > int64_t{kMaxRangeHours} * 3'600'000) {
      return absl::InvalidArgumentError(absl::StrCat("from_ms=", from, " to_ms=", to,
                                                     " is longer than ", kMaxRangeHours, " hours"));
    }
    return std::pair{absl::FromUnixMillis(from), absl::FromUnixMillis(to)};
  }
  absl::StatusOr<int> range_h = IntParam(req, "range_h", 24, 1, kMaxRangeHours);
  if (!range_h.ok()) return range_h.status();
  return std::pair{now - absl::Hours(*range_h), now};
}
// When a client refused a live stream may try again.
constexpr int kStreamRetryAfterS = 10;

// Everything but RFC 3986's unreserved characters as %XX (so '/' inside a job id too).
std::string PercentEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "%%%02X", c);
    }
  }
  return out;
}

// OK when the current viewer may see the job page `job`: the viewer's scope (clusters, user,
// team) checked as the services check a token's (Identity::CheckJob).
absl::Status CheckOwnJob(const Json& job) {
  std::optional<platform::Identity> scope = ViewerScope();
  if (!scope.has_value()) return absl::OkStatus();
  const Json& row = job.contains("job") ? job["job"] : Json::object();
  return scope->CheckJob(row.value("cluster", ""), row.value("job_id", ""), row.value("user", ""),
                         row.value("team", ""));
}

// The cluster, user and team filters of a page narrowed to the viewer's scope as the services
// narrow a token's list requests (Identity::NarrowFilters).
absl::Status NarrowToViewer(absl::string_view what, std::string* cluster, std::string* user,
                            std::string* team) {
  std::optional<platform::Identity> scope = ViewerScope();
  if (!scope.has_value()) return absl::OkStatus();
  return scope->NarrowFilters(what, cluster, user, team);
}

}  // namespace

int HttpStatusFor(absl::StatusCode code) {
  // A gateway: a service failing in a way HTTP has no status for is a bad gateway.
  const int status = platform::HttpStatusFor(code);
  return status == 500 ? 502 : status;
}

void SetSecurityHeaders(httplib::Server& server, bool hsts) {
  // Default headers go on every response, static files and refusals included.
  httplib::Headers headers = {{"Content-Security-Policy", kContentSecurityPolicy},
                              {"X-Content-Type-Options", "nosniff"},
                              {"Referrer-Policy", "no-referrer"},
                              {"X-Frame-Options", "DENY"}};
  if (hsts) headers.emplace("Strict-Transport-Security", kStrictTransportSecurity);
  server.set_default_headers(std::move(headers));
}

void RegisterRoutes(httplib::Server& server, Gateway* gateway, EventHub* hub,
                    RouteOptions options) {
  SetSecurityHeaders(server, options.hsts);
  auto now = options.now;
  server.Get("/api/fleet", [gateway, now](const httplib::Request& req, httplib::Response& res) {
    absl::StatusOr<std::pair<absl::Time, absl::Time>> range = RangeParams(req, now());
    if (!range.ok()) return SendError(res, range.status());
    // A scoped viewer sees the figures of its own jobs, as GetFleetSummary gives its token.
    FleetQuery query{.start = range->first,
                     .end = range->second,
                     .cluster = req.get_param_value("cluster"),
                     .user = req.get_param_value("user"),
                     .team = req.get_param_value("team"),
                     .gpu_model = req.get_param_value("gpu_model")};
    if (absl::Status s = NarrowToViewer("the fleet view", &query.cluster, &query.user, &query.team);
        !s.ok()) {
      return SendError(res, s);
    }
    SendJson(res, gateway->Fleet(query));
  });

  server.Get("/api/jobs", [gateway, now](const httplib::Request& req, httplib::Response& res) {
    absl::StatusOr<std::pair<absl::Time, absl::Time>> range = RangeParams(req, now());
    if (!range.ok()) return SendError(res, range.status());
    absl::StatusOr<int> limit = IntParam(req, "limit", 100, 1, 1000);
    if (!limit.ok()) return SendError(res, limit.status());
    // A signed-in viewer sees the jobs of its scope only.
    std::string cluster = req.get_param_value("cluster"), user = req.get_param_value("user"),
                team = req.get_param_value("team");
    if (absl::Status s = NarrowToViewer("the job list", &cluster, &user, &team); !s.ok()) {
      return SendError(res, s);
    }
    absl::StatusOr<Json> jobs = gateway->Jobs({.cluster = cluster,
                                               .user = user,
                                               .team = team,
                                               .gpu_model = req.get_param_value("gpu_model"),
                                               .active_from = range->first,
                                               .active_to = range->second,
                                               .limit = *limit});
    if (!jobs.ok()) return SendError(res, jobs.status());
    SendJson(res, *jobs);
  });

  // The path is decoded by the server; job ids may hold '/' (Kubernetes namespace/name), so
  // the cluster is the first segment and the job id everything after it.
  server.Get(R"(/api/jobs/([^/]+)/(.+))",
             [gateway](const httplib::Request& req, httplib::Response& res) {
               absl::StatusOr<Json> job = gateway->Job(req.matches[1], req.matches[2]);
               if (!job.ok()) return SendError(res, job.status());
               if (absl::Status s = CheckOwnJob(*job); !s.ok()) return SendError(res, s);
               SendJson(res, *job);
             });

  // Alerts link to <dashboard_url>/jobs/<cluster>/<job id> (alerting.dashboard_url): send
  // the browser to that job's page.
  server.Get(R"(/jobs/([^/]+)/(.+))", [](const httplib::Request& req, httplib::Response& res) {
    res.set_redirect(
        absl::StrCat("/#/job/", PercentEncode(req.matches[1]), "/", PercentEncode(req.matches[2])));
  });

  server.Get("/api/alerts", [gateway, now](const httplib::Request& req, httplib::Response& res) {
    absl::StatusOr<std::pair<absl::Time, absl::Time>> range = RangeParams(req, now());
    if (!range.ok()) return SendError(res, range.status());
    std::string cluster = req.get_param_value("cluster"), user, team;
    if (absl::Status s = NarrowToViewer("the alert list", &cluster, &user, &team); !s.ok()) {
      return SendError(res, s);
    }
    Json alerts = gateway->Alerts(cluster, range->first, range->second);
    if (std::optional<platform::Identity> scope = ViewerScope(); scope && scope->OwnerScoped()) {
      // A user or team sees the alerts of its own jobs: those its job listing holds.
      absl::StatusOr<Json> jobs = gateway->Jobs({.cluster = cluster,
                                                 .user = user,
                                                 .team = team,
                                                 .active_from = range->first,
                                                 .active_to = range->second,
                                                 .limit = 1000});
      if (!jobs.ok()) return SendError(res, jobs.status());
      std::set<std::pair<std::string, std::string>> own;
      for (const Json& row : (*jobs)["jobs"]) {
        own.emplace(row.value("cluster", ""), row.value("job_id", ""));
      }
      Json kept = Json::array();
      for (Json& item : alerts["items"]) {
        if (own.contains({item.value("cluster", ""), item.value("job_id", "")})) {
          kept.push_back(std::move(item));
        }
      }
      alerts["items"] = std::move(kept);
    }
    SendJson(res, alerts);
  });

  const absl::Duration keep_alive = options.keep_alive;
  server.Get("/api/events", [hub, gateway, keep_alive](const httplib::Request& req,
                                                       httplib::Response& res) {
    EventFilter filter{.cluster = req.get_param_value("cluster"),
                       .job_id = req.get_param_value("job")};
    if (!filter.job_id.empty() && filter.cluster.empty()) {
      return SendError(res, absl::InvalidArgumentError("job=" + filter.job_id +
                                                       " needs its cluster (cluster=...)"));
    }
    if (std::optional<platform::Identity> scope = ViewerScope(); scope && scope->Restricted()) {
      filter.fleet_totals = false;  // the whole fleet's figures are outside its scope
      if (!filter.job_id.empty()) {
        absl::StatusOr<Json> job = gateway->Job(filter.cluster, filter.job_id);
        if (!job.ok()) return SendError(res, job.status());
        if (absl::Status s = CheckOwnJob(*job); !s.ok()) return SendError(res, s);
      } else if (scope->OwnerScoped()) {
        // A user or team follows its own jobs only, one stream a job.
        return SendError(res,
                         absl::PermissionDeniedError(absl::StrCat(
                             scope->Describe(),
                             " follows live updates of its own jobs only (cluster=...&job=...)")));
      } else if (absl::Status s =
                     scope->NarrowFilters("live updates", &filter.cluster, nullptr, nullptr);
                 !s.ok()) {
        return SendError(res, s);
      }
    }
    absl::StatusOr<std::shared_ptr<EventSession>> opened =
        hub->Open(std::move(filter), req.remote_addr);
    if (!opened.ok()) {
      // The browser's EventSource retries by itself; Retry-After tells other clients when.
      res.set_header("Retry-After", absl::StrCat(kStreamRetryAfterS));
      return SendJson(res, Json{{"error", std::string(opened.status().message())}},
                      opened.status().code() == absl::StatusCode::kResourceExhausted ? 429 : 503);
    }
    std::shared_ptr<EventSession> session = *std::move(opened);
    // A stream lasts as long as its viewer's token: looked at with every message (at least
    // every keep-alive), so that a removed token ends the stream too.
    std::function<bool()> signed_in = ViewerStillSignedIn();
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream",
        [session, signed_in, keep_alive, first = true](size_t, httplib::DataSink& sink) mutable {
          if (!signed_in()) return false;
          std::string message;
          if (first) {
            // Opens the stream at once (the browser reports it connected) and sets the
            // reconnection delay.
            first = false;
            message = "retry: 3000\n: connected\n\n";
          } else if (!session->Next(&message, keep_alive)) {
            if (session->stopped()) return false;
            message = ": keep-alive\n\n";  // also detects a browser that went away
          }
          return sink.write(message.data(), message.size());
        },
        [hub, session](bool) { hub->Close(session); });
  });

  std::filesystem::path index = std::filesystem::path(options.static_dir) / "index.html";
  std::error_code ec;
  if (!options.static_dir.empty() && std::filesystem::exists(index, ec) &&
      server.set_mount_point("/", options.static_dir)) {
    return;
  }
  std::string dir = options.static_dir;
  server.Get("/", [dir](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_content(
        absl::StrCat("The dashboard front-end is not built",
                     dir.empty() ? "" : absl::StrCat(" (no index.html in ", dir, ")"),
                     ".\nBuild it with scripts/build-web.sh (./goodput up does) and restart "
                     "goodput-dashboard with --static-dir pointing at its output.\n"
                     "The JSON API is served under /api.\n"),
        "text/plain; charset=utf-8");
  });
}

}  // namespace goodput::dashboard
