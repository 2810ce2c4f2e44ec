// PostgreSQL storage of goodput-ofu: reading attributed samples by watermark, persisting
// windows, late counts, job progress and the watermark in one transaction, and the reads
// behind the queries. SQL lives in ofu_store.cc as named constants.
//
// Watermark (exactly once, nothing skipped). `samples.seq` is drawn before commit, so
// concurrent writers commit out of seq order and "seq > last seen" alone could skip rows.
// The consumer works in rounds on transaction ids instead: a round takes the oldest running
// transaction id X (samples_safe_xid(): every transaction below it has ended) and consumes
// the rows with xid_done <= ingest_xid < X, in seq order and in pages (seq_cursor), then
// sets xid_done = X. To keep the scan on the seq index it also keeps seq_floor, a seq below
// which every row is consumed: the sequence value read one round before a snapshot whose
// xmax is at most xid_done bounds the seqs of all later transactions from below. And from
// above: every transaction below X had ended when the round began, so the sequence value
// read after the round's snapshot bounds the seqs of its rows (a round's last page stops
// there instead of reading through everything written since; unknown in a round resumed
// after a restart, which then reads on to the end).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "services/ofu/ofu_queries.h"
#include "services/ofu/window_engine.h"
#include "services/platform/pg_pool.h"

namespace goodput::ofu {

// "host/index/uuid" with empty parts where unknown, plus "/mig<GPU_I_ID>" for a MIG
// instance: the GPU key of windows.
std::string GpuKey(const std::string& host, std::optional<int> gpu_index, const std::string& uuid,
                   std::optional<int> mig_instance = std::nullopt);
struct GpuKeyParts {
  std::string host;
  std::optional<int> gpu_index;
  std::string uuid;
  std::optional<int> mig_instance;
};
GpuKeyParts ParseGpuKey(const std::string& key);

struct ShardConfig {
  int index = 0;
  int count = 1;
};
// The SQL condition that job `j` (jobs j) belongs to `shard`: the jobs' hash modulo count.
std::string ShardFilter(const ShardConfig& shard);

struct ConsumerState {
  std::string xid_done = "0";
  std::string xid_round_end = "0";
  int64_t seq_cursor = 0;
  int64_t seq_floor = 0;
  int64_t samples_consumed = 0;
  // Commits that wrote job-level windows so far (the forwarding sequence; see 0011).
  int64_t commit_seq = 0;
  bool in_round() const { return xid_round_end != xid_done; }
};

// A job as the consumer needs it.
struct JobRecord {
  JobInfo info;
  std::string cluster;
  std::string job_id;
};

struct ConsumedSample {
  int64_t seq = 0;
  int64_t job = 0;
  std::string sample_gpu_model;
  Sample sample;
};

class OfuStore {
 public:
  OfuStore(platform::PgPool* pool, ShardConfig shard) : pool_(pool), shard_(shard) {}

  absl::StatusOr<ConsumerState> LoadState();
  // Starts a round if none is in progress (state is updated in memory, persisted with the
  // next page's commit).
  absl::Status BeginRound(ConsumerState& state);
  // The next page of the round (at most `limit` rows, seq order), only jobs of this shard.
  absl::StatusOr<std::vector<ConsumedSample>> ReadPage(const ConsumerState& state, int limit);
  // Moves the cursor past `page`; ends the round when the page was short.
  void AdvanceState(ConsumerState& state, const std::vector<ConsumedSample>& page, int limit);

  // Jobs by id (with their persisted progress).
  absl::StatusOr<absl::flat_hash_map<int64_t, JobRecord>> LoadJobs(const std::vector<int64_t>& ids);
  // Jobs with windows not yet final, and the consumed samples of those windows and of the
  // `lookback_ms` before them, or before the job's last sample ahead of them when that is
  // older (a silence) (seq order).
  absl::StatusOr<std::vector<std::pair<JobRecord, std::vector<Sample>>>> LoadOpenJobs(
      const ConsumerState& state, int64_t lookback_ms);

