#!/usr/bin/env bash
# A private PostgreSQL for local runs: its own cluster in a data folder, TCP on 127.0.0.1
# only, no unix socket, trust authentication for the local superuser `postgres`.
#
#   scripts/pg.sh start  DATA_DIR [--port N] [--db NAME]   # initdb if needed, start, print the DSN
#   scripts/pg.sh stop   DATA_DIR                          # fast shutdown
#   scripts/pg.sh status DATA_DIR                          # exit 0 running, 3 stopped
#   scripts/pg.sh dsn    DATA_DIR [--db NAME]              # print the DSN
#
# Re-running start is fine: a running server is left alone and its DSN printed. The first
# start picks a free port (or --port) and keeps it in DATA_DIR/port; DATA_DIR/pid holds the
# server's pid and DATA_DIR/dsn its connection string. Run as root, the server runs as
# the `postgres` system user, which must be able to reach DATA_DIR.
set -euo pipefail
GOODPUT_SCRIPT_NAME=pg.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[[ $# -ge 2 ]] || usage
action=$1; data_dir=$2; shift 2
port=""; db="goodput"
while [[ $# -gt 0 ]]; do
  case $1 in
    --port) port=${2:?--port needs a value}; shift 2 ;;
    --db) db=${2:?--db needs a value}; shift 2 ;;
    *) die "unknown argument '$1'" ;;
  esac
done
[[ $db =~ ^[a-zA-Z0-9_]+$ ]] || die "--db '$db': use letters, digits and '_'"

mkdir -p "$data_dir"
data_dir=$(cd "$data_dir" && pwd)
cluster="$data_dir/pgdata"
bindir=$(pg_bindir)

stored_port() { [[ -f "$data_dir/port" ]] && cat "$data_dir/port" || true; }
dsn_for() { echo "host=127.0.0.1 port=$1 user=postgres dbname=$2"; }
is_running() { [[ -f "$cluster/PG_VERSION" ]] && as_pg_user "$bindir/pg_ctl" -D "$cluster" status >/dev/null 2>&1; }
is_ready() { "$bindir/pg_isready" -q -h 127.0.0.1 -p "$1" -U postgres; }

case $action in
  start)
    if [[ $(id -u) -eq 0 ]]; then
      id postgres >/dev/null 2>&1 || die "running as root but there is no 'postgres' user"
      chown postgres:postgres "$data_dir"
      runuser -u postgres -- test -w "$data_dir" ||
        die "the postgres user cannot write $data_dir (check the permissions of its parent folders)"
    fi
    if [[ ! -f "$cluster/PG_VERSION" ]]; then
      log "initdb into $cluster"
      rm -rf "$cluster"
      as_pg_user "$bindir/initdb" -D "$cluster" -U postgres --auth=trust -E UTF8 --no-locale \
        >"$data_dir/initdb.log" 2>&1 || die "initdb failed; see $data_dir/initdb.log"
    fi
    if is_running; then
      port=$(stored_port)
      log "already running on port $port"
    else
      if [[ -z "$port" ]]; then port=$(stored_port); fi
      if [[ -z "$port" ]]; then port=$(free_port); fi
      port_in_use "$port" && die "port $port on 127.0.0.1 is taken by another program (use --port)"
      echo "$port" >"$data_dir/port"
      log "starting PostgreSQL on 127.0.0.1:$port"
      as_pg_user "$bindir/pg_ctl" -D "$cluster" -l "$data_dir/postgres.log" -w -t 60 \
        -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=''" start >/dev/null ||
        die "PostgreSQL did not start; see $data_dir/postgres.log"
    fi
    wait_until 30 is_ready "$port" || die "PostgreSQL on port $port is not ready; see $data_dir/postgres.log"
    head -n 1 "$cluster/postmaster.pid" >"$data_dir/pid"
    if [[ $("$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
            "SELECT 1 FROM pg_database WHERE datname = '$db'") != 1 ]]; then
      "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qc "CREATE DATABASE \"$db\"" >/dev/null
      log "created database $db"
    fi
    dsn_for "$port" "$db" | tee "$data_dir/dsn"
    ;;
  stop)
    if is_running; then
      as_pg_user "$bindir/pg_ctl" -D "$cluster" -m fast -w -t 60 stop >/dev/null
      log "stopped"
    else
      log "not running"
    fi
    rm -f "$data_dir/pid"
    ;;
  status)
    if is_running; then
      echo "running pid=$(head -n 1 "$cluster/postmaster.pid") port=$(stored_port) $(dsn_for "$(stored_port)" "$db")"
    else
      echo "stopped"; exit 3
    fi
    ;;
  dsn)
    [[ -n "$(stored_port)" ]] || die "no server was started in $data_dir"
    dsn_for "$(stored_port)" "$db"
    ;;
  *) usage ;;
esac
