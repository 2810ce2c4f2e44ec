#include "tests/support/postgres_server.h"

#include <fcntl.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/support/free_port.h"

#ifndef GOODPUT_TESTSUPPORT_CACHE_DIR
#define GOODPUT_TESTSUPPORT_CACHE_DIR ""
#endif

namespace goodput::testing {
namespace {

namespace fs = std::filesystem;

std::string RunCapture(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[512];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  pclose(pipe);
  return std::string(absl::StripAsciiWhitespace(out));
}

// Runs a program to completion; its output goes to `log`.
absl::Status RunProgram(std::vector<std::string> argv, const fs::path& log,
                        std::optional<uid_t> uid, std::optional<gid_t> gid,
                        absl::Duration timeout) {
  const std::string what = absl::StrJoin(argv, " ");
  auto proc =
      ChildProcess::Start({.argv = std::move(argv), .log_path = log, .uid = uid, .gid = gid});
  if (!proc.ok()) return proc.status();
  auto exit = (*proc)->Wait(timeout);
  if (!exit.ok()) return exit.status();
  if (!exit->Success()) {
    return absl::InternalError(absl::StrCat("'", what, "' failed (", exit->ToString(), "); log ",
                                            log.string(), ":\n", ReadFileTail(log)));
  }
  return absl::OkStatus();
}

absl::Status ChownTree(const fs::path& root, uid_t uid, gid_t gid) {
  if (lchown(root.c_str(), uid, gid) != 0) {
    return absl::InternalError(absl::StrCat("chown ", root.string(), ": ", std::strerror(errno)));
  }
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (lchown(it->path().c_str(), uid, gid) != 0) {
      return absl::InternalError(
          absl::StrCat("chown ", it->path().string(), ": ", std::strerror(errno)));
    }
  }
  if (ec) return absl::InternalError(absl::StrCat("walking ", root.string(), ": ", ec.message()));
  return absl::OkStatus();
}

// Holds an exclusive flock on a file for its lifetime.
class FileLock {
 public:
  static absl::StatusOr<FileLock> Acquire(const fs::path& path) {
    const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      return absl::InternalError(absl::StrCat("open ", path.string(), ": ", std::strerror(errno)));
    while (flock(fd, LOCK_EX) != 0) {
      if (errno != EINTR) {
        const int err = errno;
        close(fd);
        return absl::InternalError(absl::StrCat("flock ", path.string(), ": ", std::strerror(err)));
      }
    }
    return FileLock(fd);
  }
  FileLock(FileLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  FileLock& operator=(FileLock&&) = delete;
  ~FileLock() {
    if (fd_ >= 0) close(fd_);  // closing releases the lock
  }

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

fs::path CacheDir() {
  const char* env = std::getenv("GOODPUT_TESTSUPPORT_CACHE_DIR");
  if (env != nullptr && *env != '\0') return env;
  if (std::string(GOODPUT_TESTSUPPORT_CACHE_DIR).empty()) {
    return fs::temp_directory_path() / absl::StrCat("goodput-testsupport-", geteuid());
  }
  return GOODPUT_TESTSUPPORT_CACHE_DIR;
}

std::string PgVersion(const fs::path& bin_dir) {
  // "postgres (PostgreSQL) 15.18 (Debian ...)" -> "15.18"
  const std::string out =
      RunCapture(absl::StrCat("'", (bin_dir / "postgres").string(), "' --version 2>/dev/null"));
  std::vector<std::string> words = absl::StrSplit(out, ' ', absl::SkipEmpty());
  return words.size() >= 3 ? words[2] : "unknown";
}

// Makes sure an initdb'd template exists in the cache and returns its path.
absl::StatusOr<fs::path> EnsureTemplate(const fs::path& bin_dir, std::optional<uid_t> uid,
                                        std::optional<gid_t> gid) {
  const fs::path cache = CacheDir();
  std::error_code ec;
  fs::create_directories(cache, ec);
  if (ec) return absl::InternalError(absl::StrCat("creating ", cache.string(), ": ", ec.message()));
  auto lock = FileLock::Acquire(cache / "pg-template.lock");
  if (!lock.ok()) return lock.status();

  const fs::path template_dir = cache / absl::StrCat("pg-", PgVersion(bin_dir), "-template");
  const fs::path marker = template_dir / "goodput-template-complete";
  if (fs::exists(marker)) return template_dir;

  fs::remove_all(template_dir, ec);
  // initdb runs in a scratch folder the server user can write, then moves into the cache.
  auto scratch = TempDir::Create("goodput-initdb");
  if (!scratch.ok()) return scratch.status();
  if (uid.has_value()) {
    if (auto s = ChownTree(scratch->path(), *uid, *gid); !s.ok()) return s;
  }
  const fs::path data = scratch->path() / "data";
  const fs::path log = cache / "initdb.log";
  fs::remove(log, ec);
  if (auto s = RunProgram({(bin_dir / "initdb").string(), "-D", data.string(), "-U", "postgres",
                           "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"},
                          log, uid, gid, absl::Minutes(5));
      !s.ok()) {
    return s;
  }
  if (auto s = RunProgram({"cp", "-a", data.string(), template_dir.string()}, log, std::nullopt,
                          std::nullopt, absl::Minutes(2));
      !s.ok()) {
    return s;
  }
  std::ofstream(marker) << "initdb by goodput tests/support\n";
  if (!fs::exists(marker))
    return absl::InternalError(absl::StrCat("cannot write ", marker.string()));
  return template_dir;
}

}  // namespace

absl::StatusOr<fs::path> FindPostgresBinDir() {
  std::vector<std::string> tried;
  if (const char* env = std::getenv("GOODPUT_PG_BINDIR"); env != nullptr && *env != '\0') {
    if (fs::exists(fs::path(env) / "postgres")) return fs::path(env);
    tried.push_back(absl::StrCat("$GOODPUT_PG_BINDIR=", env));
  }
  const std::string from_pg_config = RunCapture("pg_config --bindir 2>/dev/null");
  if (!from_pg_config.empty() && fs::exists(fs::path(from_pg_config) / "postgres") &&
      fs::exists(fs::path(from_pg_config) / "initdb")) {
    return fs::path(from_pg_config);
  }
  tried.push_back(
      absl::StrCat("pg_config --bindir (", from_pg_config.empty() ? "none" : from_pg_config, ")"));
  int best_major = -1;
  fs::path best;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    int major = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &major)) continue;
    if (major > best_major && fs::exists(entry.path() / "bin" / "postgres") &&
        fs::exists(entry.path() / "bin" / "initdb")) {
      best_major = major;
      best = entry.path() / "bin";
    }
  }
  if (best_major >= 0) return best;
  tried.push_back("/usr/lib/postgresql/*/bin");
  return absl::NotFoundError(absl::StrCat("PostgreSQL server binaries not found; tried ",
                                          absl::StrJoin(tried, ", "),
                                          ". Install the postgresql package."));
}

