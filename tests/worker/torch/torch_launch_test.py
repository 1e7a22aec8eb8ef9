#!/usr/bin/python3
"""A PyTorch job in one command (ctest: torch_launch_test, label torch): scripts/launch.sh --worker_command
starts the coordinator, 2 servers and 2 Python workers (tests/worker/torch/launch_worker.py) on 127.0.0.1; and
torchrun starts 2 workers, whose rank 0 starts the coordinator and whose local rank 0 starts the server. Both
jobs train the same model on the same data: every worker of both ends with the same weights."""

import os
import re
import subprocess
import sys
import unittest

from torch_job import PYTHON, HERE, free_port, launch_sh_argv, skip_without_torch, temp_dir, worker_env

skip_without_torch()

WORKER = os.path.join(HERE, "launch_worker.py")
LINE = re.compile(r"rank (\d) of 2 \((\w+), local rank (\d), schedule (\w+)\): weights (\w+)")


def run(argv, env, timeout_s):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           env=env, universal_newlines=True, timeout=timeout_s)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        return None, e.stdout or ""


class TorchLaunchTest(unittest.TestCase):
    digests = {}

    def check(self, out, source, schedule, ranks_local):
        found = {int(m.group(1)): m.groups()[1:] for m in LINE.finditer(out)}
        self.assertEqual(sorted(found), [0, 1], out[-5000:])
        for rank, (src, local, sched, digest) in found.items():
            self.assertEqual((src, int(local), sched), (source, ranks_local[rank], schedule), out[-3000:])
        self.assertEqual(found[0][3], found[1][3], "the workers' weights differ")
        TorchLaunchTest.digests[source] = found[0][3]
        if len(TorchLaunchTest.digests) == 2:
            self.assertEqual(TorchLaunchTest.digests["launcher"], TorchLaunchTest.digests["torchrun"])

    def test_1_launch_sh_starts_python_workers(self):
        with temp_dir() as d:
            argv = launch_sh_argv(d, "%s %s" % (PYTHON, WORKER), ["--schedule=wfbp", "--heartbeat_timeout_ms=5000"])
            code, out = run(argv, worker_env(), 240)
            self.assertEqual(code, 0, out[-5000:])
            self.assertIn("launch.sh: every process exited cleanly", out)
            self.check(out, "launcher", "wfbp", {0: 0, 1: 1})

    def test_2_torchrun_starts_the_servers_itself(self):
        env = worker_env()
        env["NEREUS_PORT"] = str(free_port())
        # --redirects and --tee other than 0: Debian's torch 1.13 under Python 3.11 cannot parse "0" (its
        # Std.from_str iterates an IntFlag, which no longer yields the zero member) and fails at start.
        argv = [PYTHON, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
                "--master_port=%d" % free_port(), "--redirects=1", "--tee=1", WORKER]
        code, out = run(argv, env, 240)
        self.assertEqual(code, 0, out[-5000:])
        self.check(out, "torchrun", "full", {0: 0, 1: 1})


if __name__ == "__main__":
    unittest.main(verbosity=2)
