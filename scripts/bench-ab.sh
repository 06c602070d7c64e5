#!/usr/bin/env bash
# A/B of the hot path: this build against another, binaries run in turn on one machine.
#
#   scripts/bench-ab.sh BASE [HEAD]          (HEAD: the work tree's HEAD by default)
#
# Builds both commits' `toc-bench` (release) in target directories of their own under
# target/ab/ (kept between runs, so a second A/B against the same BASE builds only HEAD),
# then runs each scenario of $AB_SCENARIOS (reset burst pull latency) with BASE, HEAD,
# BASE, HEAD in turn ($AB_ROUNDS rounds, 2 by default), and prints one table: each figure of
# each run, the ratio HEAD / BASE of the medians, and the CPU steal of each run (a noisy
# neighbour shows there, not in the figures). $AB_ARGS goes to every run (`--quick` for a
# short check; BullMQ is left out: the peer is the same for both).
#
# When to run it: any change under src/store/, lua/, src/actors/ or src/http/ that a reset,
# a fire or a claim goes through. Put the table in the commit body or the closing note.
set -euo pipefail
cd "$(dirname "$0")/.."

base=${1:?usage: scripts/bench-ab.sh BASE [HEAD]}
head=${2:-HEAD}
scenarios=${AB_SCENARIOS:-reset burst pull latency}
rounds=${AB_ROUNDS:-2}
root=target/ab
mkdir -p "$root"

# The toc-bench binary of commit $1, built once in its own work tree and target directory.
build() {
  local sha tree
  sha=$(git rev-parse --short=12 "$1^{commit}")
  tree=$root/src-$sha
  if [ ! -x "$root/target-$sha/release/toc-bench" ]; then
    if [ ! -d "$tree" ]; then
      git worktree add --detach -f "$tree" "$sha" >/dev/null
    fi
    echo "building toc-bench at $sha ($1)" >&2
    (cd "$tree" && CARGO_TARGET_DIR="$PWD/../target-$sha" cargo build --release --quiet -p toc-bench --bin toc-bench >&2)
  fi
  echo "$root/target-$sha/release/toc-bench"
}

# The machine's steal and total CPU jiffies, from /proc/stat.
jiffies() {
  awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print $9, t }' /proc/stat
}

base_bin=$(build "$base")
head_bin=$(build "$head")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for scenario in $scenarios; do
  for round in $(seq 1 "$rounds"); do
    for side in base head; do
      bin=$base_bin
      [ "$side" = head ] && bin=$head_bin
      read -r s0 t0 < <(jiffies)
      # shellcheck disable=SC2086
      "$bin" "$scenario" --no-peers ${AB_ARGS:-} > "$out/$scenario.$side.$round.log" 2>&1 || {
        echo "$side ($bin) $scenario failed; its log:" >&2
        tail -20 "$out/$scenario.$side.$round.log" >&2
        exit 1
      }
      read -r s1 t1 < <(jiffies)
      awk -v s=$((s1 - s0)) -v t=$((t1 - t0)) 'BEGIN { printf "%.1f\n", (t > 0 ? 100 * s / t : 0) }' \
        > "$out/$scenario.$side.$round.steal"
      echo "$scenario round $round $side: done" >&2
    done
  done
done
python3 scripts/bench_ab_table.py "$out" "$base" "$head" "$rounds" $scenarios
