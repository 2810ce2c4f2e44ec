#!/usr/bin/env bash
# shellcheck disable=SC2034 # GOODPUT_LOG_TAG is read by the library
# The node's spool retrier: sends the requests the prolog and epilog could not deliver
# (goodput down, or answering 429/503 in a burst of prologs) until the spool is empty, with a
# jittered exponential backoff that honours Retry-After (goodput-slurm-lib.sh,
# gp_retry_spool). One runs per node at a time; another started meanwhile exits at once.
#
# Started detached by goodput-prolog.sh and goodput-epilog.sh when they leave requests in
# the spool, and by the goodput-slurm-spool.timer of the goodput-slurm package (after a
# reboot, or when a retrier gave up after GOODPUT_RETRY_FOR_S). Safe to run by hand as root.
# Settings: /etc/goodput/slurm.env, as the prolog's.
set -u
GOODPUT_LOG_TAG=goodput-spool-retry
# shellcheck source=goodput-slurm-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/goodput-slurm-lib.sh" || exit 0
if ! command -v flock >/dev/null 2>&1; then
  gp_log "flock (util-linux) not found: no retrier; spooled requests wait for the next run"
  exit 0
fi
gp_retry_spool
exit 0
