// The Python interpreter CMake chose for the Python SDK, for tests that run the SDK.
#pragma once

#include <fstream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "tests/support/service_process.h"

namespace goodput::testing {

// GOODPUT_SDK_PYTHON in the build tree's CMake cache; "" when CMake found no python3 with
// grpc and protobuf.
inline std::string SdkPython() {
  std::ifstream cache(BuiltBinary("CMakeCache.txt"));
  std::string line;
  while (std::getline(cache, line)) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "GOODPUT_SDK_PYTHON:FILEPATH=")) return std::string(rest);
  }
  return "";
}

// Runs `script` (python -c) with the SDK interpreter `python` and the built SDK package on
// its path, `arg` as sys.argv[1], for up to two minutes.
inline absl::StatusOr<ProgramResult> RunSdkScript(const std::string& python,
                                                  const std::string& script,
                                                  const std::string& arg) {
  return RunProgram({python, "-c", script, arg},
                    {{"PYTHONPATH", std::string(GOODPUT_BINARY_DIR) + "/sdk/python"},
                     {"PYTHONDONTWRITEBYTECODE", "1"}},
                    absl::Seconds(120));
}

}  // namespace goodput::testing
