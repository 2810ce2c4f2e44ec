# shellcheck shell=bash
# Shared by goodput-prolog.sh and goodput-epilog.sh (sourced, installed next to them): reads
# the settings, builds JSON in bash, and delivers requests to goodput-ingest's HTTP job
# endpoints (POST /api/v1/jobs:register, /api/v1/jobs:end) with curl, through a spool folder
# so that nothing is lost while goodput is down and nothing holds a job up:
#
#   every request is first written to the spool (one file each, named by time), then the
#   whole spool is sent oldest first within a small time budget. A file is removed once
#   ingest answered 2xx, or a 4xx that sending it again cannot fix (logged); on no answer,
#   a timeout, 408, 429, 5xx, 401 or 403 (a token an administrator can fix) it stays, and
#   sending stops for this run. Whatever stays is then sent by the node's retrier
#   (goodput-spool-retry.sh), started detached from the prolog or epilog so that they
#   return at once: one per node (flock), it sends the spool again after a jittered,
#   exponentially growing wait that honours the server's Retry-After, until the spool is
#   empty. The next prolog or epilog, and the goodput-slurm-spool.timer of the package,
#   start it again if it ran out of time. The spool keeps at most GOODPUT_SPOOL_MAX_FILES
#   files (the oldest beyond are dropped, logged).
#
# Settings, from /etc/goodput/slurm.env (GOODPUT_SLURM_ENV names another file) or the
# environment:
#   GOODPUT_INGEST_URL=http://ingest.goodput.svc:7102  goodput-ingest's HTTP address
#   GOODPUT_TOKEN=...                 a token of the `scheduler` role (auth on); never printed
#   GOODPUT_CLUSTER=...               defaults to SLURM_CLUSTER_NAME
#   GOODPUT_SPOOL_DIR=/var/spool/goodput   created 0700
#   GOODPUT_SPOOL_MAX_FILES=1000
#   GOODPUT_HTTP_TIMEOUT_S=5          --max-time of one request
#   GOODPUT_SEND_BUDGET_S=8           no request starts after this many seconds of sending
#   GOODPUT_RETRY=1                   0: no retrier (the spool waits for the next run)
#   GOODPUT_RETRY_INITIAL_S=1         the retrier's first backoff; it doubles after each try
#   GOODPUT_RETRY_MAX_DELAY_S=30      ... up to this
#   GOODPUT_RETRY_FOR_S=86400         a retrier gives up after this long (the next run or
#                                     the timer starts another)
#   GOODPUT_WORKLOAD_KIND_RULES="partition:infer*=inference qos:interactive=interactive"
#                                     the prolog's workload kind: the first rule
#                                     `field:pattern=kind` whose field (partition, qos,
#                                     comment: its first word, name) matches the shell glob;
#                                     kind one of training, inference, interactive, other
#   GOODPUT_WORKLOAD_KIND_DEFAULT=    the kind when no rule matches (empty: none sent;
#                                     goodput then infers it, e.g. from serving metrics)
# Needs bash 4.3+, curl, and coreutils' timeout and sleep; flock and setsid (util-linux) for
# the retrier, flock also to keep runs on a node from sending at once.

