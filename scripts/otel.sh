#!/usr/bin/env bash
# Traces end to end (scripts/otel.py says what it checks): `toc serve` exporting to a local
# OTLP/HTTP receiver that decodes with `opentelemetry-proto` from PyPI (in a virtual
# environment this script makes), a webhook receiver and a pull consumer.
#
#   scripts/otel.sh
#
# scripts/test.sh runs it after the Rust tests.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV_OTEL:-target/otel-venv}

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import opentelemetry.proto' 2>/dev/null; then
  need_python_venv
  echo "installing opentelemetry-proto into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'opentelemetry-proto>=1.20,<2'
fi
cargo build --locked --bin toc
"$VENV/bin/python" scripts/otel.py target/debug/toc
