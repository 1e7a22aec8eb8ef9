#!/usr/bin/env python3
"""Tests of scripts/include_graph.py on tiny fake trees (run by ctest)."""

import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "include_graph.py")


def make_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as fh:
            fh.write(text)


def guard(path):
    """The include guard the checker expects of a header at `path`."""
    public = "common/include/"
    if path.startswith(public):
        return path[len(public):].upper().replace("/", "_").replace(".", "_") + "_"
    return "NEREUS_" + path.upper().replace("/", "_").replace(".", "_") + "_"


def guarded(files):
    """`files` with every header given the include guard its path asks for (after the body, so that the
    line numbers of its includes stay as written; the checker reads the first #ifndef wherever it is)."""
    out = {}
    for path, text in files.items():
        if path.endswith((".h", ".cuh")):
            g = guard(path)
            text = "%s#ifndef %s\n#define %s\n#endif  // %s\n" % (text, g, g, g)
        out[path] = text
    return out


# A tree that keeps the rule: every include runs down (or stays in its component).
CLEAN = guarded({
    "proto/nereus.proto": "",
    "common/include/nereus/status.h": "#include <string>\n",
    "common/base/status.h": '#include "nereus/status.h"\n#include <glog/logging.h>\n',
    "common/net/node.h": '#include "common/base/status.h"\n#include "proto/nereus.pb.h"\n',
    "server/param_server.h": '#include "common/net/node.h"\n',
    "server/server_main.cc": '#include "server/param_server.h"\n',
    "common/include/nereus/client.h": '#include <vector>\n#include "nereus/status.h"\n',
    "worker/client/client.cc": '#include "nereus/client.h"\n#include "worker/client/queues.h"\n',
    "worker/client/queues.h": '#include "common/net/node.h"\n',
    "worker/trainer/net.h": '#include "common/base/status.h"\n#include "worker/trainer/layers/conv.h"\n',
    "worker/trainer/layers/conv.h": '#include "worker/trainer/blob.h"\n',
    "worker/trainer/blob.h": "",
    "worker/bridge/sync.h": '#include "nereus/client.h"\n#include "worker/trainer/net.h"\n',
    "worker/worker_main.cc": '#include "worker/bridge/sync.h"\n#include "worker/helper.h"\n',
    "worker/helper.h": "",
    "bench/bench.cc": '#include "server/param_server.h"\n#include "worker/helper.h"\n',
    "tests/a_test.cc": '#include "bench/bench.h"\n#include "util.h"\n',
    "tests/util.h": "",
    "bench/bench.h": "",
    "bench/sim/models.h": '#include "common/base/status.h"\n',
    "bench/harness/local_job.h": '#include "bench/sim/models.h"\n#include "server/param_server.h"\n',
    "common/net/keygen_main.cc": '#include "common/base/status.h"\n',
})


