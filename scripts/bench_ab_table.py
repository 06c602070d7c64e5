"""The table of scripts/bench-ab.sh: each figure toc-bench printed, per run, and the ratio
HEAD / BASE of the medians.

    python3 scripts/bench_ab_table.py DIR BASE HEAD ROUNDS SCENARIO...

DIR holds SCENARIO.SIDE.ROUND.log (toc-bench's output) and .steal (the run's CPU steal, %).
A figure is a line `  SYSTEM  NAME  VALUE UNIT  NOTE` as toc-bench prints each measurement.
"""

import re
import statistics
import sys

# toc-bench prints `{system:<16} {name:<44} {value:>14.1} {unit}`: a name may pass its 44
# columns and hold numbers ("flow control, 1 key, parallelism 64"), the value has one decimal.
LINE = re.compile(r"^  (\S+)\s+(.+?)\s+(-?[0-9]+\.[0-9]) (\S+)(?:  |$)")


def figures(path):
    out = {}
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            # The headline table's lines ("... target >= 0.8") are not figures of a run.
            if m and "  target " not in line:
                out[(m.group(1), m.group(2).strip())] = (float(m.group(3)), m.group(4))
    return out


def main():
    d, base, head, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    scenarios = sys.argv[5:]
    print(f"\nA/B: BASE {base}, HEAD {head}; {rounds} round(s), binaries in turn\n")
    print("| scenario | system | figure | unit | BASE runs | HEAD runs | HEAD / BASE | steal % (B, H) |")
    print("|---|---|---|---|---|---|---|---|")
    for s in scenarios:
        runs = {side: [figures(f"{d}/{s}.{side}.{r}.log") for r in range(1, rounds + 1)]
                for side in ("base", "head")}
        steal = {side: [open(f"{d}/{s}.{side}.{r}.steal").read().strip() for r in range(1, rounds + 1)]
                 for side in ("base", "head")}
        keys = []
        for r in runs["base"] + runs["head"]:
            for k in r:
                if k not in keys:
                    keys.append(k)
        for k in keys:
            b = [r[k][0] for r in runs["base"] if k in r]
            h = [r[k][0] for r in runs["head"] if k in r]
            unit = next(r[k][1] for r in runs["base"] + runs["head"] if k in r)
            ratio = (statistics.median(h) / statistics.median(b)
                     if b and h and statistics.median(b) != 0 else None)
            fmt = lambda xs: " / ".join(f"{x:,.1f}" for x in xs) or "-"
            print(f"| {s} | {k[0]} | {k[1]} | {unit} | {fmt(b)} | {fmt(h)} | "
                  f"{'-' if ratio is None else f'{ratio:.2f}'} | "
                  f"{'/'.join(steal['base'])}, {'/'.join(steal['head'])} |")


if __name__ == "__main__":
    main()
