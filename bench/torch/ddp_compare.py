#!/usr/bin/python3
"""nereus.torch against torch.nn.parallel.DistributedDataParallel (gloo), 2 workers on 127.0.0.1, measured in
the same run by the same two worker processes. Per model and Nereus update mode, a round builds three copies
of the model (the same initial weights) and times, in interleaved blocks of a few iterations (the order of
the three rotating from block to block, so that a machine whose load changes by the second charges each
alike):

  alone   each worker training its own copy, no communication (both at once: the compute floor)
  ddp     DistributedDataParallel over gloo (allreduce of 25 MiB buckets during backward)
  nereus  local: nereus.torch.DistributedDataParallel (the servers average, torch.optim.SGD steps here), or
          server: nereus.torch.DistributedOptimizer (the servers run Caffe's SGD, weights come back per layer)

Each round is a Nereus job of its own: worker 0 starts its coordinator and --servers servers (nereus_server)
on 127.0.0.1 first. Each round prints its ms per iteration and ratios; the end, per model, the median ratio
to ddp and its spread (min..max) over the rounds.

    PYTHONPATH=worker/torch /usr/bin/python3 bench/torch/ddp_compare.py --rounds=3 2>/dev/null | tee out.txt

Needs the build's nereus_server and libnereus_c.so (NEREUS_BIN_DIR / NEREUS_LIBRARY, default build/).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "worker", "torch", "examples"))
sys.path.insert(0, os.path.join(ROOT, "worker", "torch"))

# Per model: (iterations per block, blocks per system, warm-up iterations per system).
ITERATIONS = {"mlp": (50, 8, 50), "vgg": (4, 8, 3), "resnet": (4, 8, 3)}
MODES = ["local", "server"]


def free_port():
    return int(subprocess.check_output([sys.executable, os.path.join(ROOT, "tests", "scripts", "free_port.py")],
                                       universal_newlines=True))


# --- One worker ----------------------------------------------------------------------------------------

def worker(rank, spec):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    import models
    import nereus.torch as nt
    from nereus import capi

    torch.set_num_threads(spec["threads"])
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % spec["gloo_port"], rank=rank, world_size=2)
    server_bin = capi.find_binary("nereus_server")
    batch = spec["batch"]

    def start_job(port):
        """Worker 0 starts the round's coordinator and servers; both workers join."""
        coordinator = "127.0.0.1:%d" % port
        started = []
        if rank == 0:
            common = ["--coordinator=" + coordinator, "--startup_timeout_s=120"]
            argvs = [[server_bin, "--role=coordinator", "--num_servers=%d" % spec["servers"], "--num_workers=2",
                      "--heartbeat_timeout_ms=30000"] + common]
            argvs += [[server_bin, "--role=server", "--rank=%d" % s] + common for s in range(spec["servers"])]
            log = open(os.devnull, "w")
            started = [subprocess.Popen(a, stdout=log, stderr=log) for a in argvs]
        nt.init(coordinator=coordinator, rank=rank, timeout_s=300)
        return started

    def fresh(name):
        torch.manual_seed(1)
        return models.build(name)

    def round_of(name, mode, port):
        per_block, blocks, warmup = ITERATIONS[name]
        per_block = max(1, int(per_block * spec["scale"]))
        started = start_job(port)
        systems = {}
        m = fresh(name)
        systems["alone"] = (m, torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9), lambda: None)
        ddp = torch.nn.parallel.DistributedDataParallel(fresh(name))
        systems["ddp"] = (ddp, torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9), lambda: None)
        if mode == "local":
            net = nt.DistributedDataParallel(fresh(name))
            systems["nereus"] = (net, torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9), lambda: None)
        else:
            m = fresh(name)
            opt = nt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9),
                                          named_parameters=m.named_parameters(), model=m)
            systems["nereus"] = (m, opt, opt.synchronize)
        gen = torch.Generator().manual_seed(100 + rank)
        data = [models.synthetic_batch(name, batch, gen) for _ in range(4)]

        def run(system, iterations):
            net, opt, settle = systems[system]
            for it in range(iterations):
                x, y = data[it % len(data)]
                opt.zero_grad()
                F.cross_entropy(net(x), y).backward()
                opt.step()
            settle()  # Server mode: the last update is in (waited for inside the block).

        for system in systems:
            run(system, warmup)
        elapsed = {k: 0.0 for k in systems}
        order = ["alone", "ddp", "nereus"]
        for b in range(blocks):
            for system in order[b % 3:] + order[:b % 3]:
                dist.barrier()
                start = time.monotonic()
                run(system, per_block)
                elapsed[system] += time.monotonic() - start
        nt.shutdown()
        for p in started:
            p.wait(timeout=60)
        dist.barrier()
        return {k: v / (per_block * blocks) for k, v in elapsed.items()}

    for r in range(spec["rounds"]):
        for name in spec["models"]:
            for mode in MODES:
                times = round_of(name, mode, spec["ports"].pop(0))
                if rank == 0:
                    print(json.dumps({"round": r, "model": name, "mode": mode,
                                      "ms": {k: round(v * 1e3, 3) for k, v in times.items()}}), flush=True)
    dist.destroy_process_group()


