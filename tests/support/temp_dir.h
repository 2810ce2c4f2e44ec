#pragma once

// A private temporary folder for one test, removed with everything in it when the object is
// destroyed (also when the test failed an assertion). Set GOODPUT_KEEP_TEST_DIRS=1 to keep
// it for inspection; the path is then printed to stderr.

#include <filesystem>
#include <string>

#include "absl/status/statusor.h"

namespace goodput::testing {

class TempDir {
 public:
  // Creates a fresh folder under $TMPDIR (or /tmp) whose name starts with `prefix`.
  static absl::StatusOr<TempDir> Create(const std::string& prefix = "goodput-test");

  TempDir(TempDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  TempDir& operator=(TempDir&& other) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::filesystem::path& path() const { return path_; }

 private:
  explicit TempDir(std::filesystem::path path) : path_(std::move(path)) {}
  void Remove();

  std::filesystem::path path_;
};

}  // namespace goodput::testing
