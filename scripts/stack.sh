#!/usr/bin/env bash
# The local goodput stack: a private PostgreSQL and Redis in a data folder, migrations, the
# four services and, when it is built, the web dashboard, all on loopback. Used by
# `./goodput up|down|status`.
#
#   scripts/stack.sh up DATA_DIR BUILD_DIR
#   scripts/stack.sh down DATA_DIR
#   scripts/stack.sh status DATA_DIR
#
# Re-running `up` is safe: running servers are kept, services are restarted on the same data.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SERVICES=(ingest ofu mfu alerting)
declare -A GRPC_PORT=([ingest]=7101 [ofu]=7102 [mfu]=7103 [alerting]=7104)
declare -A HTTP_PORT=([ingest]=7201 [ofu]=7202 [mfu]=7203 [alerting]=7204)
DASHBOARD_PORT=7300
ALERTMANAGER_PORT=9093
declare -A GRPC_SERVICES=(
  [ingest]="goodput.v1.JobService goodput.v1.IngestService"
  [ofu]="goodput.v1.OfuService" [mfu]="goodput.v1.MfuService"
  [alerting]="goodput.v1.AlertService goodput.v1.ReportService")

say() { printf '\033[1m==>\033[0m %s\n' "$*"; }
die() { printf 'stack: %s\n' "$*" >&2; exit 1; }

# The port if nothing listens on it, else a free one chosen by the kernel.
pick_port() {
  python3 - "$1" <<'PY'
import socket, sys
want = int(sys.argv[1])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", want))
except OSError:
    s.close(); s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1]); s.close()
PY
}

pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_service() {
  local data=$1 svc=$2 pidfile="$1/run/$2.pid"
  if pid_alive "$pidfile"; then
    local pid; pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile" "$data/run/$svc.ready"
}

# A private Alertmanager (port 9093 when free) for goodput-alerting to deliver to, so that
# `./goodput up` shows notifications end to end; its web page lists what was delivered.
# Prints nothing and returns non-zero when Alertmanager is not installed.
start_alertmanager() {
  local data=$1 port=$2 bin
  bin=$(command -v prometheus-alertmanager || command -v alertmanager) || return 1
  stop_service "$data" alertmanager
  mkdir -p "$data/alertmanager"
  cat >"$data/alertmanager/alertmanager.yml" <<YAML
# Local stack: keep every alert goodput sends (see the web page); notify no one.
route:
  receiver: keep
  group_by: [alertname, cluster, job_id]
receivers:
  - name: keep
YAML
  setsid "$bin" --config.file="$data/alertmanager/alertmanager.yml" \
    --storage.path="$data/alertmanager/data" --web.listen-address="127.0.0.1:$port" \
    --cluster.listen-address= >>"$data/logs/alertmanager.log" 2>&1 </dev/null &
  echo $! >"$data/run/alertmanager.pid"
  echo "$port" >"$data/run/alertmanager.ports"
}

# goodput-dashboard: the web dashboard over the four services (port 7300 when free).
start_dashboard() {
  local data=$1 build=$2 port=$3 bin="$2/tools/dashboard/goodput-dashboard"
  [[ -x "$bin" ]] || { echo "stack: goodput-dashboard not built; no dashboard" >&2; return 0; }
  stop_service "$data" dashboard
  local gport
  local -a addr=()
  for svc in "${SERVICES[@]}"; do
    read -r gport _ <"$data/run/$svc.ports"
    addr+=("--$svc" "127.0.0.1:$gport")
  done
  say "starting goodput-dashboard (http://127.0.0.1:$port/)"
  setsid "$bin" --listen 127.0.0.1 --port "$port" "${addr[@]}" --static-dir "$build/web/dist" \
    --ready-file "$data/run/dashboard.ready" >>"$data/logs/dashboard.log" 2>&1 </dev/null &
  echo $! >"$data/run/dashboard.pid"
  echo "$port" >"$data/run/dashboard.ports"
  for _ in $(seq 1 100); do [[ -s "$data/run/dashboard.ready" ]] && break; sleep 0.1; done
  [[ -s "$data/run/dashboard.ready" ]] || echo "stack: goodput-dashboard did not start (see $data/logs/dashboard.log)" >&2
}

