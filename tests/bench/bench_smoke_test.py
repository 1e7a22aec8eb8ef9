#!/usr/bin/env python3
"""bench_smoke_test: every nereus_bench subcommand, run with tiny settings.

A benchmark nobody runs rots or hangs unseen (`transport` once waited for
ever in its raw baseline). This runs each subcommand once or more with tiny
settings, each bounded by --phase_timeout_s and a wall-clock limit, and checks
that it exits 0 and writes the JSON rows it should.

TO ADD A SUBCOMMAND: append its runs to RUNS below (name, arguments, and a
check of its JSON rows). `nereus_bench list` names every subcommand, and this
test fails for any subcommand that has no run here.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

PHASE_TIMEOUT_S = "60"
RUN_TIMEOUT_S = 300  # Each run; on an idle 2-core machine the whole test takes about 30 s.
# --small (sanitizer builds): the first two. No 64 MB: its run alone took 45 s
# of the test's 80 on a 2-core machine, and covers no other code path than 4 MB
# (cut into 1 MB partitions the same way, only more of them).
SIZES = [4096, 262144, 4194304]


def check_transport(rows):
    want = {(op, b, s, w) for op in ("push", "pull", "pushpull") for b in SIZES for s, w in ((1, 1), (2, 2))}
    got = {(r["op"], r["bytes"], r["servers"], r["workers"]) for r in rows if r["op"] != "rtt"}
    assert got == want, "transport rows: missing %s, unexpected %s" % (sorted(want - got), sorted(got - want))
    for r in rows:
        if r["op"] == "rtt":
            assert r["us"] > 0 and r["raw_us"] > 0, r
        else:
            assert r["gbps"] > 0 and r["raw_gbps"] > 0, r
            # --raw_update (on by default): the baseline with the server's update; a pull makes none.
            assert r["raw_update_gbps"] > 0, r
            # Written to 6 significant figures.
            assert abs(r["ratio_to_raw_update"] / (r["gbps"] / r["raw_update_gbps"]) - 1) < 1e-4, r
            if r["op"] == "pull":
                assert r["raw_update_gbps"] == r["raw_gbps"], r
            # Both sides with the same connections and apply threads (given below).
            assert r["streams"] == 2 and r["apply_threads"] == 2, r
    assert sum(r["op"] == "rtt" for r in rows) == 1, "transport: expected one rtt row"


def check_apply(rows):
    # --apply_threads_list=0,1,2: one row each, every update made (the bench
    # checks each partition's version), memcpy measured in the same run.
    assert [r["apply_threads"] for r in rows] == [0, 1, 2], rows
    for r in rows:
        assert r["partitions"] == 4 and r["workers"] == 3 and r["clocks"] >= 2, r
        assert r["updates_per_s"] > 0 and r["memcpy_gbytes_per_s_1"] > 0 and r["memcpy_gbytes_per_s_all"] > 0, r
        # Gradient bytes = updates x partition x workers; traffic = x (workers + 4) / workers.
        want = r["updates_per_s"] * r["partition_bytes"] * 3 / 1e9
        assert abs(r["gradient_gbytes_per_s"] / want - 1) < 1e-4, r
        assert abs(r["memory_traffic_gbytes_per_s"] / r["gradient_gbytes_per_s"] - 7 / 3) < 1e-4, r


def check_cluster_sfb(rows):
    # LeNet shrunk 4 times on 2 hosts, --sfb=auto: ip1 (250 x 400, factors
    # of 16 rows) goes as factors, ip2 (5 x 250) through the servers.
    check_rows_timed(rows)
    r = rows[0]
    assert r["sfb"] == "auto" and r["model_scale"] == 4, r
    # 4 x 16 x (250 + 400) = 41,600 bytes to the one other worker a clock.
    assert abs(r["factor_bytes"] - 41600) < 0.01 * 41600, r
    assert r["factor_apply_s"] > 0, r


def check_simulate_sfb(rows):
    # VGG19-22K at full size, 8 and 64 hosts, 10 Gbit/s, --sfb=auto: its 3
    # fully connected layers go as factors (P <= 128 for fc7), and fewer bytes
    # leave a worker than its 2 x 229M floats through the servers.
    assert [r["hosts"] for r in rows] == [8, 64], rows
    for r in rows:
        assert r["sfb_layers"] == 3 and r["factor_bytes"] > 0 and r["rebuild_s"] > 0, r
        assert r["sent_bytes"] < 2 * 229052817 * 4, r


def check_pipeline(workers, servers, schedules):
    def check(rows):
        assert [r["schedule"] for r in rows] == schedules, [r["schedule"] for r in rows]
        for r in rows:
            assert r["workers"] == workers and r["servers"] == servers, r
            assert r["iteration_s"] > 0 and r["lower_bound_s"] > 0, r
    return check


ALL_SCHEDULES = ["sequential", "wfbp", "priority", "full"]


def check_pipeline_sweep(rows):
    # --batch_sweep=0,65536 --rounds=2: the two settings interleaved, round by round.
    got = [(r["round"], r["batch_bytes"]) for r in rows]
    assert got == [(0, 0), (0, 65536), (1, 0), (1, 65536)], got
    for r in rows:
        assert r["iteration_s"] > 0 and r["push_messages_per_iter"] > 0, r
        if r["batch_bytes"] == 0:
            assert r["batches_per_iter"] == 0, r


# Two link rates (the second shaped when namespaces can be made) and three
# --sfb modes, in that order, rows gathered into one JSON.
SFB_LINKS = [0, 1000] if os.geteuid() == 0 else [0, 0]


def check_pipeline_sfb(rows):
    got = [(r["link_mbit"], r["sfb"]) for r in rows]
    want = [(l, m) for l in SFB_LINKS for m in ("off", "auto", "on")]
    assert got == want, got
    for i in range(0, len(rows), 3):
        off, auto, on = rows[i:i + 3]
        # LeNet, 3 workers, 2 servers, batch 32, at the rates given (RATES,
        # GEMM 20 GFLOP/s): HybComm sends ip1 (500x800) as factors (SFB
        # 2.66 ms of link + 3.84 ms of GEMM + 0.8 ms of step against PS 19.2 +
        # 0.4 ms) and keeps ip2 (10x500) on the servers (its factors alone
        # take 1.04 ms, PS 0.245 ms); on sends both.
        assert (off["sfb_tensors"], auto["sfb_tensors"], on["sfb_tensors"]) == (0, 1, 2), rows[i:i + 3]
        assert off["factor_messages_per_iter"] == 0 and auto["factor_messages_per_iter"] > 0, rows[i:i + 3]
        # Bytes per worker per iteration, both ways, worked by hand (the 1%
        # is for an own factor message the scheduler sent late):
        #  off:  2 x 431,080 floats x 4 B                          = 3,448,640
        #  auto: 2 x (431,080 - 400,000) x 4 (servers)               =   248,640
        #        + ip1 factors 32 x (500 + 800) x 4 x 2 peers x 2 ways = 665,600 -> 914,240
        #  on:   2 x (431,080 - 400,000 - 5,000) x 4                 =   208,640
        #        + 665,600 + ip2 factors 32 x (10 + 500) x 4 x 4     =   261,120 -> 1,135,360
        for r, want in ((off, 3448640), (auto, 914240), (on, 1135360)):
            assert abs(r["bytes_per_worker"] - want) < 0.01 * want, (want, r)
        assert auto["factor_apply_s"] > 0, auto


# HybComm's rates given, so that auto's choice does not depend on timing: a 1
# Gbit/s link, SGD step and server apply 2 GB/s, the rebuild's GEMM as named.
RATES = ["--sfb_link_gbit=1", "--sfb_update_gbytes=2", "--sfb_apply_gbytes=2"]


def check_pipeline_rebuild(rows):
    # --sfb=off,auto --sfb_rebuild=cpu,device --rounds=2: off once per round.
    got = [(r["round"], r["sfb"], r["sfb_rebuild"]) for r in rows]
    want = [(k, m, b) for k in (0, 1) for m, b in (("off", "cpu"), ("auto", "cpu"), ("auto", "device"))]
    assert got == want, got
    for i in range(0, len(rows), 3):
        off, cpu, dev = rows[i:i + 3]
        # LeNet, 3 workers, 2 servers, K = 32, link 1.25e8 B/s each way. ip1: PS 4.8 MB, 19.2 ms + 0.4 ms of
        # apply. SFB 665,600 B, 2.66 ms, + a GEMM of 2*96*400,000 = 76.8 MFLOP: at 1 GFLOP/s (cpu) 76.8 ms
        # -> PS; at the device's 100 TFLOP/s 0.8 us (+ 2 us of step at 800 GB/s) -> SFB. ip2 stays on the
        # servers (its factors alone, 261,120 B, take 1.04 ms > PS's 0.245 ms).
        assert (off["sfb_tensors"], cpu["sfb_tensors"], dev["sfb_tensors"]) == (0, 0, 1), rows[i:i + 3]
        assert cpu["rebuild_gflops"] == 1 and dev["rebuild_gflops"] == 100000, rows[i:i + 3]
        assert dev["update_gbytes"] == 800, dev
        assert cpu["factor_messages_per_iter"] == 0 and dev["factor_messages_per_iter"] > 0, rows[i:i + 3]
        # The emulated device rebuilds: the client's CPU never runs the GEMM.
        assert dev["factor_apply_s"] == 0, dev
        assert abs(dev["bytes_per_worker"] - 914240) < 0.01 * 914240, dev
        assert abs(cpu["bytes_per_worker"] - 3448640) < 0.01 * 3448640, cpu


def check_pipeline_scaled(rows):
    # VGG19 at --model_scale=4096 (fully connected weights 64x392, 64x64, 16x64 with round(32 / 64) = 1 factor
    # row each: bench/sim/models.h), 2 workers, 1 server, rebuilt on the device. fc6: PS 200,704 B, 0.803 ms +
    # 0.05 ms of apply; SFB 3,648 B, 0.015 ms + 0.1 us -> SFB. fc7: PS 32,768 B, 0.131 + 0.008 ms; SFB 1,024 B,
    # 0.004 ms -> SFB. fc8: PS 8,192 B, 0.033 + 0.002 ms; SFB 640 B, 0.003 ms -> SFB.
    assert [r["sfb"] for r in rows] == ["auto"], rows
    r = rows[0]
    assert r["model_scale"] == 4096 and r["sfb_tensors"] == 3 and r["iteration_s"] > 0, r


def check_rows_timed(rows):
    assert rows, "no rows"
    for r in rows:
        assert r["iteration_s"] > 0, r

def check_model(rows):
    # VGG-19 shrunk 256 times at an H200's 57,000 GFLOP/s / 256 (bench/torch/cluster_compare.py): 19 layers, the
    # fully connected weights still matrices (rows and columns / 16) with 32 / 16 = 2 rows of factors, every other
    # tensor flat (conv1_1's 1,728 weights: 7); the backward twice the forward; 66.1 ms an iteration.
    assert [r["layer"] for r in rows][:2] == ["conv1_1", "conv1_2"] and len(rows) == 19, rows
    by = {r["layer"]: r for r in rows}
    assert by["conv1_1"]["params"] == [[7], [1]] and not by["conv1_1"]["fully_connected"], by["conv1_1"]
    assert by["fc6"]["params"] == [[256, 1568], [16]] and by["fc6"]["factor_rows"] == 2, by["fc6"]
    assert by["fc8"]["params"] == [[63, 256], [4]] and by["fc8"]["fully_connected"], by["fc8"]
    for r in rows:
        assert abs(r["backward_s"] / r["forward_s"] - 2) < 1e-5, r
    total = sum(r["forward_s"] + r["backward_s"] for r in rows)
    assert abs(total - 0.066129) < 1e-5, total


MODELS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "worker", "trainer", "models")


def check_train(rows):
    # The published parameter counts of the two nets run here (on the CPU).
    assert [(r["model"], r["params"], r["batch"]) for r in rows] == [("lenet", 431080, 4), ("cifar10_full", 89578, 4)], rows
    for r in rows:
        assert r["device"] == "CPU" and r["gpu"] == -1, r
        assert r["iteration_ms"] > 0 and r["forward_ms"] > 0 and r["backward_ms"] > 0, r
        assert abs(r["images_per_s"] - 1e3 * r["batch"] / r["iteration_ms"]) < 1e-3 * r["images_per_s"], r


# (subcommand, arguments, check of the JSON rows). Keep each run to seconds.
RUNS = [
    ("transport", ["--sizes=" + ",".join(map(str, SIZES)), "--seconds=0.002", "--min_iterations=2",
                   "--repeats=1", "--rtt_samples=20", "--streams=2", "--apply_threads=2"],
     check_transport),
    ("apply", ["--apply_bytes=1048576", "--partition_bytes=262144", "--apply_workers=3", "--apply_threads_list=0,1,2",
               "--apply_seconds=0.001", "--apply_repeats=1"], check_apply),
    ("pipeline", ["--model=lenet", "--workers=1", "--servers=1", "--schedule=all", "--iterations=2", "--warmup=3",
                  "--device_gflops=100000"], check_pipeline(1, 1, ALL_SCHEDULES)),
    ("pipeline", ["--model=lenet", "--workers=2", "--servers=2", "--schedule=all", "--iterations=2", "--warmup=3",
                  "--device_gflops=100000"], check_pipeline(2, 2, ALL_SCHEDULES)),
    ("pipeline", ["--model=lenet", "--workers=2", "--servers=2", "--schedule=full", "--iterations=2", "--warmup=3",
                  "--device_gflops=100000", "--batch_sweep=0,65536", "--rounds=2"], check_pipeline_sweep),
    ("pipeline", ["--model=lenet", "--workers=3", "--servers=2", "--schedule=full", "--iterations=3", "--warmup=3",
                  "--device_gflops=100000", "--sfb=off,auto,on", "--link_list=" + ",".join(map(str, SFB_LINKS)),
                  "--sfb_rebuild_gflops=20"] + RATES,
     check_pipeline_sfb),
    ("pipeline", ["--model=lenet", "--workers=3", "--servers=2", "--schedule=full", "--iterations=2", "--warmup=2",
                  "--device_gflops=100000", "--sfb=off,auto", "--sfb_rebuild=cpu,device", "--rounds=2",
                  "--sfb_rebuild_gflops=1"] + RATES,
     check_pipeline_rebuild),
    ("pipeline", ["--model=vgg19", "--model_scale=4096", "--workers=2", "--servers=1", "--schedule=full",
                  "--iterations=2", "--warmup=2", "--device_gflops=100000", "--sfb=auto", "--sfb_rebuild=device"] +
     RATES,
     check_pipeline_scaled),
    # Needs root (network namespaces); exit 77 elsewhere, reported below.
    ("cluster", ["--model=lenet", "--hosts=2", "--link_mbit=100", "--schedule=full", "--iterations=2", "--warmup=2",
                 "--device_gflops=100000", "--timeout_s=120"], check_rows_timed),
    ("cluster", ["--model=lenet", "--model_scale=4", "--hosts=2", "--link_mbit=100", "--schedule=full", "--sfb=auto",
                 "--iterations=2", "--warmup=2", "--device_gflops=100000", "--timeout_s=120"], check_cluster_sfb),
    ("model", ["--model=vgg19", "--model_scale=256", "--batch=32", "--device_gflops=222.65625"], check_model),
    ("simulate", ["--model=lenet", "--host_list=1,2", "--link_list=100", "--schedule=full"], check_rows_timed),
    ("simulate", ["--model=vgg19_22k", "--host_list=8,64", "--link_list=10000", "--schedule=full", "--sfb=auto",
                  "--device_gflops=3000", "--sim_iterations=2"], check_simulate_sfb),
    # The trainer's own speed (on a GPU with --gpu=N; scripts/gpu_check.sh runs all five models there).
    ("train", ["--model=lenet,cifar10_full", "--batch=4", "--warmup=1", "--iterations=2",
               "--model_dir=" + MODELS_DIR], check_train),
]


def run(bench, sub, args, json_path):
    cmd = [bench, sub] + args + ["--phase_timeout_s=" + PHASE_TIMEOUT_S, "--json=" + json_path]
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S, text=True)
    return p, time.monotonic() - t0, " ".join(cmd)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="path to nereus_bench")
    ap.add_argument("--small", action="store_true", help="small tensors only (sanitizer builds are slow)")
    opts = ap.parse_args()
    if opts.small:
        del SIZES[2:]
        RUNS[0][1][0] = "--sizes=" + ",".join(map(str, SIZES))
    failures = []
    listed = subprocess.run([opts.bench, "list"], stdout=subprocess.PIPE, text=True, timeout=30, check=True)
    subcommands = listed.stdout.split()
    covered = {sub for sub, _, _ in RUNS}
    for sub in subcommands:
        if sub not in covered:
            failures.append("subcommand \"%s\" has no smoke run: add it to RUNS in %s" % (sub, __file__))
    # `train` needs the trainer, which a build without it (the TSan stage's) leaves out.
    optional = {"train"}
    for sub in covered - set(subcommands) - optional:
        failures.append("RUNS names \"%s\", which `nereus_bench list` does not know" % sub)
    with tempfile.TemporaryDirectory() as tmp:
        for i, (sub, args, check) in enumerate(RUNS):
            if sub in optional and sub not in subcommands:
                print("%-10s not in this build (no trainer): not run" % sub)
                continue
            path = os.path.join(tmp, "%d_%s.json" % (i, sub))
            try:
                p, secs, cmd = run(opts.bench, sub, args, path)
            except subprocess.TimeoutExpired as e:
                out = e.output.decode(errors="replace") if isinstance(e.output, bytes) else (e.output or "")
                failures.append("%s: no exit within %d s:\n%s" % (sub, RUN_TIMEOUT_S, out[-4000:]))
                continue
            print("%-10s %5.1f s  rc %d  %s" % (sub, secs, p.returncode, cmd))
            if p.returncode == 77 and sub == "cluster":
                print("cluster: skipped, no network namespaces here")
                continue
            if p.returncode != 0:
                failures.append("%s exited %d:\n%s" % (cmd, p.returncode, p.stdout[-4000:]))
                continue
            try:
                with open(path) as f:
                    check(json.load(f))
            except (AssertionError, OSError, ValueError, KeyError) as e:
                failures.append("%s: bad JSON rows: %r\n%s" % (cmd, e, p.stdout[-2000:]))
        # The watchdog: a phase bound no phase can meet ends the run with
        # status 3 and names the phase; the JSON, if written, stays valid.
        path = os.path.join(tmp, "stuck.json")
        p = subprocess.run([opts.bench, "transport", "--sizes=4096", "--repeats=1", "--phase_timeout_s=0.000001",
                            "--json=" + path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=RUN_TIMEOUT_S)
        if p.returncode != 3 or not re.search(r'phase "[^"]+ 1x1 4096 B, repeat 1" did not finish', p.stdout):
            failures.append("stuck phase: expected status 3 naming the first phase, got %d:\n%s" %
                            (p.returncode, p.stdout[-2000:]))
        if os.path.exists(path):
            with open(path) as f:
                json.load(f)
    if failures:
        print("\n\n".join(failures), file=sys.stderr)
        return 1
    print("bench smoke: %d runs of %s passed" % (len(RUNS), ", ".join(subcommands)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
