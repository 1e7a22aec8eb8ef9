#!/usr/bin/env python3
"""A 1 worker x 1 server job against the standalone trainer, same machine,
same run: the benchmark of a GPU worker's data path (scripts/gpu_check.sh
runs it on a GPU; --gpu=-1 runs it on the CPU, as tests/scripts does).

  gpu_job_bench.py --pkg=DIR --work=DIR [--models=resnet50,vgg19] [--gpu=0]
      [--sfb=off,auto] [--iterations=20] [--display=10] [--batch=32] [--rounds=1]
      [--port=7400] [--budget_s=150] [--json=FILE]

--pkg holds bin/ (nereus_worker, nereus_server, nereus_launch, nereus_bench)
and worker/trainer/models/. Each model's train net as `nereus_bench train
--net_dir` writes it (TRAIN Data layers replaced by Input layers of its image
shape at --batch; the trainer leaves them zero: no data loading is timed, and
the arithmetic's speed does not depend on the values) runs with SGD (momentum 0.9, base_lr 0.001) for --iterations:
  - standalone: nereus_worker --standalone --gpu=N;
  - job, once for each --sfb mode: nereus_launch --ssh=none, --workers servers
    and workers (default 2) on 127.0.0.1, every worker with --gpu=N (they share
    it): at least 2, so that sufficient factors cross between workers (with
    one, --sfb=auto sends no factor bytes and only takes fc6-fc8 off the
    servers' path).
Iteration time = the batch over the job's images/s (all workers) of the last
display window, so a job's time is per batch-worth of images at its throughput,
(iterations --iterations - 2 --display + 1 to --iterations - --display: the
trainer displays no window at its last iteration), so start-up and the first
iteration (allocation, cuBLAS's first calls, pinning) are not timed.
Each job prints worker 0's HybComm table (round 1) and writes a --timeline; from it, the device-to-host copies' time per
iteration and the share of it inside the backward (iteration 0 left out).
Raw ZeroMQ's time for the same bytes: nereus_bench transport 1x1 push+pull
of 64 MB partitions (its fair baseline), measured in this run: the model's
bytes pushed and pulled once at that rate.
Targets (issue 20): ResNet-50's job at most 1.10x standalone; VGG19 with
--sfb=auto at most 1.15x max(standalone, raw ZeroMQ's time).
--rounds runs every configuration that many times, round-major (each round
runs them all in turn), and reports the median with the range beside it.
Prints one line a run; --json writes {"raw": ..., "runs": [...], "targets": [...]}.
Exit status 0 when every run finished (targets are reported, not failed on).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time


def window_rate(log, who):
    """images/s of the last display window of `who`'s progress lines: the
    whole job's (the "(job N)" of a worker of several), else `who`'s own."""
    rates = re.findall(re.escape(who) + r": Iteration (\d+), loss = [^,]+, lr = [^,]+, (\d+) images/s(?: \(job (\d+)\))?",
                       log)
    if not rates:
        return (None, None)
    it, own, job = rates[-1]
    return (int(it), float(job or own))


def hidden_copies(path):
    """From a worker's --timeline: the device-to-host copies' time per
    iteration and the share of it inside that iteration's backward (from the
    first backward span's start to the last one's end), iteration 0 left out."""
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    clocks = sorted({e["args"]["clock"] for e in events if e["args"]["clock"] > 0})
    total = hidden = 0.0
    counted = 0
    for c in clocks:
        bwd = [e for e in events if e["args"]["clock"] == c and e["name"].startswith("backward ")]
        d2h = [e for e in events if e["args"]["clock"] == c and e["name"].startswith("d2h ")]
        if not bwd or not d2h:
            continue
        lo, hi = min(e["ts"] for e in bwd), max(e["ts"] + e["dur"] for e in bwd)
        counted += 1
        for e in d2h:
            total += e["dur"]
            hidden += max(0, min(hi, e["ts"] + e["dur"]) - max(lo, e["ts"]))
    if counted == 0:
        return None
    return {"iterations": counted, "d2h_ms_per_iteration": total / counted / 1000.0,
            "hidden_in_backward": hidden / total if total else None}


def run(cmd, log_path, limit):
    started = time.time()
    with open(log_path, "w") as log:
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=max(1, limit)).returncode
        except subprocess.TimeoutExpired:
            rc = "timed out after %d s" % limit
    return rc, time.time() - started, open(log_path, errors="replace").read()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pkg", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default="resnet50,vgg19")
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--sfb", default="off,auto")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--display", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--port", type=int, default=7400)
    ap.add_argument("--budget_s", type=float, default=150)
    # nereus_bench transport --seconds: about how long each of its measurements runs.
    ap.add_argument("--raw_seconds", type=float, default=1.0)
    ap.add_argument("--raw_bytes", type=int, default=67108864,
                    help="the raw ZeroMQ baseline's tensor size (default 64 MB; the smoke test uses less)")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    if a.display <= 0 or a.iterations < 2 * a.display:
        sys.exit("gpu_job_bench.py: --iterations must be at least twice --display (iteration 0 is not timed)")
    deadline = time.time() + a.budget_s
    bin_dir = os.path.join(a.pkg, "bin")
    os.makedirs(a.work, exist_ok=True)
    left = lambda: deadline - time.time()
    result = {"gpu": a.gpu, "batch": a.batch, "iterations": a.iterations, "display": a.display, "rounds": a.rounds, "runs": [],
              "targets": []}
    ok = True

    # Raw ZeroMQ, 1 server x 1 worker, push+pull of --raw_bytes (64 MB).
    raw_json = os.path.join(a.work, "raw.json")
    rc, secs, log = run([os.path.join(bin_dir, "nereus_bench"), "transport", "--sizes=%d" % a.raw_bytes, "--repeats=1",
                         "--rtt_samples=10", "--seconds=%g" % a.raw_seconds, "--json=" + raw_json], os.path.join(a.work, "raw.log"),
                        left())
    raw_gbps = None
    try:
        text = open(raw_json).read()
        try:
            rows = json.loads(text)
        except ValueError:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        for row in rows:
            if row.get("op") == "pushpull" and row.get("servers") == 1 and row.get("workers") == 1:
                raw_gbps = row["raw_gbps"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    result["raw"] = {"exit": rc, "pushpull_gbit_s": raw_gbps, "note": "nereus_bench transport 1x1 push+pull, %d bytes" % a.raw_bytes}
    print("raw ZeroMQ 1x1 push+pull %d bytes: %s Gbit/s (exit %s)" % (a.raw_bytes, raw_gbps, rc))
    ok = ok and rc == 0 and raw_gbps is not None

    models = a.models.split(",")
    # The models' train nets with Input layers for their Data layers: nereus_bench train's (one definition).
    rc, secs, log = run([os.path.join(bin_dir, "nereus_bench"), "train", "--model=" + a.models,
                         "--batch=%d" % a.batch, "--model_dir=" + os.path.join(a.pkg, "worker/trainer/models"),
                         "--net_dir=" + a.work], os.path.join(a.work, "nets.log"), min(60, left()))
    if rc != 0:
        print("nereus_bench train --net_dir FAILED (exit %s)" % rc)
        print("".join("    | " + line + "\n" for line in log.splitlines()[-20:]), end="")
        return 1
    for model in models:
        net = os.path.join(a.work, model + ".prototxt")
        open(os.path.join(a.work, model + "_solver.prototxt"), "w").write(
            'net: "%s"\nbase_lr: 0.001\nmomentum: 0.9\nweight_decay: 0.0005\nlr_policy: "fixed"\nmax_iter: %d\n'
            'display: %d\nrandom_seed: 1\nsnapshot: 0\nsnapshot_after_train: false\naverage_loss: 1\n' %
            (net, a.iterations, a.display))
    hostfile = os.path.join(a.work, "hosts")
    open(hostfile, "w").write("localhost addr=127.0.0.1\n")
    kinds = [("standalone", None)] + [("job", m) for m in a.sfb.split(",")]
    # Round-major: every configuration once per round, so drift on the machine
    # spreads over all of them.
    for rnd in range(a.rounds):
        for model in models:
            solver = os.path.join(a.work, model + "_solver.prototxt")
            for kind, sfb in kinds:
                name = "%s %s (round %d)" % (model, kind if sfb is None else "job --sfb=" + sfb, rnd + 1)
                log_path = os.path.join(a.work, "%s_%s%s_%d.log" % (model, kind, "" if sfb is None else "_" + sfb,
                                                                     rnd))
                if left() < 5:
                    result["runs"].append({"model": model, "run": kind, "sfb": sfb, "round": rnd,
                                           "error": "out of time"})
                    print("%-40s out of time" % name)
                    ok = False
                    continue
                if kind == "standalone":
                    cmd = [os.path.join(bin_dir, "nereus_worker"), "--standalone", "--solver=" + solver,
                           "--gpu=%d" % a.gpu, "--logtostderr"]
                    who = "standalone"
                else:
                    a.port += 10
                    cmd = [os.path.join(bin_dir, "nereus_launch"), "--hostfile=" + hostfile, "--ssh=none",
                           "--bin_dir=" + bin_dir, "--num_servers=%d" % a.workers,
                           "--num_workers=%d" % a.workers, "--port=%d" % a.port,
                           "--", "--solver=" + solver, "--gpu=%d" % a.gpu, "--sfb=" + sfb, "--logtostderr",
                           "--timeline=" + log_path[:-4] + ".trace.json"]
                    who = "worker 0"
                rc, secs, log = run(cmd, log_path, min(120, left()))
                it, ips = window_rate(log, who)
                row = {"model": model, "run": kind, "sfb": sfb, "round": rnd, "exit": rc, "seconds": round(secs, 1),
                       "workers": 1 if kind == "standalone" else a.workers,
                       "window_end_iteration": it, "images_per_s": ips,
                       "iteration_ms": 1000.0 * a.batch / ips if ips else None}
                m = re.search(r"learnable blobs, (\d+) parameters", log)
                if m:
                    row["param_bytes"] = 4 * int(m.group(1))
                if kind == "job" and a.gpu >= 0 and rc == 0:
                    try:
                        row["d2h"] = hidden_copies(log_path[:-4] + ".trace.json")
                    except (OSError, ValueError, KeyError) as e:
                        row["d2h"] = {"error": str(e)}
                result["runs"].append(row)
                good = rc == 0 and it == a.iterations - a.display and ips
                ok = ok and bool(good)
                print("%-40s %s" % (name, ("%.1f ms per iteration (%d images/s)" % (row["iteration_ms"], ips))
                                    if good else "FAILED (exit %s; %s)" % (rc, log_path)))
                if row.get("d2h") and row["d2h"].get("hidden_in_backward") is not None:
                    print("%-40s device-to-host copies %.2f ms per iteration, %.0f%% of it inside the backward" % (
                        "", row["d2h"]["d2h_ms_per_iteration"], 100 * row["d2h"]["hidden_in_backward"]))
                if kind == "job" and rnd == 0:  # HybComm's start-up table: what went as factors, and why.
                    lines = log.splitlines()
                    at = next((i for i, line in enumerate(lines) if "HybComm (" in line), None)
                    if at is not None:
                        table = [lines[at][lines[at].find("HybComm ("):]]
                        for line in lines[at + 1:]:
                            if not line.startswith("[worker 0@localhost]   "):
                                break
                            table.append(line[len("[worker 0@localhost] "):])
                        row["hybcomm"] = table
                        print("".join("    " + line + "\n" for line in table), end="")
                if not good:  # What went wrong travels with the output.
                    print("".join("    | " + line + "\n" for line in log.splitlines()[-20:]), end="")

    def times(model, kind, sfb=None):
        return sorted(r["iteration_ms"] for r in result["runs"]
                      if r["model"] == model and r["run"] == kind and r["sfb"] == sfb and r.get("iteration_ms"))

    def median(v):
        return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2 if v else None

    for model in models:
        alone_all = times(model, "standalone")
        alone = median(alone_all)
        params_bytes = next((r["param_bytes"] for r in result["runs"] if r["model"] == model and "param_bytes" in r),
                            None)
        raw_ms = 1000.0 * 2 * params_bytes * 8 / (raw_gbps * 1e9) if params_bytes and raw_gbps else None
        for sfb in a.sfb.split(","):
            job_all = times(model, "job", sfb)
            job = median(job_all)
            hidden = [r["d2h"]["hidden_in_backward"] for r in result["runs"] if r["model"] == model and
                      r["sfb"] == sfb and (r.get("d2h") or {}).get("hidden_in_backward") is not None]
            target = {"model": model, "sfb": sfb, "rounds": len(job_all), "job_ms": job, "job_ms_all": job_all,
                      "standalone_ms": alone, "standalone_ms_all": alone_all, "raw_zmq_ms": raw_ms,
                      "param_bytes": params_bytes, "d2h_hidden_in_backward_all": sorted(hidden)}
            if job and alone:
                target["ratio_to_standalone"] = job / alone
            if model == "resnet50" and job and alone:
                target.update({"target": "job at most 1.10x standalone", "ratio": job / alone,
                               "met": job / alone <= 1.10})
            elif model == "vgg19" and sfb == "auto" and job and alone:
                bound = max(alone, raw_ms or 0)
                target.update({"target": "job at most 1.15x max(standalone, raw ZeroMQ's time)",
                               "ratio": job / bound, "met": job / bound <= 1.15 and raw_ms is not None})
            result["targets"].append(target)
            print("%s --sfb=%s, median of %d: job %s ms (%s), standalone %s ms (%s), raw ZeroMQ %s ms; "
                  "job/standalone %s%s" % (
                      model, sfb, len(job_all), "%.1f" % job if job else "-",
                      "-".join("%.1f" % v for v in job_all[:1] + job_all[-1:]) or "-",
                      "%.1f" % alone if alone else "-",
                      "-".join("%.1f" % v for v in alone_all[:1] + alone_all[-1:]) or "-",
                      "%.1f" % raw_ms if raw_ms else "-",
                      "%.3f" % (job / alone) if job and alone else "-",
                      "; %s: %.3f (%s)" % (target["target"], target["ratio"], "met" if target["met"] else "NOT met")
                      if "target" in target else ""))
    if a.json:
        json.dump(result, open(a.json, "w"), indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
