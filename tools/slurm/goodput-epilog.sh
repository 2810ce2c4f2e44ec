#!/usr/bin/env bash
# Slurm node epilog: tells goodput the job ended so that its GPUs are released and its
# efficiency summary is final. Ending is idempotent, so every node may call it.
#
# Install: Epilog=/etc/slurm/goodput-epilog.sh in slurm.conf; same settings as the prolog
# (/etc/goodput/slurm.env). Never fails the epilog: a failure is logged and it exits 0.
set -u
[[ -r /etc/goodput/slurm.env ]] && source /etc/goodput/slurm.env

log() { logger -t goodput-epilog "$*" 2>/dev/null || echo "goodput-epilog: $*" >&2; }

cluster=${GOODPUT_CLUSTER:-${SLURM_CLUSTER_NAME:-}}
job_id=${SLURM_JOB_ID:-}
[[ -n "$cluster" && -n "$job_id" ]] || exit 0

if ! out=$(timeout 20 goodputctl end-job --cluster "$cluster" --job-id "$job_id" 2>&1); then
  log "job $job_id not ended in goodput: $out"
fi
exit 0
