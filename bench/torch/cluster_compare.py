#!/usr/bin/python3
"""nereus.torch against torch.nn.parallel.DistributedDataParallel (gloo) and single-process PyTorch on the emulated
cluster: N hosts (network namespaces on one bridge, every link shaped with tc; `nereus_bench cluster
--host_command`), one worker process per host, the same model, links and emulated compute for all three.

The model is one of nereus_bench's (`nereus_bench model`: VGG-19 or ResNet-50, their real per-layer tensors and
FLOPs), shrunk F = --model_scale times in bytes and FLOPs alike, on links and a device F times slower, so that it
times like the full model at full speed (bench/sim/models.h; docs/SCALING.md): a layer's forward sleeps FLOPs x
batch / device speed and its backward twice that (deadlines, so that sleeps that overshoot on a loaded machine do
not add up); every fully connected layer is a real nn.Linear whose input has the shrunk factor rows, so that
sufficient factors weigh what they weigh at full size; every other layer is a module holding its (shrunk) tensors,
whose gradients are constants. Per configuration, one job on every host times, in interleaved blocks whose order
rotates (so that a machine whose load changes charges each alike):

  alone   each worker training its own copy, no communication (the compute floor)
  ddp     DistributedDataParallel over gloo, buckets of 25 MiB / F (its default, shrunk as the model)
  nereus  nereus.torch.DistributedOptimizer: one server per host, Caffe's SGD on the servers, weights pulled per
          layer before each forward, nn.Linear weights offered to HybComm as sufficient factors (--sfb=auto)

and, per system, the bytes each host's link carried per iteration (the kernel's counters of its eth0) and how many
of the machine's cores were busy (all hosts share them: where that nears the core count, the emulated cluster ran
out of CPU, which a real cluster of as many hosts would not). Needs root
(network namespaces), the build's nereus_bench, nereus_server and libnereus_c.so (--bin_dir, default build/bin).

    sudo PYTHONPATH=worker/torch /usr/bin/python3 bench/torch/cluster_compare.py --json=out.json | tee out.txt
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
sys.path.insert(0, os.path.join(ROOT, "worker", "torch"))

SYSTEMS = ["alone", "ddp", "nereus"]
# Full-size device speeds, GFLOP/s: an H200 as PyTorch's VGG-19 measured there (bench/results/gpu: its 65.9 ms
# iteration is what 57,000 gives the model), and Poseidon's Titan X-class GPU (the poseidon study, SCALING.md).
COMPUTE = {"h200": 57000.0, "titanx": 1497.6}
GLOO_PORT = 29500  # nereus.torch's coordinator takes MASTER_PORT + 1.


# --- One host's worker ----------------------------------------------------------------------------------------

class Device:
    """The emulated device's clock: each piece of work ends at a deadline that runs on from the previous one's, so
    that a sleep's overshoot is absorbed by the next; the deadlines restart from now only after a gap longer than
    `gap_s` (the worker waited for something, as the device would have idled)."""

    def __init__(self, gap_s=0.002):
        self.deadline = None
        self.gap_s = gap_s

    def run(self, seconds):
        now = time.monotonic()
        if self.deadline is None or now - self.deadline > self.gap_s:
            self.deadline = now
        self.deadline += seconds
        delay = self.deadline - time.monotonic()
        if delay > 0:
            time.sleep(delay)


def build_model(spec, device):
    import torch

    class Backward(torch.autograd.Function):
        """Identity forward; its backward holds the device for the layer's backward, then passes the gradient on
        and gives each of the layer's tensors a constant gradient."""

        @staticmethod
        def forward(ctx, seconds, x, *params):
            ctx.seconds = seconds
            ctx.shapes = [p.shape for p in params]
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            device.run(ctx.seconds)
            return (None, grad) + tuple(torch.full(s, 1e-4) for s in ctx.shapes)

    class Emulated(torch.nn.Module):
        """A layer whose compute is emulated: its tensors, its forward and backward seconds."""

        def __init__(self, layer):
            super().__init__()
            self.forward_s, self.backward_s = layer["forward_s"], layer["backward_s"]
            self.tensors = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(s)) for s in layer["params"]])

        def forward(self, x):
            device.run(self.forward_s)
            return Backward.apply(self.backward_s, x, *self.tensors)

    class FullyConnected(torch.nn.Module):
        """A real nn.Linear (what HybComm can send as factors), timed as the full-size layer."""

        def __init__(self, layer):
            super().__init__()
            out_features, in_features = layer["params"][0]
            self.fc = torch.nn.Linear(in_features, out_features, bias=len(layer["params"]) > 1)
            self.forward_s, self.backward_s = layer["forward_s"], layer["backward_s"]

        def forward(self, x):
            device.run(self.forward_s)
            return Backward.apply(self.backward_s, self.fc(x))

    layers = [FullyConnected(l) if l["fully_connected"] else Emulated(l) for l in spec["layers"]]
    return torch.nn.Sequential(*layers)


