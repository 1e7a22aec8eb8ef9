"""A Python worker started by a launcher (torch_launch_test): scripts/launch.sh --worker_command or torchrun.
Joins the job from the environment, trains SmallNet for 3 iterations through the DistributedDataParallel
look-alike and prints its rank, the job's size, the schedule its client took and a checksum of the weights."""

import hashlib
import os

import torch

import nereus.torch as nt
import torch_models as tm

torch.set_num_threads(1)
job = nt.init()
net = nt.DistributedDataParallel(tm.model("small"))
opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
lo, hi = nt.rank() * tm.BATCH, (nt.rank() + 1) * tm.BATCH
for it in range(3):
    x, y = tm.batch("small", it)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(net(x[lo:hi]), y[lo:hi]).backward()
    opt.step()
digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in net.parameters())).hexdigest()[:16]
print("rank %d of %d (%s, local rank %d, schedule %s): weights %s" % (
    nt.rank(), nt.size(), job.plan.source, nt.local_rank(), job.plan.options.get("schedule", "full"), digest),
    flush=True)
nt.shutdown()
