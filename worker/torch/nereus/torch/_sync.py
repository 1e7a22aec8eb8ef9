"""ModelSync: one model's parameters kept on the Nereus servers through the
client's layer-wise calls (nereus/c_api.h, nereus_gradients_ready and
nereus_wait_weights), driven by PyTorch hooks.

Layers. Each module that owns parameters is one Nereus layer; layers are
numbered in the order the modules first run in a forward pass (a traced
forward on the first batch, without gradients, the RNG and buffers put back
afterwards), so layer 0 is nearest the input and its pulls come first.
Without a model, parameters are grouped by their name's module prefix, in
the order given. One layer's parameters are registered as separate tensors
whose weights and gradients lie in one flat float32 host buffer each (pinned
when the model is on a GPU), so each layer costs one C call per iteration in
each direction whatever its number of parameters.

One iteration (clock c):
  forward   a forward pre-hook on each layer's module: with update="server"
            nereus_wait_weights(layer, c) (the layer's weights after c
            updates; on the CPU the parameters ARE the host buffer, on a GPU
            they are copied up), and an nn.Linear whose weight may travel as
            sufficient factors keeps its input;
  backward  a hook on each parameter's gradient accumulator (fires once its
            .grad is complete) copies the gradient into the host buffer
            (from a GPU: on a copy stream, after an event); once a layer's
            every parameter has fired, nereus_gradients_ready(layer, c) hands
            it over (an nn.Linear's factors too: its input rows and its
            output's gradient rows, whose product is weight.grad); at the end
            of the backward (a callback queued on autograd's engine) every
            layer not handed over yet is, its missing gradients as zeros
            (parameters that got none this iteration), and with
            update="local" the servers' average of every worker's gradients
            is waited for and put into each .grad.
Every wait is bounded by the job's timeout; the error names the layer, its
tensors, the clock and the server (or worker) that has not answered.
"""

import queue
import threading
import zlib

import torch

from nereus import capi

# A parameter's signature, compared against worker 0's before Init: name
# hash (two 24-bit halves), number of dimensions, dimensions (each exact in
# float32 below 2^24).
_SIG_DIMS = 8
_SIG_LEN = 3 + _SIG_DIMS
_EXACT = 1 << 24


def _signature(name, shape):
    h = zlib.crc32(name.encode()) ^ (zlib.adler32(name.encode()) << 32)
    dims = [min(int(d), _EXACT - 1) for d in shape][:_SIG_DIMS]
    return [float(h & 0xFFFFFF), float((h >> 24) & 0xFFFFFF), float(len(shape))] + \
        [float(d) for d in dims] + [0.0] * (_SIG_DIMS - len(dims))


def _shape_text(sig):
    n = int(sig[2])
    return "[%s]" % ", ".join(str(int(d)) for d in sig[3:3 + min(n, _SIG_DIMS)])


BROADCAST_CHUNK = 1 << 16  # Floats per barrier through the coordinator.


def broadcast_flat(client, name, flat, root):
    """Worker `root`'s values of the contiguous float32 CPU tensor `flat` into every worker's, in rounds of
    BROADCAST_CHUNK values (each one a barrier through the coordinator: for small state)."""
    for at in range(0, flat.numel(), BROADCAST_CHUNK):
        piece = flat[at:at + BROADCAST_CHUNK]
        client.broadcast("%s.%d" % (name, at), piece.data_ptr(), piece.numel(), root)


class _Layer:
    """One Nereus layer: a module's parameters, their host buffers and what this clock has seen of them."""

    def __init__(self, index, name, module, params):
        self.index = index
        self.name = name            # The module's qualified name ("" for the root).
        self.module = module        # None without a model.
        self.params = params        # [(full name, Parameter)]
        self.offsets = []
        self.numels = []
        self.ids = []               # Nereus tensor ids.
        self.w_host = None          # Flat weights (the registered data).
        self.g_host = None          # Flat gradients (the registered diff).
        self.meta = []              # (shape, dtype, device, data_ptr) per parameter at registration.
        self.sfb = None             # _Factors for an nn.Linear that may travel as factors.
        self.fired = set()          # Parameters whose gradient arrived this clock.
        self.handed = -1            # Last clock handed over (nereus_gradients_ready).
        self.waited = -1            # Last clock whose weights are in place.

    def view(self, buf, i):
        return buf[self.offsets[i]:self.offsets[i] + self.numels[i]]