GOODPUT_SLURM_ENV=${GOODPUT_SLURM_ENV:-/etc/goodput/slurm.env}
# shellcheck disable=SC1090
[[ -r "$GOODPUT_SLURM_ENV" ]] && source "$GOODPUT_SLURM_ENV"
GOODPUT_SPOOL_DIR=${GOODPUT_SPOOL_DIR:-/var/spool/goodput}
GOODPUT_SPOOL_MAX_FILES=${GOODPUT_SPOOL_MAX_FILES:-1000}
GOODPUT_HTTP_TIMEOUT_S=${GOODPUT_HTTP_TIMEOUT_S:-5}
GOODPUT_SEND_BUDGET_S=${GOODPUT_SEND_BUDGET_S:-8}
[[ "$GOODPUT_SPOOL_MAX_FILES" =~ ^[0-9]+$ ]] || GOODPUT_SPOOL_MAX_FILES=1000
[[ "$GOODPUT_HTTP_TIMEOUT_S" =~ ^[0-9]+$ ]] || GOODPUT_HTTP_TIMEOUT_S=5
[[ "$GOODPUT_SEND_BUDGET_S" =~ ^[0-9]+$ ]] || GOODPUT_SEND_BUDGET_S=8
GOODPUT_RETRY=${GOODPUT_RETRY:-1}
GOODPUT_RETRY_INITIAL_S=${GOODPUT_RETRY_INITIAL_S:-1}
GOODPUT_RETRY_MAX_DELAY_S=${GOODPUT_RETRY_MAX_DELAY_S:-30}
GOODPUT_RETRY_FOR_S=${GOODPUT_RETRY_FOR_S:-86400}
[[ "$GOODPUT_RETRY_INITIAL_S" =~ ^[1-9][0-9]*$ ]] || GOODPUT_RETRY_INITIAL_S=1
[[ "$GOODPUT_RETRY_MAX_DELAY_S" =~ ^[1-9][0-9]*$ ]] || GOODPUT_RETRY_MAX_DELAY_S=30
[[ "$GOODPUT_RETRY_FOR_S" =~ ^[0-9]+$ ]] || GOODPUT_RETRY_FOR_S=86400
# This library's folder, where goodput-spool-retry.sh is installed beside it.
GP_SLURM_DIR=${BASH_SOURCE[0]%/*}
[[ "$GP_SLURM_DIR" == "${BASH_SOURCE[0]}" ]] && GP_SLURM_DIR=.
# Set by gp_send_spool: requests sent, requests left in the spool, and the Retry-After (s) of
# the answer that stopped it (0: none).
GP_SENT=0
GP_LEFT=0
GP_RETRY_AFTER_S=0
# Set by gp_send_file: sent, drop or keep, and the answer's Retry-After (s).
GP_OUTCOME=""
GP_OUTCOME_RETRY_AFTER_S=0
# 1 while the retrier keeps a failure it already logged to itself (gp_retry_spool).
GP_QUIET=0
umask 077

# To syslog and standard error (slurmd keeps the latter in its log at debug levels). The
# caller sets GOODPUT_LOG_TAG (goodput-prolog, goodput-epilog).
gp_log() {
  ((GP_QUIET)) && return 0
  logger -t "${GOODPUT_LOG_TAG:-goodput}" -- "$*" 2>/dev/null
  printf '%s: %s\n' "${GOODPUT_LOG_TAG:-goodput}" "$*" >&2
}

# Sets the variable named $1 to $2 as a JSON string literal, quotes included: backslashes,
# quotes and every control character escaped.
gp_json_string() {
  local -n gp_out=$1
  local s=$2 c i
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  if [[ "$s" == *[$'\x01'-$'\x1f'$'\x7f']* ]]; then
    for ((i = 1; i < 32; i++)); do
      printf -v c '%b' "\\x$(printf %02x "$i")"
      s=${s//"$c"/$(printf '\\u%04x' "$i")}
    done
    s=${s//$'\x7f'/\\u007f}
  fi
  gp_out="\"$s\""
}

# The current time as RFC 3339 UTC, for protobuf Timestamp fields.
gp_now_rfc3339() {
  local -n gp_out=$1
  # shellcheck disable=SC2034 # a nameref
  gp_out=$(TZ=UTC0 printf '%(%Y-%m-%dT%H:%M:%SZ)T' -1)
}

# Writes request body $2 for path $1 ("register" or "end") to the spool, then sends the spool.
gp_submit() {
  local kind=$1 body=$2
  # shellcheck disable=SC2174 # only the spool itself must be private
  if ! mkdir -p -m 0700 "$GOODPUT_SPOOL_DIR" 2>/dev/null || [[ ! -w "$GOODPUT_SPOOL_DIR" ]]; then
    gp_log "spool folder $GOODPUT_SPOOL_DIR is not writable; sending once without a spool"
    local tmp
    tmp=$(mktemp) || return 0
    printf '%s' "$body" >"$tmp"
    gp_send_file "$tmp" "$kind"
    rm -f "$tmp"
    return 0
  fi
  # EPOCHREALTIME has a fixed width until 2286: names sort in time order.
  local name="${EPOCHREALTIME/./}.$$.$kind.json"
  if ! printf '%s' "$body" >"$GOODPUT_SPOOL_DIR/.$name.tmp" ||
    ! mv -f "$GOODPUT_SPOOL_DIR/.$name.tmp" "$GOODPUT_SPOOL_DIR/$name"; then
    gp_log "could not write to the spool $GOODPUT_SPOOL_DIR"
    rm -f "$GOODPUT_SPOOL_DIR/.$name.tmp"
  fi
  gp_send_spool
  ((GP_LEFT > 0)) && gp_start_retrier
  return 0
}

# Starts the node's retrier (goodput-spool-retry.sh) detached: in a session of its own, so
# that slurmd, which waits for the prolog and kills its process group, neither waits for it
# nor kills it, and with no descriptor of ours open. It exits at once when another runs.
gp_start_retrier() {
  [[ "$GOODPUT_RETRY" == 0 ]] && return 0
  local retrier="$GP_SLURM_DIR/goodput-spool-retry.sh"
  if [[ ! -x "$retrier" ]]; then
    gp_log "$retrier is missing: spooled requests wait for the next run"
    return 0
  fi
  if ! command -v setsid >/dev/null 2>&1 || ! command -v flock >/dev/null 2>&1; then
    gp_log "setsid or flock (util-linux) not found: spooled requests wait for the next run"
    return 0
  fi
  GOODPUT_RETRY_AFTER_HINT_S=$GP_RETRY_AFTER_S setsid "$retrier" </dev/null >/dev/null 2>&1 &
  return 0
}

# Sends file $1 to endpoint $2 (register, end) with max time $3 (default
# GOODPUT_HTTP_TIMEOUT_S). Sets GP_OUTCOME to sent, drop (a 4xx retrying cannot fix), or keep,
# and GP_OUTCOME_RETRY_AFTER_S to the answer's Retry-After in seconds (0 when it had none).
# Runs in the caller's shell, no subshell of its own: a node's retrier costs one curl per
# try and nothing more (curl's start is most of the cost of a try).
gp_send_file() {
  local file=$1 kind=$2 max_time=${3:-$GOODPUT_HTTP_TIMEOUT_S}
  if [[ -z "${GOODPUT_INGEST_URL:-}" ]]; then
    gp_log "GOODPUT_INGEST_URL is not set (/etc/goodput/slurm.env); request kept in the spool"
    GP_OUTCOME=keep
    GP_OUTCOME_RETRY_AFTER_S=0
    return
  fi
  local url="${GOODPUT_INGEST_URL%/}/api/v1/jobs:$kind" config out code answer headers
  local retry_after=0
  # The token goes to curl on its standard input, never on a command line (ps shows those).
  # No `Expect: 100-continue`: one header block comes back, before the body.
  config="header = \"Content-Type: application/json\""$'\n'"header = \"Expect:\""
  if [[ -n "${GOODPUT_TOKEN:-}" ]]; then
    local token=${GOODPUT_TOKEN//\\/\\\\}
    config+=$'\n'"header = \"Authorization: Bearer ${token//\"/\\\"}\""
  fi
  # The headers, the answer, then its status code on a line of its own (000: no answer).
  out=$(curl --silent --show-error --config - --max-time "$max_time" \
    --connect-timeout "$max_time" --dump-header - --output - --write-out '\n%{http_code}' \
    --data-binary "@$file" -- "$url" 2>&1 <<<"$config")
  code=${out##*$'\n'}
  answer=${out%$'\n'*}
  if [[ "$code" != 000 && "$answer" == *$'\r\n\r\n'* ]]; then
    headers=${answer%%$'\r\n\r\n'*}
    answer=${answer#*$'\r\n\r\n'}
    # Retry-After in seconds (an HTTP date is not used: the backoff applies), at most 600.
    local re=$'(^|\n)[Rr][Ee][Tt][Rr][Yy]-[Aa][Ff][Tt][Ee][Rr]:[ \t]*([0-9]{1,6})[ \t]*\r'
    if [[ "$headers"$'\r' =~ $re ]]; then
      retry_after=$((10#${BASH_REMATCH[2]}))
      ((retry_after > 600)) && retry_after=600
    fi
  fi
  answer=${answer//[[:cntrl:]]/ }
  answer=${answer:0:500}
  GP_OUTCOME_RETRY_AFTER_S=0
  case "$code" in
    2??) GP_OUTCOME=sent ;;
    401 | 403 | 408 | 429 | 5?? | 000 | "")
      gp_log "POST $url: HTTP ${code:-000} ${answer} (kept for a later try)"
      GP_OUTCOME=keep
      GP_OUTCOME_RETRY_AFTER_S=$retry_after
      ;;
    *)
      local request
      request=$(<"$file")
      request=${request//[[:cntrl:]]/ }
      gp_log "POST $url refused, HTTP $code: ${answer} (dropped: ${request:0:300})"
      GP_OUTCOME=drop
      ;;
  esac
}

# Sends the spooled requests oldest first within GOODPUT_SEND_BUDGET_S; stops at the first
# one that must be kept. Runs of other jobs on the node wait for each other (flock), so a
# request is not sent twice at once and requests keep their order.
gp_send_spool() {
  local start=${EPOCHREALTIME/./} lock_fd=""
  GP_SENT=0
  GP_RETRY_AFTER_S=0
  local files=("$GOODPUT_SPOOL_DIR"/*.json)
  [[ -e "${files[0]}" ]] || files=()
  GP_LEFT=${#files[@]}
  if command -v flock >/dev/null 2>&1 && exec {lock_fd}>>"$GOODPUT_SPOOL_DIR/.lock"; then
    if ! flock -w "$GOODPUT_SEND_BUDGET_S" "$lock_fd"; then
      gp_log "another run held the spool for ${GOODPUT_SEND_BUDGET_S}s; requests kept"
      exec {lock_fd}>&-
      return 0
    fi
  fi
  files=("$GOODPUT_SPOOL_DIR"/*.json)
  [[ -e "${files[0]}" ]] || files=()
  local excess=$((${#files[@]} - GOODPUT_SPOOL_MAX_FILES))
  if ((excess > 0)); then
    gp_log "spool $GOODPUT_SPOOL_DIR holds ${#files[@]} requests; dropping the oldest $excess"
    rm -f -- "${files[@]:0:excess}"
    files=("${files[@]:excess}")
  fi
  local file kind left_ms max_time
  for file in "${files[@]}"; do
    left_ms=$((GOODPUT_SEND_BUDGET_S * 1000 - (${EPOCHREALTIME/./} - start) / 1000))
    ((left_ms >= 500)) || break
    max_time=$GOODPUT_HTTP_TIMEOUT_S
    ((left_ms / 1000 < max_time)) && max_time=$(((left_ms + 999) / 1000))
    kind=${file%.json}
    kind=${kind##*.}
    case "$kind" in
      register | end) ;;
      *)
        gp_log "dropping $file: not a spooled request"
        rm -f -- "$file"
        continue
        ;;
    esac
    gp_send_file "$file" "$kind" "$max_time"
    if [[ "$GP_OUTCOME" == keep ]]; then
      GP_RETRY_AFTER_S=$GP_OUTCOME_RETRY_AFTER_S
      break
    fi
    rm -f -- "$file"
    [[ "$GP_OUTCOME" == sent ]] && ((GP_SENT += 1))
  done
  files=("$GOODPUT_SPOOL_DIR"/*.json)
  [[ -e "${files[0]}" ]] || files=()
  GP_LEFT=${#files[@]}
  [[ -n "$lock_fd" ]] && exec {lock_fd}>&-
  return 0
}

# The retrier (goodput-spool-retry.sh): sends the spool until it is empty, waiting between
# tries Retry-After (of the answer that stopped the last try, or GOODPUT_RETRY_AFTER_HINT_S
# from the run that started it) plus a random part of a backoff that starts at
# GOODPUT_RETRY_INITIAL_S and doubles up to GOODPUT_RETRY_MAX_DELAY_S; a try that delivered
# something starts the backoff again. The random part spreads the nodes of a burst (every
# node of a large job starting at once) over time instead of sending them back together.
# One per node: it holds the spool's .retrier.lock, and a second one exits at once. Gives up
# after GOODPUT_RETRY_FOR_S. A failure is logged at the 1st, 2nd, 4th, 8th, ... try.
gp_retry_spool() {
  [[ -d "$GOODPUT_SPOOL_DIR" ]] || return 0
  local lock_fd
  exec {lock_fd}>>"$GOODPUT_SPOOL_DIR/.retrier.lock" || return 0
  if ! flock -n "$lock_fd"; then
    exec {lock_fd}>&-
    return 0
  fi
  printf '%s\n' "$$" >"$GOODPUT_SPOOL_DIR/.retrier.pid"
  local started=$SECONDS attempt=0 tries=0 retry_after=${GOODPUT_RETRY_AFTER_HINT_S:-0}
  local base_ms wait_ms pause files
  [[ "$retry_after" =~ ^[0-9]{1,6}$ ]] || retry_after=0
  ((retry_after > 600)) && retry_after=600
  while :; do
    files=("$GOODPUT_SPOOL_DIR"/*.json)
    if [[ ! -e "${files[0]}" ]]; then
      # A run that spooled after this look and found the lock held relies on this retrier:
      # let go of the lock first, then look again.
      rm -f "$GOODPUT_SPOOL_DIR/.retrier.pid"
      flock -u "$lock_fd"
      files=("$GOODPUT_SPOOL_DIR"/*.json)
      [[ -e "${files[0]}" ]] || break
      flock -n "$lock_fd" || break # another retrier has taken over
      printf '%s\n' "$$" >"$GOODPUT_SPOOL_DIR/.retrier.pid"
      continue
    fi
    base_ms=$((GOODPUT_RETRY_INITIAL_S * 1000 << (attempt < 20 ? attempt : 20)))
    ((base_ms > GOODPUT_RETRY_MAX_DELAY_S * 1000)) && base_ms=$((GOODPUT_RETRY_MAX_DELAY_S * 1000))
    wait_ms=$((retry_after * 1000 + (RANDOM * 32768 + RANDOM) % base_ms))
    ((wait_ms < 200)) && wait_ms=200
    if ((SECONDS - started + wait_ms / 1000 > GOODPUT_RETRY_FOR_S)); then
      GP_QUIET=0
      gp_log "${#files[@]} requests still spooled after ${GOODPUT_RETRY_FOR_S}s of retries;" \
        "the next prolog, epilog or timer sends them"
      rm -f "$GOODPUT_SPOOL_DIR/.retrier.pid"
      break
    fi
    printf -v pause '%d.%03d' $((wait_ms / 1000)) $((wait_ms % 1000))
    sleep "$pause"
    ((tries += 1))
    # Logged at tries 1, 2, 4, 8, ...
    GP_QUIET=$(((tries & (tries - 1)) != 0))
    gp_send_spool
    GP_QUIET=0
    retry_after=$GP_RETRY_AFTER_S
    if ((GP_SENT > 0)); then attempt=0; else ((attempt += 1)); fi
  done
  exec {lock_fd}>&-
  return 0
}
