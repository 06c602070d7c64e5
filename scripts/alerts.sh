#!/usr/bin/env bash
# The Prometheus alert rules (config/prometheus/alerts.yml): checked by `promtool check
# rules`, then tested by `promtool test rules` against series a real `toc serve` on Redis
# produced (scripts/alerts.py says how). promtool comes from Debian's `prometheus` package,
# installed when missing.
#
#   scripts/alerts.sh
#
# scripts/test.sh runs it after the Rust tests.
set -euo pipefail
cd "$(dirname "$0")/.."
# The services this script starts keep no journal (toc serve's default is toc-data/ here).
export TOC_MEMORY_JOURNAL=${TOC_MEMORY_JOURNAL:-none}

if ! command -v promtool >/dev/null 2>&1; then
  echo "promtool is missing: installing Debian's prometheus package" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server is missing: install it with apt-get install -y redis-server" >&2
  exit 1
fi
promtool check rules config/prometheus/alerts.yml
cargo build --locked --bin toc
python3 scripts/alerts.py target/debug/toc