cmd_up() {
  local data=$1 build=$2
  local ctl="$build/tools/goodputctl/goodputctl"
  [[ -x "$ctl" ]] || die "goodputctl not built in $build (run ./goodput up)"
  mkdir -p "$data"/{etc,logs,run}

  say "PostgreSQL"
  local dsn; dsn=$("$ROOT/scripts/pg.sh" start "$data/postgres" | tail -n 1)
  say "Redis"
  local redis_addr; redis_addr=$("$ROOT/scripts/redis.sh" start "$data/redis" | tail -n 1)
  local redis_port=${redis_addr##*:}

  say "migrations"
  "$ctl" migrate --dsn "$dsn" --dir "$ROOT/migrations"

  # Ports first: each service's configuration names the others it forwards to, and alerting
  # links its alerts to the dashboard.
  declare -A gport hport
  stop_service "$data" dashboard
  for svc in "${SERVICES[@]}"; do
    stop_service "$data" "$svc"
    gport[$svc]=$(pick_port "${GRPC_PORT[$svc]}")
    hport[$svc]=$(pick_port "${HTTP_PORT[$svc]}")
  done
  local dash_port; dash_port=$(pick_port "$DASHBOARD_PORT")
  local dash_url=${GOODPUT_DASHBOARD_URL:-http://127.0.0.1:$dash_port}
  local am_port am_targets=""
  stop_service "$data" alertmanager
  am_port=$(pick_port "$ALERTMANAGER_PORT")
  if start_alertmanager "$data" "$am_port"; then
    say "Alertmanager on http://127.0.0.1:$am_port (goodput-alerting delivers to it)"
    am_targets="
  targets:
    - name: alertmanager-local
      kind: alertmanager
      url: http://127.0.0.1:$am_port
  default_targets: [alertmanager-local]"
  else
    say "Alertmanager is not installed: alerts are kept but not delivered anywhere"
  fi

  for svc in "${SERVICES[@]}"; do
    cat >"$data/etc/$svc.yaml" <<YAML
# goodput-$svc, local stack (written by ./goodput up; edit and re-run up to change)
service:
  name: goodput-$svc
grpc:
  host: 127.0.0.1
  port: ${gport[$svc]}
http:
  host: 127.0.0.1
  port: ${hport[$svc]}
postgres:
  dsn: "$dsn"
  pool_size: 4
redis:
  host: 127.0.0.1
  port: $redis_port
log:
  level: info
  format: json
auth:
  enabled: false
YAML
    # Windows flow ofu -> mfu -> alerting (and ofu -> alerting); each hop catches up from
    # PostgreSQL, so the order the services start in does not matter.
    case $svc in
      # idle_flush_s: the demo replays a fleet in minutes; a job silent for a minute is over.
      ofu) cat >>"$data/etc/$svc.yaml" <<YAML
ofu:
  idle_flush_s: 60
  forward:
    mfu_address: 127.0.0.1:${gport[mfu]}
    alerting_address: 127.0.0.1:${gport[alerting]}
YAML
        ;;
      # Framework throughput series that reach ingest by remote_write become MFU reports.
      # The demo replays 21 simulated hours: its running jobs' samples are hours old, which
      # must not read as GPUs gone silent without an epilog.
      ingest) cat >>"$data/etc/$svc.yaml" <<YAML
ingest:
  mfu_metrics:
    mfu_address: 127.0.0.1:${gport[mfu]}
  jobs:
    silent_after_s: 172800
YAML
        ;;
      mfu) cat >>"$data/etc/$svc.yaml" <<YAML
mfu:
  forward:
    alerting_address: 127.0.0.1:${gport[alerting]}
YAML
        ;;
      alerting) cat >>"$data/etc/$svc.yaml" <<YAML
alerting:
  dashboard_url: $dash_url
  # The demo replays 21 simulated hours in minutes: a job that finished hours ago in simulated
  # time must not look silent while its epilog is still on the way.
  telemetry_stopped_after_s: 172800
  # Its windows reach alerting hours after they end by design: a replay, not a backlog.
  platform_lag_alert_s: 172800$am_targets
  # Job-end reports: ofu's job summaries and mfu's verdicts, read as a consumer reads them.
  reports:
    ofu_address: 127.0.0.1:${gport[ofu]}
    mfu_address: 127.0.0.1:${gport[mfu]}
YAML
        ;;
    esac
    say "starting goodput-$svc (gRPC 127.0.0.1:${gport[$svc]}, HTTP 127.0.0.1:${hport[$svc]})"
    setsid "$build/services/$svc/goodput-$svc" --config "$data/etc/$svc.yaml" \
      --ready-file "$data/run/$svc.ready" >>"$data/logs/$svc.log" 2>&1 </dev/null &
    echo $! >"$data/run/$svc.pid"
    echo "${gport[$svc]} ${hport[$svc]}" >"$data/run/$svc.ports"
  done

  say "waiting for every service to report SERVING"
  local failed=0
  for svc in "${SERVICES[@]}"; do
    for name in ${GRPC_SERVICES[$svc]}; do
      if ! "$ctl" health --addr "127.0.0.1:${gport[$svc]}" --service "$name" --wait 60 >/dev/null; then
        echo "stack: goodput-$svc did not become SERVING; last log lines:" >&2
        tail -n 20 "$data/logs/$svc.log" >&2
        failed=1
      fi
    done
  done
  [[ $failed -eq 0 ]] || die "some services did not start (logs in $data/logs)"
  start_dashboard "$data" "$build" "$dash_port"

  local demo_rc=0
  if [[ "${GOODPUT_DEMO:-1}" != 0 ]]; then
    local cluster="demo-$(date -u +%Y%m%d-%H%M%S)"
    say "running a simulated fleet through the platform (cluster $cluster)"
    local -a addr=()
    for svc in "${SERVICES[@]}"; do
      addr+=("--$svc" "127.0.0.1:${gport[$svc]}")
    done
    "$build/tools/demo/goodput-demo" "${addr[@]}" --cluster "$cluster" \
      --dashboard-url "$dash_url" \
      --ctl "$build/tools/goodputctl/goodputctl" || demo_rc=$?
    echo
  fi
  cmd_status "$data"
  echo "goodputctl finds this stack with:"
  echo "  export GOODPUT_INGEST_ADDR=127.0.0.1:${gport[ingest]} GOODPUT_OFU_ADDR=127.0.0.1:${gport[ofu]} \\"
  echo "         GOODPUT_MFU_ADDR=127.0.0.1:${gport[mfu]} GOODPUT_ALERTING_ADDR=127.0.0.1:${gport[alerting]}"
  [[ $demo_rc -eq 0 ]] || die "the demo fleet was not delivered completely (exit $demo_rc); services keep running"
}

