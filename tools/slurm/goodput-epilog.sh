#!/usr/bin/env bash
# shellcheck disable=SC2034,SC2154 # GOODPUT_LOG_TAG is read by the library; j_* and now are set through namerefs
# Slurm epilog: tells goodput the job ended, and how (completed, failed, cancelled, timed_out,
# preempted; ended when Slurm does not tell yet), so that its GPUs are released and its
# efficiency summary is final. Ending is idempotent, so every node may call it.
#
# Install: Epilog=/etc/slurm/goodput-epilog.sh in slurm.conf (each node: exact states), and
# EpilogSlurmctld= as well if you like (the controller; README.md says what it can tell),
# with goodput-slurm-lib.sh next to it. Same settings as the prolog (/etc/goodput/slurm.env).
# Never fails the epilog and never holds it long: one bounded scontrol call, delivery
# through the spool (goodput-slurm-lib.sh, which also sends what earlier runs spooled, and
# leaves what it could not send to the node's retrier), a failure logged, exit 0.
set -u
GOODPUT_LOG_TAG=goodput-epilog
# shellcheck source=goodput-slurm-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/goodput-slurm-lib.sh" || exit 0

cluster=${GOODPUT_CLUSTER:-${SLURM_CLUSTER_NAME:-}}
job_id=${SLURM_JOB_ID:-}
[[ -n "$cluster" && -n "$job_id" ]] || exit 0

# Sets `state` from Slurm's JobState ($1), Reason ($2), ExitCode "exit:signal" ($3),
# PreemptTime ($4), and whether this node ran the batch script ($5 = 1: its exit status has
# reached slurmctld by the time this node's epilog runs). While epilogs run, JobState reads
# COMPLETING whatever the outcome, so the reason, exit code and preemption time tell the
# outcomes apart (tools/slurm/README.md has what Slurm 22.05 shows for each).
state_from_slurm() {
  local job_state=$1 reason=$2 exit_code=${3%%:*} signal=${3##*:} preempt_time=$4 batch_host=$5
  [[ "$exit_code" =~ ^[0-9]+$ ]] || exit_code=0
  [[ "$signal" =~ ^[0-9]+$ ]] || signal=0
  case "$job_state" in
    COMPLETED) state=completed; return ;;
    FAILED | NODE_FAIL | BOOT_FAIL | OUT_OF_MEMORY) state=failed; return ;;
    CANCELLED) state=cancelled; return ;;
    TIMEOUT | DEADLINE) state=timed_out; return ;;
    PREEMPTED) state=preempted; return ;;
    COMPLETING) ;;
    *) state=ended; return ;;
  esac
  case "$reason" in
    TimeLimit | InactiveLimit | DeadLine) state=timed_out ;;
    NonZeroExitCode | RaisedSignal* | JobLaunchFailure | NodeDown | OutOfMemory | SystemFailure | \
      *BootFail*) state=failed ;;
    None)
      if [[ -n "$preempt_time" && "$preempt_time" != None ]]; then
        state=preempted
      elif ((exit_code == 130 || exit_code == 137 || exit_code == 143)); then
        # 128 + SIGINT, SIGKILL or SIGTERM, no failure reason: the batch shell reported the
        # signal scancel sent before slurmctld recorded it (the job reads CANCELLED later)
        state=cancelled
      elif ((exit_code != 0)); then
        state=failed
      elif ((signal != 0)); then
        state=cancelled # signalled by Slurm without a failure reason: scancel
      elif ((batch_host)); then
        state=completed
      else
        state=ended # the batch script's exit status may not have reached slurmctld yet
      fi
      ;;
    *) state=ended ;;
  esac
}

state=""
if [[ "${SLURM_SCRIPT_CONTEXT:-}" != epilog_slurmctld ]] &&
  info=$(timeout 5 scontrol show job "$job_id" 2>/dev/null); then
  # A compute node asks slurmctld. Fields are read in the shell (an epilog must not start
  # many programs). Job names and paths are free text, newlines included: when one imitates
  # a field, the output is not trusted.
  read -r -d '' -a words <<<"$info"
  declare -A seen=() value=()
  for word in "${words[@]}"; do
    key=${word%%=*}
    case "$key" in
      JobState | Reason | ExitCode | PreemptTime | BatchHost)
        seen[$key]=$((${seen[$key]:-0} + 1))
        value[$key]=${word#*=}
        ;;
    esac
  done
  trusted=1
  for key in JobState Reason ExitCode PreemptTime BatchHost; do
    ((${seen[$key]:-0} <= 1)) || trusted=0
  done
  if ((trusted)) && [[ -n "${value[JobState]:-}" ]]; then
    batch_host=0
    [[ -n "${SLURMD_NODENAME:-}" && "${value[BatchHost]:-}" == "$SLURMD_NODENAME" ]] && batch_host=1
    state_from_slurm "${value[JobState]}" "${value[Reason]:-}" "${value[ExitCode]:-}" \
      "${value[PreemptTime]:-}" "$batch_host"
  fi
fi
if [[ -z "$state" ]]; then
  # EpilogSlurmctld (a Slurm command there holds the job's nodes longer), or no answer: the
  # environment only. It has the batch script's status only when the script ended by
  # itself; a job being cancelled, preempted or timed out still reads 0:0 here.
  exit_code=${SLURM_JOB_EXIT_CODE2:-0:0}
  if [[ "${exit_code%%:*}" =~ ^0*[1-9][0-9]*$ || "${exit_code##*:}" =~ ^0*[1-9][0-9]*$ ]]; then
    state=failed
  else
    state=ended
  fi
fi

# The end time is now, not when a spooled request reaches goodput.
gp_now_rfc3339 now
gp_json_string j_cluster "$cluster"
gp_json_string j_job_id "$job_id"
state_name=${state^^}
gp_submit end "{\"key\":{\"cluster\":$j_cluster,\"jobId\":$j_job_id},\"endTime\":\"$now\",\"finalState\":\"JOB_STATE_${state_name}\"}"
exit 0
