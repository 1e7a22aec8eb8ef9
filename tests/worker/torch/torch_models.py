"""The models, data and single-process references the nereus.torch tests share (tests/worker/torch/)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 8  # Per worker; the single-process reference takes 2 * BATCH.


class SmallNet(nn.Module):
    """A convolution and fully connected layers, defined out of forward order (head first). With extra: `aux`,
    applied to the first `aux_rows` rows only (so a worker without such rows gives it no gradient), and
    `never`, used by nobody."""

    def __init__(self, extra=False):
        super().__init__()
        self.head = nn.Linear(16, 10)
        self.conv = nn.Conv2d(1, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 16)
        if extra:
            self.aux = nn.Linear(16, 16)
            self.never = nn.Linear(3, 3)

    def forward(self, x, aux_rows=0):
        h = F.relu(self.conv(x)).flatten(1)
        h = F.relu(self.fc(h))
        if aux_rows:
            h = torch.cat([h[:aux_rows] + self.aux(h[:aux_rows]), h[aux_rows:]])
        return self.head(h)


class SeqNet(nn.Module):
    """Sequences: nn.Linear on 3-D inputs (batch x time x features), whose sufficient factors are the rows of
    every time step."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(6, 12)
        self.mix = nn.Linear(12, 12)
        self.out = nn.Linear(12, 10)

    def forward(self, x):
        h = torch.tanh(self.embed(x))        # B x T x 12
        h = torch.tanh(self.mix(h)).mean(1)  # B x 12
        return self.out(h)


def model(name, seed=7):
    torch.manual_seed(seed)
    if name == "small":
        return SmallNet()
    if name == "small_extra":
        return SmallNet(extra=True)
    if name == "seq":
        return SeqNet()
    raise ValueError(name)


def batch(name, iteration, rows=2 * BATCH, dtype=torch.float32):
    """Iteration `iteration`'s whole batch (both workers' rows): worker r takes rows [r * BATCH, (r+1) * BATCH)."""
    g = torch.Generator().manual_seed(1000 + iteration)
    if name == "seq":
        x = torch.randn(rows, 5, 6, generator=g, dtype=torch.float64)
    else:
        x = torch.randn(rows, 1, 8, 8, generator=g, dtype=torch.float64)
    y = torch.randint(0, 10, (rows,), generator=g)
    return x.to(dtype), y


def loss_of(net, name, x, y, aux_rows=0):
    out = net(x, aux_rows=aux_rows) if name == "small_extra" else net(x)
    return F.cross_entropy(out, y)


def optimizer(kind, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, weight_decay=1e-3)
    if kind == "sgd_nodecay":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9)
    if kind == "nesterov":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, nesterov=True)
    if kind == "adagrad":
        return torch.optim.Adagrad(params, lr=0.05)
    if kind == "rmsprop":
        return torch.optim.RMSprop(params, lr=0.01)
    if kind == "adam":
        return torch.optim.Adam(params, lr=0.01)
    if kind == "adamw":
        return torch.optim.AdamW(params, lr=0.01)
    raise ValueError(kind)


def reference(name, kind, iterations, dtype=torch.float32, aux_rows=0):
    """Single-process training on the doubled batch: the state_dict after `iterations` steps."""
    net = model(name).to(dtype)
    opt = optimizer(kind, net.parameters())
    for it in range(iterations):
        x, y = batch(name, it, dtype=dtype)
        opt.zero_grad()
        loss_of(net, name, x, y, aux_rows=aux_rows).backward()
        opt.step()
    return {k: v.detach().clone() for k, v in net.state_dict().items()}