class _Factors:
    """An nn.Linear's sufficient factors: up to `rows` rows of its output's gradient (left, rows x out) and of
    its input (right, rows x in), gathered over the calls of one iteration."""

    def __init__(self, rows, out_features, in_features, pin):
        self.rows = rows
        self.left = torch.zeros(rows, out_features, pin_memory=pin)
        self.right = torch.zeros(rows, in_features, pin_memory=pin)
        self.inputs = []   # Per call: the input, rows x in.
        self.grads = []    # Per call: the output's gradient (filled by a tensor hook), rows x out.


class ModelSync:
    """Keeps `named_params` (the parameters to synchronize, all requiring gradients) on the servers.

    update: "server" (the servers run `solver`, Caffe's settings; weights come back) or "local" (solver Average:
    the averaged gradient comes back into .grad and the caller's optimizer steps). model: the nn.Module the
    parameters belong to (for per-layer forward hooks and forward order), or None. sfb: whether an nn.Linear's
    weight is offered as sufficient factors (server mode with SGD only; HybComm decides per layer). mults:
    {id(param): (lr_mult, decay_mult)}."""

    def __init__(self, job, named_params, model, update, solver, mults=None, sfb=True, broadcast_buffers=True,
                 auto_trace=True):
        if update not in ("server", "local"):
            raise ValueError("update must be 'server' or 'local', got %r" % (update,))
        self.job = job
        self.client = job.client
        self.update = update
        self.solver = dict(solver)
        self.mults = mults or {}
        self.model = model
        self.broadcast_buffers = broadcast_buffers
        self.sfb_wanted = sfb and update == "server" and self.solver.get("type") == "SGD"
        self.layers = []
        self.ready = False
        self.clock = 0
        self.trace = []             # ("wait" | "ready", layer, clock), with record_trace set (tests).
        self.record_trace = False
        self._named = []
        self._hooks = []            # Removable handles and accumulator nodes (kept alive).
        self._in_backward = False
        self._sfb_ids = set()       # Tensors whose gradients of the first clock travel as factors.
        self._factor_ids = set()    # Tensors registered with factors: HybComm may send them either way.
        self._lock = threading.Lock()
        self._cuda = None           # The parameters' CUDA device, or None on the CPU.
        self._copier = None
        self._closed = False
        seen = set()
        for name, p in named_params:
            if not isinstance(p, torch.Tensor):
                raise TypeError("named_parameters: %r is not a tensor" % (name,))
            if id(p) in seen:
                raise ValueError("parameter %r is given twice" % name)
            seen.add(id(p))
            if not p.requires_grad:
                raise ValueError("parameter %r does not require a gradient, so it can get none to synchronize: "
                                 "leave it out of named_parameters (or set requires_grad)" % name)
            if p.dtype != torch.float32:
                raise ValueError("parameter %r is %s: Nereus keeps float32 tensors" % (name, p.dtype))
            self._named.append((name, p))
        if not self._named:
            raise ValueError("no parameters to synchronize")
        devices = {p.device for _, p in self._named}
        if len(devices) > 1:
            raise ValueError("the parameters are on several devices (%s): one device per worker" %
                             ", ".join(sorted(str(d) for d in devices)))
        device = devices.pop()
        if device.type == "cuda":
            self._cuda = device
        elif device.type != "cpu":
            raise ValueError("parameters on %s: nereus.torch runs on the CPU and on CUDA devices" % device)
        if model is not None:
            owners = {}
            for mname, m in model.named_modules():
                for pname, p in m.named_parameters(recurse=False):
                    owners.setdefault(id(p), (mname, m))
            self._owner = {}
            for name, p in self._named:
                if id(p) not in owners:
                    raise ValueError("parameter %r is not a parameter of the model given" % name)
                self._owner[id(p)] = owners[id(p)]
            if auto_trace:
                # The model's first call builds the layers: its forward, with every argument (a forward pre-hook
                # sees no keyword arguments in torch 1.13), is wrapped until then.
                self._wrap_forward(model)
        else:
            self._prepare(self._layers_by_name(), {})

    # --- Building the layers ------------------------------------------------

    def _layers_by_name(self):
        groups = {}
        order = []
        for name, p in self._named:
            prefix = name.rsplit(".", 1)[0] if "." in name else ""
            if prefix not in groups:
                groups[prefix] = []
                order.append(prefix)
            groups[prefix].append((name, p))
        return [(prefix, None, groups[prefix]) for prefix in order]

    def _wrap_forward(self, model):
        original = model.forward
        sync = self

        def forward(*args, **kwargs):
            if not sync.ready:
                sync.ensure_ready(lambda: original(*args, **kwargs))
            if model.__dict__.get("forward") is forward:
                del model.forward  # The class's forward again.
            return original(*args, **kwargs)

        model.forward = forward
        self._wrapped_forward = (model, forward)

    def ensure_ready(self, run_forward):
        """Before the first real forward: trace one forward (`run_forward`, no gradients) for the layers' order
        and each nn.Linear's rows per iteration, take worker 0's (every worker must number the layers alike,
        whatever its own control flow did), then register, Init and put worker 0's weights in place."""
        if self.ready:
            return
        if self.model is None:
            raise RuntimeError("ensure_ready needs a model")
        # The modules that own synchronized parameters, in the model's order, with their parameters.
        owners, index = [], {}
        for name, p in self._named:
            mname, m = self._owner[id(p)]
            if id(m) not in index:
                index[id(m)] = len(owners)
                owners.append((mname, m, []))
        for name, p in self._named:
            owners[index[id(self._owner[id(p)][1])]][2].append((name, p))
        position = {id(m): i for i, (_, m) in enumerate(self.model.named_modules())}
        owners.sort(key=lambda o: position[id(o[1])])
        index = {id(m): i for i, (_, m, _) in enumerate(owners)}
        self._check_signatures([(name, p) for _, _, params in owners for name, p in params])
        order, rows = self._trace(run_forward)
        perm = [index[id(m)] for m in order if id(m) in index]
        perm += [i for i in range(len(owners)) if i not in perm]
        # Worker 0's order and rows (float32 holds these integers exactly).
        plan = torch.tensor([float(i) for i in perm] + [float(rows.get(id(m), 0)) for _, m, _ in owners])
        self.client.broadcast("nereus.torch.layers", plan.data_ptr(), plan.numel(), 0)
        perm = [int(v) for v in plan[:len(owners)].tolist()]
        rows = {id(owners[i][1]): int(v) for i, v in enumerate(plan[len(owners):].tolist())}
        self._prepare([owners[i] for i in perm], rows, checked=True)

    def _trace(self, run_forward):
        order, rows, handles = [], {}, []

        def record(module, inputs):
            if all(module is not m for m in order):
                order.append(module)
            if isinstance(module, torch.nn.Linear) and inputs and isinstance(inputs[0], torch.Tensor):
                rows[id(module)] = rows.get(id(module), 0) + inputs[0].numel() // module.in_features

        owners = {id(m): m for _, m in self._owner.values()}
        if id(self.model) in owners:
            order.append(self.model)  # The root's forward starts before its children's.
        for m in owners.values():
            handles.append(m.register_forward_pre_hook(record))
        cpu_rng = torch.get_rng_state()
        cuda_rng = torch.cuda.get_rng_state_all() if self._cuda is not None else None
        buffers = [(b, b.detach().clone()) for b in self.model.buffers()]
        self._tracing = True
        try:
            with torch.no_grad():
                run_forward()
        finally:
            self._tracing = False
            for h in handles:
                h.remove()
            with torch.no_grad():
                for b, saved in buffers:
                    b.copy_(saved)
            torch.set_rng_state(cpu_rng)
            if cuda_rng is not None:
                torch.cuda.set_rng_state_all(cuda_rng)
        return order, rows

    def _check_signatures(self, flat):
        """Every worker must give the same parameters in the same order: compares this worker's names and shapes
        with worker 0's (broadcast through the coordinator) and names the first that differs."""
        count = torch.tensor([float(len(flat))])
        self.client.broadcast("nereus.torch.count", count.data_ptr(), 1, 0)
        if int(count.item()) != len(flat):
            raise ValueError("worker %d has %d parameters to synchronize, worker 0 has %d: give every worker the "
                             "same model" % (self.client.rank(), len(flat), int(count.item())))
        mine = torch.tensor([v for name, p in flat for v in _signature(name, p.shape)], dtype=torch.float32)
        theirs = mine.clone()
        self.client.broadcast("nereus.torch.signature", theirs.data_ptr(), theirs.numel(), 0)
        for i, (name, p) in enumerate(flat):
            a = mine[i * _SIG_LEN:(i + 1) * _SIG_LEN].tolist()
            b = theirs[i * _SIG_LEN:(i + 1) * _SIG_LEN].tolist()
            if a[:2] != b[:2]:
                raise ValueError("parameter %d is %r here (worker %d) but has another name on worker 0: give every "
                                 "worker the same model" % (i, name, self.client.rank()))
            if a != b:
                raise ValueError("parameter %r has shape %s here (worker %d) but %s on worker 0: give every worker "
                                 "the same model" % (name, _shape_text(a), self.client.rank(), _shape_text(b)))

    def _prepare(self, groups, rows, checked=False):
        if self.update == "local" and self.client.consistency() != "bsp":
            raise ValueError("update='local' (the servers average, your optimizer steps) needs a BSP job; this job is "
                             "%s: use update='server'" % self.client.consistency().upper())
        if not checked:
            self._check_signatures([(name, p) for _, _, params in groups for name, p in params])
        pin = self._cuda is not None
        for index, (mname, module, params) in enumerate(groups):
            layer = _Layer(index, mname, module, params)
            total = 0
            for name, p in params:
                layer.offsets.append(total)
                layer.numels.append(p.numel())
                total += p.numel()
            layer.w_host = torch.empty(total, dtype=torch.float32, pin_memory=pin)
            layer.g_host = torch.zeros(total, dtype=torch.float32, pin_memory=pin)
            with torch.no_grad():
                for i, (name, p) in enumerate(params):
                    layer.view(layer.w_host, i).copy_(p.detach().reshape(-1))
                    if self.update == "server" and self._cuda is None:
                        # The parameter's storage becomes the host buffer the client writes the weights into.
                        p.data = layer.view(layer.w_host, i).view(p.shape)
            layer.meta = [(tuple(p.shape), p.dtype, p.device, p.data_ptr()) for _, p in params]
            if (self.sfb_wanted and isinstance(module, torch.nn.Linear) and rows.get(id(module), 0) > 0
                    and any(p is module.weight for _, p in params)):
                layer.sfb = _Factors(rows[id(module)], module.out_features, module.in_features, pin)
            self.layers.append(layer)
        for layer in self.layers:
            for i, (name, p) in enumerate(layer.params):
                lr_mult, decay_mult = self.mults.get(id(p), (1.0, 1.0))
                kw = {}
                if layer.sfb is not None and p is layer.module.weight:
                    kw = dict(factor_rows=layer.sfb.rows, factor_left=layer.sfb.left.data_ptr(),
                              factor_right=layer.sfb.right.data_ptr())
                data = layer.w_host.data_ptr() + 4 * layer.offsets[i]
                diff = layer.g_host.data_ptr() + 4 * layer.offsets[i]
                layer.ids.append(self.client.register_tensor(name, tuple(p.shape), layer.index, data, diff,
                                                             lr_mult, decay_mult, **kw))
                if kw:
                    self._factor_ids.add(layer.ids[-1])
        self.client.init(self.solver, [layer.w_host.data_ptr() + 4 * off
                                       for layer in self.layers for off in layer.offsets])
        self._sfb_ids = set(self.client.sfb_tensors())
        self.clock = self.client.start_clock()
        # Worker 0's weights (clock 0) everywhere.
        for layer in self.layers:
            self._wait(layer, self.clock)
            self._weights_in(layer)
        if self.broadcast_buffers and self.model is not None:
            self._broadcast_buffers()
        if self._cuda is not None:
            self._copy_stream = torch.cuda.Stream(self._cuda)
            self._copier = _Copier(self)
        self._install_hooks()
        self.ready = True

    def _broadcast_buffers(self):
        bufs = [b for b in self.model.buffers() if b.is_floating_point() or b.dtype in (torch.int64, torch.int32)]
        if not bufs:
            return
        flat = torch.cat([b.detach().reshape(-1).to("cpu", torch.float32) for b in bufs])
        broadcast_flat(self.client, "nereus.torch.buffers", flat, 0)
        at = 0
        with torch.no_grad():
            for b in bufs:
                n = b.numel()
                b.copy_(flat[at:at + n].view(b.shape).to(b.device, b.dtype))
                at += n

    def _install_hooks(self):
        for layer in self.layers:
            for i, (name, p) in enumerate(layer.params):
                acc = p.expand_as(p).grad_fn.next_functions[0][0]
                self._hooks.append(acc)
                self._hooks.append(acc.register_hook(self._grad_hook(layer, i)))
            if layer.module is not None:
                self._hooks.append(layer.module.register_forward_pre_hook(self._pre_hook(layer)))
                if layer.sfb is not None:
                    self._hooks.append(layer.module.register_forward_hook(self._output_hook(layer)))

    # --- Per iteration ---------------------------------------------------------

    def _error(self, layer, what, e):
        return capi.NereusError(e.code, "layer %d (%s) %s at clock %d: %s" % (
            layer.index, layer.name or ", ".join(n for n, _ in layer.params), what, self.clock,
            str(e).split(": ", 1)[-1]))

    def _call(self, call, layer, clock, what, tag):
        """call(layer.index, clock) on the client; its error names the layer and
        `what` it was doing; traced as `tag`."""
        try:
            call(layer.index, clock)
        except capi.NereusError as e:
            raise self._error(layer, what, e) from None
        if self.record_trace:
            self.trace.append((tag, layer.index, clock))

    def _wait(self, layer, clock):
        self._call(self.client.wait_weights, layer, clock, "waiting for its weights", "wait")
        layer.waited = clock

    def _weights_in(self, layer):
        """The host buffer's weights into the parameters (a GPU, or the local mode's clock 0)."""
        if self.update == "server" and self._cuda is None:
            return  # The parameters are the host buffer.
        with torch.no_grad():
            for i, (name, p) in enumerate(layer.params):
                p.copy_(layer.view(layer.w_host, i).view(p.shape), non_blocking=True)

    def check_unchanged(self, layer):
        for i, (name, p) in enumerate(layer.params):
            shape, dtype, device, ptr = layer.meta[i]
            now = (tuple(p.shape), p.dtype, p.device, p.data_ptr())
            moved = self.update == "server" and self._cuda is None and now[3] != ptr
            if now[:3] != (shape, dtype, device) or moved:
                raise RuntimeError(
                    "parameter %r changed after nereus.torch registered it (was %s %s on %s%s, now %s %s on %s): "
                    "build the model, move it to its device and dtype, then wrap it" % (
                        name, str(dtype).replace("torch.", ""), list(shape), device,
                        "" if not moved else " in the client's buffer", str(p.dtype).replace("torch.", ""),
                        list(p.shape), p.device))

    def _pre_hook(self, layer):
        def hook(module, inputs):
            if self._tracing_now():
                return
            self.check_unchanged(layer)
            if self.update == "server" and layer.waited < self.clock:
                if self._copier is not None:
                    self._copier.wait_handed(self.clock - 1)
                self._wait(layer, self.clock)
                self._weights_in(layer)
            if layer.sfb is not None and torch.is_grad_enabled() and inputs and isinstance(inputs[0], torch.Tensor):
                layer.sfb.inputs.append(inputs[0].detach().reshape(-1, module.in_features))
        return hook

    def _output_hook(self, layer):
        def hook(module, inputs, output):
            if self._tracing_now() or not torch.is_grad_enabled() or not output.requires_grad:
                return
            f = layer.sfb
            at = len(f.grads)
            f.grads.append(None)

            def keep(grad):
                f.grads[at] = grad.detach().reshape(-1, module.out_features)
            output.register_hook(keep)
        return hook

    def _tracing_now(self):
        return getattr(self, "_tracing", False)

    def _grad_hook(self, layer, i):
        def hook(*unused):
            with self._lock:
                if not self._in_backward:
                    self._in_backward = True
                    torch.autograd.Variable._execution_engine.queue_callback(self._end_backward)
                if i in layer.fired:
                    return  # A second backward through the same graph adds to .grad; it was sent already.
                layer.fired.add(i)
                p = layer.params[i][1]
                self._before_writing(layer)
                # HybComm decides each clock's path (it may switch a layer at a clock boundary, having
                # measured both): a gradient that travels as factors is not read, so it is not copied out.
                if layer.ids[i] not in self._factor_ids or not self.client.sfb_at(layer.ids[i], self.clock):
                    self._grad_out(layer, i, p.grad)
                if len(layer.fired) == len(layer.params):
                    self._hand_over(layer)
        return hook

    def _before_writing(self, layer):
        # The gradient buffer may be written once the last clock's push of it is done, which
        # nereus_wait_weights(layer, clock) waits for: a forward pre-hook did it, unless the layer's module did
        # not run this iteration (its parameters unused, or used without calling it).
        if self.update == "server" and layer.waited < self.clock:
            if self._copier is not None:
                self._copier.wait_handed(self.clock - 1)
            self._wait(layer, self.clock)
            self._weights_in(layer)

    def _grad_out(self, layer, i, grad):
        view = layer.view(layer.g_host, i)
        if grad is None:
            view.zero_()
        elif self._cuda is None:
            view.copy_(grad.detach().reshape(-1))
        else:
            self._copier.device_to_host(view, grad.detach().reshape(-1))

    def _factors_out(self, layer):
        f = layer.sfb
        pairs = [(x, g) for x, g in zip(f.inputs, f.grads) if g is not None]
        rows = sum(x.shape[0] for x, _ in pairs)
        if rows > f.rows:
            raise RuntimeError("layer %d (%s): %d rows of sufficient factors this iteration, more than the %d of the "
                               "first batch its factors were sized by: keep batches no larger than the first"
                               % (layer.index, layer.name, rows, f.rows))
        at = 0
        for x, g in pairs:
            k = x.shape[0]
            if self._cuda is None:
                f.right[at:at + k].copy_(x)
                f.left[at:at + k].copy_(g)
            else:
                self._copier.device_to_host(f.right[at:at + k], x)
                self._copier.device_to_host(f.left[at:at + k], g)
            at += k
        f.right[at:].zero_()
        f.left[at:].zero_()
        f.inputs, f.grads = [], []

    def _hand_over(self, layer):
        if layer.sfb is not None:
            self._factors_out(layer)
        layer.handed = self.clock
        if self._copier is not None:
            self._copier.hand_over(layer, self.clock)
            return
        self._gradients_ready(layer, self.clock)

    def _gradients_ready(self, layer, clock):
        self._call(self.client.gradients_ready, layer, clock, "handing over its gradients", "ready")

    def _end_backward(self):
        with self._lock:
            self._in_backward = False
            for layer in reversed(self.layers):
                if layer.handed == self.clock:
                    continue
                self._before_writing(layer)
                # Parameters that got no gradient this iteration push zeros.
                for i in range(len(layer.params)):
                    if i not in layer.fired:
                        layer.view(layer.g_host, i).zero_()
                self._hand_over(layer)
            clock = self.clock
            if self._copier is not None:
                self._copier.end_clock(clock)
            for layer in self.layers:
                layer.fired = set()
            if self.update == "local":
                if self._copier is not None:
                    self._copier.wait_handed(clock)
                for layer in self.layers:
                    self._wait(layer, clock + 1)
                    with torch.no_grad():
                        for i, (name, p) in enumerate(layer.params):
                            avg = layer.view(layer.w_host, i).view(p.shape)
                            if p.grad is None:
                                p.grad = avg.to(p.device, copy=True)
                            else:
                                p.grad.copy_(avg, non_blocking=True)
            self.clock = clock + 1

    def synchronize(self):
        """Server mode: waits until every layer's weights of the current clock are in the parameters (what a
        forward does layer by layer), e.g. before evaluating without hooks or saving a checkpoint."""
        if not self.ready or self.update != "server":
            return
        if self._copier is not None:
            self._copier.wait_handed(self.clock - 1)
        for layer in self.layers:
            self.check_unchanged(layer)
            if layer.waited < self.clock:
                self._wait(layer, self.clock)
                self._weights_in(layer)
        if self._cuda is not None:
            torch.cuda.current_stream(self._cuda).synchronize()

    def close(self):
        if self._closed:
            return
        self._closed = True
        if self._copier is not None:
            self._copier.stop()
        for h in self._hooks:
            if hasattr(h, "remove"):
                h.remove()
        self._hooks = []
        wrapped = getattr(self, "_wrapped_forward", None)
        if wrapped is not None and wrapped[0].__dict__.get("forward") is wrapped[1]:
            del wrapped[0].forward


