#pragma once

// Where goodput finds its read-only data files (migrations, the dashboard's front-end) when it
// runs from a source checkout and when it runs installed.
//
// An installed binary lives in <prefix>/bin and its data in <prefix>/share/goodput (the Debian
// package: /usr/bin and /usr/share/goodput; the container image alike). Locating the data from
// the running binary rather than from a path compiled in keeps a relocated install working.
//
//   std::string dir = DefaultMigrationsDir();  // "migrations" in a checkout, else
//                                              // /usr/share/goodput/migrations when installed

#include <filesystem>
#include <string>

#include "absl/strings/string_view.h"

namespace goodput::platform {

// The running executable's path (from /proc/self/exe); empty when it cannot be read.
std::filesystem::path ExecutablePath();

// <prefix>/share/goodput/<name> for the binary at `executable` (<prefix>/bin/<binary>).
std::filesystem::path InstalledDataDir(const std::filesystem::path& executable,
                                       absl::string_view name);

// The migrations folder used when neither a flag nor the configuration names one: `migrations`
// of the working directory when it exists (a source checkout, `./goodput up`, the tests), else
// the installed one beside the running binary when that exists, else `migrations` (so that the
// error names what was looked for).
std::string DefaultMigrationsDir();

}  // namespace goodput::platform
