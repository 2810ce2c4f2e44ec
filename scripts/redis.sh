#!/usr/bin/env bash
# A private Redis for local runs: 127.0.0.1 only, working files in a data folder.
#
#   scripts/redis.sh start  DATA_DIR [--port N]   # start if not running, print host:port
#   scripts/redis.sh stop   DATA_DIR
#   scripts/redis.sh status DATA_DIR              # exit 0 running, 3 stopped
#   scripts/redis.sh addr   DATA_DIR              # print host:port
#
# Re-running start is fine. The first start picks a free port (or --port) and keeps it in
# DATA_DIR/port; DATA_DIR/pid holds the server's pid, DATA_DIR/addr its address. Redis
# keeps only rebuildable data (caches, dedup keys, leases), so it runs without
# persistence.
set -euo pipefail
GOODPUT_SCRIPT_NAME=redis.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

usage() { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 2 ]] || usage
action=$1; data_dir=$2; shift 2
port=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --port) port=${2:?--port needs a value}; shift 2 ;;
    *) die "unknown argument '$1'" ;;
  esac
done
command -v redis-server >/dev/null 2>&1 || die "redis-server not found (install the redis-server package)"

mkdir -p "$data_dir"
data_dir=$(cd "$data_dir" && pwd)
stored_port() { [[ -f "$data_dir/port" ]] && cat "$data_dir/port" || true; }
pid_alive() { [[ -f "$data_dir/pid" ]] && kill -0 "$(cat "$data_dir/pid")" 2>/dev/null; }
answers() { [[ $(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null) == PONG ]]; }

case $action in
  start)
    if pid_alive && answers "$(stored_port)"; then
      port=$(stored_port)
      log "already running on port $port"
    else
      if [[ -z "$port" ]]; then port=$(stored_port); fi
      if [[ -z "$port" ]]; then port=$(free_port); fi
      port_in_use "$port" && die "port $port on 127.0.0.1 is taken by another program (use --port)"
      echo "$port" >"$data_dir/port"
      log "starting Redis on 127.0.0.1:$port"
      redis-server --port "$port" --bind 127.0.0.1 --protected-mode no --dir "$data_dir" \
        --daemonize yes --pidfile "$data_dir/pid" --logfile "$data_dir/redis.log" \
        --save "" --appendonly no ||
        die "redis-server did not start; see $data_dir/redis.log"
      wait_until 30 answers "$port" || die "Redis on port $port does not answer; see $data_dir/redis.log"
    fi
    echo "127.0.0.1:$port" | tee "$data_dir/addr"
    ;;
  stop)
    if pid_alive; then
      pid=$(cat "$data_dir/pid")
      kill -TERM "$pid"
      wait_until 30 bash -c "! kill -0 $pid 2>/dev/null" || { kill -KILL "$pid" 2>/dev/null || true; }
      log "stopped"
    else
      log "not running"
    fi
    rm -f "$data_dir/pid"
    ;;
  status)
    if pid_alive && answers "$(stored_port)"; then
      echo "running pid=$(cat "$data_dir/pid") addr=127.0.0.1:$(stored_port)"
    else
      echo "stopped"; exit 3
    fi
    ;;
  addr)
    [[ -n "$(stored_port)" ]] || die "no server was started in $data_dir"
    echo "127.0.0.1:$(stored_port)"
    ;;
  *) usage ;;
esac
