#!/usr/bin/env bash
# The deployment tests (ctest label `package`): goodput as users install it, from the Debian
# packages and from the container image, on a clean Debian 12 root.
#
#   package_test.sh packages   cpack the three .deb files into BUILD/packages, check what each
#                              holds, and make the debootstrapped Debian 12 root (cached)
#   package_test.sh install    apt-get install the packages into a copy of that root (a chroot;
#                              apt resolves Depends from the configured Debian mirror), apply
#                              the installed migrations and start the installed services and
#                              dashboard there, as the `goodput` user, with the installed
#                              configuration, against PostgreSQL and Redis on the host
#                              loopback; gRPC health SERVING checked from the host
#   package_test.sh image      build the image from deploy/Containerfile with buildah (its
#                              base: the same root, imported with `buildah from scratch`), run
#                              the migrations and goodput-mfu from it with podman, check health
#
# Environment (set by tests/package/CMakeLists.txt): GOODPUT_SOURCE_DIR, GOODPUT_BUILD_DIR,
# GOODPUT_VERSION, GOODPUT_INSTALL_PREFIX (must be /usr), GOODPUT_CPACK, GOODPUT_CTL (the build
# tree's goodputctl, the host-side health checker), GOODPUT_EXPECT_WEB (ON when the front-end
# was built into the package); GOODPUT_PACKAGE_TEST_KEEP=1 keeps the work folder on disk.
#
# Needs root, debootstrap, dpkg-dev, buildah, podman and runc (scripts/install-deps.sh); a
# missing one fails the test, it never skips. The base root is cached in
# BUILD/package-test/cache (debootstrap takes minutes); delete that folder to rebuild it.
set -euo pipefail

STEP=${1:?usage: package_test.sh packages|install|image}
SRC=${GOODPUT_SOURCE_DIR:?}
BUILD=${GOODPUT_BUILD_DIR:?}
VERSION=${GOODPUT_VERSION:?}
PACKAGES=$BUILD/packages
CACHE=$BUILD/package-test/cache
SUITE=bookworm
SERVICES=(ingest ofu mfu alerting)
declare -A GRPC_SERVICES=(
  [ingest]="goodput.v1.JobService goodput.v1.IngestService"
  [ofu]="goodput.v1.OfuService" [mfu]="goodput.v1.MfuService" [alerting]="goodput.v1.AlertService")
T0=$(date +%s)

say() { printf '[package %s %4ss] %s\n' "$STEP" "$(( $(date +%s) - T0 ))" "$*"; }
fail() { printf '[package %s] FAILED: %s\n' "$STEP" "$*" >&2; exit 1; }

# Every mount this script makes lives in a mount namespace of its own and goes away with the
# script, even when ctest kills it at a timeout.
if [[ -z "${GOODPUT_PACKAGE_TEST_NS:-}" ]]; then
  [[ $(id -u) -eq 0 ]] || fail "needs root (debootstrap, chroot, buildah); run as root"
  command -v unshare >/dev/null || fail "unshare (util-linux) not found"
  GOODPUT_PACKAGE_TEST_NS=1 exec unshare --mount --propagation private -- "$0" "$@"
fi

