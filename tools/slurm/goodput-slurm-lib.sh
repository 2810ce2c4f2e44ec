# shellcheck shell=bash
# Shared by goodput-prolog.sh and goodput-epilog.sh (sourced, installed next to them): reads
# the settings, builds JSON in bash, and delivers requests to goodput-ingest's HTTP job
# endpoints (POST /api/v1/jobs:register, /api/v1/jobs:end) with curl, through a spool folder
# so that nothing is lost while goodput is down and nothing holds a job up:
#
#   every request is first written to the spool (one file each, named by time), then the
#   whole spool is sent oldest first within a small time budget. A file is removed once
#   ingest answered 2xx, or a 4xx that sending it again cannot fix (logged); on no answer,
#   a timeout, 408, 429, 5xx, 401 or 403 (a token an administrator can fix) it stays for the
#   next prolog or epilog, and sending stops for this run. The spool keeps at most
#   GOODPUT_SPOOL_MAX_FILES files (the oldest beyond are dropped, logged).
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
# Needs bash 4.3+, curl, and coreutils' timeout; flock (util-linux) when present.

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
umask 077

# To syslog and standard error (slurmd keeps the latter in its log at debug levels). The
# caller sets GOODPUT_LOG_TAG (goodput-prolog, goodput-epilog).
gp_log() {
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
    gp_send_file "$tmp" "$kind" >/dev/null
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
}

# Sends file $1 to endpoint $2 (register, end) with max time $3 (default
# GOODPUT_HTTP_TIMEOUT_S). Prints one word: sent, drop (a 4xx retrying cannot fix), or keep.
gp_send_file() {
  local file=$1 kind=$2 max_time=${3:-$GOODPUT_HTTP_TIMEOUT_S}
  if [[ -z "${GOODPUT_INGEST_URL:-}" ]]; then
    gp_log "GOODPUT_INGEST_URL is not set (/etc/goodput/slurm.env); request kept in the spool"
    echo keep
    return
  fi
  local url="${GOODPUT_INGEST_URL%/}/api/v1/jobs:$kind" config out code answer
  # The token goes to curl on its standard input, never on a command line (ps shows those).
  config="header = \"Content-Type: application/json\""
  if [[ -n "${GOODPUT_TOKEN:-}" ]]; then
    local token=${GOODPUT_TOKEN//\\/\\\\}
    config+=$'\n'"header = \"Authorization: Bearer ${token//\"/\\\"}\""
  fi
  # The answer, then its status code on a line of its own (000: no answer).
  out=$(curl --silent --show-error --config - --max-time "$max_time" \
    --connect-timeout "$max_time" --output - --write-out '\n%{http_code}' \
    --data-binary "@$file" -- "$url" 2>&1 <<<"$config")
  code=${out##*$'\n'}
  answer=${out%$'\n'*}
  answer=${answer//[[:cntrl:]]/ }
  answer=${answer:0:500}
  case "$code" in
    2??) echo sent ;;
    401 | 403 | 408 | 429 | 5?? | 000 | "")
      gp_log "POST $url: HTTP ${code:-000} ${answer} (kept for the next run)"
      echo keep
      ;;
    *)
      local request
      request=$(<"$file")
      request=${request//[[:cntrl:]]/ }
      gp_log "POST $url refused, HTTP $code: ${answer} (dropped: ${request:0:300})"
      echo drop
      ;;
  esac
}

# Sends the spooled requests oldest first within GOODPUT_SEND_BUDGET_S; stops at the first
# one that must be kept. Runs of other jobs on the node wait for each other (flock), so a
# request is not sent twice at once and requests keep their order.
gp_send_spool() {
  local start=${EPOCHREALTIME/./} lock_fd=""
  if command -v flock >/dev/null 2>&1 && exec {lock_fd}>>"$GOODPUT_SPOOL_DIR/.lock"; then
    if ! flock -w "$GOODPUT_SEND_BUDGET_S" "$lock_fd"; then
      gp_log "another run held the spool for ${GOODPUT_SEND_BUDGET_S}s; requests kept"
      exec {lock_fd}>&-
      return 0
    fi
  fi
  local files=("$GOODPUT_SPOOL_DIR"/*.json)
  [[ -e "${files[0]}" ]] || files=()
  local excess=$((${#files[@]} - GOODPUT_SPOOL_MAX_FILES))
  if ((excess > 0)); then
    gp_log "spool $GOODPUT_SPOOL_DIR holds ${#files[@]} requests; dropping the oldest $excess"
    rm -f -- "${files[@]:0:excess}"
    files=("${files[@]:excess}")
  fi
  local file kind left_ms max_time outcome
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
    outcome=$(gp_send_file "$file" "$kind" "$max_time")
    [[ "$outcome" == keep ]] && break
    rm -f -- "$file"
  done
  [[ -n "$lock_fd" ]] && exec {lock_fd}>&-
  return 0
}
