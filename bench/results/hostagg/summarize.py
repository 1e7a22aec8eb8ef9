#!/usr/bin/env python3
"""Summarizes bench/results/hostagg/run.sh's runs: per configuration and setting, the bytes each host's link
carried per timed iteration (the difference between the LONG and SHORT runs of a round, over their difference in
iterations, so start-up traffic cancels), and the median iteration time of the LONG runs; then on / off."""
import collections
import glob
import json
import os
import re
import statistics
import sys

here = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
runs = collections.defaultdict(dict)  # (model, HxL, setting, round) -> iterations -> row
for path in glob.glob(os.path.join(here, "*.json")):
    m = re.match(r"(.+)_(\d+x\d+)_(on|off)_(\d+)_r(\d+)\.json$", os.path.basename(path))
    if not m:
        continue
    rows = json.load(open(path))
    row = rows[0] if isinstance(rows, list) else rows
    runs[(m.group(1), m.group(2), m.group(3), int(m.group(5)))][int(m.group(4))] = row
table = collections.defaultdict(lambda: collections.defaultdict(list))  # (model, HxL) -> setting -> [(bytes, iter_s)]
for (model, shape, setting, rnd), by_it in sorted(runs.items()):
    if len(by_it) != 2:
        continue
    short, long_ = sorted(by_it)
    a, b = by_it[short], by_it[long_]
    tx = (b["link_tx_bytes_per_host"] - a["link_tx_bytes_per_host"]) / (long_ - short)
    rx = (b["link_rx_bytes_per_host"] - a["link_rx_bytes_per_host"]) / (long_ - short)
    table[(model, shape)][setting].append((tx, rx, b["iteration_s"]))
print("| model | hosts x workers | setting | rounds | link bytes out per host per iteration (median, range) "
      "| in | iteration s (median, range) |")
print("|---|---|---|---|---|---|---|")
for (model, shape), settings in sorted(table.items()):
    for setting in ("off", "on"):
        v = settings.get(setting, [])
        if not v:
            continue
        tx = [x[0] for x in v]
        rx = [x[1] for x in v]
        it = [x[2] for x in v]
        print("| %s | %s | %s | %d | %.0f (%.0f-%.0f) | %.0f | %.4f (%.4f-%.4f) |" % (
            model, shape, setting, len(v), statistics.median(tx), min(tx), max(tx), statistics.median(rx),
            statistics.median(it), min(it), max(it)))
    if settings.get("on") and settings.get("off"):
        on_tx = statistics.median(x[0] for x in settings["on"])
        off_tx = statistics.median(x[0] for x in settings["off"])
        on_it = statistics.median(x[2] for x in settings["on"])
        off_it = statistics.median(x[2] for x in settings["off"])
        L = int(shape.split("x")[1])
        print("| %s | %s | on / off | | %.3f (1/L = %.3f) | | %.3f |" % (model, shape, on_tx / off_tx, 1.0 / L,
                                                                        on_it / off_it))
