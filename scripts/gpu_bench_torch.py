#!/usr/bin/env python3
"""The PyTorch baseline of `nereus_bench train`: the same five models, the same
batch, synthetic data and SGD (momentum 0.9), fp32 with TF32 off, timed the
same way (warm-up iterations untimed, then forward+backward+step; then forward
and backward apart, each waited for), on the same GPU in the same run
(scripts/gpu_check.sh runs both).

  gpu_bench_torch.py --models=lenet,cifar10_full,caffenet,vgg19,resnet50 \\
      [--batch=32] [--warmup=5] [--iterations=20] [--device=cuda:0] [--tf32] [--json=FILE]

The models follow the prototxts of worker/trainer/models/: LeNet and CIFAR-10
full as Caffe's examples (Caffe's within-channel LRN as x / (1 + alpha *
avgpool(x^2))^beta), CaffeNet (grouped convolutions, LRN), VGG-19 and
ResNet-50 from torchvision (ResNet-50 v1.5: the stride in the 3x3, not the
first 1x1 as Caffe's v1: the same parameters, about 5% more FLOPs). cuDNN
picks its fastest algorithms (cudnn.benchmark), as a PyTorch user would.
--tf32 lets matmuls and cuDNN use TF32 (allow_tf32), for the TF32 comparison
(nereus_bench train --tf32). Prints one line per model and writes JSON rows
with the fields of nereus_bench train's (model, framework, device, batch,
params, iteration_ms, images_per_s, forward_ms, backward_ms), and
peak_memory_reserved_bytes (torch.cuda.max_memory_reserved over the model's
run: what the caching allocator held, comparable to Nereus's peak device
bytes), cudnn (the cuDNN version PyTorch loaded), tf32, and layers: each leaf
module's average forward time (CUDA events around it, from forward hooks, in
a pass of its own; backward per module is not timed: PyTorch has no hook
before a module's backward in every version).
"""
import argparse
import json
import sys
import time


def build(name, torch, nn):
    F = nn.functional

    class WithinChannelLRN(nn.Module):
        def __init__(self, size, alpha, beta):
            super().__init__()
            self.size, self.alpha, self.beta = size, alpha, beta

        def forward(self, x):
            avg = F.avg_pool2d(x * x, self.size, stride=1, padding=(self.size - 1) // 2, count_include_pad=True)
            return x / (1 + self.alpha * avg).pow(self.beta)

    if name == "lenet":
        return nn.Sequential(nn.Conv2d(1, 20, 5), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5), nn.MaxPool2d(2, 2),
                             nn.Flatten(), nn.Linear(800, 500), nn.ReLU(inplace=True), nn.Linear(500, 10)), (1, 28, 28)
    if name == "cifar10_full":
        # Caffe pools with ceil: 32 -> 16 -> 8 -> 4.
        return nn.Sequential(
            nn.Conv2d(3, 32, 5, padding=2), nn.MaxPool2d(3, 2, ceil_mode=True), nn.ReLU(inplace=True),
            WithinChannelLRN(3, 5e-5, 0.75),
            nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(inplace=True), nn.AvgPool2d(3, 2, ceil_mode=True),
            WithinChannelLRN(3, 5e-5, 0.75),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(inplace=True), nn.AvgPool2d(3, 2, ceil_mode=True),
            nn.Flatten(), nn.Linear(64 * 4 * 4, 10)), (3, 32, 32)
    if name == "caffenet":
        lrn = lambda: nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0)
        return nn.Sequential(
            nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2), lrn(),
            nn.Conv2d(96, 256, 5, padding=2, groups=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2), lrn(),
            nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 384, 3, padding=1, groups=2), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1, groups=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2),
            nn.Flatten(), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5), nn.Linear(4096, 1000)), (3, 227, 227)
    import torchvision
    if name == "vgg19":
        return torchvision.models.vgg19(), (3, 224, 224)
    if name == "resnet50":
        return torchvision.models.resnet50(), (3, 224, 224)
    raise SystemExit("gpu_bench_torch.py: unknown model " + name)


