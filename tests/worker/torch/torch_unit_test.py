#!/usr/bin/python3
"""nereus.torch in one process, without a job (ctest: torch_unit_test, label torch): the optimizer mapping and
its refusals by name, the launcher's and torchrun's environments, the C interface's errors through ctypes,
nn.Linear's sufficient factors, parameters that cannot be synchronized."""

import os
import shutil
import subprocess
import sys
import unittest

from torch_job import PYTHON, ROOT, skip_without_torch, temp_dir

skip_without_torch()
import torch  # noqa: E402

from nereus import capi  # noqa: E402
from nereus.torch import _job, _optim  # noqa: E402
from nereus.torch._optim import UnsupportedOptimizer, caffe_solver  # noqa: E402
from nereus.torch._sync import ModelSync  # noqa: E402


def params():
    torch.manual_seed(0)
    return [torch.nn.Parameter(torch.randn(3, 2)), torch.nn.Parameter(torch.randn(3))]


class OptimizerMappingTest(unittest.TestCase):
    def test_exact_mappings(self):
        p = params()
        solver, mults, lrs = caffe_solver(torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-4))
        self.assertEqual(solver, {"type": "SGD", "base_lr": "0.1", "lr_policy": "fixed", "weight_decay": "0.0001",
                                  "regularization_type": "L2", "momentum": "0.9"})
        self.assertEqual(mults, [(1.0, 1.0), (1.0, 1.0)])
        self.assertEqual(lrs, [0.1])
        self.assertEqual(caffe_solver(torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True))[0]["type"], "Nesterov")
        s = caffe_solver(torch.optim.Adagrad(p, lr=0.05, eps=1e-9))[0]
        self.assertEqual((s["type"], s["delta"]), ("AdaGrad", "1e-09"))
        s = caffe_solver(torch.optim.RMSprop(p, lr=0.01, alpha=0.9, eps=1e-7))[0]
        self.assertEqual((s["type"], s["rms_decay"], s["delta"]), ("RMSProp", "0.9", "1e-07"))
        s = caffe_solver(torch.optim.Adadelta(p, lr=1.0, rho=0.95, eps=1e-6))[0]
        self.assertEqual((s["type"], s["momentum"], s["delta"]), ("AdaDelta", "0.95", "1e-06"))
        s = caffe_solver(torch.optim.Adam(p, lr=0.001, betas=(0.8, 0.99)), allow_inexact=True)[0]
        self.assertEqual((s["type"], s["momentum"], s["momentum2"]), ("Adam", "0.8", "0.99"))

    def test_param_groups_become_multipliers(self):
        a, b = params()
        solver, mults, lrs = caffe_solver(torch.optim.SGD([{"params": [a], "lr": 0.2, "weight_decay": 0.01},
                                                          {"params": [b], "weight_decay": 0}],
                                                         lr=0.1, momentum=0.5))
        self.assertEqual((solver["base_lr"], solver["weight_decay"]), ("0.2", "0.01"))
        self.assertEqual(mults, [(1.0, 1.0), (0.5, 0.0)])
        self.assertEqual(lrs, [0.2, 0.1])

    def test_the_rest_is_refused_by_name(self):
        p = params()
        cases = [
            (torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1),
             "SGD param group 0: dampening=0.1 cannot run on the servers (Caffe's momentum has no dampening); use "
             "update='local' to step it here, or set dampening=0"),
            (torch.optim.SGD(p, lr=0.1, maximize=True),
             "SGD param group 0: maximize=True cannot run on the servers (the servers minimize); use "
             "update='local' to step it here, or set maximize=False"),
            (torch.optim.RMSprop(p, lr=0.1, centered=True),
             "RMSprop param group 0: centered=True cannot run on the servers (Caffe's RMSProp is not centered); "
             "use update='local' to step it here, or set centered=False"),
            (torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01),
             "Adagrad param group 0: lr_decay=0.01 cannot run on the servers (Caffe's AdaGrad has a fixed rate); "
             "use update='local' to step it here, or set lr_decay=0"),
            (torch.optim.AdamW(p, lr=0.1),
             "AdamW cannot run on the servers: they run Caffe's SGD, Nesterov, AdaGrad, RMSProp, AdaDelta and "
             "Adam (torch.optim.SGD, Adagrad, RMSprop, Adadelta, Adam); use update='local' to step AdamW here"),
            (torch.optim.Adam(p, lr=0.1),
             "Adam does not map exactly onto Caffe's Adam: Caffe adds eps before the bias correction (its eps is "
             "torch's eps / sqrt(1 - beta2^t)); pass allow_inexact=True to run Caffe's Adam on the servers, or use "
             "update='local'"),
            (torch.optim.Adam(p, lr=0.1, amsgrad=True),
             "Adam param group 0: amsgrad=True cannot run on the servers (Caffe's Adam has no AMSGrad); use "
             "update='local' to step it here, or set amsgrad=False"),
            (torch.optim.Adamax(p, lr=0.1),
             "Adamax cannot run on the servers: they run Caffe's SGD, Nesterov, AdaGrad, RMSProp, AdaDelta and "
             "Adam (torch.optim.SGD, Adagrad, RMSprop, Adadelta, Adam); use update='local' to step Adamax here"),
        ]
        for opt, message in cases:
            with self.assertRaises(UnsupportedOptimizer) as c:
                caffe_solver(opt)
            self.assertEqual(str(c.exception), message)


