#!/usr/bin/env bash
# Installs, with apt-get, the Debian 12 packages goodput needs to build, test and run
# locally. Only what is missing is installed; a machine that has everything is left alone.
#
#   scripts/install-deps.sh            # build + test + local stack
#   scripts/install-deps.sh --check    # list what is missing, exit 1 if anything is
set -euo pipefail

packages=(
  # toolchain
  g++ cmake ninja-build pkg-config ccache
  # libraries
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libpqxx-dev libhiredis-dev libabsl-dev libre2-dev libyaml-cpp-dev nlohmann-json3-dev libspdlog-dev
  libcurl4-openssl-dev libsnappy-dev libcpp-httplib-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  # the TLS tests make their certificates with the openssl command line
  openssl
  # servers the platform and its tests start on loopback
  postgresql redis-server prometheus prometheus-alertmanager
  slurmctld slurmd slurm-client slurmrestd munge
  # Slurm accounting for the job-end report's sacctmgr test: slurmdbd on a private MariaDB
  slurmdbd mariadb-server
  # Python SDK and its tests
  python3 python3-grpcio python3-protobuf
  # the SDK wheel (pip wheel, offline) and its install test (a fresh venv)
  python3-pip python3-setuptools python3-wheel python3-venv
  # the Helm chart's render test (charts/render_chart.py; values.schema.json checks)
  python3-yaml python3-jsonschema
  # the digest tests' SMTP sink (tests/support/smtp_sink.py)
  python3-aiosmtpd
  # the dashboard's end-to-end test drives headless Chromium (Node.js and npm come with the machine)
  chromium
  # the package tests: .deb packages (CPack, dpkg-shlibdeps) installed into a debootstrapped
  # Debian root, and the container image built from that root with buildah and run by podman
  dpkg-dev debootstrap buildah podman runc
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi
if [[ "${1:-}" == "--check" ]]; then
  echo "install-deps: missing: ${missing[*]}" >&2
  exit 1
fi

echo "install-deps: installing ${#missing[@]} missing packages: ${missing[*]}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install packages" >&2; exit 1; }
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# Servers are started by goodput's own scripts and tests on private ports: keep the packages'
# default system instances (PostgreSQL, Redis, MariaDB, slurmdbd, ...) from being started by
# their postinst. invoke-rc.d and deb-systemd-invoke ask policy-rc.d; when the machine has
# none, one that denies every start is put in place for the install and removed after it.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\n# install-deps: no service starts during the install\nexit 101\n' \
    | $sudo tee "$policy" >/dev/null
  $sudo chmod 755 "$policy"
  trap '$sudo rm -f "$policy"' EXIT
fi
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: done"
