#!/usr/bin/env python3
"""The scaling studies (docs/SCALING.md), each end to end: runs, fits, projections, README.

    sudo scripts/scaling.sh --study=calibrate   # the simulator's constants (1-2 hosts, 5 Gbit/s-equivalent)
    sudo scripts/scaling.sh --study=poseidon    # Poseidon's regime: VGG19-22K and VGG19, 1-16 hosts, 10GbE-eq.
    sudo scripts/scaling.sh --study=today       # H200-class compute, 25-400 Gbit/s, 8-256 hosts
    scripts/scaling.sh --study=servers          # apply threads and the transport bench (no root needed)
    scripts/scaling.sh --study=alpha            # the per-message cost alpha, measured (no root needed)
    ... --no_emulation                          # no emulated run: what runs.jsonl has, the simulator re-run
    sudo scripts/scaling.sh --study=all         # all four, in that order (about 1.5 hours on a quiet 2-core machine)
    ... --smoke                                 # minutes: every step at the smallest size, into /tmp

Each study writes bench/results/<study>/ (or --out): runs.jsonl (one line per emulated run, written as
it ends, so an interrupted study resumes where it stopped; --fresh starts over; each line names the
commit of the source tree it measured), CSVs of what was derived, and README.md generated from them
(a section of the old README from the line "## Notes kept by hand" on is kept at its end). The
poseidon and today studies read the constants the calibrate study wrote
(bench/results/calibrate/calibration.json): the runs that validate the simulator are never those it
was fitted on (other link rates, more hosts, other emulation factors).

Emulation (docs/SCALING.md): a host of D GFLOP/s on R Gbit/s is emulated with the model shrunk
SHRINK times in bytes and FLOPs (nereus_bench cluster --model_scale, fully connected layers keeping
their factors: bench/sim/models.h), the device at D / FACTOR and the link at R / FACTOR, FACTOR = SHRINK
x SLOW: compute / communication is the real cluster's and every emulated time is SLOW times the real
one, per-message costs aside.
"""
import argparse
import csv
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BATCH = 32
SHRINK = 256          # sqrt(256) = 16 divides the batch: factors of exactly 2 rows (models.h).
EMULATED_MBIT = 10000 / 512  # Per host and direction, the link every regime is emulated with (19.53 Mbit/s).
TITAN_X_GFLOPS = 3000  # The Poseidon paper's GPU class: about 3 TFLOP/s sustained on convolutions.
# Its SGD step after a rebuild on the device, GB of weights a second: its 336.5 GB/s of memory over the ~5 floats a
# momentum step moves per weight (as emulated_worker.h's H200 figure; a datasheet's estimate, not a measurement).
TITAN_X_UPDATE_GBYTES = 336.5 / 5
H200_GFLOPS = 57000    # VGG19 fp32 on an H200: bench/results/gpu/ (docs/SCALING.md).
# The rebuild rates of the projections, each measured (docs/SCALING.md, "Constants of the projections"):
# an H200's cuBLAS fp32 GEMM (4096 x 4096, K = 32) as Nereus's client timed it at start-up,
H200_GEMM_GFLOPS = 15800
H200_GEMM_SOURCE = "bench/results/gpu/run3/job.log"
# and this CPU's OpenBLAS GEMM (FactorGradient, 1024 x 1024, K = 256) and SGD step as the client timed them, per
# worker (four workers of one process sharing the 2-core machine; 48.6 GFLOP/s and 8.78 GB/s in the other run, a).
CPU_GEMM_GFLOPS = 43.5
CPU_STEP_GBYTES = 5.72
CPU_GEMM_SOURCE = "bench/results/hybcomm/b_tables.txt"
H200_STEP_GBYTES = 716  # The H200's SGD step after the rebuild, timed in the same line of H200_GEMM_SOURCE.
ALPHA_SCALES = [0.5, 1, 2]  # The projections' sensitivity to alpha: at least half and double the measured.
LAYERS = {"vgg19": 19, "vgg19_22k": 19, "resnet50": 54, "inception_v3": 95, "lenet": 4}
WAIT_BOUND = 0.10     # Runs waiting more than this share of the iteration are "communication-bound".


def log(msg):
    print(time.strftime("%H:%M:%S"), msg, file=sys.stderr, flush=True)


class Regime:
    """A real host (device GFLOP/s, link Gbit/s) and how it is emulated here."""

    def __init__(self, name, gflops, gbit, shrink=SHRINK, slow=None, update_gbytes=TITAN_X_UPDATE_GBYTES):
        self.name, self.gflops, self.gbit, self.shrink = name, gflops, gbit, shrink
        self.update_gbytes = update_gbytes  # The device's SGD step after a rebuild on it (--sfb_rebuild=device).
        # The link is emulated at EMULATED_MBIT unless told otherwise: FACTOR = R / EMULATED_MBIT.
        factor = gbit * 1000 / EMULATED_MBIT
        self.slow = slow if slow is not None else factor / shrink
        self.factor = shrink * self.slow

    def cluster_flags(self):
        return ["--model_scale=%g" % self.shrink, "--device_gflops=%.9g" % (self.gflops / self.factor),
                "--link_mbit=%.9g" % (self.gbit * 1000 / self.factor)]

    def describe(self):
        return ("%s: %g GFLOP/s on %g Gbit/s, emulated shrunk %gx and slowed %gx (factor %g): %.4g GFLOP/s, "
                "%.4g Mbit/s" % (self.name, self.gflops, self.gbit, self.shrink, self.slow, self.factor,
                                 self.gflops / self.factor, self.gbit * 1000 / self.factor))


class Bench:
    def __init__(self, path, merge):
        self.path, self.merge = path, merge

    def cluster(self, model, hosts, regime, schedule, sfb, warmup, iterations, json_path, timeout_s,
                sfb_rebuild="cpu"):
        cmd = [self.path, "cluster", "--model=" + model, "--hosts=%d" % hosts, "--schedule=" + schedule,
               "--sfb=" + sfb, "--sfb_rebuild=" + sfb_rebuild, "--batch=%d" % BATCH, "--warmup=%d" % warmup, "--iterations=%d" % iterations,
               "--merge=" + self.merge, "--timeout_s=%d" % timeout_s, "--json=" + json_path] + regime.cluster_flags()
        if sfb_rebuild == "device":  # The device's step, slowed as its compute.
            cmd.append("--device_update_gbytes=%.9g" % (regime.update_gbytes / regime.factor))
        t0 = time.monotonic()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.monotonic() - t0
        if p.returncode != 0:
            return None, wall, "exit %d: %s" % (p.returncode, p.stdout[-1500:])
        with open(json_path) as f:
            row = json.load(f)[0]
        return row, wall, ""

    def simulate(self, model, hosts, mbit, gflops, scale, schedule, sfb, consts, overhead_us=0.0, iterations=3,
                 sfb_rebuild="cpu", rebuild_rows="batch", apply_threads=None):
        """Rows (dicts) of nereus_bench simulate, one per (host, link) pair. sfb_rebuild: where the rebuild runs
        (cpu: the worker's applier beside its compute; device: holding the device before the layer's next forward);
        rebuild_rows: what it is charged for in a shrunk model (batch: the full-size rebuild / F, as the compute;
        factors: the GEMM over the factors sent, what an emulated client's CPU computes); apply_threads: each
        server's (None: the servers' default, one per core here)."""
        hosts = hosts if isinstance(hosts, list) else [hosts]
        mbit = mbit if isinstance(mbit, list) else [mbit]
        cmd = [self.path, "simulate", "--model=" + model, "--host_list=" + ",".join(map(str, hosts)),
               "--link_list=" + ",".join("%.9g" % m for m in mbit), "--device_gflops=%.9g" % gflops,
               "--model_scale=%g" % scale, "--schedule=" + schedule, "--sfb=" + sfb, "--batch=%d" % BATCH,
               "--alpha_us=%.9g" % consts["alpha_us"], "--apply_ns_per_byte=%.9g" % consts["apply_ns_per_byte"],
               "--rebuild_gflops=%.9g" % consts["rebuild_gflops"],
               "--sfb_apply_ns_per_byte=%.9g" % consts.get("sfb_apply_ns_per_byte", -1),
               "--layer_overhead_us=%.9g" % overhead_us, "--sim_iterations=%d" % iterations,
               "--sfb_rebuild=" + sfb_rebuild, "--rebuild_rows=" + rebuild_rows]
        if apply_threads is not None:
            cmd.append("--sim_apply_threads=%d" % apply_threads)
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=True)
        return list(csv.DictReader(p.stdout.strip().splitlines()))


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def efficiency(compute_s, iteration_s):
    """Scaling efficiency, one definition for every study (docs/SCALING.md): a worker's throughput over that of its
    device training alone (its compute, no communication), as Poseidon measures speedup against single-machine
    training; at N hosts the job makes N x this of one device's standalone throughput. The simulator's own
    `efficiency` column is the same (ScalingEfficiency, bench/sim/simulator.h)."""
    return compute_s / iteration_s if iteration_s > 0 else 0.0


