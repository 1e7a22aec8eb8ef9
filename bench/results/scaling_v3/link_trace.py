#!/usr/bin/env python3
"""Bytes each host of an emulated cluster sends, every 100 ms, while
`nereus_bench cluster` runs (needs root). Shows the phase between workers:
    python3 bench/results/scaling_v3/link_trace.py vgg19 sequential 2 39.0625"""
import subprocess, sys, time
model, schedule, hosts, mbit = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
job = subprocess.Popen(["build/bin/nereus_bench", "cluster", "--model=" + model, "--hosts=%d" % hosts,
                        "--schedule=" + schedule, "--link_mbit=" + mbit, "--device_gflops=11.71875",
                        "--model_scale=128", "--batch=32", "--warmup=3", "--iterations=4", "--merge=auto"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
ns = []
while len(ns) < hosts and job.poll() is None:
    time.sleep(0.5)
    ns = sorted(l.split()[0] for l in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.splitlines()
                if "_h" in l.split()[0])
time.sleep(8)  # Past the start-up and the first iterations.
def tx(n):
    return int(subprocess.run(["ip", "netns", "exec", n, "cat", "/sys/class/net/eth0/statistics/tx_bytes"],
                              capture_output=True, text=True).stdout)
print("# s " + " ".join("host%d_tx_mbit" % h for h in range(hosts)))
t0, prev = time.time(), [tx(n) for n in ns]
while time.time() - t0 < 8 and job.poll() is None:
    time.sleep(0.1)
    cur = [tx(n) for n in ns]
    print("%.2f " % (time.time() - t0) + " ".join("%.1f" % ((c - p) * 8 / 0.1 / 1e6) for c, p in zip(cur, prev)))
    prev = cur
job.wait()
print("# " + [l for l in job.stdout.read().splitlines() if "iteration " in l][-1])