  // The job's stored samples with time in `range` for recomputing the final windows from
  // `span_from_ms` (RecomputeFinalWindows), reaching back to RestoreLookbackMs before its last
  // sample ahead of `span_from_ms` when that is older (a silence); time order. Every stored
  // sample, consumed or not: one not consumed yet is for a final window too, so it will be
  // late, and recomputing the same samples again gives the same windows.
  absl::StatusOr<std::vector<Sample>> LoadJobSamples(int64_t job, int64_t span_from_ms,
                                                     const RecomputeSpan& range);

  // Everything one page produced, with the new watermark, in one transaction. Windows flagged
  // kFlagLateSamplesRecomputed replace final ones; any other leaves a final window as it is.
  absl::Status Commit(const std::vector<WindowResult>& results, const std::vector<LateCount>& late,
                      const std::vector<JobProgress>& progress, const ConsumerState& state,
                      int64_t window_s);

  // --- Queries ---
  // NOT_FOUND naming the job.
  absl::StatusOr<JobRow> FindJob(const std::string& cluster, const std::string& job_id);
  // Job-level (gpu == false) or per-GPU windows of a job with start in [from, to), time
  // order (then GPU); at most `limit` rows when limit > 0.
  absl::StatusOr<std::vector<StoredWindow>> Windows(int64_t job, bool per_gpu, int64_t from_ms,
                                                    int64_t to_ms, int limit);
  // Job-level windows of all jobs with start in [from, to), with their job rows: the
  // window-by-window reference FleetPieces is checked and measured against.
  absl::StatusOr<std::vector<std::pair<JobRow, StoredWindow>>> FleetWindows(int64_t from_ms,
                                                                            int64_t to_ms);
  // The fleet's job-level windows with start in [from, to) as pieces for SummarizeFleet, in
  // a fixed order (job, then time), each summed in PostgreSQL per job and GPU model: at
  // kFleetHoursLowEfficiencyOfu, the whole UTC hours inside the range from ofu_fleet_hours and
  // the partial hours at its ends from their windows; at any other threshold, the whole range
  // from its windows.
  absl::StatusOr<std::vector<FleetPiece>> FleetPieces(int64_t from_ms, int64_t to_ms,
                                                      double low_efficiency_threshold);

  // Per-GPU OFU over the whole job (sample-weighted) and whether the GPU was idle in every
  // window it reported.
  absl::StatusOr<std::vector<PerGpuFigure>> GpuFigures(int64_t job);
  // Start of the job's newest job-level window; nullopt if it has none.
  absl::StatusOr<std::optional<int64_t>> LatestWindowStart(int64_t job);

  // --- Forwarding (ofu_forwarder.h) ---
  // DeliverySequence.producer_id of this shard: "ofu-<index>-of-<count>".
  std::string ProducerId() const;
  // The highest commit sequence `target` acknowledged (0: none).
  absl::StatusOr<int64_t> AckedSequence(const std::string& target);
  absl::Status SetAckedSequence(const std::string& target, int64_t seq);
  // Commit sequences above `after` that still own job-level windows, ascending.
  absl::StatusOr<std::vector<int64_t>> PendingCommits(int64_t after, int limit);
  // The job-level windows a commit owns, with their jobs.
  absl::StatusOr<std::vector<std::pair<JobRow, StoredWindow>>> CommitWindows(int64_t commit_seq);

  const ShardConfig& shard() const { return shard_; }

 private:
  platform::PgPool* pool_;
  ShardConfig shard_;
  // (snapshot xmax, seq bound) of earlier round starts; see the header comment.
  std::deque<std::pair<std::string, int64_t>> floor_candidates_;
  std::optional<int64_t> last_seq_read_;
  // The sequence value read after the current round's snapshot (see the header comment).
  std::optional<int64_t> round_seq_ceiling_;
  std::string round_xmax_;
};

}  // namespace goodput::ofu