class IncludeGraphTest(unittest.TestCase):
    def run_script(self, files, *args):
        with tempfile.TemporaryDirectory() as root:
            make_tree(root, files)
            p = subprocess.run([sys.executable, SCRIPT, "--root", root] + list(args),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
            return p.returncode, p.stdout, p.stderr

    def check_fails(self, extra, expected_lines):
        """--check on the clean tree with the (guarded) files extra fails naming expected_lines; its stdout and
        stderr."""
        files = dict(CLEAN)
        files.update(guarded(extra))
        rc, out, err = self.run_script(files, "--check")
        self.assertEqual(rc, 1, out + err)
        self.assertEqual(out.splitlines(), expected_lines)
        return out, err

    def check_public_header_fails(self, path, extra, includes):
        """check_fails naming each (line number, include as written) that the public header at path may not
        have; its stderr."""
        lines = ['%s:%d: a public header includes %s: only public headers ("nereus/...") and the standard library '
                 "may be included there" % (path, n, what) for n, what in includes]
        _, err = self.check_fails(extra, lines)
        self.assertIn("%d include(s) of public headers that do not stand alone" % len(includes), err)
        return err

    def check_fails_with(self, extra, expected_lines):
        out, err = self.check_fails(extra, expected_lines)
        self.assertIn("%d include(s) break the floors" % len(expected_lines), err)
        self.assertNotIn("include guard", out)

    def test_clean_tree_passes(self):
        rc, out, err = self.run_script(CLEAN, "--check")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(out, "include_graph.py: 24 includes in 16 files, all down the floors; no CUDA in common/, "
                              "server/, worker/client/; every include guard matches; the public headers stand alone\n")

    def test_a_file_of_common_outside_its_folders_is_on_no_floor(self):
        self.check_fails_with({"common/flags.h": '#include "common/base/status.h"\n'}, [
            "common/flags.h: on no floor (add its folder to FLOORS in scripts/include_graph.py)"])

    def test_the_network_runtime_may_not_include_the_update_maths(self):
        self.check_fails_with({"common/net/node2.h": '#include "common/update/sgd.h"\n',
                               "common/update/sgd.h": ""}, [
            'common/net/node2.h:1: includes "common/update/sgd.h": common/net (floor 2) may not include '
            "common/update (floor 3), a higher floor"])

    def test_every_upward_step_is_named(self):
        self.check_fails_with({
            "proto/extra.h": '#include "common/base/status.h"\n',
            "worker/trainer/solver.h": '\n#include "worker/bridge/sync.h"\n',
            "worker/bridge/more.h": '#include "worker/worker_main.cc"\n',
            "server/coordinator.h": '#include "worker/client/queues.h"\n',
            "worker/helper.h": '#include "bench/bench.h"\n',
            "bench/more.h": '#  include "tests/util.h"\n',
            "bench/sim/models2.h": '#include "bench/harness/local_job.h"\n',
        }, [
            'bench/more.h:1: includes "tests/util.h": bench (floor 10) may not include tests (floor 11), '
            "a higher floor",
            'bench/sim/models2.h:1: includes "bench/harness/local_job.h": bench/sim (floor 8) may not include '
            "bench/harness (floor 9), a higher floor",
            'proto/extra.h:1: includes "common/base/status.h": proto (floor 0) may not include common/base '
            "(floor 1), a higher floor",
            'server/coordinator.h:1: includes "worker/client/queues.h": server and worker/client are siblings on '
            "floor 4 and may not include each other",
            'worker/helper.h:1: includes "bench/bench.h": worker (floor 7) may not include bench (floor 10), '
            "a higher floor",
            'worker/bridge/more.h:1: includes "worker/worker_main.cc": worker/bridge (floor 6) may not '
            "include worker (floor 7), a higher floor",
            'worker/trainer/solver.h:2: includes "worker/bridge/sync.h": worker/trainer (floor 5) may not '
            "include worker/bridge (floor 6), a higher floor",
        ])

    def test_siblings_may_not_include_each_other(self):
        self.check_fails_with({"server/param_server.cc": '#include "worker/client/queues.h"\n'}, [
            'server/param_server.cc:1: includes "worker/client/queues.h": server and worker/client are siblings '
            "on floor 4 and may not include each other"])

    def test_file_on_no_floor_fails(self):
        self.check_fails_with({"tools/x.cc": '#include "common/base/status.h"\n'}, [
            "tools/x.cc: on no floor (add its folder to FLOORS in scripts/include_graph.py)"])

    def test_include_guard_must_match_the_path(self):
        files = dict(CLEAN)
        files["worker/trainer/blob.h"] = "#ifndef NEREUS_WORKER_BLOB_H_\n#define NEREUS_WORKER_BLOB_H_\n#endif\n"
        files["common/base/old.h"] = "#pragma once\n"
        files["common/include/nereus/client.h"] = (
            "#ifndef NEREUS_WORKER_CLIENT_INCLUDE_NEREUS_CLIENT_H_\n#include \"nereus/status.h\"\n#endif\n")
        files["common/include/nereus/status.h"] = "#ifndef NEREUS_COMMON_INCLUDE_NEREUS_STATUS_H_\n#endif\n"
        rc, out, err = self.run_script(files, "--check")
        self.assertEqual(rc, 1, out + err)
        self.assertEqual(out.splitlines(), [
            "common/base/old.h: no include guard (expected #ifndef NEREUS_COMMON_BASE_OLD_H_)",
            "common/include/nereus/client.h: include guard NEREUS_WORKER_CLIENT_INCLUDE_NEREUS_CLIENT_H_ "
            "does not match its path (expected NEREUS_CLIENT_H_)",
            "common/include/nereus/status.h: include guard NEREUS_COMMON_INCLUDE_NEREUS_STATUS_H_ does not match its "
            "path (expected NEREUS_STATUS_H_)",
            "worker/trainer/blob.h: include guard NEREUS_WORKER_BLOB_H_ does not match its path "
            "(expected NEREUS_WORKER_TRAINER_BLOB_H_)",
        ])
        self.assertIn("4 header(s) with an include guard that does not match the path", err)
        self.assertNotIn("break the floors", err)

    def test_public_headers_include_only_public_headers_and_the_standard_library(self):
        err = self.check_public_header_fails("common/include/nereus/client.h", {
            "common/include/nereus/client.h":
                '#include <vector>\n#include "nereus/status.h"\n#include "nereus/options.h"\n'
                '#include "common/base/status.h"\n#include <glog/logging.h>\n#include "proto/nereus.pb.h"\n'
                '#include <zmq.h>\n#include "nereus/missing.h"\n',
            "common/include/nereus/options.h": "#include <cstdint>\n",
        }, [(4, '"common/base/status.h"'), (5, "<glog/logging.h>"), (6, '"proto/nereus.pb.h"'), (7, "<zmq.h>"),
            (8, '"nereus/missing.h"')])
        self.assertNotIn("break the floors", err)

    def test_a_public_c_header_may_include_the_c_standard_library_only(self):
        self.check_public_header_fails("common/include/nereus/c_api.h", {
            "common/include/nereus/c_api.h":
                '#include <stddef.h>\n#include <stdint.h>\n#include <zmq.h>\n#include <sys/types.h>\n'
                '#include <my_stdint.h>\n#include "nereus/status.h"\n',
        }, [(3, "<zmq.h>"), (4, "<sys/types.h>"), (5, "<my_stdint.h>")])

    def test_dot_marks_the_upward_edge_red(self):
        files = dict(CLEAN)
        files["common/net/flags.h"] = '#include "worker/client/queues.h"\n'
        with tempfile.TemporaryDirectory() as out_dir:
            path = os.path.join(out_dir, "g.dot")
            rc, out, err = self.run_script(files, "--dot", path)
            self.assertEqual(rc, 0, out + err)
            with open(path) as fh:
                text = fh.read()
        self.assertTrue(text.startswith("digraph nereus_includes {"))
        self.assertIn('"common/net" -> "worker/client" [color=red, penwidth=2];', text)
        self.assertIn('"worker/bridge" -> "worker/trainer";', text)
        self.assertIn('"worker/trainer/layers" -> "worker/trainer";', text)
        self.assertNotIn('"worker/client" -> "common/net" [color=red', text)

    def test_cuda_stays_out_of_common_server_and_the_client(self):
        _, err = self.check_fails({
            "common/net/fast.h": "#include <vector>\n#include <cuda_runtime.h>\n",
            "server/update.cc": '#include "server/param_server.h"\n#include <cublas_v2.h>\n',
            "worker/client/push.cc": "#include <thrust/device_vector.h>\n#include <curand.h>\n",
            "worker/client/kernels.cu": "",
            # The GPU support and the trainer may use CUDA; common/ may use the macro header.
            "worker/trainer/gpu/device.cc": "#include <cuda_runtime.h>\n#include <cublas_v2.h>\n",
            "worker/trainer/layers/relu.cu": '#include "worker/trainer/gpu/device.h"\n',
            "worker/trainer/gpu/device.h": "",
            "common/base/host_device.h": "",
            "common/update/rules.h": '#include "common/base/host_device.h"\n',
        }, [
            'common/net/fast.h:2: includes "cuda_runtime.h": common/, server/ and worker/client/ stay free of CUDA',
            'server/update.cc:2: includes "cublas_v2.h": common/, server/ and worker/client/ stay free of CUDA',
            "worker/client/kernels.cu: a CUDA source in worker/client, which must build without CUDA",
            'worker/client/push.cc:1: includes "thrust/device_vector.h": common/, server/ and worker/client/ stay '
            "free of CUDA",
            'worker/client/push.cc:2: includes "curand.h": common/, server/ and worker/client/ stay free of CUDA',
        ])
        self.assertIn("5 CUDA include(s) or source(s) in common/, server/ or worker/client/", err)
        self.assertNotIn("break the floors", err)

    def test_common_including_the_gpu_support_is_named_twice(self):
        self.check_fails({"common/net/fast.h": '#include "worker/trainer/gpu/device.h"\n',
                          "worker/trainer/gpu/device.h": ""}, [
            'common/net/fast.h:1: includes "worker/trainer/gpu/device.h": common/net (floor 2) may not include '
            "worker/trainer (floor 5), a higher floor",
            'common/net/fast.h:1: includes "worker/trainer/gpu/device.h": common/, server/ and worker/client/ stay free '
            "of CUDA",
        ])

    def test_no_mode_is_an_error(self):
        rc, out, err = self.run_script(CLEAN)
        self.assertEqual(rc, 2)
        self.assertIn("give --check, --dot FILE or --png FILE", err)


if __name__ == "__main__":
    unittest.main()