# --- The driver -------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--models", default="mlp,vgg,resnet")
    ap.add_argument("--batch", type=int, default=32, help="per worker")
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1, help="torch's intra-op threads per worker")
    ap.add_argument("--scale", type=float, default=1.0, help="times the iterations per block (smoke tests: 0.25)")
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--spec", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        with open(args.spec) as f:
            worker(args.worker, json.load(f))
        return
    models = args.models.split(",")
    spec = {"rounds": args.rounds, "models": models, "batch": args.batch, "servers": args.servers,
            "threads": args.threads, "scale": args.scale, "gloo_port": free_port(),
            "ports": [free_port() for _ in range(args.rounds * len(models) * len(MODES))]}
    spec_path = "/tmp/ddp_compare.%d.json" % os.getpid()
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    with open("/proc/loadavg") as f:
        load_before = f.read().split()[:3]
    print("ddp_compare: 2 workers on 127.0.0.1, batch %d per worker, %d server(s) for nereus, %d thread(s) per "
          "worker, %d rounds; torch %s; %d cores; load average before %s" % (
              args.batch, args.servers, args.threads, args.rounds, __import__("torch").__version__, os.cpu_count(),
              " ".join(load_before)), flush=True)
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker=%d" % r, "--spec=" + spec_path],
                              stdout=subprocess.PIPE if r == 0 else subprocess.DEVNULL, universal_newlines=True)
             for r in range(2)]
    rows = []
    for line in procs[0].stdout:
        print(line, end="", flush=True)
        if line.startswith("{"):
            rows.append(json.loads(line))
    codes = [p.wait() for p in procs]
    os.unlink(spec_path)
    with open("/proc/loadavg") as f:
        load_after = f.read().split()[:3]
    if codes != [0, 0]:
        sys.exit("ddp_compare: workers exited with %s" % codes)
    print("\nper model and mode: ms per iteration (median over %d rounds) and the ratio to ddp's iteration in the "
          "same round: median [min..max]; load average after %s" % (args.rounds, " ".join(load_after)))
    print("%-7s %-7s %9s %9s %9s   %-22s %-22s" % ("model", "mode", "alone", "ddp", "nereus", "alone/ddp",
                                                 "nereus/ddp"))
    for name in models:
        for mode in MODES:
            mine = [r for r in rows if r["model"] == name and r["mode"] == mode]
            med = {s: statistics.median(r["ms"][s] for r in mine) for s in ("alone", "ddp", "nereus")}
            cells = []
            for s in ("alone", "nereus"):
                ratios = [r["ms"][s] / r["ms"]["ddp"] for r in mine]
                cells.append("%.2f [%.2f..%.2f]" % (statistics.median(ratios), min(ratios), max(ratios)))
            print("%-7s %-7s %9.2f %9.2f %9.2f   %-22s %-22s" % (name, mode, med["alone"], med["ddp"], med["nereus"],
                                                              *cells))


if __name__ == "__main__":
    main()
