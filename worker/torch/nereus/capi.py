"""ctypes bindings of the C interface (common/include/nereus/c_api.h).

One class per opaque object of the header: Client (nereus_client_t), Handle
(nereus_handle_t); options, solver settings and tensor descriptions are given
as Python values and built into their C objects inside the call. A call that
fails raises NereusError with the header's code and the library's text.

Where the library is found (find_library): $NEREUS_LIBRARY (the .so file
itself), else libnereus_c.so beside this package (what `pip install` copies
in from a build), else build/lib/libnereus_c.so of the checkout this file
sits in ($NEREUS_BUILD_DIR, default build/).
"""

import ctypes
import os

C_API_VERSION = 1

CODES = {
    0: "OK", 1: "INVALID_ARGUMENT", 2: "NOT_FOUND", 3: "FAILED_PRECONDITION", 4: "UNAVAILABLE",
    5: "DEADLINE_EXCEEDED", 6: "ABORTED", 7: "DATA_LOSS", 8: "INTERNAL", 9: "RESOURCE_EXHAUSTED", 10: "ROLLBACK",
}
DEADLINE_EXCEEDED = 5
ABORTED = 6


class NereusError(RuntimeError):
    """A failed call of the C interface: `code` (NEREUS_*), `code_name` and the library's message."""

    def __init__(self, code, message):
        self.code = code
        self.code_name = CODES.get(code, "UNKNOWN")
        super().__init__("%s: %s" % (self.code_name, message))


def _repo_root():
    # worker/torch/nereus/capi.py -> the checkout's root.
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def _build_dir():
    build = os.environ.get("NEREUS_BUILD_DIR", "build")
    return build if os.path.isabs(build) else os.path.join(_repo_root(), build)


def find_library():
    """The path of libnereus_c.so, or raise FileNotFoundError saying where it looked."""
    tried = []
    explicit = os.environ.get("NEREUS_LIBRARY")
    if explicit:
        if os.path.isfile(explicit):
            return explicit
        raise FileNotFoundError("NEREUS_LIBRARY=%s: no such file" % explicit)
    for path in (os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", "libnereus_c.so"),
                 os.path.join(_build_dir(), "lib", "libnereus_c.so")):
        tried.append(path)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError("libnereus_c.so not found (tried %s); build it (scripts/build.sh --target=nereus_c) "
                            "or set NEREUS_LIBRARY to its path" % ", ".join(tried))


def find_binary(name):
    """The path of a Nereus binary (nereus_server): $NEREUS_BIN_DIR, beside this package, or the build's bin/."""
    dirs = []
    if os.environ.get("NEREUS_BIN_DIR"):
        dirs.append(os.environ["NEREUS_BIN_DIR"])
    dirs += [os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin"), os.path.join(_build_dir(), "bin")]
    for d in dirs:
        path = os.path.join(d, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError("%s not found in %s; build it (scripts/build.sh --target=%s) or set NEREUS_BIN_DIR"
                            % (name, ", ".join(dirs), name))


_P = ctypes.c_void_p
_SIGNATURES = {
    # name: (restype, argtypes)
    "nereus_c_api_version": (ctypes.c_int, []),
    "nereus_last_error": (ctypes.c_char_p, []),
    "nereus_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "nereus_options_create": (_P, []),
    "nereus_options_destroy": (None, [_P]),
    "nereus_options_set": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p]),
    "nereus_solver_create": (_P, []),
    "nereus_solver_destroy": (None, [_P]),
    "nereus_solver_set": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.c_char_p]),
    "nereus_connect": (ctypes.c_int, [_P, ctypes.POINTER(_P)]),
    "nereus_client_destroy": (None, [_P]),
    "nereus_rank": (ctypes.c_int, [_P]),
    "nereus_num_workers": (ctypes.c_int, [_P]),
    "nereus_num_servers": (ctypes.c_int, [_P]),
    "nereus_consistency": (ctypes.c_int, [_P]),
    "nereus_staleness": (ctypes.c_int, [_P]),
    "nereus_start_clock": (ctypes.c_int64, [_P]),
    "nereus_tensor_create": (_P, [ctypes.c_char_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t]),
    "nereus_tensor_destroy": (None, [_P]),
    "nereus_tensor_set_mults": (None, [_P, ctypes.c_float, ctypes.c_float]),
    "nereus_tensor_set_layer": (None, [_P, ctypes.c_int, _P, _P]),
    "nereus_tensor_set_factors": (None, [_P, ctypes.c_int64, _P, _P]),
    "nereus_register_tensor": (ctypes.c_int, [_P, _P, ctypes.POINTER(ctypes.c_int)]),
    "nereus_init": (ctypes.c_int, [_P, _P, ctypes.POINTER(_P), ctypes.c_size_t]),
    "nereus_sfb_tensors": (ctypes.c_int, [_P, ctypes.POINTER(ctypes.c_int), ctypes.c_size_t,
                                          ctypes.POINTER(ctypes.c_size_t)]),
    "nereus_sfb_at": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_int64, ctypes.POINTER(ctypes.c_int)]),
    "nereus_push": (ctypes.c_int, [_P, ctypes.c_int, _P, ctypes.c_int64, ctypes.POINTER(_P)]),
    "nereus_pull": (ctypes.c_int, [_P, ctypes.c_int, _P, ctypes.c_int64, ctypes.POINTER(_P)]),
    "nereus_handle_wait": (ctypes.c_int, [_P, ctypes.c_int64]),
    "nereus_handle_done": (ctypes.c_int, [_P]),
    "nereus_handle_version": (ctypes.c_int64, [_P]),
    "nereus_handle_destroy": (None, [_P]),
    "nereus_gradients_ready": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_int64]),
    "nereus_wait_weights": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_int64]),
    "nereus_barrier": (ctypes.c_int, [_P, ctypes.c_char_p]),
    "nereus_broadcast": (ctypes.c_int, [_P, ctypes.c_char_p, _P, ctypes.c_size_t, ctypes.c_int]),
    "nereus_stat": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64)]),
    "nereus_monotonic_us": (ctypes.c_int64, []),
    "nereus_trace_span": (None, [_P, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]),
    "nereus_finish": (ctypes.c_int, [_P]),
    "nereus_fail": (ctypes.c_int, [_P, ctypes.c_char_p]),
}


