#include "tests/support/temp_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace goodput::testing {

absl::StatusOr<TempDir> TempDir::Create(const std::string& prefix) {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp", "/", prefix, "-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("TempDir: mkdtemp(", pattern, ") failed: ", std::strerror(errno)));
  }
  return TempDir(std::filesystem::path(pattern));
}

TempDir& TempDir::operator=(TempDir&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

TempDir::~TempDir() { Remove(); }

void TempDir::Remove() {
  if (path_.empty()) return;
  const char* keep = std::getenv("GOODPUT_KEEP_TEST_DIRS");
  if (keep != nullptr && std::string(keep) == "1") {
    std::cerr << "GOODPUT_KEEP_TEST_DIRS: keeping " << path_ << "\n";
  } else {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  path_.clear();
}

}  // namespace goodput::testing
