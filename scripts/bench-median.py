#!/usr/bin/env python3
"""The headline of several `toc bench all` runs: each ratio taken within one run (its
benchmarks.json, written by `toc bench all --out DIR` into DIR/docs/bench/), then the median
over the runs, with the lowest and highest beside it.

    scripts/bench-median.py DIR1 DIR2 DIR3

Prints a Markdown table for README.md and BENCHMARKS.md. A ratio missing from a run (a peer
left out, a scenario that failed) is left out of that ratio's median, and the table says
how many runs it covers.
"""

import json
import statistics
import sys
from pathlib import Path


def headline(run_dir):
    data = json.loads((Path(run_dir) / "docs/bench/benchmarks.json").read_text())
    if "headline" not in data:
        sys.exit(f"{run_dir}: benchmarks.json has no headline (written by an older toc-bench)")
    return data["headline"]


def main(dirs):
    if not dirs:
        sys.exit(__doc__)
    runs = [headline(d) for d in dirs]
    names = [row["name"] for row in runs[0]]
    print("| comparison | median | lowest – highest | target | met in |")
    print("|---|---|---|---|---|")
    for name in names:
        rows = [row for run in runs for row in run if row["name"] == name]
        values = [row["value"] for row in rows if row["value"] is not None]
        target = rows[0]["target"]
        if not values:
            print(f"| {name} | not measured | | {target} | |")
            continue
        met = sum(1 for row in rows if row["met"])
        print(
            f"| {name} | {statistics.median(values):.2f} | {min(values):.2f} – {max(values):.2f} "
            f"| {target} | {met} of {len(values)} runs |"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