class Library:
    """libnereus_c.so with every function's C signature declared."""

    def __init__(self, path=None):
        self.path = path or find_library()
        self._dll = ctypes.CDLL(self.path)
        # The version first, then every function by name: a library built before a function was added has the
        # same version (adding one is compatible for C callers) but not the function, and is named as such.
        missing = [name for name in _SIGNATURES if not hasattr(self._dll, name)]
        if "nereus_c_api_version" in missing:
            raise NereusError(1, "%s is not Nereus's C interface (it has no nereus_c_api_version)" % self.path)
        version = self._dll.nereus_c_api_version
        version.restype, version.argtypes = ctypes.c_int, []
        if version() != C_API_VERSION:
            raise NereusError(1, "%s has C interface version %d; this package speaks version %d"
                              % (self.path, version(), C_API_VERSION))
        if missing:
            raise NereusError(1, "%s lacks %s, which this package calls: it was built from older sources than "
                              "the package's (rebuild it: scripts/build.sh --target=nereus_c)"
                              % (self.path, ", ".join(missing)))
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(self._dll, name)
            fn.restype = restype
            fn.argtypes = argtypes
            setattr(self, name[len("nereus_"):], fn)

    def check(self, code):
        """Raises NereusError for a failed call's code (with this thread's last-error text)."""
        if code != 0:
            raise NereusError(code, self.last_error().decode("utf-8", "replace"))


def _text(value):
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value).encode()
    return str(value).encode()


class Handle:
    """A push or pull in flight (nereus_handle_t)."""

    def __init__(self, lib, ptr):
        self._lib, self._ptr = lib, ptr

    def wait(self, timeout_s=None):
        """Blocks until done (at most timeout_s); raises NereusError if the operation failed or timed out."""
        ms = -1 if timeout_s is None else int(timeout_s * 1000)
        self._lib.check(self._lib.handle_wait(self._ptr, ms))

    def done(self):
        return bool(self._lib.handle_done(self._ptr))

    def version(self):
        return self._lib.handle_version(self._ptr)

    def close(self):
        if self._ptr:
            self._lib.handle_destroy(self._ptr)
            self._ptr = None

    def __del__(self):
        self.close()


