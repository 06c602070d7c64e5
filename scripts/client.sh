#!/usr/bin/env bash
# A real client of the API: generates a Python client from the running service's own
# /openapi.json with openapi-python-client (from PyPI, in a virtual environment this script
# makes), and runs examples/client_tour.py with it against the service on both engines.
# Fails if the generator warns (a schema it could not use) or any call of the tour fails.
#
#   scripts/client.sh
#
# scripts/test.sh runs it after the Rust tests.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-target/client-venv}
OUT=target/client

if [ ! -x "$VENV/bin/openapi-python-client" ]; then
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "python3's venv is missing: installing python3-venv from Debian's packages" >&2
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  fi
  echo "installing openapi-python-client into $VENV" >&2
  python3 -m venv "$VENV"
  # ruff formats the generated code (the generator warns when it is missing).
  "$VENV/bin/pip" install -q 'openapi-python-client>=0.29,<0.30' httpx attrs ruff
fi
if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server is missing: install it with apt-get install -y redis-server" >&2
  exit 1
fi
cargo build --locked --bin toc

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
pids=()
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    kill "${pids[$i]}" 2>/dev/null || true
    wait "${pids[$i]}" 2>/dev/null || true
  done
}
trap cleanup EXIT

wait_up() {
  python3 - "$1" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=1)
        sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit("toc serve did not come up")
PY
}

redis_port=$(free_port)
redis-server --port "$redis_port" --save '' --appendonly no >/dev/null &
pids+=($!)

generated=0
for engine in memory redis; do
  port=$(free_port)
  TOC_STORE=$engine TOC_REDIS_URL="redis://127.0.0.1:$redis_port/" TOC_LISTEN="127.0.0.1:$port" \
    TOC_RUNTIME_GRACE_MS=1000 RUST_LOG=error target/debug/toc serve &
  pids+=($!)
  wait_up "$port"
  if [ "$generated" -eq 0 ]; then
    rm -rf "$OUT"
    mkdir -p "$OUT"
    python3 -c 'import sys, urllib.request; open(sys.argv[2], "wb").write(urllib.request.urlopen(sys.argv[1]).read())' \
      "http://127.0.0.1:$port/openapi.json" "$OUT/openapi.json"
    log="$OUT/generate.log"
    (cd "$OUT" && PATH="$PWD/../../$VENV/bin:$PATH" openapi-python-client generate \
      --path openapi.json --meta none --output-path timeout_center_client) >"$log" 2>&1 || {
      cat "$log"; echo "client: generation failed" >&2; exit 1; }
    if grep -qiE 'warning|unable to process|error' "$log"; then
      cat "$log"
      echo "client: openapi-python-client warned: a schema of /openapi.json is not usable" >&2
      exit 1
    fi
    generated=1
  fi
  echo "== the generated client's tour against the $engine engine"
  PYTHONPATH="$OUT" "$VENV/bin/python" examples/client_tour.py "http://127.0.0.1:$port"
done
