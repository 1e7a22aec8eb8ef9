#!/usr/bin/env python3
"""Table of bench/results/sfb/run.sh's JSON: per model and link, --sfb=off
against auto (bytes per worker per iteration, iteration time, its ratio to the
lower bound), and the ratios off/auto the study is about."""
import json
import os
import sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
print("| model | link | sfb | SFB tensors | MB / worker / iteration | iteration s | lower bound s | x bound | "
      "factor apply s | bytes off/auto | iteration auto/off |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for model in ("vgg19", "vgg19_22k"):
    path = os.path.join(out, model + ".json")
    if not os.path.exists(path):
        continue
    rows = json.load(open(path))
    for link in sorted({r["link_mbit"] for r in rows}):
        by = {r["sfb"]: r for r in rows if r["link_mbit"] == link}
        off, auto = by.get("off"), by.get("auto")
        for mode in ("off", "auto"):
            r = by.get(mode)
            if r is None:
                continue
            extra = ""
            if mode == "auto" and off is not None:
                extra = "%.2fx | %.3f" % (off["bytes_per_worker"] / r["bytes_per_worker"],
                                          r["iteration_s"] / off["iteration_s"])
            else:
                extra = " | "
            print("| %s | %g Mbit/s | %s | %d | %.1f | %.3f | %.3f | %.2f | %.3f | %s |" % (
                model, link, mode, r["sfb_tensors"], r["bytes_per_worker"] / 1e6, r["iteration_s"],
                r["lower_bound_s"], r["iteration_s"] / r["lower_bound_s"], r["factor_apply_s"], extra))