cmd_status() {
  local data=$1 build=${2:-}
  [[ -d "$data" ]] || die "nothing here yet: $data does not exist (run ./goodput up)"
  printf '%-18s %-8s %-22s %-34s %s\n' COMPONENT STATE ADDRESS "METRICS / HEALTH" LOG
  local pgport="-" rport="-"
  [[ -f "$data/postgres/port" ]] && pgport=$(cat "$data/postgres/port")
  [[ -f "$data/redis/port" ]] && rport=$(cat "$data/redis/port")
  local pgstate=stopped rstate=stopped
  "$ROOT/scripts/pg.sh" status "$data/postgres" >/dev/null 2>&1 && pgstate=running
  "$ROOT/scripts/redis.sh" status "$data/redis" >/dev/null 2>&1 && rstate=running
  printf '%-18s %-8s %-22s %-34s %s\n' postgresql "$pgstate" "127.0.0.1:$pgport" "-" "$data/postgres/postgres.log"
  printf '%-18s %-8s %-22s %-34s %s\n' redis "$rstate" "127.0.0.1:$rport" "-" "$data/redis/redis.log"
  for svc in "${SERVICES[@]}"; do
    local state=stopped gport=- hport=-
    [[ -f "$data/run/$svc.ports" ]] && read -r gport hport <"$data/run/$svc.ports"
    pid_alive "$data/run/$svc.pid" && state=running
    printf '%-18s %-8s %-22s %-34s %s\n' "goodput-$svc" "$state" "127.0.0.1:$gport" \
      "http://127.0.0.1:$hport/metrics" "$data/logs/$svc.log"
  done
  local dstate=stopped dport=-
  [[ -f "$data/run/dashboard.ports" ]] && dport=$(cat "$data/run/dashboard.ports")
  pid_alive "$data/run/dashboard.pid" && dstate=running
  printf '%-18s %-8s %-22s %-34s %s\n' goodput-dashboard "$dstate" "127.0.0.1:$dport" \
    "http://127.0.0.1:$dport/" "$data/logs/dashboard.log"
  if [[ -f "$data/run/alertmanager.ports" ]]; then
    local astate=stopped aport; aport=$(cat "$data/run/alertmanager.ports")
    pid_alive "$data/run/alertmanager.pid" && astate=running
    printf '%-18s %-8s %-22s %-34s %s\n' alertmanager "$astate" "127.0.0.1:$aport" \
      "http://127.0.0.1:$aport/#/alerts" "$data/logs/alertmanager.log"
  fi
  echo
  [[ $dstate == running ]] && echo "Dashboard: http://127.0.0.1:$dport/"
  echo "PostgreSQL DSN: $(cat "$data/postgres/dsn" 2>/dev/null || echo -)"
  echo "Health: goodputctl health --addr 127.0.0.1:<port>;  stop: ./goodput down"
}

cmd_down() {
  local data=$1
  [[ -d "$data" ]] || { echo "nothing to stop"; return 0; }
  stop_service "$data" dashboard
  for svc in "${SERVICES[@]}"; do
    stop_service "$data" "$svc"
    echo "stopped goodput-$svc"
  done
  stop_service "$data" alertmanager
  "$ROOT/scripts/redis.sh" stop "$data/redis" || true
  "$ROOT/scripts/pg.sh" stop "$data/postgres" || true
}

case "${1:-}" in
  up) [[ $# -eq 3 ]] || die "usage: stack.sh up DATA_DIR BUILD_DIR"; cmd_up "$2" "$3" ;;
  down) [[ $# -eq 2 ]] || die "usage: stack.sh down DATA_DIR"; cmd_down "$2" ;;
  status) [[ $# -ge 2 ]] || die "usage: stack.sh status DATA_DIR"; cmd_status "$2" ;;
  *) die "usage: stack.sh up|down|status DATA_DIR [BUILD_DIR]" ;;
esac