def spread(xs):
    """(max - min) / median of a configuration's repeats."""
    return (max(xs) - min(xs)) / median(xs) if len(xs) > 1 else 0.0


def source_commit(root=ROOT):
    """The commit of the source tree at `root`: `git rev-parse HEAD`, with "-dirty" when `git status
    --porcelain` lists a change outside bench/results/ (the studies' own output, which they write while they
    run, is not what they measure); "unknown" outside a git checkout or without git."""
    def git(*args):
        return subprocess.run(["git", "-C", root] + list(args), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, check=True).stdout
    try:
        head = git("rev-parse", "--verify", "HEAD").strip()
        changes = git("status", "--porcelain", "--", ".", ":(exclude)bench/results")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if changes.strip() else "")


class Runs:
    """runs.jsonl: one line per emulated run, with the commit it measured (`commit`, source_commit() when the
    study started); a study resumes where it stopped."""

    def __init__(self, path, fresh, commit=None):
        self.path = path
        self.commit = commit if commit is not None else source_commit()
        self.rows = []
        if fresh and os.path.exists(path):
            os.remove(path)
        if os.path.exists(path):
            with open(path) as f:
                self.rows = [json.loads(line) for line in f if line.strip()]

    def done(self, key, repeat):
        return any(r["key"] == key and r["repeat"] == repeat and not r.get("failed") for r in self.rows)

    def add(self, row):
        row = dict(row, commit=self.commit)
        self.rows.append(row)
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")

    def ok(self):
        return [r for r in self.rows if not r.get("failed")]


def commits_measured(rows):
    """The README's line on which commit the runs measured (runs made before runs.jsonl recorded it have none)."""
    counts = {}
    for r in rows:
        c = r.get("commit") or "not recorded"
        counts[c] = counts.get(c, 0) + 1
    return "Source commit measured (`runs.jsonl`'s `commit`): %s.\n\n" % "; ".join(
        "%s (%d run%s)" % (c, n, "" if n == 1 else "s") for c, n in sorted(counts.items()))


NOTES_HEADING = "## Notes kept by hand"


class Readme:
    """A study's README.md, written whole on leaving the `with`: what the study wrote, then the old README's
    section from NOTES_HEADING on (what a regenerated README must not lose: its study's history)."""

    def __init__(self, out):
        self.path = os.path.join(out, "README.md")
        self.parts = []

    def write(self, text):
        self.parts.append(text)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is not None:
            return False
        text = "".join(self.parts)
        if os.path.exists(self.path):
            with open(self.path) as f:
                old = f.read()
            at = old.find("\n" + NOTES_HEADING)
            if at >= 0:
                text = text.rstrip("\n") + "\n\n" + old[at + 1:]
        with open(self.path, "w") as f:
            f.write(text)
        return False


def run_configs(bench, out, runs, configs, repeats, warmup, iterations, timeout_s, emulate=True):
    """Every configuration `repeats` times, repeat-major (each repeat runs every configuration once, so
    that the machine's slow and quiet moments fall on all of them alike). emulate=False (--no_emulation) runs
    nothing: the study reports what runs.jsonl already has."""
    todo = [(rep, c) for rep in range(repeats) for c in configs if not runs.done(c["key"], rep)]
    if not emulate:
        log("--no_emulation: %d run(s) not made; reporting the %d in %s" % (len(todo), len(runs.ok()), runs.path))
        return
    log("%d run(s) to make (%d already in %s)" % (len(todo), len(configs) * repeats - len(todo), runs.path))
    for i, (rep, c) in enumerate(todo):
        regime = c["regime"]
        for attempt in range(2):
            tmp = os.path.join(out, "run.json")
            row, wall, err = bench.cluster(c["model"], c["hosts"], regime, c["schedule"], c["sfb"], warmup,
                                           c.get("iterations", iterations), tmp, timeout_s,
                                           c.get("sfb_rebuild", "cpu"))
            if row is not None:
                break
            log("   failed (%s); %s" % (err.strip().splitlines()[-1] if err.strip() else "?",
                                        "retrying" if attempt == 0 else "left out"))
        rec = {"key": c["key"], "repeat": rep, "model": c["model"], "hosts": c["hosts"], "schedule": c["schedule"],
               "sfb": c["sfb"], "sfb_rebuild": c.get("sfb_rebuild", "cpu"), "regime": regime.name,
               "rate_gbit": regime.gbit, "real_gflops": regime.gflops,
               "shrink": regime.shrink, "slow": regime.slow, "wall_s": round(wall, 1),
               "time": datetime.datetime.now().isoformat(timespec="seconds"), "load1": os.getloadavg()[0]}
        if c.get("sfb_rebuild") == "device":
            rec["device_update_gbytes"] = regime.update_gbytes / regime.factor
        if row is None:
            rec.update({"failed": True, "error": err[-800:]})
        else:
            rec.update(row)
        runs.add(rec)
        if row is not None:
            log("[%d/%d] %s repeat %d: iteration %.4f s (compute %.4f, wait %.4f) in %.0f s" %
                (i + 1, len(todo), c["key"], rep + 1, row["iteration_s"], row["measured_compute_s"],
                 row["wait_s"], wall))
    if os.path.exists(os.path.join(out, "run.json")):
        os.remove(os.path.join(out, "run.json"))


def summarize(runs, keys=None):
    """Per configuration: the median of its repeats and their spread."""
    by = {}
    for r in runs.ok():
        if keys is not None and r["key"] not in keys:
            continue
        by.setdefault(r["key"], []).append(r)
    out = {}
    for key, rs in by.items():
        it = [r["iteration_s"] for r in rs]
        c = rs[0]
        out[key] = {
            "key": key, "model": c["model"], "hosts": c["hosts"], "schedule": c["schedule"], "sfb": c["sfb"],
            "regime": c["regime"], "rate_gbit": c["rate_gbit"], "real_gflops": c["real_gflops"],
            "shrink": c["shrink"], "slow": c["slow"], "link_mbit": c["link_mbit"], "device_gflops": c["device_gflops"],
            "repeats": len(rs), "iteration_s": median(it), "spread": spread(it),
            "compute_s": c["compute_s"], "measured_compute_s": median([r["measured_compute_s"] for r in rs]),
            "wait_s": median([r["wait_s"] for r in rs]),
            "sent_bytes": median([r.get("sent_bytes", 0) for r in rs]),
            "factor_bytes": median([r.get("factor_bytes", 0) for r in rs]),
            "factor_apply_s": median([r.get("factor_apply_s", 0) for r in rs]),
            "layers": c["layers"],
            # Runs before the field rebuilt on this CPU (the default) with the servers' default threads (2 here).
            "sfb_rebuild": c.get("sfb_rebuild", "cpu"), "apply_threads": c.get("apply_threads", 2),
            "device_update_gbytes": c.get("device_update_gbytes", 0),
        }
        s = out[key]
        s["wait_share"] = max(0.0, s["iteration_s"] - s["measured_compute_s"]) / s["iteration_s"]
        # What each of the emulated device's sleeps overshot (the workers' measured compute): the
        # simulator is given the compute the run really did, as an input like the model's FLOPs.
        s["overhead_us"] = max(0.0, 1e6 * (s["measured_compute_s"] - s["compute_s"]) / (2 * s["layers"]))
    return out