class EnvironmentTest(unittest.TestCase):
    def test_the_launchers_environment(self):
        plan = _job.plan_from({"NEREUS_COORDINATOR": "10.0.0.1:7100", "NEREUS_RANK": "2", "NEREUS_BIND_HOST":
                               "10.0.0.2", "NEREUS_LOCAL_RANK": "1", "NEREUS_LOCAL_SIZE": "2",
                               "NEREUS_WORKER_FLAGS": "--schedule=wfbp --nomerge '--timeline=/t/{rank}.json'"})
        self.assertEqual(plan.source, "launcher")
        self.assertEqual(plan.options, {"coordinator": "10.0.0.1:7100", "rank": 2, "bind_host": "10.0.0.2",
                                        "schedule": "wfbp", "merge": "false", "timeline": "/t/{rank}.json"})
        self.assertEqual((plan.local_rank, plan.local_size, plan.processes), (1, 2, []))
        with self.assertRaises(ValueError) as c:
            _job.parse_worker_flags("--solver=lenet.prototxt")
        self.assertTrue(str(c.exception).startswith("--solver is a flag of nereus_worker that a Python worker does "
                                                    "not take (it takes the client's: --batch_bytes, "), c.exception)

    def test_torchruns_environment(self):
        env = {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
        plan = _job.plan_from(env, consistency="ssp", staleness=2)
        self.assertEqual(plan.source, "torchrun")
        self.assertEqual(plan.options, {"coordinator": "127.0.0.1:29501", "rank": 0, "bind_host": "127.0.0.1"})
        server = capi.find_binary("nereus_server")
        self.assertEqual(plan.processes, [
            ("coordinator", [server, "--role=coordinator", "--coordinator=127.0.0.1:29501", "--num_servers=2",
                             "--num_workers=4", "--consistency=ssp", "--staleness=2"]),
            ("server 0", [server, "--role=server", "--coordinator=127.0.0.1:29501", "--rank=0",
                          "--bind_host=127.0.0.1"]),
        ])
        # The second host's local rank 0 starts server 1; its local rank 1 starts nothing.
        env.update({"RANK": "2", "GROUP_RANK": "1", "NEREUS_PORT": "31000"})
        plan = _job.plan_from(env)
        self.assertEqual([label for label, _ in plan.processes], ["server 1"])
        self.assertEqual(plan.options["coordinator"], "127.0.0.1:31000")
        env.update({"RANK": "3", "LOCAL_RANK": "1"})
        self.assertEqual(_job.plan_from(env).processes, [])

    def test_no_job_says_how_to_give_one(self):
        with self.assertRaises(ValueError) as c:
            _job.plan_from({})
        self.assertIn("scripts/launch.sh --worker_command", str(c.exception))


class CInterfaceTest(unittest.TestCase):
    def test_errors_come_back_with_code_and_text(self):
        lib = capi.Library()
        with self.assertRaises(capi.NereusError) as c:
            capi.Client(lib, {"schedule": "fastest"})
        self.assertEqual(c.exception.code, 1)
        self.assertEqual(str(c.exception), "INVALID_ARGUMENT: nereus_options_set: schedule must be sequential, wfbp, "
                                           "priority or full, got \"fastest\"")
        with self.assertRaises(capi.NereusError) as c:
            capi.Client(lib, {"coordinator": "127.0.0.1:1", "startup_timeout_s": 1})
        self.assertIn("127.0.0.1:1", str(c.exception))

    def test_an_older_or_foreign_library_is_named(self):
        # Libraries compiled here from a line or two of C: one of another version, one of this version with only
        # nereus_c_api_version and nereus_finish (as one built before nereus_fail was added lacks that), and one
        # that is not Nereus's at all.
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            self.skipTest("no C compiler")
        with temp_dir() as d:
            def build(name, source):
                src, lib = os.path.join(d, name + ".c"), os.path.join(d, "lib%s.so" % name)
                with open(src, "w") as f:
                    f.write(source)
                subprocess.run([cc, "-shared", "-fPIC", "-o", lib, src], check=True, timeout=120)
                return lib
            newer = build("newer", "int nereus_c_api_version(void) { return 2; }\n")
            older = build("older", "int nereus_c_api_version(void) { return 1; }\nint nereus_finish(void* c) "
                                   "{ return 0; }\n")
            foreign = build("foreign", "int answer(void) { return 42; }\n")
            with self.assertRaises(capi.NereusError) as c:
                capi.Library(newer)
            self.assertEqual(str(c.exception), "INVALID_ARGUMENT: %s has C interface version 2; this package speaks "
                                               "version 1" % newer)
            with self.assertRaises(capi.NereusError) as c:
                capi.Library(older)
            names = [n for n in capi._SIGNATURES if n not in ("nereus_c_api_version", "nereus_finish")]
            self.assertIn("nereus_fail", names)
            self.assertEqual(str(c.exception), "INVALID_ARGUMENT: %s lacks %s, which this package calls: it was built "
                                               "from older sources than the package's (rebuild it: scripts/build.sh "
                                               "--target=nereus_c)" % (older, ", ".join(names)))
            with self.assertRaises(capi.NereusError) as c:
                capi.Library(foreign)
            self.assertEqual(str(c.exception), "INVALID_ARGUMENT: %s is not Nereus's C interface (it has no "
                                               "nereus_c_api_version)" % foreign)

    def test_a_missing_library_is_named(self):
        old = os.environ.get("NEREUS_LIBRARY")
        os.environ["NEREUS_LIBRARY"] = "/nonexistent/libnereus_c.so"
        try:
            with self.assertRaises(FileNotFoundError) as c:
                capi.find_library()
            self.assertEqual(str(c.exception), "NEREUS_LIBRARY=/nonexistent/libnereus_c.so: no such file")
        finally:
            if old is None:
                del os.environ["NEREUS_LIBRARY"]
            else:
                os.environ["NEREUS_LIBRARY"] = old


class PipInstallTest(unittest.TestCase):
    def test_pip_install_from_its_folder_bundles_the_library(self):
        # Into a fresh virtual environment that sees Debian's torch; no network (--no-build-isolation: the
        # system's setuptools). The installed package finds libnereus_c.so and nereus_server beside itself.
        with temp_dir() as d:
            env_dir = os.path.join(d, "venv")
            subprocess.run([PYTHON, "-m", "venv", "--system-site-packages", env_dir], check=True, timeout=120)
            src = os.path.join(d, "src")
            shutil.copytree(os.path.join(ROOT, "worker", "torch"), src,
                            ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
            env = {k: v for k, v in os.environ.items()
                   if k not in ("NEREUS_LIBRARY", "NEREUS_BIN_DIR", "PYTHONPATH")}
            lib = os.environ.get("NEREUS_LIBRARY", os.path.join(ROOT, "build", "lib", "libnereus_c.so"))
            env["NEREUS_BUILD_DIR"] = os.path.dirname(os.path.dirname(lib))
            pip = subprocess.run([os.path.join(env_dir, "bin", "pip"), "install", "--no-build-isolation", "--no-deps",
                                  "--no-index", src], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                 universal_newlines=True, timeout=300)
            self.assertEqual(pip.returncode, 0, pip.stdout[-3000:])
            del env["NEREUS_BUILD_DIR"]
            probe = ("import nereus.capi as c, nereus.torch; "
                     "print(c.find_library()); print(c.find_binary('nereus_server')); print(c.Library().c_api_version())")
            out = subprocess.run([os.path.join(env_dir, "bin", "python"), "-c", probe], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, env=env, cwd=d, universal_newlines=True, timeout=120)
            self.assertEqual(out.returncode, 0, out.stdout)
            lines = out.stdout.split()
            self.assertTrue(lines[0].startswith(env_dir) and lines[0].endswith("/nereus/lib/libnereus_c.so"), lines)
            self.assertTrue(lines[1].startswith(env_dir) and lines[1].endswith("/nereus/bin/nereus_server"), lines)
            self.assertEqual(lines[2], "1")


class FactorsAndParametersTest(unittest.TestCase):
    def test_linear_factors_multiply_to_the_weight_gradient(self):
        # The two factors nereus.torch captures: the input's rows and the output gradient's rows, 3-D included.
        torch.manual_seed(1)
        for shape in ((7, 5), (3, 4, 5)):
            lin = torch.nn.Linear(5, 6)
            x = torch.randn(*shape, requires_grad=False)
            y = lin(x)
            keep = {}
            y.register_hook(lambda g: keep.setdefault("g", g))
            (y.sin().sum()).backward()
            left, right = keep["g"].reshape(-1, 6), x.reshape(-1, 5)
            self.assertTrue(torch.equal(left.t() @ right, lin.weight.grad), shape)

    def test_a_parameter_that_cannot_be_synchronized_is_named(self):
        class NoJob:
            client = None
        p = torch.nn.Parameter(torch.zeros(2))
        frozen = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
        with self.assertRaises(ValueError) as c:
            ModelSync(NoJob(), [("a", p), ("b.frozen", frozen)], None, "server", {"type": "SGD"})
        self.assertEqual(str(c.exception), "parameter 'b.frozen' does not require a gradient, so it can get none to "
                                           "synchronize: leave it out of named_parameters (or set requires_grad)")
        with self.assertRaises(ValueError) as c:
            ModelSync(NoJob(), [("h", torch.nn.Parameter(torch.zeros(2, dtype=torch.float64)))], None, "server",
                      {"type": "SGD"})
        self.assertEqual(str(c.exception), "parameter 'h' is torch.float64: Nereus keeps float32 tensors")
        with self.assertRaises(ValueError) as c:
            ModelSync(NoJob(), [("a", p), ("again", p)], None, "server", {"type": "SGD"})
        self.assertEqual(str(c.exception), "parameter 'again' is given twice")


if __name__ == "__main__":
    unittest.main(verbosity=2)
