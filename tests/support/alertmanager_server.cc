#include "tests/support/alertmanager_server.h"

#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "httplib.h"
#include "tests/support/free_port.h"

namespace goodput::testing {
namespace {

constexpr char kDefaultConfig[] =
    "route:\n"
    "  receiver: nowhere\n"
    "receivers:\n"
    "  - name: nowhere\n";

std::string FindAlertmanager() {
  for (const char* candidate : {"/usr/bin/prometheus-alertmanager", "/usr/bin/alertmanager"}) {
    if (access(candidate, X_OK) == 0) return candidate;
  }
  return "prometheus-alertmanager";
}

}  // namespace

std::string AlertmanagerServer::Url() const { return absl::StrCat("http://127.0.0.1:", port_); }

absl::StatusOr<std::unique_ptr<AlertmanagerServer>> AlertmanagerServer::Create(
    AlertmanagerServerOptions options) {
  absl::StatusOr<TempDir> dir = TempDir::Create("goodput-alertmanager");
  if (!dir.ok()) return dir.status();
  std::unique_ptr<AlertmanagerServer> am(new AlertmanagerServer(*std::move(dir)));
  const std::filesystem::path config = am->dir() / "alertmanager.yml";
  {
    std::ofstream out(config);
    out << (options.config_yaml.empty() ? kDefaultConfig : options.config_yaml);
  }
  std::filesystem::create_directories(am->dir() / "data");
  // A port taken between FreePort and the bind makes the server exit: try a few.
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<int> port = FreePort();
    if (!port.ok()) return port.status();
    am->port_ = *port;
    absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(
        {.argv = {FindAlertmanager(), absl::StrCat("--config.file=", config.string()),
                  absl::StrCat("--storage.path=", (am->dir() / "data").string()),
                  absl::StrCat("--web.listen-address=127.0.0.1:", *port),
                  "--cluster.listen-address=", "--log.level=info"},
         .log_path = am->dir() / "alertmanager.log"});
    if (!process.ok()) return process.status();
    am->process_ = *std::move(process);
    httplib::Client client("127.0.0.1", *port);
    client.set_connection_timeout(1);
    const bool ready = PollUntil(
        [&] {
          if (!am->process_->IsRunning()) return true;
          auto res = client.Get("/-/ready");
          return res && res->status == 200;
        },
        options.start_timeout, absl::Milliseconds(50));
    if (ready && am->process_->IsRunning()) return am;
    if (!ready) {
      return absl::DeadlineExceededError(
          absl::StrCat("alertmanager was not ready: ", am->process_->LogTail()));
    }
  }
  return absl::UnavailableError(absl::StrCat("alertmanager exited: ", am->process_->LogTail()));
}

}  // namespace goodput::testing