def predict(bench, s, consts):
    """The simulator's iteration of the emulated run summarized in `s`, as it ran: its servers' apply threads, and
    a rebuild on the emulated device charged at the full-size cost / F (--sfb_rebuild=device) or on this CPU over
    the factors sent (cpu)."""
    device = s.get("sfb_rebuild", "cpu") == "device"
    if device:  # At the emulated device's rates, as the run charged it (not the calibration's CPU rates).
        consts = dict(consts, rebuild_gflops=s["device_gflops"],
                      sfb_apply_ns_per_byte=1 / s["device_update_gbytes"] if s.get("device_update_gbytes") else 0)
    def sim(overhead_us):
        return bench.simulate(s["model"], s["hosts"], s["link_mbit"], s["device_gflops"], s["shrink"], s["schedule"],
                              s["sfb"], consts, overhead_us, sfb_rebuild="device" if device else "cpu",
                              rebuild_rows="batch" if device else "factors",
                              apply_threads=s.get("apply_threads", 2))[0]
    overhead_us = s["overhead_us"]
    if device:
        # The workers' measured compute includes the rebuilds they slept on the device: only the rest is what
        # their layers' sleeps overshot.
        rebuild_s = float(sim(0.0)["rebuild_s"])
        overhead_us = max(0.0, 1e6 * (s["measured_compute_s"] - s["compute_s"] - rebuild_s) / (2 * s["layers"]))
    row = sim(overhead_us)
    return float(row["iteration_s"]), row


def write_csv(path, rows, fields):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (round(v, 6) if isinstance(v, float) else v) for k, v in r.items()})


def machine():
    return "%s, %d cores, load average %.2f at the end" % (platform.node(), os.cpu_count(), os.getloadavg()[0])


def smoke_banner(smoke):
    if not smoke:
        return ""
    return ("**SMOKE RUN: NOT RESULTS.** Made with --smoke (the smallest configurations, one repeat, two timed "
            "iterations) on whatever machine ran it, only to show that every step of the pipeline works. "
            "Nothing here may be quoted.\n\n")


# ---------------------------------------------------------------------------------------------- calibrate

def calibrate(args, bench, out):
    # The link at half the rate the other studies emulate theirs with (9.77 Mbit/s, slowed 2x as
    # Poseidon's regime): the validation runs differ in emulated link rate, in compute speed, in
    # emulation factor and in hosts.
    regime = Regime("5G-eq", TITAN_X_GFLOPS, 5, slow=2)
    if args.smoke:
        models, hosts, kinds, repeats = ["resnet50"], [1, 2], [("full", "off"), ("full", "auto"),
                                                                ("sequential", "off")], 1
    else:
        models, hosts, repeats = ["vgg19", "resnet50", "vgg19_22k"], [1, 2], args.repeats
        kinds = [("full", "off"), ("full", "auto"), ("sequential", "off")]
    configs = []
    for m in models:
        for h in hosts:
            for sched, sfb in kinds:
                # VGG19-22K only where it calibrates the factors' rebuild.
                if m == "vgg19_22k" and sfb != "auto":
                    continue
                configs.append({"key": "%s/%s/%s/h%d/%s" % (regime.name, m, sched, h, sfb), "model": m, "hosts": h,
                                "schedule": sched, "sfb": sfb, "regime": regime})
    runs = Runs(os.path.join(out, "runs.jsonl"), args.fresh)
    run_configs(bench, out, runs, configs, repeats, args.warmup, args.iterations, args.timeout_s,
                not args.no_emulation)
    summary = summarize(runs, {c["key"] for c in configs})
    if not summary:
        sys.exit("calibrate: no run succeeded")
    # 1. Per-message cost and the server's apply cost: the grid point whose predictions of the
    #    runs without factors have the least squared relative error, then a finer grid around it.
    off = [s for s in summary.values() if s["sfb"] == "off"]

    def loss(alpha, apply):
        consts = {"alpha_us": alpha, "apply_ns_per_byte": apply, "rebuild_gflops": 0}
        e = [(predict(bench, s, consts)[0] - s["iteration_s"]) / s["iteration_s"] for s in off]
        return sum(x * x for x in e) / len(e)

    alphas = [0, 10, 25, 50, 100, 200, 400] if not args.smoke else [0, 50, 200]
    applies = [0, 0.25, 0.5, 1, 2, 4, 8] if not args.smoke else [0, 1, 4]
    grid = []
    log("fitting alpha and the apply cost on %d configuration(s) without factors" % len(off))
    for a in alphas:
        for c in applies:
            grid.append((loss(a, c), a, c))
    best = min(grid)
    if not args.smoke:
        a0, c0 = best[1], best[2]
        for a in sorted({max(0, a0 * f) for f in (0.6, 0.8, 1.0, 1.25, 1.5)} | {a0 + 5}):
            for c in sorted({max(0, c0 * f) for f in (0.6, 0.8, 1.0, 1.25, 1.5)} | {c0 + 0.1}):
                grid.append((loss(a, c), a, c))
        best = min(grid)
    rms, alpha, apply = best
    # 2. The factors' rebuild and SGD step on the worker: the clients measure their time per iteration
    #    (factor_apply_s); the simulator's is F x (1 / rate) + A x step, with F the rebuild's FLOPs (as
    #    seconds at 1 GFLOP/s) and A the bytes stepped (as seconds at 1 ns a byte), both read from the
    #    simulator. Least squares in relative terms over the configurations with factors, both
    #    coefficients >= 0.
    samples = []
    for s in summary.values():
        if s["sfb"] != "auto" or s["factor_apply_s"] <= 0:
            continue
        base = {"alpha_us": alpha, "apply_ns_per_byte": 0, "rebuild_gflops": 1, "sfb_apply_ns_per_byte": 0}
        f_s = float(predict(bench, s, base)[1]["rebuild_s"])
        base.update({"rebuild_gflops": 0, "sfb_apply_ns_per_byte": 1})
        a_s = float(predict(bench, s, base)[1]["rebuild_s"])
        if f_s > 0 or a_s > 0:
            samples.append((f_s, a_s, s["factor_apply_s"]))
    x, y = fit_nonnegative(samples)
    rebuild = 1 / x if x > 0 else 0.0
    consts = {"alpha_us": alpha, "apply_ns_per_byte": apply, "rebuild_gflops": rebuild, "sfb_apply_ns_per_byte": y}
    cal = dict(consts)
    cal.update({"fit_rms_relative_error": math.sqrt(rms), "configurations": len(summary),
                "runs": len(runs.ok()),
                "rebuild_samples": [{"flops_s_at_1_gflops": f, "step_s_at_1_ns": a, "measured_s": m}
                                    for f, a, m in samples],
                "regime": regime.describe(), "smoke": args.smoke, "date": datetime.date.today().isoformat(),
                "machine": machine(), "merge": bench.merge, "batch": BATCH})
    with open(os.path.join(out, "calibration.json"), "w") as f:
        json.dump(cal, f, indent=2)
    rows = []
    for s in sorted(summary.values(), key=lambda s: s["key"]):
        p, _ = predict(bench, s, consts)
        s = dict(s)
        s.update({"predicted_s": p, "error_pct": 100 * (p - s["iteration_s"]) / s["iteration_s"]})
        rows.append(s)
    fields = ["model", "schedule", "hosts", "sfb", "rate_gbit", "repeats", "iteration_s", "spread", "compute_s",
              "measured_compute_s", "wait_share", "factor_apply_s", "predicted_s", "error_pct"]
    write_csv(os.path.join(out, "calibration_fit.csv"), rows, fields)
    with Readme(out) as f:
        f.write("# Calibration of the simulator\n\n" + smoke_banner(args.smoke))
        f.write("Generated by `scripts/scaling.sh --study=calibrate` on %s (%s); `--merge=%s`.\n\n" %
                (cal["date"], cal["machine"], bench.merge))
        f.write("%s. %d configuration(s), %d run(s) (%d repeat(s) each, %d warm-up and %d timed iterations, "
                "medians).\n\n" % (regime.describe(), len(summary), len(runs.ok()), repeats, args.warmup,
                                   args.iterations))
        f.write(commits_measured(runs.ok()))
        f.write("Constants (`calibration.json`), fitted on these runs only; the poseidon and today studies "
                "predict other runs with them:\n\n")
        f.write("| constant | value | how |\n|---|---|---|\n")
        f.write("| alpha (per message) | %.3g us | grid, least squared relative error on the runs without factors |\n"
                % alpha)
        f.write("| server apply | %.3g ns per byte per worker gradient | same grid |\n" % apply)
        f.write("| factor rebuild (GEMM) | %s | the clients' measured rebuild and step time (factor_apply_s) "
                "against the simulator's FLOPs and bytes, least squares over %d configuration(s) |\n" %
                ("%.3g GFLOP/s" % rebuild if rebuild > 0 else "free (too fast to tell)", len(samples)))
        f.write("| factor SGD step (worker) | %.3g ns per byte | same fit |\n" % consts["sfb_apply_ns_per_byte"])
        f.write("\nRoot-mean-square relative error of the fit: %.2f%%. In-sample errors (these runs fitted "
                "the constants; they say how well the model can describe them, not how well it predicts):\n\n"
                % (100 * math.sqrt(rms)))
        f.write("| model | schedule | hosts | sfb | measured s (spread) | wait | predicted s | error |\n"
                "|---|---|---|---|---|---|---|---|\n")
        for r in rows:
            f.write("| %s | %s | %d | %s | %.4f (%.1f%%) | %.0f%% | %.4f | %+.1f%% |\n" %
                    (r["model"], r["schedule"], r["hosts"], r["sfb"], r["iteration_s"], 100 * r["spread"],
                     100 * r["wait_share"], r["predicted_s"], r["error_pct"]))
    log("calibration: alpha %.3g us, apply %.3g ns/byte, rebuild %.3g GFLOP/s, factor step %.3g ns/byte "
        "(fit rms %.2f%%) -> %s" % (alpha, apply, rebuild, consts["sfb_apply_ns_per_byte"], 100 * math.sqrt(rms), out))


