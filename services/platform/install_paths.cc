#include "services/platform/install_paths.h"

#include <system_error>

namespace goodput::platform {

std::filesystem::path ExecutablePath() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  return exe;
}

std::filesystem::path InstalledDataDir(const std::filesystem::path& executable,
                                       absl::string_view name) {
  // GOODPUT_DATADIR_FROM_BINDIR is bin -> share/goodput as CMake's install directories say
  // ("../share/goodput" for the usual layout).
  return (executable.parent_path() / GOODPUT_DATADIR_FROM_BINDIR / std::string(name))
      .lexically_normal();
}

std::string DefaultMigrationsDir() {
  constexpr char kCheckout[] = "migrations";
  std::error_code ec;
  if (std::filesystem::is_directory(kCheckout, ec)) return kCheckout;
  std::filesystem::path exe = ExecutablePath();
  if (!exe.empty()) {
    std::filesystem::path installed = InstalledDataDir(exe, "migrations");
    if (std::filesystem::is_directory(installed, ec)) return installed.string();
  }
  return kCheckout;
}

}  // namespace goodput::platform