absl::StatusOr<std::unique_ptr<PostgresServer>> PostgresServer::Create(
    PostgresServerOptions options) {
  auto bin_dir = FindPostgresBinDir();
  if (!bin_dir.ok()) return bin_dir.status();
  auto dir = TempDir::Create("goodput-pg");
  if (!dir.ok()) return dir.status();
  auto server =
      std::unique_ptr<PostgresServer>(new PostgresServer(std::move(*dir), std::move(options)));
  server->bin_dir_ = *bin_dir;
  if (geteuid() == 0) {
    // PostgreSQL refuses to run as root.
    passwd* pw = getpwnam("postgres");
    if (pw == nullptr) {
      return absl::FailedPreconditionError(
          "running as root, but there is no 'postgres' user to run PostgreSQL as");
    }
    server->run_as_uid_ = pw->pw_uid;
    server->run_as_gid_ = pw->pw_gid;
  }
  auto template_dir = EnsureTemplate(server->bin_dir_, server->run_as_uid_, server->run_as_gid_);
  if (!template_dir.ok()) return template_dir.status();

  server->data_dir_ = server->dir_.path() / "data";
  server->log_path_ = server->dir_.path() / "postgres.log";
  if (auto s = RunProgram({"cp", "-a", template_dir->string(), server->data_dir_.string()},
                          server->dir_.path() / "copy.log", std::nullopt, std::nullopt,
                          absl::Minutes(2));
      !s.ok()) {
    return s;
  }
  std::error_code ec;
  fs::remove(server->data_dir_ / "goodput-template-complete", ec);
  fs::permissions(server->data_dir_, fs::perms::owner_all, ec);
  if (server->run_as_uid_.has_value()) {
    if (auto s = ChownTree(server->dir_.path(), *server->run_as_uid_, *server->run_as_gid_);
        !s.ok()) {
      return s;
    }
  }

  // The free port may be taken before the server binds it; try a few.
  absl::Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto port = FreePort();
    if (!port.ok()) return port.status();
    server->port_ = *port;
    last = server->StartOnce();
    if (last.ok()) return server;
    if (!absl::StrContains(last.message(), "could not bind") &&
        !absl::StrContains(last.message(), "could not create any TCP/IP sockets")) {
      break;
    }
  }
  return last;
}

PostgresServer::~PostgresServer() { Stop().IgnoreError(); }