class Client:
    """One worker's client (nereus_client_t). Buffers given to it are raw addresses (tensor.data_ptr()):
    the caller keeps them alive until close() returns."""

    def __init__(self, lib, options):
        """Connects with `options` ({name: value}, c_api.h's option names); blocks until the whole job has joined."""
        self._lib = lib
        self._ptr = None
        o = lib.options_create()
        try:
            for name, value in options.items():
                lib.check(lib.options_set(o, name.encode(), _text(value)))
            ptr = ctypes.c_void_p()
            lib.check(lib.connect(o, ctypes.byref(ptr)))
            self._ptr = ptr
        finally:
            lib.options_destroy(o)

    @property
    def lib(self):
        return self._lib

    def rank(self):
        return self._lib.rank(self._ptr)

    def num_workers(self):
        return self._lib.num_workers(self._ptr)

    def num_servers(self):
        return self._lib.num_servers(self._ptr)

    def consistency(self):
        """'bsp', 'ssp' or 'async'."""
        return ("bsp", "ssp", "async")[self._lib.consistency(self._ptr)]

    def staleness(self):
        return self._lib.staleness(self._ptr)

    def start_clock(self):
        return self._lib.start_clock(self._ptr)

    def register_tensor(self, name, shape, layer=-1, data=0, diff=0, lr_mult=1.0, decay_mult=1.0,
                        factor_rows=0, factor_left=0, factor_right=0):
        """Declares a tensor; returns its id. data, diff, factor_left, factor_right: addresses of float32 buffers
        that must outlive the client (c_api.h, nereus_tensor_set_layer and nereus_tensor_set_factors)."""
        dims = (ctypes.c_int64 * len(shape))(*[int(d) for d in shape])
        t = self._lib.tensor_create(name.encode(), dims, len(shape))
        try:
            self._lib.tensor_set_mults(t, float(lr_mult), float(decay_mult))
            if data:
                self._lib.tensor_set_layer(t, int(layer), data, diff)
            if factor_rows:
                self._lib.tensor_set_factors(t, int(factor_rows), factor_left, factor_right)
            tid = ctypes.c_int(-1)
            self._lib.check(self._lib.register_tensor(self._ptr, t, ctypes.byref(tid)))
            return tid.value
        finally:
            self._lib.tensor_destroy(t)

    def init(self, solver, initial_addresses):
        """Sends worker 0's initial values (one address per tensor) and `solver` ({Caffe name: value}); blocking."""
        s = self._lib.solver_create()
        try:
            for name, value in solver.items():
                self._lib.check(self._lib.solver_set(s, name.encode(), _text(value)))
            n = len(initial_addresses)
            arr = (ctypes.c_void_p * max(n, 1))(*initial_addresses)
            self._lib.check(self._lib.init(self._ptr, s, arr, n))
        finally:
            self._lib.solver_destroy(s)

    def sfb_tensors(self):
        count = ctypes.c_size_t(0)
        self._lib.check(self._lib.sfb_tensors(self._ptr, None, 0, ctypes.byref(count)))
        ids = (ctypes.c_int * max(count.value, 1))()
        self._lib.check(self._lib.sfb_tensors(self._ptr, ids, count.value, ctypes.byref(count)))
        return list(ids[:count.value])

    def sfb_at(self, tensor, clock):
        out = ctypes.c_int(0)
        self._lib.check(self._lib.sfb_at(self._ptr, tensor, clock, ctypes.byref(out)))
        return bool(out.value)

    def push(self, tensor, address, clock):
        h = ctypes.c_void_p()
        self._lib.check(self._lib.push(self._ptr, tensor, address, clock, ctypes.byref(h)))
        return Handle(self._lib, h)

    def pull(self, tensor, address, clock):
        h = ctypes.c_void_p()
        self._lib.check(self._lib.pull(self._ptr, tensor, address, clock, ctypes.byref(h)))
        return Handle(self._lib, h)

    def gradients_ready(self, layer, clock):
        self._lib.check(self._lib.gradients_ready(self._ptr, layer, clock))

    def wait_weights(self, layer, clock):
        self._lib.check(self._lib.wait_weights(self._ptr, layer, clock))

    def barrier(self, name):
        self._lib.check(self._lib.barrier(self._ptr, name.encode()))

    def broadcast(self, name, address, n, root):
        self._lib.check(self._lib.broadcast(self._ptr, name.encode(), address, n, root))

    def stat(self, name):
        v = ctypes.c_uint64(0)
        self._lib.check(self._lib.stat(self._ptr, name.encode(), ctypes.byref(v)))
        return v.value

    def trace_span(self, name, clock, begin_us, end_us, lane=0):
        self._lib.trace_span(self._ptr, name.encode(), clock, begin_us, end_us, lane)

    def monotonic_us(self):
        return self._lib.monotonic_us()

    def finish(self):
        """Tells the job this worker is done; blocks until every worker is."""
        self._lib.check(self._lib.finish(self._ptr))

    def fail(self, message):
        """This worker cannot go on (its training raised): the job ends at once, every node naming
        this worker and `message`, instead of waiting out the heartbeat timeout. Then close()."""
        self._lib.check(self._lib.fail(self._ptr, str(message).encode()))

    def close(self):
        """Leaves the job (without finish() the others see this worker as dead) and frees the client."""
        if self._ptr:
            self._lib.client_destroy(self._ptr)
            self._ptr = None
