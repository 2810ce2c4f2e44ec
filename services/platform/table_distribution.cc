#include "services/platform/table_distribution.h"

namespace goodput::platform {

const std::vector<TableDistribution>& ProjectTableDistribution() {
  using K = TableDistribution::Kind;
  static const auto* const kTables = new std::vector<TableDistribution>{
      // Raw samples by GPU host: a host's GPUs in one shard, ingest's batches spread over all
      // of them, ofu's seq-range reads run on every shard at once.
      {"samples", K::kDistributed, "host"},
      {"serving_samples", K::kDistributed, "host"},
      {"ingest_batches", K::kDistributed, "batch_id"},
      {"gpu_fault_state", K::kDistributed, "gpu_key"},
      {"gpu_fault_events", K::kDistributed, "host"},
      // Job-level tables by job (jobs.id), co-located with each other.
      {"ofu_windows", K::kDistributed, "job"},
      {"ofu_job_state", K::kDistributed, "job"},
      {"ofu_fleet_hours", K::kDistributed, "job"},
      {"job_hosts_seen", K::kDistributed, "job"},
      {"job_reports", K::kDistributed, "job"},
      {"job_report_requests", K::kDistributed, "job"},
      // mfu's and alerting's copies of the windows name the job by (cluster, job_id).
      {"mfu_ofu_windows", K::kDistributed, "job_id"},
      {"mfu_reconcile_pending", K::kDistributed, "job_id"},
      {"mfu_reconciliation_points", K::kDistributed, "job_id"},
      {"mfu_job_reconciliations", K::kDistributed, "job_id"},
      {"mfu_reports", K::kDistributed, "report_id"},
      {"alert_windows", K::kDistributed, "job_id"},
      {"alert_job_state", K::kDistributed, "job_id"},
      // The registry, the watermarks and the operator-facing tables: small, read with joins
      // from every shard, or keyed by more than one identity (jobs by id and by (cluster,
      // job_id); job_gpus' exclusion constraints by GPU index and by UUID).
      {"jobs", K::kReference, ""},
      {"job_gpus", K::kReference, ""},
      {"ingest_ha_replicas", K::kReference, ""},
      {"ofu_consumer_state", K::kReference, ""},
      {"ofu_forward_state", K::kReference, ""},
      {"mfu_delivery_watermarks", K::kReference, ""},
      {"mfu_event_producers", K::kReference, ""},
      {"mfu_divergence_events", K::kReference, ""},
      {"mfu_forward_state", K::kReference, ""},
      {"alert_receiver_state", K::kReference, ""},
      {"alert_divergence_events", K::kReference, ""},
      {"alerts", K::kReference, ""},
      {"alert_silences", K::kReference, ""},
      {"alert_outbox", K::kReference, ""},
      {"alert_delivery_attempts", K::kReference, ""},
      {"alert_digest_periods", K::kReference, ""},
      // The policy stage's audit log: small, read with the alerts it names.
      {"policy_actions", K::kReference, ""},
  };
  return *kTables;
}

}  // namespace goodput::platform
