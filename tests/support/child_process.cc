#include "tests/support/child_process.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

extern char** environ;

namespace goodput::testing {

std::string ExitStatus::ToString() const {
  if (signal != 0) return absl::StrCat("killed by signal ", signal);
  return absl::StrCat("exit code ", exit_code);
}

std::string ReadFileTail(const std::filesystem::path& path, size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(max_bytes)
                                   ? size - static_cast<std::streamoff>(max_bytes)
                                   : 0;
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

bool PollUntil(const std::function<bool()>& condition, absl::Duration timeout,
               absl::Duration interval) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    std::this_thread::sleep_for(absl::ToChronoNanoseconds(interval));
  }
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(ChildProcessOptions options) {
  if (options.argv.empty()) return absl::InvalidArgumentError("ChildProcess: argv is empty");

  // Everything the child needs is prepared before fork: after fork only async-signal-safe
  // calls are allowed.
  std::vector<char*> argv;
  for (auto& arg : options.argv) argv.push_back(arg.data());
  argv.push_back(nullptr);

  std::map<std::string, std::string> env_map;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    env_map[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  for (const auto& [key, value] : options.env) env_map[key] = value;
  std::vector<std::string> env_strings;
  for (const auto& [key, value] : env_map) env_strings.push_back(absl::StrCat(key, "=", value));
  std::vector<char*> envp;
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);

  const std::string log_path = options.log_path.empty() ? "/dev/null" : options.log_path.string();
  const std::string working_dir = options.working_dir.string();
  std::vector<gid_t> groups;
  if (options.uid.has_value()) {
    if (passwd* pw = getpwuid(*options.uid); pw != nullptr) {
      int count = 64;
      groups.resize(count);
      if (getgrouplist(pw->pw_name, options.gid.value_or(pw->pw_gid), groups.data(), &count) < 0) {
        groups.resize(count);
        getgrouplist(pw->pw_name, options.gid.value_or(pw->pw_gid), groups.data(), &count);
      }
      groups.resize(count);
    }
  }

  int error_pipe[2];
  if (pipe2(error_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("ChildProcess: pipe2: ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(error_pipe[0]);
    close(error_pipe[1]);
    return absl::InternalError(absl::StrCat("ChildProcess: fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    close(error_pipe[0]);
    auto fail = [&](int step) {
      const int err[2] = {step, errno};
      (void)!write(error_pipe[1], err, sizeof(err));
      _exit(127);
    };
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log_fd < 0) fail(1);
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    if (!working_dir.empty() && chdir(working_dir.c_str()) != 0) fail(2);
    if (options.uid.has_value()) {
      if (setgroups(groups.size(), groups.data()) != 0) fail(3);
      if (options.gid.has_value() && setgid(*options.gid) != 0) fail(3);
      if (setuid(*options.uid) != 0) fail(3);
    }
    // Signals ignored or blocked by the test runner must not leak into servers.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    execvpe(argv[0], argv.data(), envp.data());
    fail(4);
  }
  close(error_pipe[1]);
  setpgid(pid, pid);  // also from the parent, so a signal sent right away reaches the group
  int err[2] = {0, 0};
  const ssize_t n = read(error_pipe[0], err, sizeof(err));
  close(error_pipe[0]);
  auto child = std::unique_ptr<ChildProcess>(new ChildProcess(std::move(options), pid));
  if (n == static_cast<ssize_t>(sizeof(err))) {
    child->Wait(absl::Seconds(5)).IgnoreError();
    static constexpr const char* kSteps[] = {"", "opening the log file", "changing directory",
                                             "dropping privileges", "executing"};
    return absl::NotFoundError(absl::StrCat(
        "ChildProcess: ", kSteps[(err[0] >= 1 && err[0] <= 4) ? err[0] : 4], " for '",
        absl::StrJoin(child->options_.argv, " "), "' failed: ", std::strerror(err[1])));
  }
  return child;
}

ChildProcess::~ChildProcess() {
  if (!exit_.has_value()) Terminate();
}

bool ChildProcess::TryReap() {
  if (exit_.has_value()) return true;
  int status = 0;
  const pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == 0) return false;
  ExitStatus result;
  if (r < 0) {
    // Already reaped elsewhere; treat it as gone.
    exit_ = result;
    return true;
  }
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  exit_ = result;
  return true;
}

bool ChildProcess::IsRunning() { return !TryReap(); }

absl::Status ChildProcess::Signal(int signal) {
  if (exit_.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat("ChildProcess ", pid_, " has exited"));
  }
  if (kill(-pid_, signal) != 0 && kill(pid_, signal) != 0) {
    return absl::InternalError(
        absl::StrCat("kill(", pid_, ", ", signal, "): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status ChildProcess::SignalLeader(int signal) {
  if (exit_.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat("ChildProcess ", pid_, " has exited"));
  }
  if (kill(pid_, signal) != 0) {
    return absl::InternalError(
        absl::StrCat("kill(", pid_, ", ", signal, "): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<ExitStatus> ChildProcess::Wait(absl::Duration timeout) {
  if (PollUntil([&] { return TryReap(); }, timeout, absl::Milliseconds(10))) return *exit_;
  return absl::DeadlineExceededError(absl::StrCat("ChildProcess '", options_.argv[0], "' (pid ",
                                                  pid_, ") still running after ",
                                                  absl::FormatDuration(timeout)));
}

ExitStatus ChildProcess::Terminate(absl::Duration grace, int first_signal) {
  if (TryReap()) {
    kill(-pid_, SIGKILL);  // stragglers the child left in its group
    return *exit_;
  }
  kill(-pid_, first_signal);
  if (!Wait(grace).ok()) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    (void)Wait(absl::Seconds(30));
  }
  kill(-pid_, SIGKILL);
  return exit_.value_or(ExitStatus{});
}

std::string ChildProcess::LogTail(size_t max_bytes) const {
  if (options_.log_path.empty()) return "";
  return ReadFileTail(options_.log_path, max_bytes);
}

}  // namespace goodput::testing
