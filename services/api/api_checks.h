// Checks of client-supplied API values against what the services can store and show, shared
// by every service that takes them (ingest's samples and jobs, mfu's reports), so that a host,
// a job id or a timestamp is judged the same way wherever it arrives.
//
//   if (auto reason = CheckText(job_id, kMaxJobIdBytes)) {
//     return absl::InvalidArgumentError(absl::StrCat("job.job_id=\"", Sanitize(job_id), "\" ",
//                                                    *reason));
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "google/protobuf/timestamp.pb.h"

namespace goodput::api {

// Length limits of identities. PostgreSQL refuses NUL bytes and invalid UTF-8 in text, and a
// btree index entry must stay under 2,704 bytes (hosts, clusters, job ids and batch ids are
// indexed), so every indexed identity is kept well below it.
inline constexpr size_t kMaxClusterBytes = 128;
inline constexpr size_t kMaxHostBytes = 255;  // a DNS name is at most 253
inline constexpr size_t kMaxJobIdBytes = 256;
inline constexpr size_t kMaxBatchIdBytes = 512;
inline constexpr size_t kMaxUuidBytes = 128;
inline constexpr size_t kMaxGpuModelBytes = 128;
inline constexpr size_t kMaxMigProfileBytes = 64;
inline constexpr size_t kMaxLabelNameBytes = 256;
inline constexpr size_t kMaxLabelValueBytes = 1024;
// Free text shown in listings (job name, user, team, workload fingerprint).
inline constexpr size_t kMaxFreeTextBytes = 1024;

// How strictly CheckText judges a string: identities (host, cluster, UUID, model, batch id,
// job id) may hold no control character at all; free text (label values, names) only no NUL.
enum class TextKind { kIdentity, kFreeText };

// Nullopt when `value` can be stored as `kind` text within `max_bytes`; otherwise the end of
// a sentence saying why ("contains a NUL byte at byte 4", "is 3000 bytes; the limit is 255").
std::optional<std::string> CheckText(absl::string_view value, size_t max_bytes,
                                     TextKind kind = TextKind::kIdentity);

// The characters a job id or a host may hold. Both travel beyond goodput: into schedulers'
// commands (scontrol, Osmo's API), URLs, alert labels and the dashboard, so they are held to
// what real schedulers and DNS produce, and never start with '-' (an option to a command):
//   job id: ASCII letters and digits and . _ - + : / @ =   (Slurm "4211873", "9100_3",
//           "9200+1"; Kubernetes "namespace/pod"; Osmo workflow ids)
//   host:   ASCII letters and digits and . _ - : [ ] %     (DNS names, IPv4, IPv6 with zone)
// Nullopt when `value` passes; else the end of a sentence naming the first character refused
// ("contains '$' at byte 3, not allowed in a job id (letters, digits and . _ - + : / @ = only)").
// Length, NUL and control characters are CheckText's.
std::optional<std::string> CheckJobIdChars(absl::string_view value);
std::optional<std::string> CheckHostChars(absl::string_view value);

// True when `text` is well-formed UTF-8.
bool IsValidUtf8(absl::string_view text);

// `value` made safe to echo in an error or a log: at most 200 bytes (then "..."), well-formed
// UTF-8 kept, control characters and invalid bytes written as \xNN.
std::string Sanitize(absl::string_view value);

// The span of times a job, sample or report may carry: from 2000-01-01 to 2100-01-01 UTC.
// Zero (1970), year 1 and year 3000 are client bugs, not history.
inline constexpr int64_t kMinApiTimeUnixS = 946684800;   // 2000-01-01T00:00:00Z
inline constexpr int64_t kMaxApiTimeUnixS = 4102444800;  // 2100-01-01T00:00:00Z

// Nullopt when `t` is a valid timestamp inside that span; else why ("is 1970-01-01T00:00:00Z,
// before 2000-01-01").
std::optional<std::string> CheckApiTime(const google::protobuf::Timestamp& t);

}  // namespace goodput::api
