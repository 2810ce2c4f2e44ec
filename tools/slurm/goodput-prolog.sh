#!/usr/bin/env bash
# shellcheck disable=SC2034,SC2154 # GOODPUT_LOG_TAG is read by the library; j_* and now are set through namerefs
# Slurm node prolog: registers the job and the GPUs it holds on this node with goodput.
# Every node of a job runs it; goodput merges the allocations into one job.
#
# Install: Prolog=/etc/slurm/goodput-prolog.sh in slurm.conf (runs as root on each node at
# the job's first step), with goodput-slurm-lib.sh next to it. Needs bash, curl and, to send
# GPU UUIDs, nvidia-smi. Settings: /etc/goodput/slurm.env (see goodput-slurm-lib.sh).
#
# A goodput outage must never stop a job from starting: requests go through a spool that the
# node's retrier sends once goodput takes them (goodput-slurm-lib.sh; started detached, never
# waited for), every call is bounded, and the prolog exits 0.
set -u
GOODPUT_LOG_TAG=goodput-prolog
# shellcheck source=goodput-slurm-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/goodput-slurm-lib.sh" || exit 0

cluster=${GOODPUT_CLUSTER:-${SLURM_CLUSTER_NAME:-}}
job_id=${SLURM_JOB_ID:-}
if [[ -z "$cluster" || -z "$job_id" ]]; then
  gp_log "no cluster or job id in the environment; nothing registered"
  exit 0
fi
host=${HOSTNAME:-$(hostname)}
host=${host%%.*}

