#!/usr/bin/env bash
# Tests the dashboard (/ui) in a real headless Chromium: Chromium from Debian's packages,
# Playwright for Python from PyPI in a virtual environment this script makes, against real
# `toc serve` processes. Exits non-zero on any failure.
#
#   scripts/ui.sh                 # the checks of tests/ui/dashboard.py
#   SHOTS=docs scripts/ui.sh      # and the screenshots of docs/operations.md, written to docs/
#
# scripts/test.sh runs it after the Rust tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# The services this script starts keep no journal (toc serve's default is toc-data/ here).
export TOC_MEMORY_JOURNAL=${TOC_MEMORY_JOURNAL:-none}

VENV=${VENV_UI:-target/ui-venv}
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if ! command -v chromium >/dev/null 2>&1; then
  echo "chromium is missing: installing it from Debian's packages" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c 'import playwright' >/dev/null 2>&1; then
  if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "python3's venv is missing: installing python3-venv from Debian's packages" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-venv >/dev/null
  fi
  echo "installing playwright into $VENV (the browser is Debian's chromium)" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q 'playwright>=1.40,<2'
fi
cargo build --locked --bin toc --example custom_service
if [ -n "${SHOTS:-}" ]; then mkdir -p "$SHOTS"; fi
UI_CUSTOM_SERVICE=target/debug/examples/custom_service \
  "$VENV/bin/python" tests/ui/dashboard.py target/debug/toc ${SHOTS:+"$SHOTS"}
