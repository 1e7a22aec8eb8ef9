#!/usr/bin/env bash
# scripts/gpu_job_bench.py's smoke run on the CPU (--gpu=-1), so that the
# benchmark gpu_check.sh runs on a GPU machine is exercised here too: LeNet
# with its Data layers made Input layers (nereus_bench train --net_dir), standalone and as a 2 workers x 2
# servers job (nereus_launch --ssh=none) with --sfb=off and auto, next to raw
# ZeroMQ's push+pull measured in the same run (of 4 MB, not the benchmark's
# 64 MB: 9 s instead of 45 here). Checks that every run
# finished and was timed over the expected window, that the ratios and the
# raw rate are there, and that the auto job's HybComm table came back.
#   gpu_job_bench_test.sh BUILD_DIR
set -euo pipefail
BUILD_DIR=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
for b in nereus_worker nereus_server nereus_launch nereus_bench; do
  [[ -x "$BUILD_DIR/bin/$b" ]] || { echo "gpu_job_bench_test: $BUILD_DIR/bin/$b is not built (a build without the trainer)"; exit 77; }
done
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/pkg"
ln -s "$BUILD_DIR/bin" "$T/pkg/bin"
ln -s "$ROOT/worker" "$T/pkg/worker"
python3 "$ROOT/scripts/gpu_job_bench.py" --pkg="$T/pkg" --work="$T/work" --models=lenet --gpu=-1 --sfb=off,auto \
  --iterations=4 --display=2 --rounds=1 --raw_seconds=0.1 --raw_bytes=4194304 --budget_s=500 --json="$T/out.json"
python3 - "$T/out.json" "$T/work/lenet.prototxt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["raw"]["exit"] == 0 and r["raw"]["pushpull_gbit_s"] > 0, r["raw"]
runs = r["runs"]
assert [(x["run"], x["sfb"]) for x in runs] == [("standalone", None), ("job", "off"), ("job", "auto")], runs
for x in runs:
    assert x["exit"] == 0 and x["window_end_iteration"] == 2 and x["iteration_ms"] > 0, x
    assert x["workers"] == (1 if x["run"] == "standalone" else 2), x
    assert x["param_bytes"] == 4 * 431080, x  # LeNet's learned parameters, float32.
auto = runs[2]
assert auto["hybcomm"][0].startswith("HybComm (--sfb=auto, 2 worker(s), 2 server(s))"), auto["hybcomm"]
assert any(line.split()[0] == "ip1/0" for line in auto["hybcomm"][2:]), auto["hybcomm"]
targets = r["targets"]
assert [t["sfb"] for t in targets] == ["off", "auto"], targets
for t in targets:
    assert t["ratio_to_standalone"] == t["job_ms"] / t["standalone_ms"], t
    assert t["raw_zmq_ms"] == 1000.0 * 2 * 4 * 431080 * 8 / (r["raw"]["pushpull_gbit_s"] * 1e9), t
# The net nereus_bench train --net_dir wrote: the TRAIN Data layer as an Input layer, the TEST one dropped.
net = " ".join(open(sys.argv[2]).read().split())
assert 'type: "Data"' not in net and net.count('type: "Input"') == 1, net[:400]
assert "input_param { shape { dim: 32 dim: 1 dim: 28 dim: 28 } shape { dim: 32 } }" in net, net[:400]
print("gpu_job_bench_test: passed")
PY
