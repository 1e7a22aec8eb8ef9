#!/usr/bin/python3
"""nereus.torch against real jobs on 127.0.0.1 (ctest: torch_job_test, label torch): two worker processes
(tests/worker/torch/job_worker.py) run every scenario below one after the other, each one a job of its own
(a coordinator and 2 servers started here), and the tests read what each left.

The bound against single-process training. A 2-worker BSP job computes the same maths as one process on the
doubled batch, in another order of float32 roundings (each worker's mean over its half, the servers' average
in rank order, Caffe's update formula). How far apart two float32 orderings of one computation may end is
measured, not guessed: training the same reference in float64 gives the exact answer to within float32's
noise, and the float32 reference's distance from it is what rounding alone does to this run. The distributed
result must be as close to the float64 answer as 4 times that (and at least float32's epsilon times the
weights): rounding differences, nothing systematic.
"""

import json
import os
import re
import sys
import unittest

from torch_job import PYTHON, HERE, Servers, run_workers, skip_without_torch, temp_dir

skip_without_torch()
import torch  # noqa: E402

import torch_models as tm  # noqa: E402

ITERATIONS = 5
SCENARIOS = [
    dict(name="server_a", model="small", update="server", opt="sgd", iterations=ITERATIONS),
    dict(name="server_b", model="small", update="server", opt="sgd", iterations=ITERATIONS),
    dict(name="local_a", model="small", update="local", opt="adam", iterations=ITERATIONS),
    dict(name="local_b", model="small", update="local", opt="adam", iterations=ITERATIONS),
    dict(name="unused", model="small_extra", update="local", opt="sgd_nodecay", iterations=3, aux=True),
    dict(name="server_unused", model="small_extra", update="server", opt="sgd_nodecay", iterations=3, aux=True),
    dict(name="sfb_on", model="seq", update="server", opt="sgd_nodecay", iterations=4, sfb="on", check_factors=True),
    # HybComm switching a layer's path at a clock boundary (forced, as a measured switch would be): out goes
    # through the servers at clocks 1-2 and back as factors from 3, mix through the servers from 2.
    dict(name="sfb_switch", model="seq", update="server", opt="sgd_nodecay", iterations=4, sfb="on",
         client={"sfb_schedule": "out.weight:1:ps,out.weight:3:sfb,mix.weight:2:ps"}),
    dict(name="sfb_off", model="seq", update="server", opt="sgd_nodecay", iterations=4, sfb="off"),
    dict(name="changed", model="small", update="server", opt="sgd", iterations=4, change_at=2),
    dict(name="mismatch", model="small", update="server", opt="sgd", iterations=2, mismatch=True),
    dict(name="frozen", model="small", update="server", opt="sgd", iterations=2, frozen=True),
    dict(name="ssp", model="small", update="server", opt="sgd", iterations=5, flags=["--consistency=ssp",
                                                                                      "--staleness=1"]),
    dict(name="async", model="small", update="server", opt="sgd", iterations=5, flags=["--consistency=async"]),
    dict(name="ssp_local", model="small", update="local", opt="sgd", iterations=2, flags=["--consistency=ssp",
                                                                                           "--staleness=1"]),
    dict(name="broadcast", model="small", update="local", opt="sgd", iterations=1, broadcast=True),
    dict(name="killed", model="small", update="server", opt="sgd", iterations=50, kill_at=3),
]


class TorchJobTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = temp_dir()
        d = cls.tmp.name
        cls.servers = {}
        specs = []
        for sc in SCENARIOS:
            servers = Servers(d, sc["name"], flags=sc.get("flags", ()))
            cls.servers[sc["name"]] = servers
            specs.append(dict(sc, coordinator=servers.address))
        spec = os.path.join(d, "spec.json")
        with open(spec, "w") as f:
            json.dump(specs, f)
        script = os.path.join(HERE, "job_worker.py")
        cls.outputs = run_workers([[PYTHON, script, str(r), spec, d] for r in range(2)], timeout_s=400)
        cls.codes = {name: s.wait(60) for name, s in cls.servers.items()}
        cls.results = {}
        for sc in SCENARIOS:
            for r in range(2):
                path = os.path.join(d, "%s.%d.pt" % (sc["name"], r))
                cls.results[(sc["name"], r)] = torch.load(path) if os.path.exists(path) else None

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers.values():
            s.kill()
        cls.tmp.cleanup()

    def result(self, name, rank):
        r = self.results[(name, rank)]
        self.assertIsNotNone(r, "worker %d left no result for %s; its output:\n%s" % (rank, name,
                                                                                        self.outputs[rank][1][-6000:]))
        return r

    def ok(self, name):
        """Both workers' results of a scenario that must succeed, and its job ended cleanly."""
        got = [self.result(name, r) for r in range(2)]
        for r in range(2):
            self.assertIsNone(got[r]["error"], "worker %d, %s" % (r, name))
        self.assertEqual(self.codes[name], {"coordinator": 0, "server0": 0, "server1": 0}, name)
        return got

    def assert_bytes_equal(self, a, b, what):
        self.assertEqual(sorted(a), sorted(b))
        for k in a:
            self.assertTrue(torch.equal(a[k], b[k]), "%s: %s differs" % (what, k))

    def assert_within_rounding(self, got, name, kind, iterations, aux_rows=0):
        ref32 = tm.reference(name, kind, iterations, aux_rows=aux_rows)
        ref64 = tm.reference(name, kind, iterations, dtype=torch.float64, aux_rows=aux_rows)
        eps = torch.finfo(torch.float32).eps
        worst = 0.0
        for k in ref32:
            noise = (ref32[k].double() - ref64[k]).abs().max().item()
            floor = eps * ref64[k].abs().max().item()
            bound = 4 * max(noise, floor)
            off = (got[k].double() - ref64[k]).abs().max().item()
            self.assertLessEqual(off, bound, "%s: %g from the float64 reference, bound %g (float32 reference: %g)"
                                 % (k, off, bound, noise))
            worst = max(worst, off / bound)
        print("%s/%s: at most %.2f of the bound from the float64 reference" % (name, kind, worst))

    def test_bsp_runs_are_byte_equal_and_workers_agree(self):
        for mode in ("server", "local"):
            a, b = self.ok(mode + "_a"), self.ok(mode + "_b")
            self.assert_bytes_equal(a[0]["state"], a[1]["state"], mode + ": worker 0 against worker 1")
            self.assert_bytes_equal(a[0]["state"], b[0]["state"], mode + ": run a against run b")

    def test_server_mode_trains_as_one_process_on_the_doubled_batch(self):
        self.assert_within_rounding(self.ok("server_a")[0]["state"], "small", "sgd", ITERATIONS)

    def test_local_mode_trains_as_one_process_on_the_doubled_batch(self):
        self.assert_within_rounding(self.ok("local_a")[0]["state"], "small", "adam", ITERATIONS)

    def test_layers_wait_in_forward_order_and_hand_over_in_backward_order(self):
        got = self.ok("server_a")[0]
        # Layers: conv 0, fc 1, head 2 (defined first, runs last).
        for clock in range(1, ITERATIONS):
            waits = [l for kind, l, c in got["trace"] if kind == "wait" and c == clock]
            readies = [l for kind, l, c in got["trace"] if kind == "ready" and c == clock]
            self.assertEqual(waits, [0, 1, 2], "clock %d" % clock)
            self.assertEqual(readies, [2, 1, 0], "clock %d" % clock)

    def test_unused_parameters_push_zeros(self):
        # aux runs on worker 0's rows only; never runs at all. Worker 0's order (conv, fc, aux, head, never) is
        # every worker's; worker 1 hands aux and never over at the end of its backward, as zeros.
        for name, kind in (("unused", "sgd_nodecay"), ("server_unused", "sgd_nodecay")):
            got = self.ok(name)
            self.assert_bytes_equal(got[0]["state"], got[1]["state"], name + ": worker 0 against worker 1")
            self.assert_within_rounding(got[0]["state"], "small_extra", kind, 3, aux_rows=tm.BATCH)
            w1 = [l for k, l, c in got[1]["trace"] if k == "ready" and c == 1]
            self.assertEqual(w1, [3, 1, 0, 4, 2], name)
            w0 = [l for k, l, c in got[0]["trace"] if k == "ready" and c == 1]
            self.assertEqual(w0, [3, 2, 1, 0, 4], name)
        never0 = tm.model("small_extra").never.weight
        self.assertTrue(torch.equal(self.ok("unused")[0]["state"]["never.weight"], never0))

    def test_linear_factors_are_the_full_gradient(self):
        on, off = self.ok("sfb_on"), self.ok("sfb_off")
        for r in range(2):
            self.assertEqual(on[r]["sfb_layers"], ["embed", "mix", "out"])
            self.assertEqual(off[r]["sfb_layers"], [])
            self.assertEqual(len(on[r]["factors"]), 3 * 4)
            for layer, equal, diff in on[r]["factors"]:
                self.assertTrue(equal, "worker %d, %s: left^T right is %g from weight.grad" % (r, layer, diff))
        self.assert_bytes_equal(on[0]["state"], on[1]["state"], "sfb: worker 0 against worker 1")
        # The factor path sums in another order than the servers: within float32 rounding of the server path.
        for k, v in off[0]["state"].items():
            self.assertLess((on[0]["state"][k] - v).abs().max().item(), 1e-5, k)

    def test_a_layer_switched_between_factors_and_servers_trains_as_either(self):
        on, switched, off = self.ok("sfb_on"), self.ok("sfb_switch"), self.ok("sfb_off")
        for r in range(2):
            self.assertEqual(switched[r]["sfb_layers"], ["embed", "mix", "out"])  # Clock 0's paths.
            self.assertEqual(switched[r]["sfb_last"], ["embed", "out"])  # Clock 3's.
        self.assert_bytes_equal(switched[0]["state"], switched[1]["state"], "switched: worker 0 against worker 1")
        # A gradient that goes through the servers after a switch must be handed over (a stale or zero
        # buffer would leave it far from the server path), and factors after a switch back rebuilt.
        for k, v in off[0]["state"].items():
            self.assertLess((switched[0]["state"][k] - v).abs().max().item(), 1e-5, k)
        # Factors crossed for the clocks on factors only: 3 layers x 4 clocks on; switched: out 2 (clocks 0, 3), mix 2, embed 4.
        for r in range(2):
            self.assertEqual(off[r]["factor_messages"], 0)
            self.assertEqual(on[r]["factor_messages"], 12)
            self.assertEqual(switched[r]["factor_messages"], 8)

    def test_a_model_changed_after_init_is_named(self):
        for r in range(2):
            err = self.result("changed", r)["error"]
            self.assertIsNotNone(err)
            self.assertIn("parameter 'fc.weight' changed after nereus.torch registered it", err)

    def test_a_shape_mismatch_is_named(self):
        self.assertEqual(self.result("mismatch", 1)["error"],
                         "ValueError: parameter 'head.weight' has shape [10, 17] here (worker 1) but [10, 16] on "
                         "worker 0: give every worker the same model")
        err0 = self.result("mismatch", 0)["error"]
        print("worker 0 of the mismatched job:", err0)
        self.assertIsNotNone(err0)
        self.assertIn("worker 1", err0)
        # Worker 1 told the job why (nereus_fail) before it left.
        self.assertIn(") failed: ValueError: parameter 'head.weight' has shape [10, 17] here (worker 1)", err0)

    def assert_both_refuse(self, name, error):
        """Both workers of scenario `name` meet `error` themselves. Whichever meets it first tells the job
        (nereus_fail), which ends at once: the other raises `error` itself, or, if the job ended before it got
        there, the job's abort naming the first and its error."""
        got = [self.result(name, r)["error"] for r in range(2)]
        for r in range(2):
            aborted = re.fullmatch(r"NereusError: ABORTED: worker %d \(tcp://127\.0\.0\.1:\d+\) failed: %s"
                                   % (1 - r, re.escape(error)), got[r] or "")
            self.assertTrue(got[r] == error or aborted, "worker %d of %s: %s" % (r, name, got[r]))
        self.assertIn(error, got, "neither worker of %s met the error itself" % name)

    def test_a_parameter_without_gradient_is_named(self):
        self.assert_both_refuse("frozen", "ValueError: parameter 'conv.bias' does not require a gradient, so it can "
                                          "get none to synchronize: leave it out of named_parameters (or set "
                                          "requires_grad)")

    def test_ssp_and_async_train_in_server_mode_and_local_mode_needs_bsp(self):
        for name in ("ssp", "async"):
            got = self.ok(name)
            for r in range(2):
                for k, v in got[r]["state"].items():
                    self.assertTrue(torch.isfinite(v).all(), "%s, worker %d: %s" % (name, r, k))
        self.assert_both_refuse("ssp_local", "ValueError: update='local' (the servers average, your optimizer "
                                             "steps) needs a BSP job; this job is SSP: use update='server'")

    def test_broadcast_parameters_gives_every_worker_worker_0s_values(self):
        got = self.ok("broadcast")
        want = dict(tm.model("small").state_dict(), steps=torch.tensor([5.0]))
        for r in range(2):
            self.assert_bytes_equal(got[r]["broadcast"], want, "worker %d after broadcast_parameters" % r)

    def test_a_killed_worker_ends_the_job_naming_it(self):
        self.assertIsNone(self.results[("killed", 1)])  # It died without a word.
        err = self.result("killed", 0)["error"]
        print("worker 0 of the killed job:", err)
        self.assertIsNotNone(err)
        self.assertIn("worker 1", err)
        self.assertNotEqual(self.codes["killed"]["coordinator"], 0)
        self.assertEqual(self.outputs[0][0], 0, self.outputs[0][1][-4000:])


if __name__ == "__main__":
    unittest.main(verbosity=2)
