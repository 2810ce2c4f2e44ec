#pragma once

// Finds a program for a test to start: daemons live in sbin, which a test's PATH may lack.
//
//   ChildProcess::Start({.argv = {FindProgram("slurmdbd"), "-D"}});

#include <string>

namespace goodput::testing {

// The path of program `name` from PATH, then /usr/sbin and /sbin; `name` itself when none
// has it (exec then reports it missing).
std::string FindProgram(const std::string& name);

}  // namespace goodput::testing
