// goodput-dashboard: the web dashboard's gateway. Serves the built front-end and a small
// JSON API (routes.h) answered from the four services' gRPC APIs, with live updates as
// Server-Sent Events. Settings: options.h (flags, environment fallbacks).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "grpcpp/grpcpp.h"
#include "services/platform/http_server.h"
#include "services/platform/install_paths.h"
#include "services/platform/signals.h"
#include "services/platform/tls.h"
#include "tools/dashboard/events.h"
#include "tools/dashboard/gateway.h"
#include "tools/dashboard/options.h"
#include "tools/dashboard/routes.h"
#include "tools/dashboard/signin.h"

namespace goodput::dashboard {
namespace {

// The built front-end: <build>/web/dist when this binary runs from a build tree
// (<build>/tools/dashboard), else the installed <prefix>/share/goodput/web (the Debian
// package, the container image). Where neither holds one, the place an installed binary
// looks, so that the message saying there is no front-end names it.
std::string DefaultStaticDir() {
  std::filesystem::path exe = platform::ExecutablePath();
  if (exe.empty()) return "";
  std::filesystem::path build_tree = exe.parent_path().parent_path().parent_path() / "web" / "dist";
  std::filesystem::path installed = platform::InstalledDataDir(exe, "web");
  std::error_code ec;
  if (std::filesystem::exists(build_tree / "index.html", ec)) return build_tree.string();
  if (std::filesystem::exists(installed / "index.html", ec)) return installed.string();
  return (exe.parent_path().filename() == "bin" ? installed : build_tree).string();
}

int Run(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<DashboardOptions> options =
      ParseOptions(args, [](const char* name) { return std::getenv(name); });
  if (!options.ok()) {
    std::cerr << "goodput-dashboard: " << options.status().message() << "\n";
    return 2;
  }
  if (options->help) {
    std::cout << kUsage;
    return 0;
  }
  std::string static_dir = options->static_dir.empty() ? DefaultStaticDir() : options->static_dir;

  const platform::ClientTls client_tls =
      platform::ClientTlsFromEnvironment([](const char* name) { return std::getenv(name); });
  auto channel = [&client_tls](const std::string& address) {
    return platform::MakeChannel(address, client_tls);
  };
  Gateway gateway({.ingest = channel(options->ingest),
                   .ofu = channel(options->ofu),
                   .mfu = channel(options->mfu),
                   .alerting = channel(options->alerting)},
                  {.token = options->token});
  EventHub hub(&gateway, {},
               {.max_sessions = static_cast<size_t>(options->max_streams),
                .max_sessions_per_client = static_cast<size_t>(options->max_streams_per_client)});

  absl::StatusOr<std::unique_ptr<platform::SignalWatcher>> signals =
      platform::SignalWatcher::Install();
  if (!signals.ok()) {
    std::cerr << "goodput-dashboard: " << signals.status().message() << "\n";
    return 1;
  }
  // Every open page holds one connection thread for its event stream: room for all of them
  // and for the API besides, so that live pages cannot starve it.
  platform::HttpLimits limits;
  limits.threads = options->max_streams + 16;
  limits.max_body_bytes = 64 << 10;  // the API takes no bodies
  platform::TlsConfig tls;
  tls.cert_file = options->tls_cert;
  tls.key_file = options->tls_key;
  if (absl::Status s = platform::ValidateTlsFiles(tls); !s.ok()) {
    std::cerr << "goodput-dashboard: " << s.message() << "\n";
    return 2;
  }
  std::vector<std::string> allowed_hosts = DefaultAllowedHosts(options->listen_host);
  for (absl::string_view host :
       absl::StrSplit(options->allowed_hosts, ',', absl::SkipWhitespace())) {
    allowed_hosts.emplace_back(absl::StripAsciiWhitespace(host));
  }
  absl::StatusOr<std::unique_ptr<SignIn>> signin = SignIn::Create(
      {.token_file = options->token_file,
       .trusted_proxy = options->trusted_proxy,
       .user_header = options->proxy_user_header,
       .operator_users = absl::StrSplit(options->operator_users, ',', absl::SkipWhitespace()),
       .secure_cookie = tls.serves_tls(),
       .allowed_hosts = std::move(allowed_hosts)});
  if (!signin.ok()) {
    std::cerr << "goodput-dashboard: " << signin.status().message() << "\n";
    return 2;
  }
  platform::HttpServer http(
      {.host = options->listen_host, .port = options->port, .limits = limits, .tls = tls}, nullptr,
      nullptr);
  (*signin)->Install(http);
  RegisterRoutes(http.native(), &gateway, &hub,
                 {.static_dir = static_dir, .hsts = tls.serves_tls()});
  for (const char* route :
       {"GET /api/fleet", "GET /api/jobs", "GET /api/jobs/<cluster>/<job>", "GET /api/alerts",
        "GET /api/events", "GET /jobs/<cluster>/<job>", "GET /"}) {
    http.AddRouteName(route);
  }
  if (absl::Status s = http.Start(); !s.ok()) {
    std::cerr << "goodput-dashboard: " << s.message() << "\n";
    return 1;
  }
  bool have_front_end = std::filesystem::exists(std::filesystem::path(static_dir) / "index.html");
  std::cout << "goodput-dashboard: serving " << (tls.serves_tls() ? "https" : "http") << "://"
            << options->listen_host << ":" << http.port() << "/ (services: ingest "
            << options->ingest << ", ofu " << options->ofu << ", mfu " << options->mfu
            << ", alerting " << options->alerting << ")"
            << ((*signin)->enabled() ? "; sign-in required" : "") << "\n";
  if (!have_front_end) {
    std::cout << "goodput-dashboard: no front-end in \"" << static_dir
              << "\" (build it with scripts/build-web.sh); serving the JSON API only\n";
  }
  std::cout.flush();
  if (!options->ready_file.empty()) {
    std::ofstream ready(options->ready_file);
    ready << "http_port=" << http.port() << "\n"
          << "http_routes=" << absl::StrJoin(http.routes(), ",") << "\n";
  }

  (*signals)->Wait();
  std::cout << "goodput-dashboard: shutting down" << std::endl;
  hub.StopAll();
  std::cout << "goodput-dashboard: live streams closed" << std::endl;
  http.Stop();
  std::cout << "goodput-dashboard: stopped" << std::endl;
  return 0;
}

}  // namespace
}  // namespace goodput::dashboard

int main(int argc, char** argv) { return goodput::dashboard::Run(argc, argv); }
