// What the libFuzzer targets of this folder share: IngestPipeline::Ingest's steps that need no
// database (the batch's identity checks, canonical hosts, shared-GPU marking, DCGM blanks,
// validation, attribution against a fixed set of jobs), and the invariants every outcome must
// keep. A broken invariant aborts, which the fuzzer reports as a crash with its input.
//
//   FuzzIngest(std::move(samples), "eos", "b-1");   // from a decoder's output
#pragma once

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "services/api/api_checks.h"
#include "services/core/gpu_catalog.h"
#include "services/ingest/attribution.h"
#include "services/ingest/identity_rules.h"
#include "services/ingest/sample.h"
#include "services/ingest/validation.h"

namespace goodput::ingest::fuzz {

// 2024-05-01T12:00:00Z: the fuzzers' clock.
inline constexpr int64_t kNowUnixMs = 1714564800000;

inline ValidationOptions Validation() {
  return ValidationOptions{.catalog = &core::GpuCatalog::BuiltIn(),
                           .now_unix_ms = kNowUnixMs,
                           .max_age_ms = 30LL * 86'400'000};
}

// Aborts unless `text` can be shown as is: no byte below 0x20 but none at all, well-formed
// UTF-8 (refusal messages echo input, escaped).
inline void CheckShowable(const std::string& text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7F) std::abort();
  }
  if (!api::IsValidUtf8(text)) std::abort();
}

// Runs the database-free part of IngestPipeline::Ingest on `samples` and checks its outcome.
inline void FuzzIngest(std::vector<Sample> samples, const std::string& cluster,
                       const std::string& batch_id) {
  if (batch_id.empty() || api::CheckText(batch_id, api::kMaxBatchIdBytes)) return;
  if (cluster.empty() || api::CheckText(cluster, api::kMaxClusterBytes)) return;
  IdentityRules rules;
  for (Sample& s : samples) {
    std::string canonical = CanonicalHost(s.gpu.host, rules);
    if (canonical != s.gpu.host && !api::CheckText(s.gpu.host, api::kMaxHostBytes).has_value()) {
      s.labels.try_emplace("hostname_as_reported", std::move(s.gpu.host));
      s.gpu.host = std::move(canonical);
    }
  }
  MarkSharedGpus(samples);
  for (Sample& s : samples) DropDcgmBlanks(s);
  const ValidationOptions options = Validation();
  BatchValidation v = ValidateBatch(samples, batch_id, options);
  if (v.kept.size() + v.refusals.size() != samples.size()) std::abort();
  for (const Refusal& r : v.refusals) {
    if (r.field.empty() || r.message.empty()) std::abort();
    CheckShowable(r.value);
    CheckShowable(r.message);
  }
  // Jobs on the hosts and ids the seeds use; attribution must only ever answer one of them.
  std::vector<AllocationRecord> allocations = {
      {.job_row_id = 1, .host = "gpu-node-042", .gpu_index = 0, .start_unix_ms = 1},
      {.job_row_id = 2, .host = "gpu-node-042", .gpu_index = 1, .start_unix_ms = 1,
       .end_unix_ms = kNowUnixMs},
      {.job_row_id = 3, .host = "r6i3n0", .uuid = "GPU-1", .start_unix_ms = 1, .mig_instance = 1},
  };
  absl::flat_hash_map<std::string, int64_t> jobs = {{"4211873", 4}, {"ns/train", 5}};
  Attributor attributor(std::move(allocations), std::move(jobs), rules);
  for (size_t i : v.kept) {
    const Sample& s = samples[i];
    // What validation kept is storable: identities without control characters, hosts of the
    // allowed characters.
    if (api::CheckText(s.gpu.host, api::kMaxHostBytes) || api::CheckHostChars(s.gpu.host)) {
      std::abort();
    }
    if (s.labels.size() > options.max_labels) std::abort();
    std::optional<int64_t> job = attributor.Attribute(s);
    if (job.has_value() && (*job < 1 || *job > 5)) std::abort();
    (void)LabelJobIds(s);
  }
}

}  // namespace goodput::ingest::fuzz