def fit_nonnegative(samples):
    """x, y >= 0 minimizing sum(((f x + a y - m) / m)^2) over samples (f, a, m)."""
    def solve(use_x, use_y):
        sff = sfa = saa = sfm = sam = 0.0
        for f, a, m in samples:
            f, a = (f / m if use_x else 0.0), (a / m if use_y else 0.0)
            sff, sfa, saa, sfm, sam = sff + f * f, sfa + f * a, saa + a * a, sfm + f, sam + a
        det = sff * saa - sfa * sfa
        if use_x and use_y and det > 1e-30:
            return (sfm * saa - sam * sfa) / det, (sam * sff - sfm * sfa) / det
        if use_x and sff > 0:
            return sfm / sff, 0.0
        if use_y and saa > 0:
            return 0.0, sam / saa
        return 0.0, 0.0

    def err(x, y):
        return sum(((f * x + a * y - m) / m) ** 2 for f, a, m in samples)

    if not samples:
        return 0.0, 0.0
    candidates = [solve(True, True), solve(True, False), solve(False, True)]
    candidates = [(x, y) for x, y in candidates if x >= 0 and y >= 0]
    return min(candidates, key=lambda c: err(*c)) if candidates else (0.0, 0.0)


def load_calibration(args):
    path = args.calibration or os.path.join(args.results, "calibrate", "calibration.json")
    if not os.path.exists(path):
        sys.exit("no calibration at %s: run scripts/scaling.sh --study=calibrate first (or --calibration=FILE)"
                 % path)
    with open(path) as f:
        cal = json.load(f)
    if cal.get("smoke") and not args.smoke:
        sys.exit("%s comes from a --smoke run: calibrate for real first" % path)
    return cal, path


# ------------------------------------------------------------------------------------ validation helpers

def validate(bench, summary, consts):
    rows = []
    for s in sorted(summary.values(), key=lambda s: (s["regime"], s["model"], s["sfb"], s["hosts"])):
        p, _ = predict(bench, s, consts)
        s = dict(s)
        s.update({"predicted_s": p, "error_pct": 100 * (p - s["iteration_s"]) / s["iteration_s"]})
        rows.append(s)
    return rows


def validation_summary(rows):
    """Lines for the README: errors on every run, and on the communication-bound ones against the target."""
    lines = []
    groups = [("every configuration", rows),
              ("communication-bound (waiting > %d%% of the iteration)" % (100 * WAIT_BOUND),
               [r for r in rows if r["wait_share"] > WAIT_BOUND]),
              ("compute-bound (the rest)", [r for r in rows if r["wait_share"] <= WAIT_BOUND])]
    for name, rs in groups:
        if not rs:
            lines.append("- %s: none" % name)
            continue
        e = [abs(r["error_pct"]) for r in rs]
        lines.append("- %s: %d, median |error| %.1f%%, largest %.1f%%, median spread of the repeats %.1f%%" %
                     (name, len(rs), median(e), max(e), 100 * median([r["spread"] for r in rs])))
    comm = [r for r in rows if r["wait_share"] > WAIT_BOUND]
    if comm:
        e = [abs(r["error_pct"]) for r in comm]
        beyond = [r for r in comm if abs(r["error_pct"]) > 10 + 100 * r["spread"]]
        met = median(e) <= 5 and not beyond
        lines.append("- target (held-out communication-bound runs: median |error| <= 5%% and none beyond 10%% plus "
                     "its own spread): **%s** (median %.1f%%; %d beyond)" % ("met" if met else "not met", median(e),
                                                                             len(beyond)))
        for r in beyond:
            lines.append("  - beyond: %s %s %d hosts sfb=%s: %+.1f%% (spread %.1f%%)" %
                         (r["regime"], r["model"], r["hosts"], r["sfb"], r["error_pct"], 100 * r["spread"]))
    return lines


def validation_table(rows):
    out = ["| regime | model | hosts | sfb | measured s | spread | wait | predicted s | error |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append("| %s | %s | %d | %s | %.4f | %.1f%% | %.0f%% | %.4f | %+.1f%% |" %
                   (r["regime"], r["model"], r["hosts"],
                    r["sfb"] + (" (rebuild on the device)" if r.get("sfb_rebuild") == "device" else ""),
                    r["iteration_s"], 100 * r["spread"], 100 * r["wait_share"], r["predicted_s"], r["error_pct"]))
    return out


VALIDATION_FIELDS = ["regime", "model", "schedule", "hosts", "sfb", "rate_gbit", "repeats", "iteration_s", "spread",
                     "compute_s", "measured_compute_s", "wait_share", "sent_bytes", "factor_bytes", "factor_apply_s",
                     "predicted_s", "error_pct"]


def alpha_levels(measured_us):
    """(label, alpha us) of the projections' sensitivity: the measured alpha at each of ALPHA_SCALES, then the
    calibration's old 400 us (what the projections rested on before alpha was measured) for comparison."""
    return [("x%g" % k, k * measured_us) for k in ALPHA_SCALES] + [("400 us (old)", 400.0)]


def project(bench, models, variants, hosts, rates_gbit, gflops, levels, apply_threads):
    """Full-size simulations at real speed, one row per (model, variant, alpha level, hosts, rate); efficiency
    against compute alone (the simulator's column)."""
    proj = []
    for m in models:
        for name, sfb, c, where in variants:
            for label, a in levels:
                sim = bench.simulate(m, hosts, [r * 1000 for r in rates_gbit], gflops, 1, "full", sfb,
                                     dict(c, alpha_us=a), iterations=2, sfb_rebuild=where,
                                     apply_threads=apply_threads)
                for r in sim:
                    proj.append({"model": m, "variant": name, "alpha": label, "alpha_us": a, "hosts": int(r["hosts"]),
                                 "rate_gbit": float(r["link_mbit"]) / 1000, "iteration_s": float(r["iteration_s"]),
                                 "compute_s": float(r["compute_s"]), "efficiency": float(r["efficiency"]),
                                 "sent_bytes": float(r["sent_bytes"]), "factor_bytes": float(r["factor_bytes"]),
                                 "sfb_layers": int(r["sfb_layers"]), "rebuild_s": float(r["rebuild_s"])})
    return proj