class _Copier:
    """A GPU worker's copies to the host: device-to-host copies run on a copy stream after an event recorded on
    the compute stream; a thread waits for each layer's copies to end (an event) and then hands the layer over.
    Owned by its ModelSync; stop() ends the thread."""

    def __init__(self, sync):
        self.sync = sync
        self.stream = sync._copy_stream
        self.items = queue.Queue()
        self.cv = threading.Condition()
        self.handed = sync.clock - 1  # Last clock every layer of which was handed over.
        self.error = None
        self.thread = threading.Thread(target=self._run, name="nereus-copier", daemon=True)
        self.thread.start()

    def device_to_host(self, dst, src):
        ev = torch.cuda.current_stream(self.sync._cuda).record_event()
        with torch.cuda.stream(self.stream):
            self.stream.wait_event(ev)
            dst.copy_(src, non_blocking=True)
            src.record_stream(self.stream)

    def hand_over(self, layer, clock):
        self.items.put((layer, clock, self.stream.record_event()))

    def end_clock(self, clock):
        self.items.put((None, clock, None))

    def _run(self):
        while True:
            item = self.items.get()
            if item is None:
                return
            layer, clock, ev = item
            if layer is None:
                with self.cv:
                    self.handed = clock
                    self.cv.notify_all()
                continue
            try:
                ev.synchronize()
                self.sync._gradients_ready(layer, clock)
            except Exception as e:  # Re-raised on the training thread by wait_handed.
                with self.cv:
                    self.error = e
                    self.cv.notify_all()

    def wait_handed(self, clock):
        timeout = self.sync.job.timeout_s
        with self.cv:
            if not self.cv.wait_for(lambda: self.error is not None or self.handed >= clock, timeout=timeout):
                raise capi.NereusError(capi.DEADLINE_EXCEEDED, "the gradients of clock %d have not left the GPU "
                                       "after %g s" % (clock, timeout))
            if self.error is not None:
                raise self.error

    def stop(self):
        self.items.put(None)
        self.thread.join()
