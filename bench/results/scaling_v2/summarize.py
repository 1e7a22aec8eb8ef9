#!/usr/bin/env python3
"""Summarizes run.sh's JSONs: per (model, hosts, merge) the median over rounds
of throughput, and the efficiency at 8 hosts = median thr(8) / (8 x median
thr(1)); also per round (each round's 8-host run against the same round's
1-host run). Writes runs.csv and efficiency.csv next to the runs; prints a
table. Reads each 8-host worker's merge groups and alpha from calibration.txt (the
workers' link and plan log lines, written by run.sh's caller from OUT/logs),
else from OUT/logs."""
import glob, json, os, re, statistics, sys

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rows = []
cal_path = os.path.join(out, "calibration.txt")
calibration = open(cal_path).read().splitlines() if os.path.exists(cal_path) else []
for path in sorted(glob.glob(os.path.join(out, "runs", "*.json"))):
    tag = os.path.basename(path)[:-5]
    m = re.match(r"(\w+?)_h(\d+)_(auto|off|before)_r(\d+)$", tag)
    r = json.load(open(path))[0]
    groups, alphas = [], []
    # calibration.txt: the workers' link and plan lines, each after its run's tag.
    for text in [l for l in calibration if l.startswith(tag + " ")] or \
            [open(p, errors="replace").read() for p in glob.glob(os.path.join(out, "logs", tag, "worker*.log"))]:
        groups += [int(g) for g in re.findall(r"into (\d+) groups", text)]
        alphas += [float(a) for a in re.findall(r"link model alpha ([0-9.e+-]+) us", text)]
    rows.append(dict(model=m[1], hosts=int(m[2]), merge=m[3], round=int(m[4]), iteration_s=r["iteration_s"],
                     compute_s=r["compute_s"], measured_compute_s=r["measured_compute_s"], wait_s=r["wait_s"],
                     samples_per_s=r["samples_per_s"],
                     groups="/".join(str(g) for g in sorted(groups)) if groups else "",
                     alpha_us="/".join("%.0f" % a for a in sorted(alphas)) if alphas else ""))
keys = ["model", "hosts", "merge", "round", "iteration_s", "compute_s", "measured_compute_s", "wait_s",
        "samples_per_s", "groups", "alpha_us"]
with open(os.path.join(out, "runs.csv"), "w") as f:
    f.write(",".join(keys) + "\n")
    for r in rows:
        f.write(",".join(("%.5f" % r[k]) if isinstance(r[k], float) else str(r[k]) for k in keys) + "\n")
med = lambda v: statistics.median(v) if v else float("nan")
with open(os.path.join(out, "efficiency.csv"), "w") as f:
    f.write("model,merge,thr1_median,thr8_median,efficiency,per_round_efficiencies,rounds\n")
    print("| model | merge | 1 host samples/s | 8 hosts samples/s | efficiency (medians) | per round |")
    print("|---|---|---|---|---|---|")
    for model in ["vgg19", "resnet50"]:
        for merge in ["auto", "off", "before"]:
            sel = lambda h: [r for r in rows if r["model"] == model and r["merge"] == merge and r["hosts"] == h]
            if not sel(8):
                continue
            t1, t8 = med([r["samples_per_s"] for r in sel(1)]), med([r["samples_per_s"] for r in sel(8)])
            one = {r["round"]: r["samples_per_s"] for r in sel(1)}
            per = ["%.1f%%" % (100 * r["samples_per_s"] / (8 * one[r["round"]])) for r in sorted(sel(8), key=lambda r: r["round"])
                   if r["round"] in one]
            eff = t8 / (8 * t1)
            f.write(f"{model},{merge},{t1:.3f},{t8:.3f},{eff:.4f},{' '.join(per)},{len(sel(8))}\n")
            print(f"| {model} | {merge} | {t1:.2f} | {t8:.2f} | {100 * eff:.1f}% | {' '.join(per)} |")
