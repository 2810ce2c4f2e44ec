#!/usr/bin/env bash
# Slurm node prolog: registers the job and the GPUs it holds on this node with goodput.
# Every node of a job runs it; goodput merges the allocations into one job.
#
# Install: Prolog=/etc/slurm/goodput-prolog.sh in slurm.conf (runs as root on each node at
# the job's first step), with goodputctl on the node's PATH. Settings come from
# /etc/goodput/slurm.env when present:
#   GOODPUT_INGEST_ADDR=ingest.goodput.svc:7101   goodput-ingest's gRPC address
#   GOODPUT_TOKEN=...                             a token of the `scheduler` role
#   GOODPUT_CLUSTER=...                           defaults to SLURM_CLUSTER_NAME
#
# A goodput outage must never stop a job from starting: failures are logged and the
# prolog exits 0.
set -u
[[ -r /etc/goodput/slurm.env ]] && source /etc/goodput/slurm.env

log() { logger -t goodput-prolog "$*" 2>/dev/null || echo "goodput-prolog: $*" >&2; }

cluster=${GOODPUT_CLUSTER:-${SLURM_CLUSTER_NAME:-}}
job_id=${SLURM_JOB_ID:-}
if [[ -z "$cluster" || -z "$job_id" ]]; then
  log "no cluster or job id in the environment; nothing registered"
  exit 0
fi
host=$(hostname -s)

# SLURM_JOB_GPUS lists the GPU indexes allocated on this node ("0,1,2,3"); fall back to
# CUDA_VISIBLE_DEVICES, which prologs see on some configurations.
gpu_list=${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}
gpus=""
IFS=',' read -ra indexes <<<"$gpu_list"
for i in "${indexes[@]}"; do
  [[ "$i" =~ ^[0-9]+$ ]] && gpus+="${gpus:+,}$host:$i"
done

args=(register-job --cluster "$cluster" --job-id "$job_id" --scheduler slurm
      --user "${SLURM_JOB_USER:-}" --team "${SLURM_JOB_ACCOUNT:-}"
      --name "${SLURM_JOB_NAME:-}" --label "partition=${SLURM_JOB_PARTITION:-}")
[[ -n "$gpus" ]] && args+=(--gpus "$gpus")
[[ -n "${GOODPUT_WORKLOAD:-}" ]] && args+=(--fingerprint "$GOODPUT_WORKLOAD")
# Array tasks and heterogeneous-job components each have their own SLURM_JOB_ID (what
# dcgm-exporter's hpc_job label carries); keep the names users know from squeue/sacct.
[[ -n "${SLURM_ARRAY_JOB_ID:-}" && -n "${SLURM_ARRAY_TASK_ID:-}" ]] &&
  args+=(--label "array_task=${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}")
[[ -n "${SLURM_HET_JOB_ID:-}" && -n "${SLURM_HET_JOB_OFFSET:-}" ]] &&
  args+=(--label "het_component=${SLURM_HET_JOB_ID}+${SLURM_HET_JOB_OFFSET}")

if ! out=$(timeout 20 goodputctl "${args[@]}" 2>&1); then
  log "job $job_id on $host not registered: $out"
fi
exit 0
