"""Nereus for PyTorch: data-parallel training with the parameters on Nereus's
servers, through the client's C interface (ctypes; nothing compiled against
PyTorch). docs/TORCH.md is the guide.

    import nereus.torch as nt
    nt.init()                                   # from the launcher's or torchrun's environment
    model = Net()
    opt = nt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
                                  named_parameters=model.named_parameters(), model=model)
    for x, y in batches:                        # this worker's share of the data
        opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
    nt.shutdown()

or, as with torch.nn.parallel.DistributedDataParallel (the servers average
the gradients; your optimizer steps):

    model = nt.DistributedDataParallel(Net())
    opt = torch.optim.Adam(model.parameters())
"""

import atexit
import os
import sys

import torch

from nereus import capi
from nereus.capi import NereusError
from nereus.torch import _job, _optim
from nereus.torch._optim import UnsupportedOptimizer
from nereus.torch._sync import ModelSync, broadcast_flat

__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size", "num_servers",
           "barrier", "broadcast_parameters", "DistributedOptimizer", "DistributedDataParallel", "NereusError",
           "UnsupportedOptimizer", "job"]


class Job:
    """This process's part of a Nereus job: its client, the processes it started (torchrun) and its models."""

    def __init__(self, lib, plan, client, processes, timeout_s):
        self.lib = lib
        self.plan = plan
        self.client = client
        self.processes = processes
        self.timeout_s = timeout_s
        self.syncs = []
        self.failed = None  # The uncaught exception, in words (_excepthook).


_job_state = {"job": None}


def job():
    """The Job init() made (raises if none)."""
    j = _job_state["job"]
    if j is None:
        raise RuntimeError("nereus.torch.init() has not been called")
    return j


def is_initialized():
    return _job_state["job"] is not None


def init(coordinator=None, rank=None, bind_host=None, timeout_s=300.0, num_servers=None, consistency="bsp",
         staleness=0, partition_bytes=None, server_flags=(), library=None, **client_options):
    """Joins the job; blocks until every worker and server has joined.

    Where the job is: coordinator="host:port" and rank=r; else the launcher's environment (NEREUS_COORDINATOR,
    ...; scripts/launch.sh --worker_command); else torchrun's (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), where
    rank 0 starts the coordinator and each host's local rank 0 its server (num_servers: the job's total, one per
    host by default; consistency, staleness, partition_bytes, server_flags: the coordinator's settings).
    timeout_s bounds every wait for weights (the error names the layer, tensor, clock and the peer awaited).
    client_options: the client's settings by their c_api.h names (schedule="full", sfb="auto", ...)."""
    if _job_state["job"] is not None:
        raise RuntimeError("nereus.torch.init() was called already")
    lib = capi.Library(library)
    plan = _job.plan_from(os.environ, coordinator=coordinator, rank=rank, bind_host=bind_host,
                          num_servers=num_servers, consistency=consistency, staleness=staleness,
                          partition_bytes=partition_bytes, server_flags=server_flags)
    options = dict(plan.options)
    options.update(client_options)
    options.setdefault("wait_timeout_ms", int(timeout_s * 1000))
    processes = _job.start_processes(plan)
    try:
        client = capi.Client(lib, options)
    except Exception:
        _job.stop_processes(processes, 0)
        raise
    _job_state["job"] = Job(lib, plan, client, processes, timeout_s)
    return _job_state["job"]


def shutdown():
    """Leaves the job cleanly: waits until every worker has called it, then for the processes init() started."""
    j = _job_state["job"]
    if j is None:
        return
    _job_state["job"] = None
    try:
        for s in j.syncs:
            s.synchronize()  # Server mode: the last update into the parameters.
        j.client.finish()
    finally:
        for s in j.syncs:
            s.close()
        j.client.close()
        failed = _job.stop_processes(j.processes, j.timeout_s)
    if failed:
        raise NereusError(capi.ABORTED, "the job's processes this worker started did not end cleanly: " +
                          ", ".join(failed))


def _abandon():
    """The process is ending without shutdown(): after an uncaught exception the client tells the job why and goes
    (the job ends at once, every node naming this worker and the exception); otherwise it finishes cleanly."""
    j = _job_state["job"]
    if j is None:
        return
    if j.failed:
        _job_state["job"] = None
        try:
            j.client.fail(j.failed)
        except Exception:  # The job may have ended already; the exception is what this process reports.
            pass
        for s in j.syncs:
            s.close()
        j.client.close()
        _job.stop_processes(j.processes, 0)
        return
    shutdown()


_previous_excepthook = sys.excepthook


def _excepthook(kind, value, tb):
    j = _job_state["job"]
    if j is not None:
        j.failed = "uncaught %s: %s" % (kind.__name__, value)
    _previous_excepthook(kind, value, tb)


sys.excepthook = _excepthook
atexit.register(_abandon)


def rank():
    return job().client.rank()


def size():
    return job().client.num_workers()


def num_servers():
    return job().client.num_servers()


def local_rank():
    return job().plan.local_rank


def local_size():
    return job().plan.local_size


def barrier(name="barrier"):
    job().client.barrier(name)


