#include "tests/support/find_program.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "absl/strings/str_split.h"

namespace goodput::testing {

std::string FindProgram(const std::string& name) {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) dirs = absl::StrSplit(path, ':', absl::SkipEmpty());
  dirs.push_back("/usr/sbin");
  dirs.push_back("/sbin");
  for (const std::string& d : dirs) {
    const std::filesystem::path candidate = std::filesystem::path(d) / name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return name;
}

}  // namespace goodput::testing
