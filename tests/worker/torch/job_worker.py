"""One worker process of the nereus.torch tests: runs a list of scenarios, each one a job of its own (its
coordinator and servers started by the test), one after the other, so that torch is imported once per worker.

    job_worker.py RANK SPEC.json OUT_DIR

Each scenario writes OUT_DIR/NAME.RANK.pt: {"state": the model's state_dict at the end, "trace": the order of
waits and hand-overs, "factors": per SFB layer whether left^T right equalled weight.grad, "error": the text of
an exception, if one ended it}.
"""

import json
import os
import signal
import sys

import torch

import nereus.torch as nt
import torch_models as tm


def run(rank, sc):
    nt.init(coordinator=sc["coordinator"], rank=rank, timeout_s=sc.get("timeout_s", 60),
            sfb=sc.get("sfb", "off"), schedule=sc.get("schedule", "full"), **sc.get("client", {}))
    result = {"trace": [], "factors": [], "error": None, "state": None}
    net = tm.model(sc["model"])
    if sc.get("mismatch") and rank == 1:
        net.fc = torch.nn.Linear(4 * 6 * 6, 17)
        net.head = torch.nn.Linear(17, 10)
    if sc.get("frozen"):
        net.conv.bias.requires_grad_(False)
    if sc.get("broadcast"):
        if rank == 1:
            with torch.no_grad():
                for p in net.parameters():
                    p.add_(1.0)
        net.register_buffer("steps", torch.tensor([float(rank + 5)]))
        nt.broadcast_parameters(net.state_dict(), root_rank=0)
        result["broadcast"] = {k: v.detach().clone() for k, v in net.state_dict().items()}
    if sc["update"] == "local":
        ddp = nt.DistributedDataParallel(net)
        opt = tm.optimizer(sc["opt"], ddp.parameters())
        forward = ddp
        sync = ddp._nereus_sync
    else:
        opt = nt.DistributedOptimizer(tm.optimizer(sc["opt"], net.parameters()), named_parameters=net.named_parameters(),
                                      model=net, allow_inexact=sc.get("allow_inexact", False))
        forward = net
        sync = opt._nereus_sync
    sync.record_trace = True
    lo, hi = rank * tm.BATCH, (rank + 1) * tm.BATCH
    for it in range(sc["iterations"]):
        if sc.get("kill_at") == it and rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        if sc.get("change_at") == it:
            net.fc.weight.data = net.fc.weight.data.clone()  # A new tensor behind the registered parameter.
        x, y = tm.batch(sc["model"], it)
        x, y = x[lo:hi], y[lo:hi]
        opt.zero_grad()
        if sc["model"] == "small_extra":
            out = forward(x, aux_rows=tm.BATCH if (sc.get("aux") and rank == 0) else 0)
        else:
            out = forward(x)
        torch.nn.functional.cross_entropy(out, y).backward()
        if sc.get("check_factors"):
            for layer in sync.layers:
                if layer.sfb is not None:
                    product = layer.sfb.left.t() @ layer.sfb.right
                    result["factors"].append((layer.name, bool(torch.equal(product, layer.module.weight.grad)),
                                              float((product - layer.module.weight.grad).abs().max())))
        opt.step()
    if sc["update"] == "server":
        opt.synchronize()
    result["trace"] = list(sync.trace)
    result["sfb_layers"] = sorted(layer.name for layer in sync.layers if layer.sfb is not None and
                                  layer.ids[[p for _, p in layer.params].index(layer.module.weight)]
                                  in sync._sfb_ids)
    names = {i: layer.name for layer in sync.layers for i in layer.ids}
    result["sfb_last"] = sorted(names[i] for i in sync.client.sfb_tensors())
    result["factor_messages"] = sync.client.stat("factor_messages")
    result["state"] = {k: v.detach().clone() for k, v in net.state_dict().items()}
    nt.shutdown()
    return result


def main():
    rank, spec, out_dir = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    torch.set_num_threads(1)
    with open(spec) as f:
        scenarios = json.load(f)
    for sc in scenarios:
        try:
            result = run(rank, sc)
        except Exception as e:  # The test reads the text; the job is left as a failed worker leaves it.
            result = {"error": "%s: %s" % (type(e).__name__, e), "trace": [], "factors": [], "state": None}
            j = nt._job_state["job"]
            if j is not None:
                j.failed = result["error"]
                nt._abandon()
        torch.save(result, os.path.join(out_dir, "%s.%d.pt" % (sc["name"], rank)))
        print("worker %d: scenario %s: %s" % (rank, sc["name"], result["error"] or "ok"), flush=True)


if __name__ == "__main__":
    main()
