#!/usr/bin/python3
"""worker/torch/examples/mnist_lenet.py reaches 97% test accuracy with 2 servers x 2 workers started by one
scripts/launch.sh command (ctest: torch_mnist_test, labels torch and convergence; the data come from the
fixture "mnist", scripts/get_mnist.sh). About 90 s on 2 cores."""

import os
import re
import subprocess
import sys
import unittest

from torch_job import PYTHON, ROOT, launch_sh_argv, skip_without_torch, temp_dir, worker_env

skip_without_torch()


class MnistTest(unittest.TestCase):
    def test_lenet_reaches_97_percent(self):
        data = os.path.join(ROOT, "data", "mnist")
        if not os.path.exists(os.path.join(data, "t10k-labels-idx1-ubyte")):
            self.skipTest("no data/mnist (scripts/get_mnist.sh)")
        with temp_dir() as d:
            example = os.path.join(ROOT, "worker", "torch", "examples", "mnist_lenet.py")
            argv = launch_sh_argv(d, "%s %s --data=%s" % (PYTHON, example, data))
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env=worker_env(), universal_newlines=True, timeout=500)
        lines = [l for l in p.stdout.splitlines() if "accuracy" in l]
        print("\n".join(lines))
        self.assertEqual(p.returncode, 0, p.stdout[-5000:])
        final = re.search(r"final test accuracy (\d\.\d+)", p.stdout)
        self.assertIsNotNone(final, p.stdout[-5000:])
        self.assertGreaterEqual(float(final.group(1)), 0.97)


if __name__ == "__main__":
    unittest.main(verbosity=2)
