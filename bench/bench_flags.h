// The benchmarks' flags: "--name value" pairs whose values are positive integers.
#pragma once

#include <iostream>
#include <map>
#include <string>

#include "absl/strings/numbers.h"

namespace goodput::bench {

// Sets *flags.at(name) for each "--name value" in argv. False, with the reason on stderr, for
// a flag not in `flags`, a missing value, or one that is not a positive integer.
inline bool ParsePositiveIntFlags(int argc, char** argv, const std::map<std::string, int*>& flags) {
  for (int i = 1; i < argc; i += 2) {
    const std::string flag = argv[i];
    auto it = flags.find(flag);
    if (it == flags.end()) {
      std::cerr << "unknown flag " << flag << "\n";
      return false;
    }
    int value = 0;
    if (i + 1 >= argc || !absl::SimpleAtoi(argv[i + 1], &value) || value <= 0) {
      std::cerr << flag << ": \"" << (i + 1 < argc ? argv[i + 1] : "")
                << "\" is not a positive integer\n";
      return false;
    }
    *it->second = value;
  }
  return true;
}

}  // namespace goodput::bench