PROJECTION_FIELDS = ["model", "variant", "alpha", "alpha_us", "hosts", "rate_gbit", "iteration_s", "compute_s",
                     "efficiency", "sfb_layers", "sent_bytes", "factor_bytes", "rebuild_s"]


def real_constants(args, cal):
    """Constants for the full-size projections, each measured and named in the README: alpha (--study=alpha), the
    servers' apply per thread and how many threads (--study=servers). Returns (consts, apply_threads, notes, alpha)."""
    a, a_path = load_alpha(args)
    notes = []
    consts = {"alpha_us": a["alpha_us"], "apply_ns_per_byte": cal["apply_ns_per_byte"]}
    notes.append("alpha %.3g us per message, measured: half the median 4 KB round trip of `nereus_bench transport` "
                 "(%.1f us over %d runs, %.1f-%.1f us) on this machine (`%s`); the projections are shown at %s times "
                 "it and at the 400 us they used before. (The calibration's fitted alpha, %.3g us, describes the "
                 "emulated cluster, 16 processes on 2 cores, and is used only to predict its runs.)" %
                 (a["alpha_us"], a["rtt_us_median"], a["runs"], a["rtt_us_min"], a["rtt_us_max"], a_path,
                  " and ".join("%g" % k for k in ALPHA_SCALES), cal["alpha_us"]))
    threads = None
    servers = os.path.join(args.results, "servers", "apply.json")
    if os.path.exists(servers):
        with open(servers) as f:
            rows = json.load(f)
        best = max(rows, key=lambda r: r["gradient_gbytes_per_s"])
        threads = max(1, best["apply_threads"])
        consts["apply_ns_per_byte"] = threads / best["gradient_gbytes_per_s"]
        notes.append("server apply: %d threads, each %.3g ns per byte per worker gradient (`nereus_bench apply`'s "
                     "best, %.2f GB/s of gradients on %d apply threads, in %s, shared among them)" %
                     (threads, consts["apply_ns_per_byte"], best["gradient_gbytes_per_s"], best["apply_threads"],
                      os.path.relpath(servers, ROOT)))
    else:
        notes.append("server apply %.3g ns per byte: the calibration's (no servers study yet: run "
                     "--study=servers for this machine's apply bench)" % consts["apply_ns_per_byte"])
    return consts, threads, notes, a


def rate_for(proj, m, name, label, h, target=0.9):
    ok = [p["rate_gbit"] for p in proj if p["model"] == m and p["variant"] == name and p["alpha"] == label
          and p["hosts"] == h and p["efficiency"] >= target]
    return min(ok) if ok else None


def sensitivity_table(proj, models, variants, hosts, levels, rate=None):
    """README lines: per model and variant, the rate for 90% (or, with `rate`, the efficiency at that rate) at each
    alpha level, one cell per host count."""
    out = ["| model | variant | alpha | " + " | ".join("%d hosts" % h for h in hosts) + " |",
           "|---|---|---|" + "---|" * len(hosts)]
    for m in models:
        for name, _, _, _ in variants:
            for label, a in levels:
                cells = []
                for h in hosts:
                    if rate is None:
                        r = rate_for(proj, m, name, label, h)
                        cells.append("%g" % r if r is not None else "-")
                    else:
                        p = [x for x in proj if x["model"] == m and x["variant"] == name and x["alpha"] == label
                             and x["hosts"] == h and x["rate_gbit"] == rate]
                        cells.append("%.1f%%" % (100 * p[0]["efficiency"]) if p else "")
                out.append("| %s | %s | %s | %s |" % (m, name, "%s (%.3g us)" % (label, a) if label.startswith("x")
                                                      else label, " | ".join(cells)))
    return out


# ----------------------------------------------------------------------------------------------- poseidon

def poseidon(args, bench, out):
    cal, cal_path = load_calibration(args)
    emu_consts = {k: cal[k] for k in ("alpha_us", "apply_ns_per_byte", "rebuild_gflops", "sfb_apply_ns_per_byte")}
    regime = Regime("10G-eq", TITAN_X_GFLOPS, 10)
    if args.smoke:
        models, hosts, auto_hosts, repeats = ["vgg19_22k"], [1, 2], [2], 1
    else:
        models, hosts, auto_hosts, repeats = ["vgg19_22k", "vgg19"], args.poseidon_hosts, args.poseidon_auto_hosts, \
            args.repeats
    # --sfb=off at every host count; auto with the rebuild on the emulated device, as Poseidon rebuilt on the GPU,
    # charged at its full-size cost (its FLOPs / F at the device's rate / F, as the compute: docs/SCALING.md).
    configs = [{"key": "%s/%s/full/h%d/off" % (regime.name, m, h), "model": m, "hosts": h, "schedule": "full",
                "sfb": "off", "regime": regime} for m in models for h in hosts]
    configs += [{"key": "%s/%s/full/h%d/auto-device" % (regime.name, m, h), "model": m, "hosts": h,
                 "schedule": "full", "sfb": "auto", "sfb_rebuild": "device", "regime": regime}
                for m in models for h in auto_hosts if m in (args.poseidon_auto_models or models)]
    runs = Runs(os.path.join(out, "runs.jsonl"), args.fresh)
    run_configs(bench, out, runs, configs, repeats, args.warmup, args.iterations, args.timeout_s,
                not args.no_emulation)
    summary = summarize(runs, {c["key"] for c in configs})
    rows = validate(bench, summary, emu_consts)
    write_csv(os.path.join(out, "validation.csv"), rows, VALIDATION_FIELDS)
    # Scaling efficiency against compute alone (efficiency()): the baseline of each model is its device training
    # alone, the compute the one-host --sfb=off runs' worker measured (its emulated sleeps, overshoots included).
    eff = []
    for m in models:
        one = summary.get("%s/%s/full/h1/off" % (regime.name, m))
        if one is None:
            continue
        alone = one["measured_compute_s"]
        for variant, hs in [("off", hosts), ("auto-device", auto_hosts)]:
            for h in hs:
                s = summary.get("%s/%s/full/h%d/%s" % (regime.name, m, h, variant))
                if s is None:
                    continue
                e = efficiency(alone, s["iteration_s"])
                eff.append({"model": m, "sfb": variant, "hosts": h, "source": "emulated", "alpha": "",
                            "iteration_s": s["iteration_s"], "compute_alone_s": alone, "efficiency": e,
                            "speedup": h * e, "spread": s["spread"], "repeats": s["repeats"]})
    # The projection at full size and real speed (Titan X-class, 10 Gbit/s), with the measured constants.
    consts, threads, notes, a = real_constants(args, cal)
    levels = alpha_levels(a["alpha_us"])
    step_ns = 1 / TITAN_X_UPDATE_GBYTES
    variants = [("off", "off", dict(consts, rebuild_gflops=0), "cpu"),
                ("auto-device", "auto", dict(consts, rebuild_gflops=TITAN_X_GFLOPS, sfb_apply_ns_per_byte=step_ns),
                 "device")]
    notes.append("rebuild on the device (auto-device), as the emulated runs: its GEMM at the compute's %d GFLOP/s "
                 "(the regime's device; the emulated runs charge it so), its SGD step at %.3g GB/s of weights "
                 "(the Titan X's 336.5 GB/s of memory / 5 floats a weight: an estimate), holding the device before "
                 "the layer's next forward" % (TITAN_X_GFLOPS, TITAN_X_UPDATE_GBYTES))
    proj_hosts = [8, 16, 32, 64] if not args.smoke else [8]
    proj = project(bench, models, variants, proj_hosts, [regime.gbit], regime.gflops, levels, threads)
    for p in proj:
        if p["alpha"] == levels[1][0]:
            eff.append({"model": p["model"], "sfb": p["variant"], "hosts": p["hosts"], "source": "simulated",
                        "alpha": p["alpha"], "iteration_s": p["iteration_s"], "compute_alone_s": p["compute_s"],
                        "efficiency": p["efficiency"], "speedup": p["hosts"] * p["efficiency"], "spread": 0,
                        "repeats": 0})
    write_csv(os.path.join(out, "efficiency.csv"), eff,
              ["model", "sfb", "hosts", "source", "alpha", "iteration_s", "compute_alone_s", "efficiency", "speedup",
               "spread", "repeats"])
    write_csv(os.path.join(out, "projection.csv"), proj, PROJECTION_FIELDS)
    target = [e for e in eff if e["model"] == "vgg19_22k" and e["sfb"] == "auto-device" and e["hosts"] == 8
              and e["source"] == "emulated"]
    with Readme(out) as f:
        f.write("# Poseidon's regime on the emulated cluster\n\n" + smoke_banner(args.smoke))
        f.write("Generated by `scripts/scaling.sh --study=poseidon%s` on %s (%s); `--merge=%s`, `--schedule=full`, "
                "batch %d per worker, one server and one worker per host.\n\n" %
                (" --no_emulation" if args.no_emulation else "", datetime.date.today().isoformat(), machine(),
                 bench.merge, BATCH))
        f.write("%s. Every configuration %d time(s) (%d warm-up, %d timed iterations, medians), repeat-major; "
                "`runs.jsonl` has every run. `auto-device`: `--sfb=auto --sfb_rebuild=device`, the rebuild on the "
                "emulated device (as Poseidon rebuilt on the GPU) charged at its full-size cost, 2 K P M N FLOPs / F at "
                "the device's rate / F (docs/SCALING.md).\n\n" % (regime.describe(), repeats, args.warmup,
                                                                  args.iterations))
        f.write(commits_measured([r for r in runs.ok() if r["key"] in {c["key"] for c in configs}]))
        f.write("## Scaling efficiency\n\nAgainst compute alone, as in every study (docs/SCALING.md): a worker's "
                "throughput over its device's training alone; speedup = hosts x efficiency. Emulated rows: compute "
                "alone is what the one-host `--sfb=off` run's worker measured (its emulated sleeps), the iteration the "
                "median of the repeats (spread = (max - min) / median); simulated rows: the simulator at full size "
                "and real speed (%g GFLOP/s, %g Gbit/s) with the measured alpha (%.3g us) and the constants below.\n\n"
                % (regime.gflops, regime.gbit, a["alpha_us"]))
        f.write("| model | --sfb | hosts | source | iteration s | compute alone s | efficiency | speedup | spread |\n"
                "|---|---|---|---|---|---|---|---|---|\n")
        for e in eff:
            f.write("| %s | %s | %d | %s | %.4f | %.4f | %.1f%% | %.2fx | %s |\n" %
                    (e["model"], e["sfb"], e["hosts"], e["source"], e["iteration_s"], e["compute_alone_s"],
                     100 * e["efficiency"], e["speedup"],
                     "%.1f%% (%d runs)" % (100 * e["spread"], e["repeats"]) if e["source"] == "emulated" else "-"))
        f.write("\nTarget: VGG19-22K with `--sfb=auto` at least 95%% scaling efficiency at 8 hosts (Poseidon: 97%% "
                "at 16): %s\n\n" % (
                    "**%s** (%.1f%%, spread %.1f%% over %d runs)" % (
                        "met" if target[0]["efficiency"] >= 0.95 else "not met", 100 * target[0]["efficiency"],
                        100 * target[0]["spread"], target[0]["repeats"]) if target
                    else "not measured in this run"))
        f.write("Constants of the projection:\n\n" + "".join("- %s\n" % n for n in notes) + "\n")
        f.write("## Sensitivity to alpha (simulator, full size, %g Gbit/s)\n\n" % regime.gbit)
        f.write("\n".join(sensitivity_table(proj, models, variants, proj_hosts, levels, rate=regime.gbit)) + "\n\n")
        f.write("## The simulator against these runs (out of sample)\n\nNone of these runs was used to fit the "
                "constants (`%s`: 1-2 hosts at 5 Gbit/s-equivalent); each is predicted as it ran (its servers' apply "
                "threads; auto-device's rebuild on the device at its rates).\n\n" % os.path.relpath(cal_path, ROOT))
        f.write("\n".join(validation_summary(rows)) + "\n\n")
        f.write("\n".join(validation_table(rows)) + "\n")
    log("poseidon -> %s" % out)


