// goodput-dashboard's settings: command-line flags, each with an environment variable as
// its fallback (the flag wins), like the other goodput tools.
//
//   --listen HOST        $GOODPUT_DASHBOARD_HOST         [127.0.0.1]
//   --port N             $GOODPUT_DASHBOARD_PORT         [7300; 0 = any free port]
//   --ingest HOST:PORT   $GOODPUT_INGEST_ADDR            [127.0.0.1:7101]
//   --ofu HOST:PORT      $GOODPUT_OFU_ADDR               [127.0.0.1:7102]
//   --mfu HOST:PORT      $GOODPUT_MFU_ADDR               [127.0.0.1:7103]
//   --alerting HOST:PORT $GOODPUT_ALERTING_ADDR          [127.0.0.1:7104]
//   --token TOKEN        $GOODPUT_TOKEN                  bearer token for the services
//   --static-dir DIR     $GOODPUT_DASHBOARD_STATIC_DIR   the built front-end
//   --max-streams N      $GOODPUT_DASHBOARD_MAX_STREAMS  [64] live-update streams in all
//   --max-streams-per-client N  $GOODPUT_DASHBOARD_MAX_STREAMS_PER_CLIENT  [8] per client
//                        address (behind a proxy every page shares its address: raise it)
//   --tls-cert FILE, --tls-key FILE  $GOODPUT_DASHBOARD_TLS_CERT, $GOODPUT_DASHBOARD_TLS_KEY
//                        serve HTTPS (re-read when the files change)
//   --token-file FILE    $GOODPUT_DASHBOARD_TOKEN_FILE   sign-in required (signin.h): tokens
//                        as `TOKEN ROLE [clusters=..] [user=..] [team=..]` lines, re-read when the file changes
//   --trusted-proxy ADDR $GOODPUT_DASHBOARD_TRUSTED_PROXY  a proxy address whose user header
//                        signs requests in (SSO behind an OAuth2 proxy)
//   --proxy-user-header NAME  $GOODPUT_DASHBOARD_PROXY_USER_HEADER  [X-Forwarded-User]
//   --operator-users A,B $GOODPUT_DASHBOARD_OPERATOR_USERS  proxy users who see every job
//   --allowed-hosts A,B  $GOODPUT_DASHBOARD_ALLOWED_HOSTS  names the Host header may give
//                        besides the listen addresses and localhost ("*": any)
//   --ready-file FILE    written once serving: "http_port=N"
// The services are called over TLS when $GOODPUT_TLS_CA is set (as goodputctl: tls.h).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace goodput::dashboard {

struct DashboardOptions {
  std::string listen_host = "127.0.0.1";
  int port = 7300;
  std::string ingest = "127.0.0.1:7101";
  std::string ofu = "127.0.0.1:7102";
  std::string mfu = "127.0.0.1:7103";
  std::string alerting = "127.0.0.1:7104";
  std::string token;
  std::string static_dir;  // empty: next to the binary (see main.cc)
  int max_streams = 64;
  int max_streams_per_client = 8;
  std::string tls_cert;
  std::string tls_key;
  std::string token_file;
  std::string trusted_proxy;
  std::string proxy_user_header = "X-Forwarded-User";
  std::string operator_users;  // comma-separated
  std::string allowed_hosts;   // comma-separated, added to signin.h's DefaultAllowedHosts
  std::string ready_file;
  bool help = false;
};

extern const char kUsage[];

// Parses `args` (without the program name); `getenv` supplies the fallbacks.
// INVALID_ARGUMENT naming the flag (or variable) and the value for anything it cannot use.
absl::StatusOr<DashboardOptions> ParseOptions(
    const std::vector<std::string>& args, const std::function<const char*(const char*)>& getenv);

}  // namespace goodput::dashboard
