#!/usr/bin/env bash
# Runs the whole test suite. The tests start real redis-server processes (and a local Redis
# Cluster), so this installs redis-server from Debian's packages when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  echo "redis-server is missing: installing it from Debian's packages" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
fi

cargo test --locked "$@"
