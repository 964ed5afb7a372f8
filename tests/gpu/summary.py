#!/usr/bin/env python3
"""The one table of a GPU run (tests/gpu/run-on-gpu-host.sh): every check
with its result and seconds, then the bench rows of the run (adag-bench
--json files), each with adag's figure, the raw mechanism's of the same
run and their ratio.

    summary.py SUMMARY.tsv [BENCH.json ...]
"""
import json
import sys

# the params that tell the rows of one bench apart, in this order
KEYS = ("device", "placement", "actors", "mechanism", "path", "dir", "direction", "bytes",
        "kernels", "graph", "size", "op", "ranks")


def row_label(row):
    params = row.get("params") or {}
    parts = [f"{k}={params[k]}" for k in KEYS if k in params]
    if row.get("placement") and "placement" not in params:
        parts.insert(0, row["placement"])
    return " ".join(parts)


def figure(row):
    order = (("median_us", "us"), ("gbps", "GB/s"), ("per_s", "/s"))
    if row.get("metric") == "bandwidth":
        order = order[1:2] + order[:1] + order[2:]
    for key, unit in order:
        if row.get(key) is not None:
            return f"{row[key]:.3f} {unit}" if key != "per_s" else f"{row[key]:.0f} {unit}"
    return "-"


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    checks = []
    with open(argv[1]) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 4:
                checks.append(parts)
    print("| step | check | result | s |")
    print("|---|---|---|---|")
    for step, name, result, secs in checks:
        print(f"| {step} | {name} | {result} | {secs} |")
    rows = []
    for path in argv[2:]:
        if "*" in path:
            continue  # the shell's unmatched glob: no bench step ran
        try:
            with open(path) as f:
                rows.extend(json.load(f))
        except (OSError, ValueError) as e:
            print(f"\n{path}: unreadable ({e})")
    if rows:
        print()
        print("| bench | row | adag | raw, same run | ratio |")
        print("|---|---|---|---|---|")
    for row in rows:
        name = row.get("name", "?")
        if row.get("skipped"):
            print(f"| {name} | {row_label(row)} | skipped: {row['skipped']} | | |")
            continue
        base = row.get("baseline_value")
        ratio = row.get("ratio")
        print(f"| {name} | {row_label(row)} | {figure(row)} | "
              f"{'' if base is None else f'{base:.3f}'} {row.get('baseline') or ''} | "
              f"{'' if ratio is None else f'{ratio:.2f}x'} |")
    failed = [c for c in checks if c[2].startswith("FAILED")]
    skipped = [c for c in checks if c[2] == "SKIPPED"]
    print(f"\n{len(checks)} checks: {len(checks) - len(failed) - len(skipped)} passed, "
          f"{len(skipped)} skipped, {len(failed)} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
