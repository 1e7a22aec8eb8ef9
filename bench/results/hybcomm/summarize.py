#!/usr/bin/env python3
"""The tables of README.md from a pipeline bench JSON (bench/results/hybcomm/run.sh).

Rows are labelled by their place in a round ("off", "auto/cpu", ..., a second
"off" as "off#2"). Per round: each row's median iteration (over 4 workers x 8
timed iterations) and its ratio to the round's first off; then, per label,
the median, smallest and largest of both over the rounds.
"""
import json
import os
import statistics
import sys

path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "vgg19_57000.json")
rows = json.load(open(path))


def name(r):
    return r["sfb"] if r["sfb"] == "off" else "%s/%s" % (r["sfb"], r["sfb_rebuild"])


by_round = {}
for r in rows:
    by_round.setdefault(r["round"], []).append(r)
labels = []
for rnd, rs in sorted(by_round.items()):
    seen = {}
    for r in rs:
        n = name(r)
        seen[n] = seen.get(n, 0) + 1
        r["label"] = n if seen[n] == 1 else "%s#%d" % (n, seen[n])
        if r["label"] not in labels:
            labels.append(r["label"])

print("| round | " + " | ".join(labels) + " |")
print("|---|" + "---|" * len(labels))
times = {k: [] for k in labels}
ratios = {k: [] for k in labels}
for rnd, rs in sorted(by_round.items()):
    off = [r for r in rs if r["label"] == "off"][0]["iteration_s"]
    cells = {}
    for r in rs:
        times[r["label"]].append(r["iteration_s"])
        ratios[r["label"]].append(r["iteration_s"] / off)
        cells[r["label"]] = "%.3f (%.2fx)" % (r["iteration_s"], r["iteration_s"] / off)
    print("| %d | %s |" % (rnd, " | ".join(cells.get(k, "") for k in labels)))
print()
print("| row | SFB tensors | iteration s, median (min-max) | x the round's off, median (min-max) | "
      "factor apply s / iteration | MB / worker / iteration |")
print("|---|---|---|---|---|---|")
for k in labels:
    rs = [r for r in rows if r["label"] == k]
    print("| %s | %s | %.3f (%.3f-%.3f) | %.2f (%.2f-%.2f) | %.3f | %.1f |" % (
        k, ",".join(sorted({str(r["sfb_tensors"]) for r in rs})), statistics.median(times[k]), min(times[k]),
        max(times[k]), statistics.median(ratios[k]), min(ratios[k]), max(ratios[k]),
        statistics.median(r["factor_apply_s"] for r in rs), statistics.median(r["bytes_per_worker"] for r in rs) / 1e6))
