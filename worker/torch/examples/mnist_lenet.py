#!/usr/bin/env python3
"""LeNet on the repository's MNIST (scripts/get_mnist.sh: data/mnist/*-idx?-ubyte, read here directly, no
torchvision) with its parameters on Nereus's servers. Each worker reads every P-th training digit (P workers).

One command, 2 servers x 2 workers on this machine (docs/TORCH.md):
    printf 'localhost slots=2 addr=127.0.0.1\\n' > /tmp/hosts
    scripts/launch.sh --hostfile=/tmp/hosts --ssh=none --num_servers=2 --num_workers=2 --port=7000 \\
        --worker_command="python3 worker/torch/examples/mnist_lenet.py"
or under torchrun (rank 0 starts the coordinator, local rank 0 the server):
    torchrun --nproc_per_node=2 worker/torch/examples/mnist_lenet.py

--update=server: the servers run Caffe's SGD with momentum and its "inv" rate policy (torch.optim.SGD's
settings, the policy given as solver=...), the weights come back layer by layer before each layer's forward. --update=local: DistributedDataParallel look-alike, the
servers average the gradients and torch.optim.SGD steps here. Worker 0 prints the test accuracy over the
whole test set every --test_every iterations and at the end ("final test accuracy 0.9785").
"""

import argparse
import os
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import nereus.torch as nt


class LeNet(nn.Module):
    """Caffe's LeNet (worker/trainer/models/lenet_train_test.prototxt): conv 20 5x5, max pool, conv 50 5x5,
    max pool, inner product 500, ReLU, inner product 10."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.ip1 = nn.Linear(50 * 4 * 4, 500)
        self.ip2 = nn.Linear(500, 10)
        # Caffe's fillers in that prototxt: "xavier" weights, uniform in +-sqrt(3 / fan_in); zero biases.
        for m in (self.conv1, self.conv2, self.ip1, self.ip2):
            fan_in = m.weight[0].numel()
            nn.init.uniform_(m.weight, -(3.0 / fan_in) ** 0.5, (3.0 / fan_in) ** 0.5)
            nn.init.zeros_(m.bias)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x), 2)
        x = F.max_pool2d(self.conv2(x), 2)
        return self.ip2(F.relu(self.ip1(x.flatten(1))))


def read_idx(path):
    """An IDX file (MNIST's format: big-endian magic, sizes, then unsigned bytes) as a uint8 tensor."""
    with open(path, "rb") as f:
        data = f.read()
    zero, kind, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or kind != 0x08:
        raise ValueError("%s: not an IDX file of unsigned bytes" % path)
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).view(*dims)


def load(data_dir, split):
    images = read_idx(os.path.join(data_dir, "%s-images-idx3-ubyte" % split))
    labels = read_idx(os.path.join(data_dir, "%s-labels-idx1-ubyte" % split))
    return images.unsqueeze(1).float() * 0.00390625, labels.long()  # Caffe's scale: 1/256.


def accuracy(model, images, labels):
    model.eval()
    correct = 0
    with torch.no_grad():
        for at in range(0, len(labels), 500):
            correct += (model(images[at:at + 500]).argmax(1) == labels[at:at + 500]).sum().item()
    model.train()
    return correct / len(labels)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data/mnist")
    ap.add_argument("--iterations", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=64, help="per worker")
    ap.add_argument("--lr", type=float, default=0.03, help="base rate of Caffe's inv policy, as "
                    "worker/trainer/models/lenet_solver_quick.prototxt: lr * (1 + 1e-4 * iteration)^-0.75")
    ap.add_argument("--update", choices=["server", "local"], default="server")
    ap.add_argument("--test_every", type=int, default=250)
    ap.add_argument("--threads", type=int, default=1, help="torch's threads per worker")
    ap.add_argument("--seed", type=int, default=1701)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    nt.init()
    rank, size = nt.rank(), nt.size()
    train_x, train_y = load(args.data, "train")
    test_x, test_y = load(args.data, "t10k")
    train_x, train_y = train_x[rank::size], train_y[rank::size]  # Every P-th digit, as the Caffe trainer reads.

    torch.manual_seed(args.seed)  # The same initial weights everywhere (worker 0's win anyway).
    model = LeNet()
    sgd = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    inv = {"lr_policy": "inv", "gamma": 1e-4, "power": 0.75}
    schedule = None
    if args.update == "server":
        # The servers run the rate policy (Caffe's, as the Caffe trainer's lenet_solver_quick does).
        opt = nt.DistributedOptimizer(sgd, named_parameters=model.named_parameters(), model=model, solver=inv)
        net = model
    else:
        net = nt.DistributedDataParallel(model)
        opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda it: (1 + inv["gamma"] * it) ** -inv["power"])

    order = torch.Generator().manual_seed(args.seed + rank)
    perm, at = torch.randperm(len(train_y), generator=order), 0
    start = time.monotonic()
    for it in range(args.iterations):
        if at + args.batch > len(perm):
            perm, at = torch.randperm(len(train_y), generator=order), 0
        idx = perm[at:at + args.batch]
        at += args.batch
        opt.zero_grad()
        loss = F.cross_entropy(net(train_x[idx]), train_y[idx])
        loss.backward()
        opt.step()
        if schedule is not None:
            schedule.step()
        if rank == 0 and (it + 1) % args.test_every == 0 and it + 1 < args.iterations:
            print("iteration %d: loss %.4f, test accuracy %.4f (%.1f s)" % (
                it + 1, loss.item(), accuracy(net, test_x, test_y), time.monotonic() - start), flush=True)
    if args.update == "server":
        opt.synchronize()
    if rank == 0:
        print("final test accuracy %.4f after %d iterations of %d x %d digits (%.1f s)" % (
            accuracy(net, test_x, test_y), args.iterations, size, args.batch, time.monotonic() - start), flush=True)
    nt.shutdown()


if __name__ == "__main__":
    main()
