"""Which PyTorch optimizers the servers can run, as Caffe's solvers
(common/update/sgd.h has the rules; docs/TORCH.md, "What maps to what",
works each one out).

With g' = g + weight_decay * w (both add L2 decay to the gradient first):
  SGD(momentum m, dampening 0)   torch: b = m b + g'; w -= lr b
                                 Caffe: h = lr g' + m h; w -= h
      h = lr b at every step while lr is constant, so the two agree exactly
      in real arithmetic (not bit for bit: the roundings differ); after lr
      changes Caffe's history still carries the old rate and they part.
  SGD(nesterov=True)             torch: w -= lr (g' + m b)
                                 Caffe Nesterov: w -= (1 + m) h' - m h = lr (g' + m b)
  Adagrad(lr_decay 0, initial_accumulator_value 0)   both w -= lr g' / (sqrt(sum g'^2) + eps)
  RMSprop(momentum 0, centered False)   both v = alpha v + (1 - alpha) g'^2; w -= lr g' / (sqrt(v) + eps)
  Adadelta                       both: sqrt(acc + eps) / sqrt(v + eps) = sqrt((acc + eps) / (v + eps))
  Adam(amsgrad False)            NOT exact: torch divides by sqrt(v) / sqrt(1 - b2^t) + eps, Caffe by
                                 (sqrt(v) + eps) / sqrt(1 - b2^t): Caffe's eps is torch's eps / sqrt(1 - b2^t),
                                 which changes with t. Refused unless allow_inexact=True (then Caffe's Adam runs).
Every other optimizer (AdamW's decoupled decay, Adamax, NAdam, RAdam, ASGD,
Rprop, LBFGS, SparseAdam, ...) and every other setting (dampening,
maximize, amsgrad, centered, RMSprop's momentum, Adagrad's lr_decay) is
refused by name; the local mode (the servers only average, your optimizer
steps) runs any of them.
"""

import torch

# Settings every mapped optimizer must leave at these values.
_FIXED = {
    "maximize": False,
    "differentiable": False,
}


class UnsupportedOptimizer(ValueError):
    pass


def _check(group, index, cls, name, want, why):
    have = group.get(name, want)
    if have != want:
        raise UnsupportedOptimizer("%s param group %d: %s=%r cannot run on the servers (%s); use update='local' "
                                   "to step it here, or set %s=%r" % (cls, index, name, have, why, name, want))


def caffe_solver(optimizer, allow_inexact=False):
    """(solver settings for nereus_solver_set, [(lr_mult, decay_mult)] per parameter in param-group order, and
    the groups' learning rates as mapped), or raise UnsupportedOptimizer naming what cannot be mapped."""
    cls = type(optimizer).__name__
    groups = optimizer.param_groups
    if not groups:
        raise UnsupportedOptimizer("%s has no param groups" % cls)
    kind = None
    for i, g in enumerate(groups):
        for name, want in _FIXED.items():
            _check(g, i, cls, name, want, "the servers minimize")
        if isinstance(optimizer, torch.optim.SGD):
            _check(g, i, cls, "dampening", 0, "Caffe's momentum has no dampening")
            k = "Nesterov" if g.get("nesterov", False) else "SGD"
        elif isinstance(optimizer, torch.optim.Adagrad):
            _check(g, i, cls, "lr_decay", 0, "Caffe's AdaGrad has a fixed rate")
            _check(g, i, cls, "initial_accumulator_value", 0, "Caffe's AdaGrad history starts at 0")
            k = "AdaGrad"
        elif isinstance(optimizer, torch.optim.RMSprop):
            _check(g, i, cls, "momentum", 0, "Caffe's RMSProp has no momentum")
            _check(g, i, cls, "centered", False, "Caffe's RMSProp is not centered")
            k = "RMSProp"
        elif isinstance(optimizer, torch.optim.Adadelta):
            k = "AdaDelta"
        elif type(optimizer) is torch.optim.Adam:
            _check(g, i, cls, "amsgrad", False, "Caffe's Adam has no AMSGrad")
            if not allow_inexact:
                raise UnsupportedOptimizer(
                    "Adam does not map exactly onto Caffe's Adam: Caffe adds eps before the bias correction (its eps "
                    "is torch's eps / sqrt(1 - beta2^t)); pass allow_inexact=True to run Caffe's Adam on the "
                    "servers, or use update='local'")
            k = "Adam"
        else:
            raise UnsupportedOptimizer(
                "%s cannot run on the servers: they run Caffe's SGD, Nesterov, AdaGrad, RMSProp, AdaDelta and Adam "
                "(torch.optim.SGD, Adagrad, RMSprop, Adadelta, Adam); use update='local' to step %s here" % (cls, cls))
        if kind is not None and k != kind:
            raise UnsupportedOptimizer("%s param groups %d and 0 ask for different solvers (%s, %s)" % (cls, i, k, kind))
        kind = k
    base = groups[0]
    base_lr = float(base["lr"])
    base_decay = max(float(g.get("weight_decay", 0)) for g in groups)
    solver = {"type": kind, "base_lr": repr(base_lr), "lr_policy": "fixed", "weight_decay": repr(base_decay),
              "regularization_type": "L2"}
    if kind in ("SGD", "Nesterov"):
        moms = {float(g.get("momentum", 0)) for g in groups}
        if len(moms) > 1:
            raise UnsupportedOptimizer("%s param groups have different momenta %s: the servers take one" % (cls, moms))
        solver["momentum"] = repr(moms.pop())
    elif kind == "AdaGrad":
        solver["delta"] = repr(float(base["eps"]))
    elif kind == "RMSProp":
        solver["delta"] = repr(float(base["eps"]))
        solver["rms_decay"] = repr(float(base["alpha"]))
    elif kind == "AdaDelta":
        solver["delta"] = repr(float(base["eps"]))
        solver["momentum"] = repr(float(base["rho"]))
    elif kind == "Adam":
        b1, b2 = base["betas"]
        solver["delta"] = repr(float(base["eps"]))
        solver["momentum"] = repr(float(b1))
        solver["momentum2"] = repr(float(b2))
    for i, g in enumerate(groups[1:], 1):
        for name in ("eps", "alpha", "rho", "betas"):
            if name in base and g.get(name) != base[name]:
                raise UnsupportedOptimizer("%s param group %d has %s=%r, group 0 %r: the servers take one"
                                           % (cls, i, name, g.get(name), base[name]))
    mults = []
    for g in groups:
        lr_mult = float(g["lr"]) / base_lr if base_lr != 0 else 0.0
        decay_mult = float(g.get("weight_decay", 0)) / base_decay if base_decay != 0 else 0.0
        mults.extend([(lr_mult, decay_mult)] * len(g["params"]))
    return solver, mults, [float(g["lr"]) for g in groups]