absl::Status PostgresServer::StartOnce() {
  std::vector<std::string> argv = {(bin_dir_ / "postgres").string(),
                                   "-D",
                                   data_dir_.string(),
                                   "-p",
                                   absl::StrCat(port_),
                                   "-c",
                                   "listen_addresses=127.0.0.1",
                                   "-c",
                                   "unix_socket_directories=",
                                   "-c",
                                   "shared_buffers=32MB",
                                   "-c",
                                   "max_connections=100"};
  for (const auto& [name, value] : options_.settings) {
    argv.push_back("-c");
    argv.push_back(absl::StrCat(name, "=", value));
  }
  auto proc = ChildProcess::Start({.argv = std::move(argv),
                                   .log_path = log_path_,
                                   .working_dir = dir_.path(),
                                   .uid = run_as_uid_,
                                   .gid = run_as_gid_});
  if (!proc.ok()) return proc.status();
  process_ = std::move(*proc);
  const std::string dsn = absl::StrCat(Dsn("postgres"), " connect_timeout=2");
  bool exited = false;
  const bool ready = PollUntil(
      [&] {
        if (!process_->IsRunning()) {
          exited = true;
          return true;
        }
        return PQping(dsn.c_str()) == PQPING_OK;
      },
      options_.start_timeout, absl::Milliseconds(25));
  if (ready && !exited) return absl::OkStatus();
  process_->Terminate(absl::Seconds(5));
  process_.reset();
  const std::string log = ReadFileTail(log_path_, 8192);
  return absl::UnavailableError(absl::StrCat(
      "PostgreSQL on port ", port_, exited ? " exited during start-up" : " did not become ready",
      "; log ", log_path_.string(), ":\n", log));
}

absl::Status PostgresServer::Start() {
  if (IsRunning()) return absl::OkStatus();
  return StartOnce();
}

absl::Status PostgresServer::Stop() {
  if (process_ == nullptr) return absl::OkStatus();
  absl::Status result;
  if (process_->IsRunning()) {
    process_->SignalLeader(SIGINT).IgnoreError();  // fast shutdown
    if (!process_->Wait(absl::Seconds(60)).ok()) {
      result = absl::DeadlineExceededError(
          absl::StrCat("PostgreSQL on port ", port_, " did not shut down within 60s; killed"));
    }
  }
  process_->Terminate(absl::Seconds(5));
  process_.reset();
  return result;
}

absl::Status PostgresServer::Restart() {
  if (auto s = Stop(); !s.ok()) return s;
  return StartOnce();
}

bool PostgresServer::IsRunning() { return process_ != nullptr && process_->IsRunning(); }

std::string PostgresServer::Dsn(const std::string& db) const {
  return absl::StrCat("host=127.0.0.1 port=", port_, " user=postgres dbname=", db);
}

namespace {

// Runs `sql` on a fresh libpq connection; `first_value` receives the first field if asked.
absl::Status RunSql(const std::string& dsn, const std::string& sql,
                    std::optional<std::string>* first_value) {
  PGconn* conn = PQconnectdb(absl::StrCat(dsn, " connect_timeout=10").c_str());
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn);
    PQfinish(conn);
    return absl::UnavailableError(absl::StrCat("connecting to ", dsn, ": ", message));
  }
  PGresult* res = PQexec(conn, sql.c_str());
  const ExecStatusType status = PQresultStatus(res);
  absl::Status result;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    const std::string message =
        absl::StrCat("'", sql.substr(0, 200), "': ", PQresultErrorMessage(res));
    result = (state != nullptr && std::string(state) == "42P04") ? absl::AlreadyExistsError(message)
                                                                 : absl::InternalError(message);
  } else if (first_value != nullptr) {
    if (PQntuples(res) > 0 && PQnfields(res) > 0) {
      *first_value = PQgetisnull(res, 0, 0) ? std::string() : std::string(PQgetvalue(res, 0, 0));
    } else {
      first_value->reset();
    }
  }
  PQclear(res);
  PQfinish(conn);
  return result;
}

}  // namespace

absl::Status PostgresServer::CreateDatabase(const std::string& name) {
  if (name.empty() || !std::all_of(name.begin(), name.end(), [](char c) {
        return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
      })) {
    return absl::InvalidArgumentError(
        absl::StrCat("database name '", name, "': use letters, digits and '_'"));
  }
  return RunSql(Dsn("postgres"), absl::StrCat("CREATE DATABASE \"", name, "\""), nullptr);
}

absl::Status PostgresServer::Execute(const std::string& db, const std::string& sql) {
  return RunSql(Dsn(db), sql, nullptr);
}

absl::StatusOr<std::string> PostgresServer::QueryValue(const std::string& db,
                                                       const std::string& sql) {
  std::optional<std::string> value;
  if (auto s = RunSql(Dsn(db), sql, &value); !s.ok()) return s;
  if (!value.has_value()) return absl::NotFoundError(absl::StrCat("'", sql, "' returned no rows"));
  return *value;
}

}  // namespace goodput::testing