def time_modules(model, forward, torch, device, iterations):
    """Each leaf module's forward time per forward pass, averaged over
    `iterations` (a module called several times in a pass, as ResNet's ReLUs
    are, counts all its calls): a CUDA event recorded before and after each
    call (forward pre-hook and hook)."""
    events = {}
    handles = []
    for name, m in model.named_modules():
        if list(m.children()):
            continue
        def pre(mod, inputs, name=name):
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            events.setdefault(name, []).append([e, None])
        def post(mod, inputs, output, name=name):
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            events[name][-1][1] = e
        handles += [m.register_forward_pre_hook(pre), m.register_forward_hook(post)]
    with torch.no_grad():
        for _ in range(iterations):
            forward()
    torch.cuda.synchronize(device)
    for h in handles:
        h.remove()
    return [{"name": name, "type": type(dict(model.named_modules())[name]).__name__,
             "forward_ms": sum(a.elapsed_time(b) for a, b in pairs) / iterations}
            for name, pairs in events.items()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="lenet,cifar10_full,caffenet,vgg19,resnet50")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--tf32", action="store_true")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    import torch
    import torch.nn as nn
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_bench_torch.py: no CUDA device for PyTorch", file=sys.stderr)
        return 77
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cudnn.benchmark = True
    device = torch.device(args.device)
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    rows = []
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    for name in args.models.split(","):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        model, shape = build(name, torch, nn)
        model = model.to(device).train()
        params = sum(p.numel() for p in model.parameters())
        opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, weight_decay=0.0005)
        loss_fn = nn.CrossEntropyLoss()
        x = torch.randn((args.batch,) + shape, device=device)
        y = (torch.arange(args.batch, device=device) % 10).long()

        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            return loss

        for _ in range(args.warmup):
            step()
        sync()
        t0 = time.perf_counter()
        for _ in range(args.iterations):
            loss = step()
        loss.item()  # As Nereus reads its loss every iteration (not timed apart).
        sync()
        step_s = time.perf_counter() - t0
        forward_s = backward_s = 0.0
        for _ in range(args.iterations):
            opt.zero_grad(set_to_none=True)
            t = time.perf_counter()
            loss = loss_fn(model(x), y)
            sync()
            forward_s += time.perf_counter() - t
            t = time.perf_counter()
            loss.backward()
            sync()
            backward_s += time.perf_counter() - t
        n = args.iterations
        layers = time_modules(model, lambda: loss_fn(model(x), y), torch, device, n) if device.type == "cuda" else []
        row = {"model": name, "framework": "pytorch " + torch.__version__, "device": where, "batch": args.batch,
               "params": params, "warmup": args.warmup, "iterations": n, "iteration_ms": 1e3 * step_s / n,
               "images_per_s": n * args.batch / step_s, "forward_ms": 1e3 * forward_s / n,
               "backward_ms": 1e3 * backward_s / n, "tf32": args.tf32, "cudnn": cudnn,
               "peak_memory_reserved_bytes": torch.cuda.max_memory_reserved(device) if device.type == "cuda" else 0,
               "layers": layers}
        rows.append(row)
        print("%-13s batch %3d  %9.2f ms/iteration  %9.1f images/s  (forward %.2f ms, backward %.2f ms; %s, "
              "PyTorch %s fp32, TF32 %s, cuDNN %s, peak reserved %.2f GiB)" % (
                  name, args.batch, row["iteration_ms"], row["images_per_s"], row["forward_ms"], row["backward_ms"],
                  where, torch.__version__, "on" if args.tf32 else "off", cudnn,
                  row["peak_memory_reserved_bytes"] / 2.0 ** 30))
        sys.stdout.flush()
        del model, opt, x, y
        if device.type == "cuda":
            torch.cuda.empty_cache()
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
