// Keyed hashes and unguessable tokens for the targets (OpenSSL): webhook signatures, the
// Slurm target's comment marker and the delimiters it asks squeue to print.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace goodput::alerting {

// Lower-case hex of HMAC-SHA256(key, text) (64 characters).
std::string HmacSha256Hex(absl::string_view key, absl::string_view text);

// `bytes` bytes from the system's cryptographic random source, in lower-case hex.
// INTERNAL when the source fails.
absl::StatusOr<std::string> RandomHex(size_t bytes);

}  // namespace goodput::alerting
