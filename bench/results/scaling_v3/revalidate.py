#!/usr/bin/env python3
"""The simulator of this commit against every run of this folder's scaling.csv:
the same flags as scripts/scaling.sh (alpha 100 us, apply 1 ns/byte, the
compute the workers really slept). Run from the repository root after a
build: python3 bench/results/scaling_v3/revalidate.py > bench/results/scaling_v3/revalidation.md"""
import csv, statistics, subprocess
LAYERS = {"vgg19": 19, "resnet50": 54, "inception_v3": 95, "vgg19_22k": 19}
SHRINK, SLOW = 128, 2
rows = list(csv.DictReader(open("bench/results/scaling_v3/scaling.csv")))
out = []
for r in rows:
    overhead = max(0, 1e6 * (float(r["measured_compute_s"]) - float(r["compute_s"])) / (2 * LAYERS[r["model"]]))
    line = subprocess.run(
        ["build/bin/nereus_bench", "simulate", "--layer_overhead_us=%g" % overhead, "--model=" + r["model"],
         "--host_list=" + r["hosts"], "--schedule=" + r["schedule"], "--link_list=" + r["link_mbit"],
         "--device_gflops=%g" % (3000 / (SHRINK * SLOW)), "--model_scale=%d" % SHRINK, "--batch=32",
         "--alpha_us=100", "--apply_ns_per_byte=1"],
        capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    m, old, new = float(r["iteration_s"]), float(r["predicted_s"]), float(line.split(",")[5])
    out.append((r["model"], r["schedule"], int(r["hosts"]), int(r["rate_gbit"]), m, old, new))
print("| model | schedule | hosts | rate | measured s | predicted s before | error before | predicted s now | error now |")
print("|---|---|---|---|---|---|---|---|---|")
for o in sorted(out, key=lambda o: (o[0], o[1], o[3], o[2])):
    e0, e1 = 100 * (o[5] - o[4]) / o[4], 100 * (o[6] - o[4]) / o[4]
    print("| %s | %s | %d | %dG | %.4f | %.4f | %+.1f%% | %.4f | %+.1f%%%s |" % (
        o[0], o[1], o[2], o[3], o[4], o[5], e0, o[6], e1, " **outside 10%**" if abs(e1) > 10 else ""))
for name, i in (("before", 5), ("now", 6)):
    a = [abs(100 * (o[i] - o[4]) / o[4]) for o in out]
    print("\n%s: median |error| %.1f%%, %d of %d runs within 10%%, largest %.1f%%" % (
        name, statistics.median(a), sum(x <= 10 for x in a), len(a), max(a)))
