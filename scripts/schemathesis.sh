#!/usr/bin/env bash
# Runs schemathesis (from PyPI, in a virtual environment this script makes) against the real
# service on both engines: `st run --checks all`, its stateful phase included, with a fixed
# seed and a bounded number of examples. Exits non-zero on any failure.
#
#   scripts/schemathesis.sh            # both engines
#   EXAMPLES=100 SEED=7 scripts/schemathesis.sh
#
# scripts/test.sh runs it after the Rust tests. Besides the two engines it runs against
# examples/custom_service.rs, a service with a job type of its own. Settings (one per-operation override, with its
# reason) are in schemathesis.toml at the top of the repository.
set -euo pipefail
cd "$(dirname "$0")/.."

EXAMPLES=${EXAMPLES:-30}
SEED=${SEED:-1}
VENV=${VENV:-target/schemathesis-venv}

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

if [ ! -x "$VENV/bin/st" ]; then
  need_python_venv
  echo "installing schemathesis into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'schemathesis>=4,<5'
fi
if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server is missing: install it with apt-get install -y redis-server" >&2
  exit 1
fi
cargo build --locked --bin toc --example custom_service

redis_port=$(free_port)
redis-server --port "$redis_port" --save '' --appendonly no >/dev/null &
pids+=($!)

status=0
# Both engines, then a service of its own (examples/custom_service.rs: its send_reminder type
# in the description, on the embedded store).
for engine in memory redis custom; do
  port=$(free_port)
  if [ "$engine" = custom ]; then
    TOC_LISTEN="127.0.0.1:$port" TOC_RUNTIME_GRACE_MS=1000 RUST_LOG=error \
      target/debug/examples/custom_service &
  else
    TOC_STORE=$engine TOC_REDIS_URL="redis://127.0.0.1:$redis_port/" TOC_LISTEN="127.0.0.1:$port" \
      TOC_RUNTIME_GRACE_MS=1000 RUST_LOG=error target/debug/toc serve &
  fi
  pids+=($!)
  python3 - "$port" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=1)
        break
    except Exception:
        time.sleep(0.1)
else:
    sys.exit("toc serve did not come up")
PY
  echo "== schemathesis against the $engine engine" >&2
  # Every operation but the topic's PUT, then that one alone: a topic's settings decide
  # which jobs it accepts (its payload limit, its default type), so topics changed at random
  # while jobs are written would turn valid jobs into refusals that no schema can foresee.
  # The hooks say how to make an import's body (JSON Lines), which schemathesis does not know.
  PYTHONPATH=scripts SCHEMATHESIS_HOOKS=schemathesis_hooks \
  "$VENV/bin/st" run "http://127.0.0.1:$port/openapi.json" --checks all \
    --exclude-name 'PUT /v1/topics/{topic}' \
    --max-examples "$EXAMPLES" --seed "$SEED" || status=1
  "$VENV/bin/st" run "http://127.0.0.1:$port/openapi.json" --checks all \
    --include-name 'PUT /v1/topics/{topic}' \
    --max-examples "$EXAMPLES" --seed "$SEED" || status=1
done
exit "$status"
