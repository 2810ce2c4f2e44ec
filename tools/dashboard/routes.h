// The dashboard's HTTP surface: the JSON API under /api (fleet, jobs, one job, alerts, the
// live event stream) and the built front-end's static files at /.
//
//   GET /api/fleet?range_h=24                fleet summary of the last 24 hours
//   GET /api/jobs?cluster=&range_h=&limit=   jobs active in the range, newest first
//   GET /api/jobs/<cluster>/<job id>         one job's page (job ids may contain '/')
//   GET /api/alerts?cluster=&range_h=        alerts open at some point in the range
//   GET /api/events?cluster=&job=            Server-Sent Events (ofu, alert, fleet, status);
//                                            429 with Retry-After when the client has its
//                                            most streams open (SessionLimits), 503 when
//                                            the dashboard has
//   GET /jobs/<cluster>/<job id>             redirect to the job's page (alerts link here)
//
// Errors are JSON {"error": "..."} with the HTTP status matching the gRPC code (404 for an
// unknown job, 400 for a bad parameter, 503 when a service is down). Paths holding control
// characters ("/index.html%00.js") or ".." segments are refused 400 by the HTTP server
// (guarded_http_server.h) before any route or static file sees them.
#pragma once

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "httplib.h"
#include "tools/dashboard/events.h"
#include "tools/dashboard/gateway.h"

namespace goodput::dashboard {

struct RouteOptions {
  // The built front-end; empty or without index.html: / explains how to build it.
  std::string static_dir = {};
  // The clock the time ranges are computed from.
  std::function<absl::Time()> now = [] { return absl::Now(); };
  // Served over HTTPS: every response carries Strict-Transport-Security.
  bool hsts = false;
  // A live stream with nothing to send sends a comment this often (and then looks whether its
  // viewer is still signed in).
  absl::Duration keep_alive = absl::Seconds(15);
};

// The headers every response of the dashboard carries: a Content-Security-Policy that allows
// the front-end's own scripts, styles and API only (no inline script, no framing, no plugins),
// X-Content-Type-Options: nosniff, Referrer-Policy: no-referrer and X-Frame-Options: DENY.
// (Every string the front-end renders is escaped; the policy is the second line of defence.)
// With `hsts` (the dashboard serves HTTPS), Strict-Transport-Security: kStrictTransportSecurity
// too, so that a browser never signs in over plain HTTP to that name again.
inline constexpr char kContentSecurityPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'";
inline constexpr char kStrictTransportSecurity[] = "max-age=31536000";
void SetSecurityHeaders(httplib::Server& server, bool hsts = false);

// HTTP status for a gRPC/absl code.
int HttpStatusFor(absl::StatusCode code);

// Registers every route on `server`, and SetSecurityHeaders. `gateway` and `hub` must outlive it.
void RegisterRoutes(httplib::Server& server, Gateway* gateway, EventHub* hub, RouteOptions options);

}  // namespace goodput::dashboard
