#!/usr/bin/env python3
"""The tables of README.md from the pipeline bench's JSON files of run.sh.

One row per (model, job size, link, device): each mode's iteration (the
median over the workers' timed clocks of one run), as the median over the
rounds and their smallest-largest; auto against the better of off and on
(the ratio of the medians, and per round against that round's better one);
the fully connected layers auto sent as factors at the end of each round;
and what its trials cost: the warm-up's clocks (where they run) in all,
auto's against the better fixed mode's of the same round (median over the
rounds), as a share of a 1000-clock job at the better mode's median
iteration.

    python3 bench/results/hybcomm/measured/summarize.py [FILE.json ...]
"""
import glob
import json
import os
import statistics
import sys

here = os.path.dirname(os.path.abspath(__file__))
paths = sys.argv[1:] or sorted(glob.glob(os.path.join(here, "*.json")))
rows = []
for p in paths:
    rows.extend(json.load(open(p)))

LINK = {0: "unshaped", 10000: "10 Gbit/s", 1000: "1 Gbit/s"}
configs = {}
for r in rows:
    key = (r["model"], r["workers"], r["link_mbit"], r["device_gflops"])
    configs.setdefault(key, {}).setdefault(r["round"], {})[r["sfb"]] = r


def span(v):
    return "%.3f (%.3f-%.3f)" % (statistics.median(v), min(v), max(v))


order = sorted(configs, key=lambda k: (k[0], k[1], k[3], {0: 0, 10000: 1, 1000: 2}[k[2]]))
print("| model | workers x servers | link | device GFLOP/s | rounds | off s | on s | auto s | auto / better "
      "(rounds) | auto's SFB layers | trials' cost, % of 1000 clocks | <= 1.05x |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
met = total = 0
for key in order:
    model, w, link, gflops = key
    rounds = [rs for _, rs in sorted(configs[key].items()) if all(m in rs for m in ("off", "on", "auto"))]
    if not rounds:
        continue
    t = {m: [rs[m]["iteration_s"] for rs in rounds] for m in ("off", "on", "auto")}
    better = min(statistics.median(t["off"]), statistics.median(t["on"]))
    ratio = statistics.median(t["auto"]) / better
    per_round = [rs["auto"]["iteration_s"] / min(rs["off"]["iteration_s"], rs["on"]["iteration_s"]) for rs in rounds]
    layers = ",".join(str(rs["auto"]["sfb_tensors"]) for rs in rounds)
    cost = [rs["auto"]["warmup_s"] - min(rs["off"]["warmup_s"], rs["on"]["warmup_s"]) for rs in rounds]
    cost_share = statistics.median(cost) / (1000 * better) * 100
    total += 1
    met += ratio <= 1.05
    print("| %s | %dx%d | %s | %g | %d | %s | %s | %s | %.2f (%.2f-%.2f) | %s | %.1f | %s |" % (
        model, w, w, LINK.get(link, "%g Mbit/s" % link), gflops, len(rounds), span(t["off"]), span(t["on"]),
        span(t["auto"]), ratio, min(per_round), max(per_round), layers, cost_share,
        "yes" if ratio <= 1.05 else "no"))
print()
print("auto within 1.05x of the better fixed mode (medians): %d of %d settings" % (met, total))
