#!/usr/bin/env python3
"""A ResNet-style model (ResNet-20's shape, BatchNorm included) trained on synthetic CIFAR-sized data with
its parameters on Nereus's servers: what a job costs per iteration, on the CPU or a GPU.

    printf 'localhost slots=2 addr=127.0.0.1\\n' > /tmp/hosts
    scripts/launch.sh --hostfile=/tmp/hosts --ssh=none --num_servers=2 --num_workers=2 --port=7000 \\
        --worker_command="python3 worker/torch/examples/resnet_synthetic.py --iterations=50"
    torchrun --nproc_per_node=2 worker/torch/examples/resnet_synthetic.py          # or under torchrun

--update=local (default): the DistributedDataParallel look-alike, torch.optim.SGD steps on the averaged
gradients (BatchNorm's statistics stay each worker's after worker 0's initial ones). --update=server: the
servers run Caffe's SGD with momentum. --device=cuda: the model on this worker's GPU (local rank), its
gradients and weights through pinned host buffers. Worker 0 prints the loss and the time per iteration.
"""

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

import nereus.torch as nt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=32, help="per worker")
    ap.add_argument("--update", choices=["server", "local"], default="local")
    ap.add_argument("--device", default="cpu", help="cpu, or cuda (this worker's local rank picks the GPU)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    nt.init()
    device = torch.device("cpu")
    if args.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("resnet_synthetic.py: --device=cuda, but torch sees no GPU")
        device = torch.device("cuda", nt.local_rank() % torch.cuda.device_count())
        torch.cuda.set_device(device)
    torch.manual_seed(1)
    model = models.ResNetSmall().to(device)
    sgd = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    if args.update == "server":
        opt = nt.DistributedOptimizer(sgd, named_parameters=model.named_parameters(), model=model)
        net = model
    else:
        net = nt.DistributedDataParallel(model)
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    gen = torch.Generator().manual_seed(100 + nt.rank())
    start = None
    for it in range(args.warmup + args.iterations):
        if it == args.warmup:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.monotonic()
        x, y = models.synthetic_batch("resnet", args.batch, gen)
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        opt.zero_grad()
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
    if args.update == "server":
        opt.synchronize()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    per = (time.monotonic() - start) / args.iterations
    if nt.rank() == 0:
        print("resnet (%d workers x %d on %s, update=%s): loss %.4f, %.1f ms per iteration, %.0f images/s" % (
            nt.size(), args.batch, device, args.update, loss.item(), per * 1e3, nt.size() * args.batch / per),
            flush=True)
    nt.shutdown()


if __name__ == "__main__":
    main()
