# Shared helpers for goodput's local server scripts (sourced, not run).
# Functions: log, die, free_port, port_in_use, wait_until, pg_bindir, as_pg_user.

log() { printf '%s: %s\n' "${GOODPUT_SCRIPT_NAME:-goodput}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# free_port: prints a TCP port on 127.0.0.1 that nothing listens on right now.
free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
    return
  fi
  local port
  for port in $(seq 20000 29999 | shuf); do
    if ! port_in_use "$port"; then echo "$port"; return; fi
  done
  die "no free port found"
}

# port_in_use PORT: true if something accepts connections on 127.0.0.1:PORT.
port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# wait_until SECONDS COMMAND...: polls COMMAND every 0.1 s until it succeeds or time runs out.
wait_until() {
  local deadline=$(( $(date +%s) + $1 )); shift
  until "$@"; do
    if (( $(date +%s) >= deadline )); then return 1; fi
    sleep 0.1
  done
}

# pg_bindir: the PostgreSQL server binaries folder ($GOODPUT_PG_BINDIR, pg_config, or the
# newest /usr/lib/postgresql/<major>/bin).
pg_bindir() {
  if [[ -n "${GOODPUT_PG_BINDIR:-}" && -x "$GOODPUT_PG_BINDIR/postgres" ]]; then
    echo "$GOODPUT_PG_BINDIR"; return
  fi
  local dir
  if command -v pg_config >/dev/null 2>&1; then
    dir=$(pg_config --bindir 2>/dev/null || true)
    if [[ -x "$dir/postgres" && -x "$dir/initdb" ]]; then echo "$dir"; return; fi
  fi
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  if [[ -n "$dir" && -x "$dir/postgres" ]]; then echo "$dir"; return; fi
  die "PostgreSQL server binaries not found (install the postgresql package or set GOODPUT_PG_BINDIR)"
}

# as_pg_user COMMAND...: runs COMMAND as the postgres system user when we are root
# (PostgreSQL refuses to run as root), as ourselves otherwise.
as_pg_user() {
  if [[ $(id -u) -eq 0 ]]; then
    if command -v runuser >/dev/null 2>&1; then
      runuser -u postgres -- "$@"
    else
      setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
    fi
  else
    "$@"
  fi
}