# The node prolog gets neither the job's name, account nor array ids (Slurm 22.05), so they
# come from `scontrol --oneliner show job`, one bounded call. Its fields are `Key=value`
# separated by spaces, but JobName is free text (spaces, '=', newlines). Only what the user
# cannot forge is trusted: the fields before JobName, the name up to the UserId field that
# follows it (recognised by the user name Slurm put in our environment), and the Account
# after that field when nothing else repeats it.
name=${SLURM_JOB_NAME:-}
account=${SLURM_JOB_ACCOUNT:-}
array_job_id=${SLURM_ARRAY_JOB_ID:-}
array_task_id=${SLURM_ARRAY_TASK_ID:-}
partition=${SLURM_JOB_PARTITION:-}
qos=${SLURM_JOB_QOS:-}
comment=${SLURM_JOB_COMMENT:-}
info=$(timeout 5 scontrol --oneliner show job "$job_id" 2>&1)
if [[ "$info" != "JobId=$job_id "* || "$info" != *" JobName="* ]]; then
  info=${info//[[:cntrl:]]/ }
  gp_log "scontrol show job $job_id: ${info:0:300} (job name, account and array ids not sent)"
else
  head_fields=${info%%" JobName="*}
  rest=${info#*" JobName="}
  read -ra head_words <<<"$head_fields"
  for field in "${head_words[@]}"; do
    case "$field" in
      ArrayJobId=*) [[ -z "$array_job_id" ]] && array_job_id=${field#*=} ;;
      ArrayTaskId=*) [[ -z "$array_task_id" ]] && array_task_id=${field#*=} ;;
    esac
  done
  user_marker=" UserId=${SLURM_JOB_USER:-}("
  if [[ -n "${SLURM_JOB_USER:-}" && "$rest" == *"$user_marker"* ]]; then
    [[ -z "$name" ]] && name=${rest%%"$user_marker"*}
    after=${rest#*"$user_marker"}
    # GroupId, MCS_label, Priority and Nice come between UserId and Account: no user text.
    # A name (or a later free-text field) that repeats the UserId field could pass another
    # account off as the job's: then no account is sent.
    others=${after//"$user_marker"/}
    if [[ -z "$account" && "$after" == *" Account="* && "$others" == "$after" ]]; then
      account=${after#*" Account="}
      account=${account%%[[:space:]]*}
    fi
    # QOS follows Account with no user text between them.
    if [[ -z "$qos" && "$after" == *" QOS="* && "$others" == "$after" ]]; then
      qos=${after#*" QOS="}
      qos=${qos%%[[:space:]]*}
    fi
  fi
fi
[[ "$array_job_id" =~ ^[0-9]+$ ]] || array_job_id=""
[[ "$array_task_id" =~ ^[0-9]+$ ]] || array_task_id=""
[[ "$account" == "(null)" ]] && account=""
# The comment is the user's own text: only its first word is matched.
if [[ -z "$comment" && "$info" == *" Comment="* ]]; then
  comment=${info##*" Comment="}
  comment=${comment%%[[:space:]]*}
fi
[[ "$comment" == "(null)" ]] && comment=""

# Workload kind from the operator's rules (goodput-slurm-lib.sh), first match wins.
workload_kind=""
read -ra kind_rules <<<"${GOODPUT_WORKLOAD_KIND_RULES:-}"
for rule in "${kind_rules[@]}"; do
  field=${rule%%:*}
  pattern=${rule#*:}
  rule_kind=${pattern##*=}
  pattern=${pattern%=*}
  if [[ "$rule" != *:*=* ]]; then
    gp_log "GOODPUT_WORKLOAD_KIND_RULES: \"$rule\" is not field:pattern=kind; skipped"
    continue
  fi
  case "$field" in
    partition) value=$partition ;;
    qos) value=$qos ;;
    comment) value=$comment ;;
    name) value=$name ;;
    *)
      gp_log "GOODPUT_WORKLOAD_KIND_RULES: \"$field\" in \"$rule\" is not partition, qos, comment or name; skipped"
      continue
      ;;
  esac
  # shellcheck disable=SC2053 # the pattern is a glob on purpose
  if [[ -n "$value" && "$value" == $pattern ]]; then
    workload_kind=$rule_kind
    break
  fi
done
[[ -z "$workload_kind" ]] && workload_kind=${GOODPUT_WORKLOAD_KIND_DEFAULT:-}
case "$workload_kind" in
  training | inference | interactive | other | "") ;;
  *)
    gp_log "workload kind \"$workload_kind\" is not training, inference, interactive or other; none sent"
    workload_kind=""
    ;;
esac

# SLURM_JOB_GPUS lists the GPU indexes allocated on this node ("0,1,2,3"); fall back to
# CUDA_VISIBLE_DEVICES, which prologs see on some configurations (indexes or GPU UUIDs).
# With nvidia-smi, each GPU is sent with its UUID as well.
declare -A uuid_of=() index_of=()
if command -v nvidia-smi >/dev/null 2>&1 &&
  smi=$(timeout 5 nvidia-smi --query-gpu=index,uuid --format=csv,noheader 2>/dev/null); then
  while IFS=', ' read -r index uuid; do
    [[ "$index" =~ ^[0-9]+$ && "$uuid" =~ ^GPU-[0-9A-Fa-f-]+$ ]] || continue
    uuid_of[$index]=$uuid
    index_of[$uuid]=$index
  done <<<"$smi"
fi
gpu_list=${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}
gp_now_rfc3339 now
gp_json_string j_host "$host"
allocations=""
IFS=',' read -ra listed <<<"$gpu_list"
entries=()
for entry in "${listed[@]}"; do
  if [[ "$entry" =~ ^([0-9]+)-([0-9]+)$ ]] && ((10#${BASH_REMATCH[2]} - 10#${BASH_REMATCH[1]} < 64)); then
    for ((i = 10#${BASH_REMATCH[1]}; i <= 10#${BASH_REMATCH[2]}; i++)); do entries+=("$i"); done
  else
    entries+=("$entry")
  fi
done
for entry in "${entries[@]}"; do
  entry=${entry//[[:space:]]/}
  index="" uuid=""
  if [[ "$entry" =~ ^[0-9]+$ ]]; then
    index=$((10#$entry))
    uuid=${uuid_of[$index]:-}
  elif [[ "$entry" =~ ^GPU-[0-9A-Fa-f-]+$ ]]; then
    uuid=$entry
    index=${index_of[$entry]:-}
  else
    # MIG devices ("MIG-<uuid>") are not registered yet: `nvidia-smi -L` names their parent
    # GPU but not their GPU instance id, which attribution needs (README.md).
    [[ "$entry" == MIG-* ]] && gp_log "MIG device $entry not registered (not supported yet)"
    continue
  fi
  gpu="\"host\":$j_host"
  [[ -n "$index" ]] && gpu+=",\"gpuIndex\":$index"
  [[ -n "$uuid" ]] && gpu+=",\"uuid\":\"$uuid\""
  allocations+="${allocations:+,}{\"gpu\":{$gpu},\"startTime\":\"$now\"}"
done

gp_json_string j_cluster "$cluster"
gp_json_string j_job_id "$job_id"
gp_json_string j_user "${SLURM_JOB_USER:-}"
gp_json_string j_team "$account"
gp_json_string j_name "$name"
labels=""
if [[ -n "$partition" ]]; then
  gp_json_string j_partition "$partition"
  labels="\"partition\":$j_partition"
fi
# alerting's policies select jobs by their QOS (services/alerting/README.md, "Policies").
if [[ "$qos" =~ ^[A-Za-z0-9._-]+$ && "$qos" != "(null)" ]]; then
  labels+="${labels:+,}\"qos\":\"$qos\""
fi
# Array tasks and heterogeneous-job components each have their own SLURM_JOB_ID (what
# dcgm-exporter's hpc_job label carries); keep the names users know from squeue/sacct.
[[ -n "$array_job_id" && -n "$array_task_id" ]] &&
  labels+="${labels:+,}\"array_task\":\"${array_job_id}_${array_task_id}\""
if [[ "${SLURM_HET_JOB_ID:-}" =~ ^[0-9]+$ && "${SLURM_HET_JOB_OFFSET:-}" =~ ^[0-9]+$ ]]; then
  labels+="${labels:+,}\"het_component\":\"${SLURM_HET_JOB_ID}+${SLURM_HET_JOB_OFFSET}\""
fi
job="\"key\":{\"cluster\":$j_cluster,\"jobId\":$j_job_id},\"scheduler\":\"SCHEDULER_KIND_SLURM\""
job+=",\"user\":$j_user,\"team\":$j_team,\"name\":$j_name,\"state\":\"JOB_STATE_RUNNING\""
job+=",\"startTime\":\"$now\",\"allocations\":[$allocations],\"labels\":{$labels}"
if [[ -n "$workload_kind" ]]; then
  job+=",\"workloadKind\":\"WORKLOAD_KIND_${workload_kind^^}\""
fi
if [[ -n "${GOODPUT_WORKLOAD:-}" ]]; then
  gp_json_string j_workload "$GOODPUT_WORKLOAD"
  job+=",\"workloadFingerprint\":$j_workload"
fi

gp_submit register "{\"job\":{$job}}"
exit 0
