#!/usr/bin/env bash
# Builds the dashboard front-end (web/) into static files for goodput-dashboard.
#
#   scripts/build-web.sh [OUT_DIR]     # default web/dist
#
# Installs the exact packages of web/package-lock.json from the npm registry (only
# when the lockfile changed since the last install), type-checks and bundles with Vite.
# Needs Node.js >= 20.19 and npm.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WEB="$ROOT/web"
OUT=${1:-$WEB/dist}
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac

die() { printf 'build-web: %s\n' "$*" >&2; exit 1; }

command -v node >/dev/null || die "node not found (Node.js >= 20.19 is needed to build the dashboard)"
command -v npm >/dev/null || die "npm not found"
node -e '
  const [maj, min] = process.versions.node.split(".").map(Number);
  if (maj < 20 || (maj === 20 && min < 19)) {
    console.error(`build-web: Node.js ${process.versions.node} is too old; Vite needs >= 20.19`);
    process.exit(1);
  }' || exit 1

cd "$WEB"
# Install the lockfile's exact versions, only when the lockfile is newer than what is installed
# (npm writes node_modules/.package-lock.json on install). `npm install --no-save` rather than
# `npm ci`: npm 11's `ci` refuses a lockfile that lacks other platforms' optional packages
# (rollup's native builds), which is what npm itself writes on Linux; `--no-save` never
# rewrites the lockfile, so the installed tree is still the locked one.
if [[ ! -f node_modules/.package-lock.json || package-lock.json -nt node_modules/.package-lock.json ]]; then
  echo "build-web: installing front-end packages (npm install of the lockfile)"
  npm install --no-save --no-audit --no-fund --loglevel=error
fi
echo "build-web: building into $OUT"
GOODPUT_WEB_OUT_DIR="$OUT" npm run --silent build -- --logLevel warn
[[ -f "$OUT/index.html" ]] || die "the build wrote no $OUT/index.html"
# A stamp for build systems: newer than every input once the build succeeded.
touch "$OUT/.built"
