#include "tests/support/mariadb_server.h"

#include <unistd.h>

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "tests/support/find_program.h"
#include "tests/support/free_port.h"
#include "tests/support/service_process.h"

namespace goodput::testing {
namespace {

namespace fs = std::filesystem;

// Settings for both the bootstrap and the server: a small, fast, throw-away instance (no
// doublewrite, no flush at commit) that still meets what slurmdbd needs (InnoDB). Its temporary
// tables live in the instance's own folder: the bootstrap's in a shared /tmp failed when two
// instances were set up at once ("Could not remove temporary table ... error: 2").
std::vector<std::string> SmallInstanceSettings(const fs::path& tmp) {
  std::vector<std::string> settings = {
      "--skip-name-resolve",           absl::StrCat("--tmpdir=", tmp.string()),
      "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M",
      "--innodb-doublewrite=0",        "--innodb-flush-log-at-trx-commit=0"};
  // mariadbd refuses to run as root unless told to.
  if (geteuid() == 0) settings.push_back("--user=root");
  return settings;
}

bool IsPlainWord(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<MariaDbServer>> MariaDbServer::Create(MariaDbServerOptions options) {
  absl::StatusOr<TempDir> dir = TempDir::Create("goodput-mariadb");
  if (!dir.ok()) return dir.status();
  std::unique_ptr<MariaDbServer> server(new MariaDbServer(*std::move(dir)));
  if (absl::Status s = server->Start(options); !s.ok()) return s;
  return server;
}

absl::Status MariaDbServer::Start(const MariaDbServerOptions& options) {
  const fs::path root = dir_.path();
  const fs::path data = root / "data";
  socket_ = root / "mariadb.sock";
  const fs::path tmp = root / "tmp";
  std::error_code ec;
  fs::create_directories(tmp, ec);
  if (ec) return absl::InternalError(absl::StrCat("creating ", tmp.string(), ": ", ec.message()));

  std::vector<std::string> install = {FindProgram("mariadb-install-db"), "--no-defaults",
                                      absl::StrCat("--datadir=", data.string()),
                                      "--auth-root-authentication-method=normal", "--skip-test-db"};
  for (std::string& s : SmallInstanceSettings(tmp)) install.push_back(std::move(s));
  absl::StatusOr<ProgramResult> installed = RunProgram(install, {}, options.start_timeout);
  if (!installed.ok()) return installed.status();
  if (!installed->exit.Success()) {
    return absl::InternalError(
        absl::StrCat("mariadb-install-db ", installed->exit.ToString(), ": ", installed->output));
  }

  absl::StatusOr<int> port = FreePort();
  if (!port.ok()) return port.status();
  port_ = *port;
  const fs::path error_log = root / "mariadbd.err";
  std::vector<std::string> argv = {FindProgram("mariadbd"),
                                   "--no-defaults",
                                   absl::StrCat("--datadir=", data.string()),
                                   absl::StrCat("--socket=", socket_.string()),
                                   absl::StrCat("--port=", port_),
                                   absl::StrCat("--bind-address=", host_),
                                   absl::StrCat("--pid-file=", (root / "mariadbd.pid").string()),
                                   absl::StrCat("--log-error=", error_log.string())};
  for (std::string& s : SmallInstanceSettings(tmp)) argv.push_back(std::move(s));
  absl::StatusOr<std::unique_ptr<ChildProcess>> proc = ChildProcess::Start(
      {.argv = std::move(argv), .log_path = root / "mariadbd.out", .working_dir = root});
  if (!proc.ok()) return proc.status();
  server_ = *std::move(proc);
  std::string last;
  const bool ready = PollUntil(
      [&] {
        if (!server_->IsRunning()) return true;
        absl::Status s = Execute("SELECT 1");
        last = s.ToString();
        return s.ok();
      },
      options.start_timeout, absl::Milliseconds(100));
  if (!ready || !server_->IsRunning()) {
    return absl::UnavailableError(
        absl::StrCat("mariadbd on port ", port_,
                     server_->IsRunning() ? " did not answer" : " exited during start-up", " (",
                     last, "); ", error_log.string(), ":\n", ReadFileTail(error_log, 4096)));
  }
  return absl::OkStatus();
}

MariaDbServer::~MariaDbServer() {
  if (server_) server_->Terminate(absl::Seconds(30));
}

absl::Status MariaDbServer::Execute(const std::string& sql) {
  absl::StatusOr<ProgramResult> r =
      RunProgram({"mariadb", "--no-defaults", absl::StrCat("--socket=", socket_.string()),
                  "--user=root", "--batch", "--execute", sql},
                 {}, absl::Seconds(30));
  if (!r.ok()) return r.status();
  if (!r->exit.Success()) {
    return absl::InternalError(absl::StrCat("mariadb ", r->exit.ToString(), ": ", r->output));
  }
  return absl::OkStatus();
}

absl::Status MariaDbServer::CreateUser(const std::string& name, const std::string& password) {
  if (!IsPlainWord(name) || !IsPlainWord(password)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "MariaDB user \"", name, "\": name and password must be letters, digits or _"));
  }
  return Execute(absl::StrCat("CREATE USER '", name, "'@'", host_, "' IDENTIFIED BY '", password,
                              "'; GRANT ALL ON *.* TO '", name, "'@'", host_, "'"));
}

}  // namespace goodput::testing