# -------------------------------------------------------------------------------------------------- today

def today(args, bench, out):
    cal, cal_path = load_calibration(args)
    emu_consts = {k: cal[k] for k in ("alpha_us", "apply_ns_per_byte", "rebuild_gflops", "sfb_apply_ns_per_byte")}
    if args.smoke:
        models, rates, emu_hosts, repeats = ["resnet50"], [25], [2], 1
        proj_hosts, search_rates = [8, 16], [25, 100]
    else:
        models, rates, emu_hosts, repeats = ["vgg19", "vgg19_22k", "resnet50"], [25, 100, 400], args.today_hosts, \
            args.repeats
        proj_hosts, search_rates = [8, 16, 32, 64, 128, 256], [10, 25, 50, 100, 200, 400, 800, 1600]
    configs = []
    for rate in rates:
        regime = Regime("H200@%dG" % rate, H200_GFLOPS, rate)
        for m in models:
            for h in emu_hosts:
                for sfb in ["off", "auto"]:
                    c = {"key": "%s/%s/full/h%d/%s" % (regime.name, m, h, sfb), "model": m, "hosts": h,
                         "schedule": "full", "sfb": sfb, "regime": regime}
                    configs.append(c)
    runs = Runs(os.path.join(out, "runs.jsonl"), args.fresh)
    run_configs(bench, out, runs, configs, repeats, args.warmup, args.iterations, args.timeout_s,
                not args.no_emulation)
    summary = summarize(runs, {c["key"] for c in configs})
    rows = validate(bench, summary, emu_consts)
    write_csv(os.path.join(out, "validation.csv"), rows, VALIDATION_FIELDS)
    # The projection at full size and real speed, every rate measured.
    consts, threads, notes, a = real_constants(args, cal)
    levels = alpha_levels(a["alpha_us"])
    variants = [("off", "off", dict(consts, rebuild_gflops=0), "cpu"),
                ("auto, rebuild on the GPU (a GPU worker)", "auto",
                 dict(consts, rebuild_gflops=H200_GEMM_GFLOPS, sfb_apply_ns_per_byte=1 / H200_STEP_GBYTES), "cpu"),
                ("auto, rebuild on the CPU (a CPU worker)", "auto",
                 dict(consts, rebuild_gflops=CPU_GEMM_GFLOPS, sfb_apply_ns_per_byte=1 / CPU_STEP_GBYTES), "cpu")]
    notes.append("rebuild on the GPU: %d GFLOP/s and its SGD step at %d GB/s, measured: what Nereus's client timed "
                 "on an H200 at start-up (cuBLAS GEMM 4096 x 4096 with K = 32, one worker's; `%s`); at 8+ workers "
                 "the GEMM's K is 256+ and cuBLAS likely faster, so this is the conservative side" %
                 (H200_GEMM_GFLOPS, H200_STEP_GBYTES, H200_GEMM_SOURCE))
    notes.append("rebuild on the CPU: %.3g GFLOP/s and its SGD step at %.3g GB/s, measured: what the client timed "
                 "per worker on this 2-core machine (OpenBLAS FactorGradient 1024 x 1024, K = 256, four workers "
                 "sharing it; `%s`; the other run, a, timed 48.6 GFLOP/s and 8.78 GB/s)" %
                 (CPU_GEMM_GFLOPS, CPU_STEP_GBYTES, CPU_GEMM_SOURCE))
    notes.append("either rebuild runs on the worker's applier beside its compute (the client's rebuild thread)")
    proj = project(bench, models, variants, [1] + proj_hosts, search_rates, H200_GFLOPS, levels, threads)
    proj = [p for p in proj if p["hosts"] > 1]
    write_csv(os.path.join(out, "projection.csv"), proj, PROJECTION_FIELDS)
    need = []
    for m in models:
        for name, _, _, _ in variants:
            for label, al in levels:
                for h in proj_hosts:
                    need.append({"model": m, "variant": name, "alpha": label, "alpha_us": al, "hosts": h,
                                 "rate_gbit": rate_for(proj, m, name, label, h)})
    write_csv(os.path.join(out, "rate_for_90pct.csv"), need, ["model", "variant", "alpha", "alpha_us", "hosts",
                                                              "rate_gbit"])
    measured = [lv for lv in levels if lv[0] == "x1"]
    with Readme(out) as f:
        f.write("# Today's regime: H200-class workers, 25-400 Gbit/s\n\n" + smoke_banner(args.smoke))
        f.write("Generated by `scripts/scaling.sh --study=today%s` on %s (%s); `--merge=%s`, `--schedule=full`, batch "
                "%d per worker, one server and one worker per host, compute at %d GFLOP/s (an H200 on VGG19: "
                "bench/results/gpu/, `--device_gflops=%d`).\n\n" %
                (" --no_emulation" if args.no_emulation else "", datetime.date.today().isoformat(), machine(),
                 bench.merge, BATCH, H200_GFLOPS, H200_GFLOPS))
        f.write(commits_measured(runs.ok()))
        f.write("## Link rate needed for 90% scaling efficiency (simulator, full size, measured alpha)\n\n")
        f.write("Lowest of %s Gbit/s at which a worker reaches 90%% of its GPU training alone (scaling efficiency "
                "against compute alone, as in every study: docs/SCALING.md); '-' if none does.\n\n" %
                ", ".join("%g" % r for r in search_rates))
        f.write("\n".join(sensitivity_table(proj, models, variants, proj_hosts, measured)) + "\n")
        f.write("\nConstants of the projection (real hosts cannot be measured here; each is named):\n\n")
        f.write("".join("- %s\n" % n for n in notes))
        f.write("\n## Sensitivity to alpha: the rate needed for 90%% at %s times the measured alpha and at the old "
                "400 us\n\n" % " and ".join("%g" % k for k in ALPHA_SCALES))
        f.write("\n".join(sensitivity_table(proj, models, variants, proj_hosts, levels)) + "\n")
        f.write("\n## Scaling efficiency at 25, 100 and 400 Gbit/s (simulator, full size, measured alpha)\n\n"
                "Against compute alone (one GPU training by itself).\n\n")
        for rate in [25, 100, 400] if not args.smoke else [25]:
            f.write("%g Gbit/s:\n\n" % rate)
            f.write("\n".join(sensitivity_table(proj, models, variants, proj_hosts, measured, rate=rate)) + "\n\n")
        f.write("## The simulator against the emulated cluster at the small end (out of sample)\n\n")
        f.write("Each rate is emulated with the link at %.4g Mbit/s per host: H200 compute and the link slowed by "
                "rate / %.4g Mbit/s, the model shrunk %dx (so 25, 100 and 400 Gbit/s are slowed 5x, 20x and 80x), "
                "`%s`'s constants, none fitted on these runs; the runs rebuilt on this CPU over the factors sent, and "
                "are predicted so. %d repeat(s) each, %d warm-up and %d timed iterations.\n\n" %
                (EMULATED_MBIT, EMULATED_MBIT, SHRINK, os.path.relpath(cal_path, ROOT), repeats, args.warmup,
                 args.iterations))
        f.write("\n".join(validation_summary(rows)) + "\n\n")
        f.write("\n".join(validation_table(rows)) + "\n")
    log("today -> %s" % out)