def broadcast_parameters(params, root_rank=0):
    """Gives every worker worker `root_rank`'s values of `params` (a state_dict, or (name, tensor) pairs, the
    same on every worker), through the coordinator in rounds of 64 Ki values: for buffers and small state.
    Parameters that DistributedOptimizer or DistributedDataParallel synchronize start from worker 0's values
    anyway."""
    items = sorted(params.items()) if isinstance(params, dict) else list(params)
    j = job()
    for name, t in items:
        if not isinstance(t, torch.Tensor) or t.numel() == 0:
            continue
        if not (t.is_floating_point() or t.dtype in (torch.int32, torch.int64)):
            raise TypeError("broadcast_parameters: %r is %s" % (name, t.dtype))
        host = t.detach().reshape(-1).to("cpu", torch.float32).contiguous()
        if t.dtype in (torch.int32, torch.int64) and host.abs().max().item() >= (1 << 24):
            raise ValueError("broadcast_parameters: %r holds integers beyond 2^24" % name)
        broadcast_flat(j.client, "nereus.torch.param." + name, host, root_rank)
        with torch.no_grad():
            t.copy_(host.view(t.shape).to(t.device, t.dtype))


class _DistributedOptimizer:
    """Mixed into a subclass of the wrapped optimizer's class (as Horovod does), so it is still an instance of
    it (lr schedulers, checkpoints)."""

    def _nereus_setup(self, sync, update, lrs):
        self._nereus_sync = sync
        self._nereus_update = update
        self._nereus_lrs = lrs

    def step(self, closure=None):
        loss = None
        if self._nereus_update == "local":
            return super(self.__class__, self).step(closure)
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for i, g in enumerate(self.param_groups):
            if float(g["lr"]) != self._nereus_lrs[i]:
                raise UnsupportedOptimizer(
                    "param group %d's learning rate changed from %r to %r (an lr scheduler?): the servers run "
                    "Caffe's solver with the rates given at the start; use update='local', or a Caffe lr_policy "
                    "(DistributedOptimizer(..., solver={'lr_policy': ...}))" % (i, self._nereus_lrs[i], g["lr"]))
        if self._nereus_sync.model is None:
            self._nereus_sync.synchronize()  # No forward hooks: the new weights are waited for here.
        return loss

    def synchronize(self):
        """Server mode: the newest weights into every parameter now (a forward does it layer by layer)."""
        self._nereus_sync.synchronize()


def DistributedOptimizer(optimizer, named_parameters=None, model=None, update="server", allow_inexact=False,
                         sfb=True, solver=None):
    """Wraps `optimizer` so that its parameters train on the Nereus servers.

    update="server": the servers run the optimizer as Caffe's solver (SGD with momentum, Nesterov, AdaGrad,
    RMSprop, AdaDelta; Adam with allow_inexact; anything else refused by name, docs/TORCH.md); step() applies
    nothing here; the weights come back layer by layer before each layer's forward (with `model`) or in step()
    (without). BSP, SSP or async, as the job is. solver: extra Caffe settings (lr_policy, gamma, stepsize, ...).
    update="local": the servers average the gradients (BSP), which are in .grad when backward() returns, and
    `optimizer` steps here as usual: any optimizer.
    named_parameters: the parameters with their names, the same on every worker (default: the optimizer's,
    named by position; with a model, the model's). model: the nn.Module they belong to, for per-layer forward
    hooks and the forward order of the layers (the first forward is traced). sfb: offer each nn.Linear's weight
    to HybComm as sufficient factors (server mode with SGD; the client option sfb decides)."""
    j = job()
    opt_params = [p for g in optimizer.param_groups for p in g["params"]]
    if named_parameters is None:
        if model is not None:
            named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        else:
            named = [("param%d" % i, p) for i, p in enumerate(opt_params)]
    else:
        named = list(named_parameters)
    by_id = {id(p): n for n, p in named}
    for gi, g in enumerate(optimizer.param_groups):
        for p in g["params"]:
            if id(p) not in by_id:
                raise ValueError("a parameter of shape %s in param group %d is not in named_parameters"
                                 % (list(p.shape), gi))
    order = {id(p): i for i, p in enumerate(opt_params)}
    named = [(n, p) for n, p in named if id(p) in order]
    if update == "server":
        settings, mults_list, lrs = _optim.caffe_solver(optimizer, allow_inexact=allow_inexact)
        settings.update({k: str(v) for k, v in (solver or {}).items()})
        mults = {id(p): mults_list[order[id(p)]] for p in opt_params}
    elif update == "local":
        settings, mults, lrs = {"type": "Average"}, {}, None
    else:
        raise ValueError("update must be 'server' or 'local', got %r" % (update,))
    sync = ModelSync(j, named, model, update, settings, mults, sfb=sfb)
    j.syncs.append(sync)
    cls = type(type(optimizer).__name__, (type(optimizer),),
               {k: v for k, v in _DistributedOptimizer.__dict__.items() if k not in ("__dict__", "__weakref__")})
    wrapped = cls.__new__(cls)
    wrapped.__dict__.update(optimizer.__dict__)
    wrapped._nereus_setup(sync, update, lrs)
    return wrapped


class DistributedDataParallel(torch.nn.Module):
    """Like torch.nn.parallel.DistributedDataParallel: wraps `module`; after backward() every parameter's .grad
    holds the average of every worker's gradients (the servers average them, in rank order, BSP), and your own
    optimizer steps. Differences: gradients leave per layer as soon as autograd produces them and in forward
    order of priority; parameters without a gradient count as zeros (no find_unused_parameters needed);
    buffers are taken from worker 0 once, at the first forward (broadcast_buffers), not at every one."""

    def __init__(self, module, device_ids=None, output_device=None, broadcast_buffers=True, **unused):
        super().__init__()
        self.module = module
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self._nereus_sync = ModelSync(job(), named, module, "local", {"type": "Average"},
                                      broadcast_buffers=broadcast_buffers, auto_trace=False)
        job().syncs.append(self._nereus_sync)

    def forward(self, *args, **kwargs):
        self._nereus_sync.ensure_ready(lambda: self.module(*args, **kwargs))
        return self.module(*args, **kwargs)