need() {
  local tool missing=()
  for tool in "$@"; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  [[ ${#missing[@]} -eq 0 ]] ||
    fail "missing on this machine: ${missing[*]} (scripts/install-deps.sh installs them)"
}

# --- temporary work folder, cleaned up on exit --------------------------------------------
WORK=""
CLEANUPS=()
cleanup() {
  local rc=$? i t
  for (( i=${#CLEANUPS[@]}-1; i>=0; i-- )); do
    t=$(date +%s)
    eval "${CLEANUPS[i]}" >/dev/null 2>&1 || true
    (( $(date +%s) - t < 5 )) || say "cleanup: '${CLEANUPS[i]}' took $(( $(date +%s) - t ))s"
  done
  if [[ -n "${GOODPUT_PACKAGE_TEST_KEEP:-}" && -n "$WORK" ]]; then
    say "kept $WORK (GOODPUT_PACKAGE_TEST_KEEP)"
  elif [[ -n "$WORK" && -d "$WORK" ]]; then
    # WORK is a tmpfs with mounts below it (a chroot's /proc); they are ours, in our namespace.
    grep -oE " $WORK(/[^ ]*)? " /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
    t=$(date +%s)
    rm -rf --one-file-system "$WORK"
    (( $(date +%s) - t < 5 )) || say "cleanup: removing $WORK took $(( $(date +%s) - t ))s"
  fi
  [[ $rc -eq 0 ]] || printf '[package %s] exit %d after %ss\n' "$STEP" "$rc" "$(( $(date +%s) - T0 ))" >&2
}
trap cleanup EXIT
make_work() {
  mkdir -p "$BUILD/package-test"
  # Work folders of runs killed an hour ago or more (a tmpfs is gone with its run; the folder
  # under it stays).
  find "$BUILD/package-test" -mindepth 1 -maxdepth 1 -type d -name '*.??????' -mmin +60 \
    -exec rm -rf --one-file-system {} + 2>/dev/null || true
  WORK=$(mktemp -d "$BUILD/package-test/$STEP.XXXXXX")
  # In memory: a root written by dpkg takes longer to delete from a busy disk than the test
  # takes to run. Mode 0755: PostgreSQL runs as the postgres user and must reach its folder.
  if [[ -n "${GOODPUT_PACKAGE_TEST_KEEP:-}" ]]; then
    chmod 0755 "$WORK"  # on disk, to be looked at after the run
  else
    mount -t tmpfs -o mode=0755,size=6g goodput-package-test "$WORK"
  fi
}

# --- the Debian mirror this machine uses ---------------------------------------------------
# The machine's configured Debian archive ("URI SUITE COMPONENT" per line) for bookworm and
# its -updates and -security suites, as apt sees them: the test downloads from nowhere else.
debian_sources() {
  apt-get indextargets --format '$(REPO_URI) $(RELEASE) $(COMPONENT)' \
    'Identifier: Packages' 'Origin: Debian' 2>/dev/null |
    awk -v s="$SUITE" '$2 == s || $2 == s "-updates" || $2 == s "-security"' | sort -u
}
debian_mirror() {
  debian_sources | awk -v s="$SUITE" '$2 == s { print $1; exit }'
}
write_apt_sources() {  # ROOT: the chroot's apt sources are the host's Debian entries
  local root=$1
  debian_sources | awk '{ print "deb " $1 " " $2 " " $3 }' >"$root/etc/apt/sources.list"
  rm -f "$root"/etc/apt/sources.list.d/*
}

# --- the Debian 12 base root (debootstrap --variant=minbase), cached as a tarball ----------
BASE_TAR=$CACHE/debian-$SUITE-minbase.tar
ensure_base_root() {
  need debootstrap apt-get tar
  local mirror key
  mirror=$(debian_mirror)
  [[ -n "$mirror" ]] ||
    fail "no Debian $SUITE archive among this machine's apt sources (apt-get indextargets; after apt-get update?)"
  # The first word changes when what this function makes does (a cache made before is redone).
  key="v2 debootstrap --variant=minbase $SUITE $mirror"
  if [[ -f "$BASE_TAR" && "$(cat "$BASE_TAR.key" 2>/dev/null)" == "$key" ]]; then
    say "Debian $SUITE minbase root: cached ($(du -h "$BASE_TAR" | cut -f1), $BASE_TAR)"
    return
  fi
  mkdir -p "$CACHE"
  local root; root=$(mktemp -d "$CACHE/root.XXXXXX")
  CLEANUPS+=("rm -rf --one-file-system '$root'")
  chmod 0755 "$root"  # it becomes /: the goodput user must get through it
  say "debootstrap --variant=minbase $SUITE from $mirror (takes a few minutes; cached after)"
  if ! debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >"$CACHE/debootstrap.log" 2>&1; then
    tail -n 30 "$CACHE/debootstrap.log" >&2
    fail "debootstrap failed (log: $CACHE/debootstrap.log)"
  fi
  grep -o " $root/[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l || true
  write_apt_sources "$root"
  # Nothing left from the host or the bootstrap that a later run must not see.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/tmp/*
  tar -C "$root" --numeric-owner -cf "$BASE_TAR.tmp" .
  mv "$BASE_TAR.tmp" "$BASE_TAR"
  echo "$key" >"$BASE_TAR.key"
  rm -rf --one-file-system "$root"
  say "Debian $SUITE minbase root cached: $(du -h "$BASE_TAR" | cut -f1)"
}

# ROOT: a fresh copy of the base root in WORK/root with what a chroot needs: name
# resolution, /proc, an apt archive cache that survives the run (CACHE/apt-archives).
ROOT=""
make_root() {
  ROOT=$WORK/root
  mkdir -p "$ROOT"
  tar -C "$ROOT" --numeric-owner -xf "$BASE_TAR"
  chmod 0755 "$ROOT"  # / of the chroot: the goodput user must get through it
  cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
  mount -t proc proc "$ROOT/proc"
  mkdir -p "$CACHE/apt-archives/partial"
  mount --bind "$CACHE/apt-archives" "$ROOT/var/cache/apt/archives"
}
in_root() { local root=$1; shift; chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "$@"; }

# --- packages -----------------------------------------------------------------------------
deb_file() {  # NAME ARCH
  local f="$PACKAGES/$1_${VERSION}_$2.deb"
  [[ -f "$f" ]] || fail "package $1 was not built: no $f"
  echo "$f"
}

check_deb_holds() {  # DEB PATH...
  local deb=$1; shift
  local listing; listing=$(dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./|/|')
  local p
  for p in "$@"; do
    grep -qxF "$p" <<<"$listing" || fail "$(basename "$deb") does not hold $p"
  done
}

check_deb_field() {  # DEB FIELD REGEX
  local value; value=$(dpkg-deb -f "$1" "$2")
  grep -qE "$3" <<<"$value" ||
    fail "$(basename "$1"): $2 is \"$value\"; expected it to match /$3/"
}

step_packages() {
  need dpkg-deb dpkg-shlibdeps readelf "${GOODPUT_CPACK:?}"
  [[ "${GOODPUT_INSTALL_PREFIX:-}" == /usr ]] ||
    fail "the build is configured with CMAKE_INSTALL_PREFIX=${GOODPUT_INSTALL_PREFIX:-?}; the Debian packages need /usr (cmake -DCMAKE_INSTALL_PREFIX=/usr $BUILD, as ./goodput does)"
  say "cpack: building the Debian packages into $PACKAGES"
  rm -rf "$PACKAGES"
  mkdir -p "$PACKAGES"
  if ! (cd "$BUILD" && "$GOODPUT_CPACK" -G DEB -B "$PACKAGES") >"$BUILD/package-test-cpack.log" 2>&1; then
    tail -n 40 "$BUILD/package-test-cpack.log" >&2
    fail "cpack failed (log: $BUILD/package-test-cpack.log)"
  fi
  rm -rf "$PACKAGES/_CPack_Packages"
  local server ctl slurm
  server=$(deb_file goodput-server amd64)
  ctl=$(deb_file goodputctl amd64)
  slurm=$(deb_file goodput-slurm all)
  local f
  for f in "$server" "$ctl" "$slurm"; do
    say "  $(basename "$f")  $(du -h "$f" | cut -f1)"
  done

  say "checking what each package holds and depends on"
  local -a server_files=(/usr/bin/goodput-dashboard /usr/libexec/goodput/container-entrypoint
    /etc/goodput/dashboard.env /usr/lib/systemd/system/goodput-dashboard.service
    /usr/share/goodput/migrations/0001_jobs_and_samples.sql)
  local svc
  for svc in "${SERVICES[@]}"; do
    server_files+=("/usr/bin/goodput-$svc" "/etc/goodput/$svc.yaml"
                   "/usr/lib/systemd/system/goodput-$svc.service")
  done
  local sql
  for sql in "$SRC"/migrations/*.sql; do
    server_files+=("/usr/share/goodput/migrations/$(basename "$sql")")
  done
  if [[ "${GOODPUT_EXPECT_WEB:-OFF}" == ON ]]; then
    server_files+=(/usr/share/goodput/web/index.html)
  else
    say "  the dashboard front-end was not built (no npm): goodput-server ships the JSON API only"
  fi
  check_deb_holds "$server" "${server_files[@]}"
  check_deb_holds "$ctl" /usr/bin/goodputctl
  check_deb_holds "$slurm" /usr/share/goodput/slurm/goodput-prolog.sh \
    /usr/share/goodput/slurm/goodput-epilog.sh /usr/share/goodput/slurm/goodput-slurm-lib.sh \
    /usr/share/goodput/slurm/goodput-spool-retry.sh /usr/lib/systemd/system/goodput-slurm-spool.service \
    /usr/lib/systemd/system/goodput-slurm-spool.timer /etc/goodput/slurm.env
  # dpkg-shlibdeps found the runtime libraries; adduser for the postinst.
  check_deb_field "$server" Depends 'libgrpc\+\+1\.51'
  check_deb_field "$server" Depends 'libpqxx-6\.4'
  check_deb_field "$server" Depends 'libyaml-cpp0\.7'
  check_deb_field "$server" Depends '(^|, )adduser'
  check_deb_field "$server" Depends "goodputctl \\(= $VERSION\\)"
  check_deb_field "$ctl" Depends 'libgrpc\+\+1\.51'
  check_deb_field "$slurm" Depends '(^|, )curl'
  local conffiles
  conffiles=$(dpkg-deb --ctrl-tarfile "$server" | tar -xOf - ./conffiles)
  for svc in "${SERVICES[@]}"; do
    grep -qxF "/etc/goodput/$svc.yaml" <<<"$conffiles" ||
      fail "goodput-server: /etc/goodput/$svc.yaml is not a conffile"
  done
  # Stripped: debug information would multiply the size.
  dpkg-deb --fsys-tarfile "$server" | tar -xOf - ./usr/bin/goodput-ingest >"$PACKAGES/.probe"
  if readelf -S "$PACKAGES/.probe" 2>/dev/null | grep -q '\.debug_info'; then
    rm -f "$PACKAGES/.probe"; fail "goodput-server: /usr/bin/goodput-ingest is not stripped"
  fi
  rm -f "$PACKAGES/.probe"
  dpkg-deb -f "$server" Depends | tr ',' '\n' | sed 's/^ */    /' | sed "1s/^/  goodput-server Depends:\n/"

  ensure_base_root
  say "ok: packages in $PACKAGES"
}

# --- a private PostgreSQL (DSN) and Redis (REDIS_ADDR) on the host loopback ---------------
DSN=""
REDIS_ADDR=""
start_postgres() {
  CLEANUPS+=("'$SRC/scripts/pg.sh' stop '$WORK/postgres'")
  "$SRC/scripts/pg.sh" start "$WORK/postgres" >"$WORK/pg.out" 2>"$WORK/pg.sh.log" ||
    { cat "$WORK/pg.sh.log" >&2; fail "PostgreSQL did not start"; }
  DSN=$(tail -n 1 "$WORK/pg.out")
}
start_redis() {
  CLEANUPS+=("'$SRC/scripts/redis.sh' stop '$WORK/redis'")
  "$SRC/scripts/redis.sh" start "$WORK/redis" >"$WORK/redis.out" 2>"$WORK/redis.sh.log" ||
    { cat "$WORK/redis.sh.log" >&2; fail "Redis did not start"; }
  REDIS_ADDR=$(tail -n 1 "$WORK/redis.out")
}
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# wait_serving NAME PORT LOG: every gRPC service NAME serves is SERVING, asked from the host.
wait_serving() {
  local name=$1 port=$2 log=$3 grpc_service
  for grpc_service in ${GRPC_SERVICES[$name]}; do
    if ! "${GOODPUT_CTL:?}" health --addr "127.0.0.1:$port" --service "$grpc_service" \
         --wait 60 >/dev/null 2>"$WORK/health.err"; then
      echo "--- last lines of $log:" >&2
      tail -n 30 "$log" >&2
      fail "$name: $grpc_service on 127.0.0.1:$port is not SERVING: $(cat "$WORK/health.err")"
    fi
  done
  say "  goodput-$name: ${GRPC_SERVICES[$name]} SERVING on 127.0.0.1:$port (asked from the host)"
}

# stop_pid PID NAME: SIGTERM, then the process must exit 0 (a clean drain) within 30 s.
stop_pid() {
  local pid=$1 name=$2 rc=0
  kill -TERM "$pid" 2>/dev/null || fail "$name (pid $pid) exited before it was stopped"
  local deadline=$(( $(date +%s) + 30 ))
  while kill -0 "$pid" 2>/dev/null; do
    (( $(date +%s) < deadline )) || fail "$name did not stop within 30 s of SIGTERM"
    sleep 0.2
  done
  wait "$pid" || rc=$?
  [[ $rc -eq 0 ]] || fail "$name exited $rc after SIGTERM (expected 0)"
}

# --- install ------------------------------------------------------------------------------
step_install() {
  need chroot tar python3 "${GOODPUT_CTL:?}"
  [[ -f "$BASE_TAR" ]] || fail "no base root $BASE_TAR: run the 'packages' step first"
  local server ctl slurm
  server=$(deb_file goodput-server amd64)
  ctl=$(deb_file goodputctl amd64)
  slurm=$(deb_file goodput-slurm all)
  make_work
  make_root
  local root=$ROOT
  say "clean Debian $SUITE root in $root"
  mkdir -p "$root/tmp/goodput"
  cp "$server" "$ctl" "$slurm" "$root/tmp/goodput/"
  say "apt-get install ./goodput-server ./goodputctl ./goodput-slurm (Depends from the Debian mirror)"
  if ! in_root "$root" sh -c 'export DEBIAN_FRONTEND=noninteractive &&
        apt-get update -q &&
        apt-get install -y -q --no-install-recommends /tmp/goodput/*.deb' >"$WORK/apt.log" 2>&1; then
    tail -n 40 "$WORK/apt.log" >&2
    fail "apt-get install of the packages failed"
  fi
  say "  $(grep -cE '^(Unpacking|Setting up) ' "$WORK/apt.log" || true) unpack/setup steps; installed:"
  in_root "$root" dpkg-query -W -f='    ${Package} ${Version} ${Status}\n' goodput-server goodputctl goodput-slurm
  local state p
  for p in goodput-server goodputctl goodput-slurm; do
    state=$(in_root "$root" dpkg-query -W -f='${Status}' "$p")
    [[ "$state" == "install ok installed" ]] || fail "$p is \"$state\" after apt-get install"
  done

  say "checking the installed files"
  local bin
  for bin in goodput-ingest goodput-ofu goodput-mfu goodput-alerting goodput-dashboard goodputctl; do
    in_root "$root" "/usr/bin/$bin" --help >"$WORK/help.out" 2>&1 ||
      { cat "$WORK/help.out" >&2; fail "/usr/bin/$bin --help failed in the clean root (libraries?)"; }
  done
  in_root "$root" getent passwd goodput >/dev/null || fail "postinst did not create the goodput user"
  local uid gid
  uid=$(in_root "$root" id -u goodput)
  gid=$(in_root "$root" id -g goodput)
  [[ $uid -ne 0 && $uid -lt 1000 ]] || fail "goodput user has uid $uid; expected a system uid"
  local mode
  mode=$(in_root "$root" stat -c '%a %U:%G' /etc/goodput/ingest.yaml)
  [[ "$mode" == "640 root:goodput" ]] || fail "/etc/goodput/ingest.yaml is $mode; expected 640 root:goodput"
  mode=$(in_root "$root" stat -c '%a %U' /etc/goodput/slurm.env)
  [[ "$mode" == "600 root" ]] || fail "/etc/goodput/slurm.env is $mode; expected 600 root"
  local conffiles
  conffiles=$(in_root "$root" dpkg-query -W -f='${Conffiles}' goodput-server)
  grep -q "/etc/goodput/alerting.yaml" <<<"$conffiles" || fail "dpkg lists no conffiles for goodput-server"
  local unit
  for unit in goodput-ingest goodput-ofu goodput-mfu goodput-alerting goodput-dashboard; do
    local f="$root/usr/lib/systemd/system/$unit.service"
    [[ -f "$f" ]] || fail "no $unit.service installed"
    for want in "User=goodput" "ProtectSystem=strict" "NoNewPrivileges=yes" "PrivateTmp=yes" \
                "ProtectHome=yes" "Restart=on-failure"; do
      grep -qxF "$want" "$f" || fail "$unit.service lacks $want"
    done
  done
  # systemd's own checker on the installed units, in the root (systemd added after the
  # packages, as a server has it): unknown keys, bad values, missing binaries.
  if ! in_root "$root" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends systemd' \
       >>"$WORK/apt.log" 2>&1; then
    tail -n 20 "$WORK/apt.log" >&2
    fail "apt-get install systemd (to verify the units) failed"
  fi
  if ! in_root "$root" systemd-analyze verify /usr/lib/systemd/system/goodput-ingest.service \
       /usr/lib/systemd/system/goodput-ofu.service /usr/lib/systemd/system/goodput-mfu.service \
       /usr/lib/systemd/system/goodput-alerting.service \
       /usr/lib/systemd/system/goodput-dashboard.service >"$WORK/verify.log" 2>&1 ||
     grep -q goodput "$WORK/verify.log"; then
    cat "$WORK/verify.log" >&2
    fail "systemd-analyze verify finds fault with the installed units"
  fi
  say "  units: systemd-analyze verify finds nothing to say"

  say "PostgreSQL and Redis on the host loopback"
  start_postgres
  start_redis
  local dsn=$DSN redis_addr=$REDIS_ADDR
  say "  $dsn; Redis $redis_addr"

  say "goodputctl migrate in the root (finds /usr/share/goodput/migrations by itself)"
  in_root "$root" sh -c 'cd / && exec goodputctl migrate --dsn "$1"' sh "$dsn" >"$WORK/migrate.out" 2>&1 ||
    { cat "$WORK/migrate.out" >&2; fail "installed goodputctl migrate failed"; }
  local expected; expected=$(ls "$SRC"/migrations/*.sql | wc -l)
  grep -q "^$expected applied, 0 already applied" "$WORK/migrate.out" ||
    { cat "$WORK/migrate.out" >&2; fail "expected $expected migrations applied from the installed folder"; }
  say "  $(tail -n 1 "$WORK/migrate.out")"

  # Ports: free ones (the packaged 7101-7104 may be taken on a shared machine), given as
  # environment overrides of the installed files, as a systemd drop-in would.
  declare -A gport hport
  for svc in "${SERVICES[@]}"; do gport[$svc]=$(free_port); hport[$svc]=$(free_port); done
  local dport; dport=$(free_port)
  declare -A pid
  for svc in "${SERVICES[@]}"; do
    local -a env=(GOODPUT_POSTGRES__DSN="$dsn" GOODPUT_REDIS__PORT="${redis_addr##*:}"
                  GOODPUT_GRPC__PORT="${gport[$svc]}" GOODPUT_HTTP__PORT="${hport[$svc]}")
    case $svc in
      ingest) env+=(GOODPUT_INGEST__MFU_METRICS__MFU_ADDRESS="127.0.0.1:${gport[mfu]}") ;;
      ofu) env+=(GOODPUT_OFU__FORWARD__MFU_ADDRESS="127.0.0.1:${gport[mfu]}"
                 GOODPUT_OFU__FORWARD__ALERTING_ADDRESS="127.0.0.1:${gport[alerting]}") ;;
      mfu) env+=(GOODPUT_MFU__FORWARD__ALERTING_ADDRESS="127.0.0.1:${gport[alerting]}") ;;
      alerting) env+=(GOODPUT_ALERTING__DASHBOARD_URL="http://127.0.0.1:$dport") ;;
    esac
    say "starting /usr/bin/goodput-$svc --config /etc/goodput/$svc.yaml as goodput ($uid:$gid)"
    chroot --userspec="$uid:$gid" --groups="$gid" "$root" /usr/bin/env -i PATH=/usr/bin:/bin \
      "${env[@]}" "/usr/bin/goodput-$svc" --config "/etc/goodput/$svc.yaml" \
      >"$WORK/$svc.log" 2>&1 </dev/null &
    pid[$svc]=$!
    CLEANUPS+=("kill -KILL ${pid[$svc]}")
  done
  for svc in "${SERVICES[@]}"; do wait_serving "$svc" "${gport[$svc]}" "$WORK/$svc.log"; done
  for svc in "${SERVICES[@]}"; do
    if grep -q 'unknown config key' "$WORK/$svc.log"; then
      grep 'unknown config key' "$WORK/$svc.log" >&2
      fail "goodput-$svc warns about the installed /etc/goodput/$svc.yaml"
    fi
  done

  say "starting /usr/bin/goodput-dashboard with /etc/goodput/dashboard.env"
  local -a denv=()
  local line
  while IFS= read -r line; do
    [[ "$line" =~ ^[A-Z_]+= ]] && denv+=("$line")
  done <"$root/etc/goodput/dashboard.env"
  denv+=(GOODPUT_DASHBOARD_PORT="$dport" GOODPUT_INGEST_ADDR="127.0.0.1:${gport[ingest]}"
         GOODPUT_OFU_ADDR="127.0.0.1:${gport[ofu]}" GOODPUT_MFU_ADDR="127.0.0.1:${gport[mfu]}"
         GOODPUT_ALERTING_ADDR="127.0.0.1:${gport[alerting]}")
  chroot --userspec="$uid:$gid" --groups="$gid" "$root" /usr/bin/env -i PATH=/usr/bin:/bin \
    "${denv[@]}" /usr/bin/goodput-dashboard >"$WORK/dashboard.log" 2>&1 </dev/null &
  pid[dashboard]=$!
  CLEANUPS+=("kill -KILL ${pid[dashboard]}")
  local deadline=$(( $(date +%s) + 30 ))
  until python3 - "$dport" <<'PY' >"$WORK/jobs.json" 2>"$WORK/http.err"
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/api/jobs", timeout=5) as r:
    sys.stdout.write(r.read().decode())
PY
  do
    if (( $(date +%s) >= deadline )); then
      tail -n 20 "$WORK/dashboard.log" >&2; cat "$WORK/http.err" >&2
      fail "the installed dashboard did not answer /api/jobs (from goodput-ingest) within 30 s"
    fi
    sleep 0.2
  done
  say "  dashboard: /api/jobs answered from the installed services: $(head -c 80 "$WORK/jobs.json")"
  if [[ "${GOODPUT_EXPECT_WEB:-OFF}" == ON ]]; then
    python3 - "$dport" <<'PY' || { tail -n 20 "$WORK/dashboard.log" >&2; fail "the dashboard does not serve the installed front-end"; }
import sys, urllib.request
with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/", timeout=5) as r:
    body = r.read().decode()
assert "<html" in body.lower() and "<script" in body.lower(), body[:200]
PY
    if grep -q 'no front-end' "$WORK/dashboard.log"; then
      cat "$WORK/dashboard.log" >&2; fail "the dashboard did not find /usr/share/goodput/web"
    fi
    say "  dashboard: / serves the front-end from /usr/share/goodput/web"
  fi

  say "the installed Slurm prolog and epilog register and end a job with curl (ingest's HTTP job endpoints)"
  local -a slurm_env=(SLURM_CLUSTER_NAME=package-test SLURM_JOB_ID=4242 SLURM_JOB_USER=alice
                      SLURM_JOB_ACCOUNT=m1234 SLURM_JOB_GPUS=0,1
                      GOODPUT_INGEST_URL="http://127.0.0.1:${hport[ingest]}")
  in_root "$root" "${slurm_env[@]}" /usr/share/goodput/slurm/goodput-prolog.sh >"$WORK/prolog.out" 2>&1 ||
    { cat "$WORK/prolog.out" >&2; fail "the installed prolog exited non-zero"; }
  "$GOODPUT_CTL" jobs show package-test/4242 --addr "127.0.0.1:${gport[ingest]}" --json \
    >"$WORK/job.json" 2>&1 || { cat "$WORK/prolog.out" "$WORK/job.json" >&2; fail "the prolog registered no job"; }
  grep -q '"alice"' "$WORK/job.json" || { cat "$WORK/job.json" >&2; fail "the registered job lacks its user"; }
  # As EpilogSlurmctld (no scontrol in this root), with the exit status Slurm hands over.
  in_root "$root" "${slurm_env[@]}" SLURM_SCRIPT_CONTEXT=epilog_slurmctld SLURM_JOB_EXIT_CODE2=1:0 \
    /usr/share/goodput/slurm/goodput-epilog.sh >"$WORK/epilog.out" 2>&1 ||
    { cat "$WORK/epilog.out" >&2; fail "the installed epilog exited non-zero"; }
  "$GOODPUT_CTL" jobs show package-test/4242 --addr "127.0.0.1:${gport[ingest]}" --json >"$WORK/job.json" 2>&1
  grep -q 'JOB_STATE_FAILED' "$WORK/job.json" ||
    { cat "$WORK/epilog.out" "$WORK/job.json" >&2; fail "the epilog did not end the job as failed (exit 1:0)"; }
  say "  job package-test/4242 registered by the prolog, ended as failed by the epilog (exit 1:0)"

  say "stopping (SIGTERM: each must drain and exit 0)"
  stop_pid "${pid[dashboard]}" goodput-dashboard
  for svc in alerting mfu ofu ingest; do stop_pid "${pid[$svc]}" "goodput-$svc"; done

  say "an administrator's edit of /etc/goodput survives a reinstall; purge removes everything"
  echo "# edited by the administrator" >>"$root/etc/goodput/ingest.yaml"
  if ! in_root "$root" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --reinstall \
        /tmp/goodput/goodput-server_*.deb' >>"$WORK/apt.log" 2>&1; then
    tail -n 20 "$WORK/apt.log" >&2
    fail "reinstalling goodput-server failed"
  fi
  grep -q "edited by the administrator" "$root/etc/goodput/ingest.yaml" ||
    fail "reinstalling goodput-server overwrote the edited /etc/goodput/ingest.yaml"
  if ! in_root "$root" sh -c 'DEBIAN_FRONTEND=noninteractive apt-get purge -y -q \
        goodput-server goodput-slurm goodputctl' >>"$WORK/apt.log" 2>&1; then
    tail -n 20 "$WORK/apt.log" >&2
    fail "apt-get purge of the packages failed"
  fi
  local left
  left=$(cd "$root" && ls -d usr/bin/goodput* usr/share/goodput etc/goodput \
           usr/lib/systemd/system/goodput-* 2>/dev/null || true)
  [[ -z "$left" ]] || fail "left behind after purge: $left"
  say "ok: installed from the packages into a clean Debian $SUITE root and served"
}

# --- image --------------------------------------------------------------------------------
# Private container storage in the build folder (vfs, as containers.md says for these
# machines), and the settings the sandbox needs: runc, cgroupfs, no default ulimits. Podman
# records its run and temporary folders in its database on first use and keeps using those,
# so they are fixed folders beside the storage, not the run's tmpfs.
setup_containers() {
  need buildah podman runc
  local store=$CACHE/containers
  if [[ "$(cat "$store/.path" 2>/dev/null)" != "$store" ]]; then
    rm -rf "$store"  # made for another path (a moved build folder): podman would use that one
  fi
  mkdir -p "$store/storage" "$store/run" "$store/libpod-tmp" "$WORK/containers"
  echo "$store" >"$store/.path"
  cat >"$WORK/containers/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$store/storage"
runroot = "$store/run"
EOF
  cat >"$WORK/containers/containers.conf" <<EOF
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
runtime = "runc"
tmp_dir = "$store/libpod-tmp"
EOF
  export CONTAINERS_STORAGE_CONF="$WORK/containers/storage.conf"
  export CONTAINERS_CONF="$WORK/containers/containers.conf"
  export TMPDIR="$WORK/containers/tmp"
  mkdir -p "$TMPDIR"
}

# The Containerfile's FROM (debian:bookworm-slim) as users pull it, made here from the cached
# root: `buildah from scratch`, the root copied in, trimmed as the slim image is.
BASE_IMAGE=localhost/goodput-test-base:$SUITE-minbase
ensure_base_image() {
  local key; key=$(sha256sum "$BASE_TAR" "$BASE_TAR.key" | sha256sum | cut -c1-16)
  if [[ "$(podman image inspect --format '{{index .Labels "goodput.base-key"}}' "$BASE_IMAGE" 2>/dev/null)" == "$key" ]]; then
    say "base image $BASE_IMAGE: cached"
    return
  fi
  say "base image $BASE_IMAGE: buildah from scratch + the debootstrapped root"
  local root=$WORK/base-root
  mkdir -p "$root"
  tar -C "$root" --numeric-owner -xf "$BASE_TAR"
  # What the slim image leaves out, and keeps out of later installs.
  mkdir -p "$root/etc/dpkg/dpkg.cfg.d"
  cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/lintian/*
EOF
  find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  rm -rf "$root"/usr/share/{man,info,locale,lintian}/* "$root"/var/cache/debconf/*-old \
    "$root"/var/log/* "$root"/dev/* "$root"/proc/* "$root"/sys/* "$root"/tmp/*
  local ctr
  ctr=$(buildah from scratch)
  CLEANUPS+=("buildah rm '$ctr'")
  buildah copy --quiet "$ctr" "$root" / >/dev/null
  buildah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --cmd /bin/bash --label "goodput.base-key=$key" --os linux --arch amd64 "$ctr"
  podman rmi -f "$BASE_IMAGE" >/dev/null 2>&1 || true
  buildah commit --quiet --rm "$ctr" "$BASE_IMAGE" >/dev/null
  rm -rf --one-file-system "$root"
  say "  $BASE_IMAGE: $(( $(podman image inspect --format '{{.Size}}' "$BASE_IMAGE") / 1000000 )) MB"
}

step_image() {
  need python3 "${GOODPUT_CTL:?}"
  [[ -f "$BASE_TAR" ]] || fail "no base root $BASE_TAR: run the 'packages' step first"
  deb_file goodput-server amd64 >/dev/null
  deb_file goodputctl amd64 >/dev/null
  make_work
  setup_containers
  # Left over from a run that was killed (a timeout): this storage is this build's own.
  podman rm -af >/dev/null 2>&1 || true
  buildah rm --all >/dev/null 2>&1 || true
  ensure_base_image
  local image=localhost/goodput:$VERSION
  podman rmi -f "$image" >/dev/null 2>&1 || true
  # The build context: the packages folder, as the Containerfile's header shows users.
  local context=$WORK/context
  mkdir -p "$context"
  cp "$PACKAGES"/goodput-server_*.deb "$PACKAGES"/goodputctl_*.deb "$context/"
  say "buildah build -f deploy/Containerfile --from $BASE_IMAGE (apt-get from the Debian mirror)"
  if ! buildah build --quiet --pull=never --from "$BASE_IMAGE" --network host --layers=false \
       -f "$SRC/deploy/Containerfile" -t "$image" "$context" >"$WORK/build.log" 2>&1; then
    tail -n 40 "$WORK/build.log" >&2
    fail "buildah build of deploy/Containerfile failed"
  fi
  local size_b; size_b=$(podman image inspect --format '{{.Size}}' "$image")
  say "  $image: $(( size_b / 1000000 )) MB"
  local user entry
  user=$(podman image inspect --format '{{.Config.User}}' "$image")
  entry=$(podman image inspect --format '{{json .Config.Entrypoint}}' "$image")
  [[ "$user" == "65532:65532" ]] || fail "image user is \"$user\"; expected 65532:65532"
  [[ "$entry" == '["/usr/libexec/goodput/container-entrypoint"]' ]] || fail "image entrypoint is $entry"
  podman image inspect --format '{{json .Config.ExposedPorts}}' "$image" | grep -q '"7103/tcp"' ||
    fail "image does not expose 7103"

  local -a run=(podman run --rm --network host)
  say "PostgreSQL on the host loopback"
  start_postgres
  local dsn=$DSN
  say "podman run $image migrate (the installed migrations)"
  "${run[@]}" -e GOODPUT_POSTGRES__DSN="$dsn" "$image" migrate >"$WORK/migrate.out" 2>&1 ||
    { cat "$WORK/migrate.out" >&2; fail "migrate in the container failed"; }
  local expected; expected=$(ls "$SRC"/migrations/*.sql | wc -l)
  grep -q "^$expected applied" "$WORK/migrate.out" ||
    { cat "$WORK/migrate.out" >&2; fail "expected $expected migrations applied in the container"; }
  say "  $(tail -n 1 "$WORK/migrate.out")"

  local gport hport nothing name="goodput-package-test-mfu-$$"
  gport=$(free_port); hport=$(free_port); nothing=$(free_port)
  say "podman run --network host $image mfu (gRPC 127.0.0.1:$gport)"
  # Forwarding goes to a port where nothing listens: this test runs mfu alone.
  podman run -d --network host --name "$name" \
    -e GOODPUT_POSTGRES__DSN="$dsn" -e GOODPUT_GRPC__PORT="$gport" -e GOODPUT_HTTP__PORT="$hport" \
    -e GOODPUT_MFU__FORWARD__ALERTING_ADDRESS="127.0.0.1:$nothing" \
    "$image" mfu >/dev/null 2>"$WORK/run.err" ||
    { cat "$WORK/run.err" >&2; fail "podman run $image mfu failed"; }
  CLEANUPS+=("podman rm -f '$name'")
  podman logs -f "$name" >"$WORK/mfu.log" 2>&1 &
  CLEANUPS+=("kill $! && wait $!")
  wait_serving mfu "$gport" "$WORK/mfu.log"
  local id; id=$(podman exec "$name" id -u)
  [[ "$id" == 65532 ]] || fail "the container runs as uid $id; expected 65532"
  say "  runs as uid $id; entrypoint $entry"
  say "stopping the container (SIGTERM: mfu must drain and exit 0)"
  podman stop --time 30 "$name" >/dev/null
  local rc; rc=$(podman inspect --format '{{.State.ExitCode}}' "$name")
  [[ "$rc" == 0 ]] || { tail -n 20 "$WORK/mfu.log" >&2; fail "goodput-mfu in the container exited $rc after SIGTERM"; }
  say "ok: image $image ($(( size_b / 1000000 )) MB) built from deploy/Containerfile and served"
}

case $STEP in
  packages) step_packages ;;
  install) step_install ;;
  image) step_image ;;
  *) fail "unknown step '$STEP' (packages, install, image)" ;;
esac