def link_bytes():
    """Bytes this host's link has sent and received (the namespace's eth0)."""
    def read(name):
        with open("/sys/class/net/eth0/statistics/" + name) as f:
            return int(f.read())
    return read("tx_bytes") + read("rx_bytes")


def machine_busy_s():
    """CPU seconds this machine (every emulated host: namespaces share the kernel's counters) has been busy."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def worker(args):
    import torch
    import torch.distributed as dist

    import nereus.torch as nt

    host, hosts = int(os.environ["NEREUS_BENCH_HOST"]), int(os.environ["NEREUS_BENCH_HOSTS"])
    addresses = os.environ["NEREUS_BENCH_ADDRESSES"].split(",")
    os.environ.update({"RANK": str(host), "WORLD_SIZE": str(hosts), "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
                       "MASTER_ADDR": addresses[0], "MASTER_PORT": str(GLOO_PORT), "GLOO_SOCKET_IFNAME": "eth0"})
    torch.set_num_threads(1)
    with open(args.spec) as f:
        spec = json.load(f)
    scale = spec["model_scale"]
    dist.init_process_group("gloo", init_method="env://", rank=host, world_size=hosts)
    nt.init(timeout_s=600, num_servers=hosts, partition_bytes=max(64, int((1 << 20) / scale)),
            credit_bytes=max(64, int((2 << 20) / scale)), sfb=args.sfb, sfb_trial_clocks=args.sfb_trial_clocks)
    device = Device()
    first_fc = next(l for l in spec["layers"] if l["fully_connected"])
    rows, features = first_fc["factor_rows"], first_fc["params"][0][1]

    def fresh():
        torch.manual_seed(1)
        return build_model(spec, device)

    systems = {}
    m = fresh()
    systems["alone"] = (m, torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9), lambda: None)
    ddp = torch.nn.parallel.DistributedDataParallel(fresh(), bucket_cap_mb=25.0 / scale)
    systems["ddp"] = (ddp, torch.optim.SGD(ddp.parameters(), lr=0.01, momentum=0.9), lambda: None)
    m = fresh()
    opt = nt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9),
                                  named_parameters=m.named_parameters(), model=m)
    systems["nereus"] = (m, opt, opt.synchronize)
    x = torch.randn(rows, features, generator=torch.Generator().manual_seed(100 + host))

    def run(system, iterations):
        net, o, settle = systems[system]
        for _ in range(iterations):
            o.zero_grad()
            net(x).square().mean().backward()
            o.step()
        settle()  # Server mode: the last update is in (waited for inside the block).

    for system in SYSTEMS:
        run(system, args.warmup)
    elapsed = {s: [] for s in SYSTEMS}
    moved = {s: 0 for s in SYSTEMS}
    busy = {s: 0.0 for s in SYSTEMS}
    for b in range(args.blocks):
        for system in SYSTEMS[b % 3:] + SYSTEMS[:b % 3]:
            dist.barrier()
            before, busy_before, start = link_bytes(), machine_busy_s(), time.monotonic()
            run(system, args.iterations)
            elapsed[system].append((time.monotonic() - start) / args.iterations)
            moved[system] += link_bytes() - before
            busy[system] += machine_busy_s() - busy_before
    dist.barrier()
    mine = {"host": host, "ms": {s: [round(t * 1e3, 3) for t in elapsed[s]] for s in SYSTEMS},
            "link_bytes": {s: moved[s] / (args.blocks * args.iterations) for s in SYSTEMS},
            "machine_busy_s": {s: busy[s] / (args.blocks * args.iterations) for s in SYSTEMS}}
    everyone = [None] * hosts
    dist.all_gather_object(everyone, mine)
    nt.shutdown()
    dist.destroy_process_group()
    if host == 0:
        print("RESULT " + json.dumps(everyone), flush=True)


# --- The driver ---------------------------------------------------------------------------------------------------

def run_configuration(args, model, hosts, gbit, compute):
    scale = args.model_scale
    spec_path = "/tmp/cluster_compare.%d.json" % os.getpid()
    subprocess.run([os.path.join(args.bin_dir, "nereus_bench"), "model", "--model=" + model, "--model_scale=%g" % scale,
                    "--batch=%d" % args.batch, "--device_gflops=%.17g" % (COMPUTE[compute] / scale),
                    "--json=" + spec_path], check=True, stdout=subprocess.DEVNULL)
    with open(spec_path) as f:
        layers = json.load(f)
    spec = {"model_scale": scale, "layers": layers}
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    command = " ".join([
        "NEREUS_BIN_DIR=" + args.bin_dir,
        "NEREUS_LIBRARY=" + os.path.join(os.path.dirname(args.bin_dir), "lib", "libnereus_c.so"), "PYTHONPATH=" + os.path.join(ROOT, "worker", "torch"), sys.executable,
        os.path.abspath(__file__), "--worker", "--spec=" + spec_path, "--sfb=" + args.sfb,
        "--sfb_trial_clocks=%d" % args.sfb_trial_clocks,
        "--warmup=%d" % args.warmup, "--blocks=%d" % args.blocks, "--iterations=%d" % args.iterations])
    link_mbit = gbit * 1000.0 / scale
    out = subprocess.run([os.path.join(args.bin_dir, "nereus_bench"), "cluster", "--hosts=%d" % hosts,
                          "--link_mbit=%.17g" % link_mbit, "--timeout_s=%d" % args.timeout_s,
                          "--host_command=" + command], stdout=subprocess.PIPE, universal_newlines=True)
    os.unlink(spec_path)
    if out.returncode == 77:
        print("cluster_compare: nereus_bench cluster cannot make network namespaces here", file=sys.stderr)
        sys.exit(77)  # ctest: skipped
    if out.returncode != 0:
        sys.exit("cluster_compare: %s %d hosts %g Gbit/s %s failed (status %d)" % (model, hosts, gbit, compute,
                                                                                 out.returncode))
    result = next(json.loads(l[len("RESULT "):]) for l in out.stdout.splitlines() if l.startswith("RESULT "))
    compute_s = sum(l["forward_s"] + l["backward_s"] for l in spec["layers"])
    # Per system: the median over blocks of the slowest host's block (a BSP job goes at its slowest worker's pace).
    ms = {s: [max(h["ms"][s][b] for h in result) for b in range(args.blocks)] for s in SYSTEMS}
    return {"model": model, "hosts": hosts, "link_gbit": gbit, "link_mbit": link_mbit, "compute": compute,
            "device_gflops": COMPUTE[compute], "model_scale": scale, "batch": args.batch, "sfb": args.sfb,
            "compute_ms": round(compute_s * 1e3, 3), "block_ms": ms,
            "median_ms": {s: statistics.median(ms[s]) for s in SYSTEMS},
            "link_bytes_per_iteration_full_size": {s: statistics.mean(h["link_bytes"][s] for h in result) * scale
                                                   for s in SYSTEMS},
            # The whole machine's CPU seconds per iteration, all hosts together (host 0's reading): against
            # os.cpu_count() x the iteration, how near the emulated cluster came to running out of cores.
            "machine_busy_s_per_iteration": result[0]["machine_busy_s"], "cores": os.cpu_count()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="vgg19,resnet50")
    ap.add_argument("--hosts", default="8,4")
    ap.add_argument("--links_gbit", default="10,1", help="link rates at full size, Gbit/s each way")
    ap.add_argument("--computes", default="h200,titanx", help="emulated device: " + ", ".join(COMPUTE))
    ap.add_argument("--model_scale", type=float, default=256.0,
                    help="F: bytes, FLOPs, link and device all F times smaller (F <= batch^2 keeps HybComm's "
                         "choices, bench/sim/models.h)")
    ap.add_argument("--batch", type=int, default=32, help="per worker")
    ap.add_argument("--sfb", default="auto", help="nereus's --sfb: auto, on or off")
    ap.add_argument("--sfb_trial_clocks", type=int, default=0,
                    help="nereus's measured choice (the client's sfb_trial_clocks). 0 (default): the start-up cost "
                         "model chooses each layer's path, and the timed iterations are its steady state. With trials "
                         "(the client's default, 3), VGG-19's three layers take about 24 clocks to try both paths, "
                         "more than this benchmark times, and the client times a clock from the previous one's "
                         "start, so the other systems' blocks would fall into the trials' windows")
    ap.add_argument("--warmup", type=int, default=2, help="iterations per system before timing")
    ap.add_argument("--blocks", type=int, default=3, help="timed blocks per system")
    ap.add_argument("--iterations", type=int, default=2, help="iterations per block")
    ap.add_argument("--rounds", type=int, default=1, help="jobs per configuration")
    ap.add_argument("--timeout_s", type=int, default=1200, help="per job")
    ap.add_argument("--bin_dir", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--json", default="", help="write every configuration's result here")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--spec", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args)
        return
    if os.geteuid() != 0:
        print("cluster_compare: needs root (network namespaces, tc), like nereus_bench cluster", file=sys.stderr)
        sys.exit(77)  # ctest: skipped
    for c in args.computes.split(","):
        if c not in COMPUTE:
            sys.exit("cluster_compare: --computes: unknown device %r (known: %s)" % (c, ", ".join(COMPUTE)))
    try:
        import torch
    except ImportError:
        print("cluster_compare: no torch for %s" % sys.executable, file=sys.stderr)
        sys.exit(77)  # ctest: skipped
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print("cluster_compare: torch %s, %d cores, load average %s; model scale %g, batch %d per worker, nereus "
          "--sfb=%s; %d blocks x %d iterations per system after %d warm-up" % (
              torch.__version__, os.cpu_count(), load, args.model_scale, args.batch, args.sfb, args.blocks,
              args.iterations, args.warmup), flush=True)
    print("%-9s %5s %5s %-7s %9s %9s %9s %9s %11s %11s   %-18s %s" % (
        "model", "hosts", "Gbit", "device", "compute", "alone", "ddp", "nereus", "nereus/ddp", "ddp/nereus",
        "link MB/it/host", "cores busy (alone ddp nereus)"))
    rows = []
    for r in range(args.rounds):
        for model in args.models.split(","):
            for compute in args.computes.split(","):
                for gbit in [float(g) for g in args.links_gbit.split(",")]:
                    for hosts in [int(h) for h in args.hosts.split(",")]:
                        row = run_configuration(args, model, hosts, gbit, compute)
                        row["round"] = r
                        rows.append(row)
                        m = row["median_ms"]
                        print("%-9s %5d %5g %-7s %9.1f %9.1f %9.1f %9.1f %11.2f %11.2f   %-18s %s" % (
                            model, hosts, gbit, compute, row["compute_ms"], m["alone"], m["ddp"], m["nereus"],
                            m["nereus"] / m["ddp"], m["ddp"] / m["nereus"],
                            " ".join("%.0f" % (row["link_bytes_per_iteration_full_size"][s] / 1e6)
                                     for s in SYSTEMS),
                            " ".join("%.2f" % (row["machine_busy_s_per_iteration"][s] / (m[s] / 1e3))
                                     for s in SYSTEMS)), flush=True)
                        if args.json:
                            with open(args.json, "w") as f:
                                json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
