#!/usr/bin/env bash
# Signed webhooks verified by the Standard Webhooks reference library (`standardwebhooks`
# from PyPI, in a virtual environment this script makes) in a real receiver, against real
# `toc serve` processes on both engines, through a key rotation; and no secret of a URL or a
# header in any output (scripts/webhooks.py says what it checks).
#
#   scripts/webhooks.sh
#
# scripts/test.sh runs it after the Rust tests.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-target/webhooks-venv}

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import standardwebhooks' 2>/dev/null; then
  need_python_venv
  echo "installing standardwebhooks into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'standardwebhooks>=1.0,<2'
fi
if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server is missing: install it with apt-get install -y redis-server" >&2
  exit 1
fi
cargo build --locked --bin toc

redis_port=$(free_port)
redis-server --port "$redis_port" --save '' --appendonly no >/dev/null &
pids+=($!)

"$VENV/bin/python" scripts/webhooks.py target/debug/toc "$redis_port"
