#!/usr/bin/env python3
"""Medians of the batching runs in this directory: one line per JSON file and
--batch_bytes value (iteration time, push messages per worker per iteration,
units that left in batches), and the on/off ratio of the medians."""
import glob
import json
import os
import statistics

here = os.path.dirname(os.path.abspath(__file__))
print("| file | link Mbit/s | device GFLOP/s | merge | batch_bytes | runs | iteration s (median) | push msgs/iter | batches/iter | units in batches/iter | on/off iteration |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(here, "*.json"))):
    rows = json.load(open(path))
    name = os.path.basename(path)[:-5]
    by = {}
    for r in rows:
        by.setdefault(r["batch_bytes"], []).append(r)
    med = {b: statistics.median(r["iteration_s"] for r in rs) for b, rs in by.items()}
    for b in sorted(by):
        rs = by[b]
        gflops = rs[0]["compute_s"]
        ratio = "%.3f" % (med[b] / med[0]) if b != 0 and 0 in med else ""
        print("| %s | %g | %s | %s | %d | %d | %.3f | %.1f | %.1f | %.1f | %s |" % (
            name, rs[0]["link_mbit"], name.split("gflops")[-1].split("_")[0], "off" if "mergeoff" in name else "auto",
            b, len(rs), med[b],
            statistics.median(r["push_messages_per_iter"] for r in rs),
            statistics.median(r["batches_per_iter"] for r in rs),
            statistics.median(r["batched_units_per_iter"] for r in rs), ratio))