# ------------------------------------------------------------------------------------------------ servers

def servers(args, bench, out):
    """One server's apply threads, and the transport bench against the strongest raw baseline."""
    steps = []
    apply_args = ["--apply_repeats=%d" % (1 if args.smoke else 3)]
    if args.smoke:
        apply_args += ["--apply_bytes=4194304", "--apply_seconds=0.05"]
    transport_args = ["--repeats=%d" % (1 if args.smoke else 5), "--rtt_samples=%d" % (50 if args.smoke else 2000)]
    if args.smoke:
        transport_args += ["--sizes=4096,4194304", "--seconds=0.01", "--min_iterations=2"]
    for name, sub, extra in [("apply", "apply", apply_args), ("transport", "transport", transport_args)]:
        js, txt = os.path.join(out, name + ".json"), os.path.join(out, name + ".txt")
        log("nereus_bench %s %s" % (sub, " ".join(extra)))
        with open(txt, "w") as f:
            p = subprocess.run([bench.path, sub, "--json=" + js] + extra, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
            f.write(p.stdout)
        if p.returncode != 0:
            sys.exit("servers: nereus_bench %s failed (%d); its output is in %s" % (sub, p.returncode, txt))
        with open(js) as f:
            steps.append((name, json.load(f)))
    apply_rows, transport_rows = steps[0][1], steps[1][1]
    with Readme(out) as f:
        f.write("# Servers apply on every core; the transport against the strongest raw baseline\n\n"
                + smoke_banner(args.smoke))
        f.write("Generated by `scripts/scaling.sh --study=servers` on %s (%s). Raw output: `apply.txt`, "
                "`transport.txt`; rows: `apply.json`, `transport.json`.\n\n" %
                (datetime.date.today().isoformat(), machine()))
        f.write("## One server's updates (`nereus_bench apply`)\n\n")
        r0 = apply_rows[0]
        f.write("%d partitions of %d bytes, %d workers' gradients averaged per update, best of the repeats; memcpy "
                "in the same run: %.2f GB/s copied on 1 thread, %.2f GB/s on %d.\n\n" %
                (r0["partitions"], r0["partition_bytes"], r0["workers"], r0["memcpy_gbytes_per_s_1"],
                 r0["memcpy_gbytes_per_s_all"], r0["cores"]))
        f.write("| apply threads | updates/s | gradient GB/s | memory traffic GB/s | vs 1 thread |\n"
                "|---|---|---|---|---|\n")
        one = [r for r in apply_rows if r["apply_threads"] == 1]
        for r in apply_rows:
            f.write("| %d | %.0f | %.2f | %.2f | %s |\n" %
                    (r["apply_threads"], r["updates_per_s"], r["gradient_gbytes_per_s"],
                     r["memory_traffic_gbytes_per_s"],
                     "%.2fx" % (r["gradient_gbytes_per_s"] / one[0]["gradient_gbytes_per_s"]) if one else ""))
        f.write("\n(0 threads: every update on the receive thread, as before the pool.)\n\n")
        f.write("## Push+pull and the round trip against raw ZeroMQ\n\nBoth sides with %d connection(s) per worker "
                "and server and %d apply thread(s), one job each for the three phases after the same warm-up "
                "(docs/TRANSPORT.md). Targets: push+pull at least 0.9x raw at 4 MB and 64 MB; 4 KB round trip at "
                "most 1.3x.\n\n" % (transport_rows[0].get("streams", 0), transport_rows[0].get("apply_threads", 0)))
        f.write("| S x W | bytes | Nereus Gbit/s | raw | raw+upd | / raw | / raw+upd | target |\n"
                "|---|---|---|---|---|---|---|---|\n")
        for r in transport_rows:
            if r["op"] != "pushpull":
                continue
            target = ""
            if r["bytes"] in (4194304, 67108864):
                target = "met" if r["ratio"] >= 0.9 else "not met"
            f.write("| %dx%d | %d | %.2f | %.2f | %.2f | %.3f | %.3f | %s |\n" %
                    (r["servers"], r["workers"], r["bytes"], r["gbps"], r["raw_gbps"], r.get("raw_update_gbps", 0),
                     r["ratio"], r.get("ratio_to_raw_update", 0), target))
        rtt = [r for r in transport_rows if r["op"] == "rtt"]
        if rtt:
            r = rtt[0]
            f.write("\n4 KB round trip: %.1f us against %.1f us raw: %.3fx (%s).\n" %
                    (r["us"], r["raw_us"], r["ratio"], "met" if r["ratio"] <= 1.3 else "not met"))
    log("servers -> %s" % out)


# -------------------------------------------------------------------------------------------------- alpha

def alpha(args, bench, out):
    """The per-message cost alpha, measured directly: the 4 KB push+pull round trip of one worker and one server
    (`nereus_bench transport`, its median of --rtt_samples round trips, beside raw ZeroMQ's in the same run), run
    --alpha_runs times. A round trip is two messages (the push, the weights back), each costing the simulator's
    alpha: alpha = round trip / 2. The projections use the median of the runs (and its half and double)."""
    runs = Runs(os.path.join(out, "runs.jsonl"), args.fresh)
    n = 2 if args.smoke else args.alpha_runs
    samples = 200 if args.smoke else 2000
    todo = [i for i in range(n) if not runs.done("rtt", i)]
    for i in todo:
        js = os.path.join(out, "run.json")
        cmd = [bench.path, "transport", "--sizes=", "--repeats=1", "--rtt_samples=%d" % samples, "--json=" + js]
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        rec = {"key": "rtt", "repeat": i, "command": " ".join(["nereus_bench"] + cmd[1:-1]),
               "time": datetime.datetime.now().isoformat(timespec="seconds"), "load1": os.getloadavg()[0]}
        if p.returncode != 0:
            rec.update({"failed": True, "error": p.stdout[-800:]})
        else:
            with open(js) as f:
                r = [x for x in json.load(f) if x["op"] == "rtt"][0]
            rec.update({"rtt_us": r["us"], "raw_rtt_us": r["raw_us"], "alpha_us": r["us"] / 2})
            log("[%d/%d] 4 KB round trip %.1f us (raw ZeroMQ %.1f us), load %.2f" %
                (i + 1, n, r["us"], r["raw_us"], rec["load1"]))
        runs.add(rec)
    if os.path.exists(os.path.join(out, "run.json")):
        os.remove(os.path.join(out, "run.json"))
    ok = [r for r in runs.ok() if r["key"] == "rtt"]
    if not ok:
        sys.exit("alpha: no run succeeded")
    rtt = [r["rtt_us"] for r in ok]
    raw = [r["raw_rtt_us"] for r in ok]
    result = {"alpha_us": median(rtt) / 2, "rtt_us_median": median(rtt), "rtt_us_min": min(rtt),
              "rtt_us_max": max(rtt), "raw_rtt_us_median": median(raw), "runs": len(ok),
              "spread": spread(rtt), "samples_per_run": samples, "smoke": args.smoke,
              "date": datetime.date.today().isoformat(), "machine": machine(),
              "load1_median": median([r["load1"] for r in ok])}
    with open(os.path.join(out, "alpha.json"), "w") as f:
        json.dump(result, f, indent=2)
    with Readme(out) as f:
        f.write("# alpha, the per-message cost, measured\n\n" + smoke_banner(args.smoke))
        f.write("Generated by `scripts/scaling.sh --study=alpha` on %s (%s). Each run: `%s` (one worker and one "
                "server on this machine, the median of %d round trips of 4 KB, Nereus's and raw ZeroMQ's "
                "alternated); `runs.jsonl` has every run, with the load average when it ended.\n\n" %
                (result["date"], result["machine"], ok[0]["command"], samples))
        f.write(commits_measured(ok))
        f.write("| | median | min | max | spread |\n|---|---|---|---|---|\n")
        f.write("| Nereus 4 KB round trip | %.1f us | %.1f us | %.1f us | %.0f%% |\n" %
                (median(rtt), min(rtt), max(rtt), 100 * spread(rtt)))
        f.write("| raw ZeroMQ, same runs | %.1f us | %.1f us | %.1f us | %.0f%% |\n\n" %
                (median(raw), min(raw), max(raw), 100 * spread(raw)))
        f.write("**alpha = %.1f us** (`alpha.json`): half the median round trip of %d runs, a round trip being two "
                "messages (the push and the weights back) each of which costs the simulator alpha. The projections "
                "(`--study=poseidon`, `--study=today`) use it and show their sensitivity at %s times it. It is "
                "measured on this 2-core machine with other work on it (median load average %.2f at the runs' "
                "ends).\n" % (result["alpha_us"], len(ok), " and ".join("%g" % x for x in ALPHA_SCALES),
                              result["load1_median"]))
    log("alpha: %.1f us (median round trip %.1f us over %d runs) -> %s" %
        (result["alpha_us"], median(rtt), len(ok), out))


def load_alpha(args):
    """The measured alpha (--study=alpha's alpha.json) and its path; exits if there is none."""
    path = os.path.join(args.results, "alpha", "alpha.json")
    if not os.path.exists(path):
        sys.exit("no %s: run scripts/scaling.sh --study=alpha first" % path)
    with open(path) as f:
        a = json.load(f)
    if a.get("smoke") and not args.smoke:
        sys.exit("%s comes from a --smoke run: measure alpha for real first" % path)
    return a, os.path.relpath(path, ROOT)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--study", required=True, choices=["calibrate", "alpha", "poseidon", "today", "servers", "all"])
    ap.add_argument("--smoke", action="store_true", help="the smallest run of every step (minutes), into /tmp")
    ap.add_argument("--out", help="the study's folder (default bench/results/<study>, or /tmp/... with --smoke)")
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "results"),
                    help="where the studies' folders are (the calibration is read from <results>/calibrate)")
    ap.add_argument("--calibration", help="calibration.json to use instead of <results>/calibrate's")
    ap.add_argument("--bench", default=os.path.join(ROOT, os.environ.get("NEREUS_BUILD_DIR", "build"), "bin",
                                                    "nereus_bench"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--timeout_s", type=int, default=600, help="per emulated run")
    ap.add_argument("--merge", default="off",
                    help="--merge of the emulated workers (off: the simulator does not model MG-WFBP merging, and "
                         "auto's start-up pings, 14 MB to each server, take a minute at 8 emulated hosts)")
    ap.add_argument("--poseidon_hosts", default="1,2,4,8,16")
    ap.add_argument("--today_hosts", default="8")
    ap.add_argument("--fresh", action="store_true", help="discard runs.jsonl and start the runs over")
    ap.add_argument("--no_emulation", action="store_true",
                    help="make no emulated run (no root needed): report what each study's runs.jsonl has, the "
                         "simulator's fits, validations and projections made anew")
    ap.add_argument("--alpha_runs", type=int, default=10, help="--study=alpha: transport runs")
    ap.add_argument("--poseidon_auto_models", default=None,
                    help="--study=poseidon: models of the --sfb=auto runs, comma separated (default: both)")
    ap.add_argument("--poseidon_auto_hosts", default=None,
                    help="--study=poseidon: hosts of the --sfb=auto runs (rebuilt on the emulated device); default "
                         "--poseidon_hosts")
    args = ap.parse_args()
    args.poseidon_hosts = [int(h) for h in args.poseidon_hosts.split(",")]
    args.today_hosts = [int(h) for h in args.today_hosts.split(",")]
    if args.smoke:
        args.warmup, args.iterations, args.repeats = 2, 2, 1
        if args.results == os.path.join(ROOT, "bench", "results"):
            args.results = "/tmp/nereus_scaling_smoke"
    if not os.path.exists(args.bench):
        sys.exit("no %s: build first (scripts/build.sh)" % args.bench)
    bench = Bench(args.bench, args.merge)
    args.poseidon_auto_hosts = ([int(h) for h in args.poseidon_auto_hosts.split(",")] if args.poseidon_auto_hosts
                                else args.poseidon_hosts)
    args.poseidon_auto_models = args.poseidon_auto_models.split(",") if args.poseidon_auto_models else None
    studies = ["calibrate", "servers", "alpha", "poseidon", "today"] if args.study == "all" else [args.study]
    if len(studies) > 1 and args.out:
        sys.exit("--out names one study's folder: use --results with --study=all")
    for study in studies:
        if study not in ("servers", "alpha") and not args.no_emulation and os.geteuid() != 0:
            sys.exit("--study=%s runs the emulated cluster, which needs root (network namespaces): sudo" % study)
        out = args.out or os.path.join(args.results, study)
        os.makedirs(out, exist_ok=True)
        t0 = time.monotonic()
        log("== study %s -> %s" % (study, out))
        {"calibrate": calibrate, "alpha": alpha, "poseidon": poseidon, "today": today,
         "servers": servers}[study](args, bench, out)
        log("== study %s took %.1f min" % (study, (time.monotonic() - t0) / 60))


if __name__ == "__main__":
    main()
