#!/usr/bin/env python3
"""scaling_study_test: the parts of scripts/scaling_study.py that decide what a study reports.

The studies themselves take an hour and root (scripts/scaling.sh --study=...; --smoke runs every
step in minutes). Checked here, in seconds: the emulation factors of each regime, the calibration's
non-negative fit, the validation summary's target verdict, the commit every runs.jsonl line records,
the README's hand-kept notes surviving a regeneration, and the contract with nereus_bench simulate
(the columns the studies read, the constants they pass).
"""
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

SRC = os.environ.get("NEREUS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
spec = importlib.util.spec_from_file_location("scaling_study", os.path.join(SRC, "scripts", "scaling_study.py"))
study = importlib.util.module_from_spec(spec)
spec.loader.exec_module(study)


class RegimeTest(unittest.TestCase):
    def test_factors(self):
        # 10 Gbit/s at a 19.53 Mbit/s emulated link: factor 512 = 256 x 2.
        r = study.Regime("10G-eq", 3000, 10)
        self.assertEqual((r.factor, r.slow), (512, 2))
        self.assertEqual(r.cluster_flags(), ["--model_scale=256", "--device_gflops=5.859375", "--link_mbit=19.53125"])
        # Today's: 25, 100, 400 Gbit/s slowed 5, 20, 80 times.
        self.assertEqual([study.Regime("t", 57000, g).slow for g in (25, 100, 400)], [5, 20, 80])
        # The calibration's link at half the rate: 9.77 Mbit/s.
        self.assertEqual(study.Regime("5G-eq", 3000, 5, slow=2).cluster_flags()[2], "--link_mbit=9.765625")


class FitTest(unittest.TestCase):
    def test_recovers_both_coefficients(self):
        samples = [(f, a, 0.5 * f + 2 * a) for f, a in [(1, 0), (0, 1), (2, 1), (1, 3)]]
        x, y = study.fit_nonnegative(samples)
        self.assertAlmostEqual(x, 0.5)
        self.assertAlmostEqual(y, 2)

    def test_clamps_a_negative_coefficient_to_zero(self):
        # Unconstrained: y = -1 would fit exactly; the fit keeps y = 0 and the best x alone.
        samples = [(1, 1, 1.0), (2, 1, 3.0), (3, 1, 5.0)]
        x, y = study.fit_nonnegative(samples)
        self.assertEqual(y, 0.0)
        self.assertGreater(x, 0)
        self.assertEqual(study.fit_nonnegative([]), (0.0, 0.0))


class EfficiencyTest(unittest.TestCase):
    """One definition of scaling efficiency in every study: against compute alone."""

    def test_against_compute_alone(self):
        self.assertEqual(study.efficiency(2.0, 2.0), 1.0)
        self.assertEqual(study.efficiency(1.26, 2.52), 0.5)
        self.assertEqual(study.efficiency(1.0, 0.0), 0.0)

    def test_alpha_levels_are_half_measured_double_and_the_old_400(self):
        self.assertEqual(study.alpha_levels(50.9), [("x0.5", 25.45), ("x1", 50.9), ("x2", 101.8),
                                                    ("400 us (old)", 400.0)])

    def test_rate_for_90_percent_is_the_lowest_rate_that_reaches_it(self):
        proj = [{"model": "m", "variant": "v", "alpha": "x1", "hosts": 8, "rate_gbit": r, "efficiency": e}
                for r, e in [(10, 0.5), (25, 0.91), (50, 0.89), (100, 0.95)]]
        self.assertEqual(study.rate_for(proj, "m", "v", "x1", 8), 25)
        self.assertIsNone(study.rate_for(proj, "m", "v", "x2", 8))


def row(error, wait, spread=0.0):
    return {"regime": "r", "model": "m", "hosts": 8, "sfb": "off", "error_pct": error, "wait_share": wait,
            "spread": spread}


class SummaryTest(unittest.TestCase):
    def test_target_counts_only_communication_bound_runs(self):
        # The compute-bound run's 30% does not count; the communication-bound ones' median is 4%.
        lines = study.validation_summary([row(3, 0.5), row(-4, 0.2), row(5, 0.3), row(30, 0.05)])
        self.assertIn("communication-bound (waiting > 10% of the iteration): 3, median |error| 4.0%", "\n".join(lines))
        self.assertIn("**met** (median 4.0%; 0 beyond)", "\n".join(lines))

    def test_a_run_beyond_ten_percent_plus_its_spread_fails_the_target(self):
        lines = "\n".join(study.validation_summary([row(1, 0.5), row(-12, 0.5, spread=0.01), row(11, 0.5, 0.02)]))
        self.assertIn("**not met** (median 11.0%; 1 beyond)", lines)
        self.assertIn("beyond: r m 8 hosts sfb=off: -12.0% (spread 1.0%)", lines)


COMMIT = re.compile(r"^([0-9a-f]{40}(-dirty)?|unknown)$")


class CommitTest(unittest.TestCase):
    """runs.jsonl records the commit of the source tree each run measured."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="scaling_study_test_")
        # So that git never finds a checkout above the temporary folder (a TMPDIR inside one).
        self.ceiling = os.environ.get("GIT_CEILING_DIRECTORIES")
        os.environ["GIT_CEILING_DIRECTORIES"] = os.path.dirname(self.dir)

    def tearDown(self):
        shutil.rmtree(self.dir)
        if self.ceiling is None:
            del os.environ["GIT_CEILING_DIRECTORIES"]
        else:
            os.environ["GIT_CEILING_DIRECTORIES"] = self.ceiling

    def test_every_record_names_the_commit(self):
        path = os.path.join(self.dir, "runs.jsonl")
        runs = study.Runs(path, fresh=False)
        self.assertRegex(runs.commit, COMMIT)
        self.assertEqual(runs.commit, study.source_commit())
        runs.add({"key": "k", "repeat": 0, "iteration_s": 1.0})
        runs.add({"key": "k", "repeat": 1, "failed": True, "error": "exit 1"})
        with open(path) as f:
            lines = [json.loads(line) for line in f]
        self.assertEqual([r["commit"] for r in lines], [runs.commit] * 2)
        # A study that resumes reads them back; a record of a run before the field has none.
        with open(path, "a") as f:
            f.write(json.dumps({"key": "k", "repeat": 2, "iteration_s": 1.0}) + "\n")
        again = study.Runs(path, fresh=False, commit="c0ffee")
        self.assertEqual([r.get("commit") for r in again.rows], [runs.commit, runs.commit, None])
        self.assertEqual(study.commits_measured(again.ok()),
                         "Source commit measured (`runs.jsonl`'s `commit`): %s (1 run); not recorded (1 run).\n\n"
                         % runs.commit)

    def test_the_commit_of_a_checkout_clean_dirty_or_none(self):
        self.assertEqual(study.source_commit(self.dir), "unknown")  # Not a git checkout.
        if shutil.which("git") is None:
            self.skipTest("no git")

        def git(*args):
            return subprocess.run(["git", "-C", self.dir, "-c", "user.name=t", "-c", "user.email=t@example.com"]
                                  + list(args), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                  check=True).stdout.strip()
        git("init", "-q")
        self.assertEqual(study.source_commit(self.dir), "unknown")  # No commit yet.
        os.makedirs(os.path.join(self.dir, "bench", "results", "s"))
        for name in ("code.cc", "bench/results/s/runs.jsonl"):
            with open(os.path.join(self.dir, name), "w") as f:
                f.write("x\n")
        git("add", "-A")
        git("commit", "-q", "-m", "one")
        head = git("rev-parse", "HEAD")
        self.assertEqual(study.source_commit(self.dir), head)
        # The studies' own output does not make the tree dirty; a change to the code does.
        with open(os.path.join(self.dir, "bench/results/s/runs.jsonl"), "a") as f:
            f.write("y\n")
        self.assertEqual(study.source_commit(self.dir), head)
        with open(os.path.join(self.dir, "code.cc"), "a") as f:
            f.write("y\n")
        self.assertEqual(study.source_commit(self.dir), head + "-dirty")


class ReadmeTest(unittest.TestCase):
    def test_notes_kept_by_hand_survive_a_regeneration(self):
        out = tempfile.mkdtemp(prefix="scaling_study_test_")
        try:
            with study.Readme(out) as f:
                f.write("# Study\n\nfirst run\n")
            with open(os.path.join(out, "README.md"), "a") as f:
                f.write("\n%s\n\n- what happened before\n" % study.NOTES_HEADING)
            with study.Readme(out) as f:
                f.write("# Study\n\n")
                f.write("second run\n")
            with open(os.path.join(out, "README.md")) as f:
                self.assertEqual(f.read(), "# Study\n\nsecond run\n\n%s\n\n- what happened before\n"
                                 % study.NOTES_HEADING)
        finally:
            shutil.rmtree(out)


class SimulateContractTest(unittest.TestCase):
    """The study's calls of nereus_bench simulate: the columns it reads exist, the constants reach it."""

    def setUp(self):
        path = os.path.join(os.environ.get("NEREUS_BIN_DIR", ""), "nereus_bench")
        if not os.path.exists(path):
            self.skipTest("no nereus_bench (run through ctest)")
        self.bench = study.Bench(path, "off")

    def test_columns_and_constants(self):
        consts = {"alpha_us": 0, "apply_ns_per_byte": 0, "rebuild_gflops": 0}
        rows = self.bench.simulate("lenet", [1, 2], [100, 1000], 1000, 1, "full", "auto", consts)
        self.assertEqual([(r["hosts"], r["link_mbit"]) for r in rows],
                         [("1", "100"), ("2", "100"), ("1", "1000"), ("2", "1000")])
        for key in ("iteration_s", "compute_s", "efficiency", "sfb_layers", "sent_bytes", "factor_bytes", "rebuild_s"):
            self.assertIn(key, rows[0])
        # LeNet on 2 hosts: ip1 as factors (HybComm, the rebuild free). A slow rebuild reaches the simulator:
        # forced to factors it takes longer, and HybComm, which prices it, keeps ip1 on the servers.
        self.assertEqual(rows[1]["sfb_layers"], "1")
        slow = dict(consts, rebuild_gflops=0.001)
        forced = self.bench.simulate("lenet", 2, 100, 1000, 1, "full", "on", slow)[0]
        self.assertGreater(float(forced["rebuild_s"]), float(rows[1]["rebuild_s"]))
        self.assertGreater(float(forced["iteration_s"]), float(rows[1]["iteration_s"]))
        self.assertEqual(self.bench.simulate("lenet", 2, 100, 1000, 1, "full", "auto", slow)[0]["sfb_layers"], "0")
        # The simulator's efficiency is against compute alone, as the studies' (to its 4 printed decimals and the
        # rounding of the 6-decimal times it is recomputed from: LeNet's iterations are ~1 ms).
        for r in rows:
            e = study.efficiency(float(r["compute_s"]), float(r["iteration_s"]))
            self.assertAlmostEqual(float(r["efficiency"]), e, delta=5e-5 + 2e-3 * e)
            # One host (its server local, alpha and apply free) never waits; two wait on the link.
            if r["hosts"] == "1":
                self.assertEqual(r["efficiency"], "1.0000")
            else:
                self.assertLess(e, 1.0)
        # predict() on a summary as summarize() makes it.
        s = {"model": "lenet", "hosts": 2, "link_mbit": 100, "device_gflops": 1000, "shrink": 1, "schedule": "full",
             "sfb": "off", "overhead_us": 0}
        predicted, r = study.predict(self.bench, s, consts)
        self.assertAlmostEqual(predicted, float(r["iteration_s"]))
        self.assertEqual(r["sfb_layers"], "0")


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
