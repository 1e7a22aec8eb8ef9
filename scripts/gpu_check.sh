#!/usr/bin/env bash
# The one-call check of Nereus's GPU code on a GPU machine, run from the
# archive scripts/gpu_pack.sh makes (docs/GPU.md):
#
#   tar -xJf nereus-gpu.tar.xz && nereus-gpu/scripts/gpu_check.sh OUTDIR [--dry_run]
#
# In about 5 to 7 minutes, each step bounded by `timeout`:
#   1. every gpu-labelled test (bin/tests.json) with NEREUS_REQUIRE_GPU=1, so a
#      test that finds no GPU fails instead of skipping (gpu_job_test: a job
#      of 2 GPU workers x 2 servers, bin/nereus_server and bin/nereus_worker);
#   2. LeNet (worker/trainer/models/lenet_solver.prototxt's net and settings,
#      on data/mnist) for 300 iterations on the CPU and on GPU 0 from the same
#      initial weights (a .caffemodel of iteration 0, --weights), the losses of
#      every 10th iteration compared: each within 5% relative (+0.005) of the
#      CPU's, and the final test accuracies within 1 point. (The first
#      iteration agrees to rounding; the runs then drift apart as GEMMs
#      summed in another order feed through the updates: measured drift, not
#      a bound, is in OUTDIR/lenet.json.)
#   3. the job benchmark (scripts/gpu_job_bench.py): ResNet-50 and VGG-19,
#      a 1 worker (GPU 0) x 1 server job on this machine against the
#      standalone GPU trainer and raw ZeroMQ's time for the same bytes, 3 rounds, same
#      run, with the targets of the GPU data path (reported, not failed on);
#   4. the benchmark: nereus_bench train --gpu=0 (LeNet, CIFAR-10 full,
#      CaffeNet, VGG-19, ResNet-50 at batch 32; every layer's forward and
#      backward time and the peak device memory in its JSON) on each engine
#      (cuDNN where this machine has it, and --cudnn=false: im2col + GEMM),
#      and VGG-19 and ResNet-50 again with --tf32; PyTorch fp32 with TF32
#      off, and on for those two, on the same GPU (scripts/gpu_bench_torch.py,
#      in the machine's own environment: none of Nereus's libraries on its
#      LD_LIBRARY_PATH), with the targets of the GPU speed issue (reported,
#      not failed on): with cuDNN VGG-19 and ResNet-50 at most 1.10x
#      PyTorch's iteration, CaffeNet at most 1.0x, LeNet and CIFAR-10 faster;
#      on im2col VGG-19 at most 1.7x and ResNet-50 1.5x; with TF32 on both
#      sides at most 1.10x; peak device memory at most 1.3x PyTorch's
#      max_memory_reserved (VGG-19, ResNet-50).
# Writes into OUTDIR (8 files): summary.json (everything above in one, the
# job benchmark's rows included), tests.log, tests.json, lenet.log,
# lenet.json, job.log, bench.log, bench.json.
# Exit status: 0 when the tests pass and the LeNet traces agree; 1 otherwise;
# 77 when there is no GPU (after checking the archive's contents; also
# --dry_run, which prints the commands it would run); 2 for bad usage.
#
# CUDA libraries: cuBLAS, cuBLASLt and cuRAND are the machine's: the first
# of $NEREUS_CUDA_LIB_DIR, $CUDA_HOME/lib64, /usr/local/cuda/lib64 and
# PyTorch's nvidia-* packages that holds each (printed at the start); so is
# cuDNN 9 (libcudnn.so.9, never packed), found the same way if it is there
# (without it the convolutions run on im2col, and the log says so).
set -uo pipefail

usage() { echo "usage: scripts/gpu_check.sh OUTDIR [--dry_run]" >&2; exit 2; }
OUTDIR=""
DRY=0
for a in "$@"; do
  case "$a" in
    --dry_run) DRY=1 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_check.sh: unknown flag $a" >&2; usage ;;
    *) [[ -z "$OUTDIR" ]] || usage; OUTDIR="$a" ;;
  esac
done
[[ -n "$OUTDIR" ]] || usage
PKG=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$OUTDIR" || exit 2
OUTDIR=$(cd "$OUTDIR" && pwd)
START=$(date +%s)
DEADLINE=$((START + 420))  # Everything within 7 minutes, with room to write the summary.
budget() {  # LIMIT -> the smaller of LIMIT and the seconds left (at least 1)
  local left=$((DEADLINE - $(date +%s)))
  (( left < 1 )) && left=1
  (( $1 < left )) && echo "$1" || echo "$left"
}
say() { echo "gpu_check: $*" | tee -a "$OUTDIR/tests.log" >&2; }
: > "$OUTDIR/tests.log"

# --- 0. The archive's contents ------------------------------------------------
missing=()
for f in bin/nereus_worker bin/nereus_server bin/nereus_launch bin/nereus_bench bin/tests.json \
         scripts/gpu_bench_torch.py scripts/gpu_job_bench.py \
         worker/trainer/models/lenet_train_test.prototxt worker/trainer/models/lenet_solver.prototxt \
         worker/trainer/models/vgg19_train_val.prototxt worker/trainer/models/resnet50_train_val.prototxt \
         worker/trainer/models/caffenet_train_val.prototxt worker/trainer/models/cifar10_full_train_test.prototxt \
         data/mnist/mnist_train_lmdb/data.mdb data/mnist/mnist_test_lmdb/data.mdb MANIFEST; do
  [[ -e "$PKG/$f" ]] || missing+=("$f")
done
while read -r b; do
  [[ -x "$PKG/bin/$b" ]] || missing+=("bin/$b")
done < <(python3 -c 'import json,sys; print("\n".join(sorted({t["binary"] for t in json.load(open(sys.argv[1]))})))' \
           "$PKG/bin/tests.json" 2>/dev/null)
if (( ${#missing[@]} > 0 )); then
  say "the archive at $PKG lacks: ${missing[*]}"
  exit 1
fi
NTESTS=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$PKG/bin/tests.json")
say "archive $PKG: $NTESTS gpu tests, $(ls "$PKG/lib" | wc -l) libraries; $(head -2 "$PKG/MANIFEST" | tail -1)"

HAVE_GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU 0'; then
  HAVE_GPU=1
  say "$(nvidia-smi -L | head -1); driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)"
fi

# --- CUDA libraries from this machine ---------------------------------------
find_lib() {  # NAME -> the first directory holding it
  local name=$1 d
  local dirs=("${NEREUS_CUDA_LIB_DIR:-}" "${CUDA_HOME:+$CUDA_HOME/lib64}" /usr/local/cuda/lib64
              /usr/local/cuda/targets/x86_64-linux/lib)
  for d in "${dirs[@]}"; do
    [[ -n "$d" && -e "$d/$name" ]] && { echo "$d"; return 0; }
  done
  python3 - "$name" <<'EOF' 2>/dev/null
import glob, os, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for hit in sorted(glob.glob(os.path.join(r, "nvidia", "**", sys.argv[1]), recursive=True)):
        print(os.path.dirname(hit))
        sys.exit(0)
sys.exit(1)
EOF
}
LIBDIRS="$PKG/lib"
for name in libcublas.so.13 libcublasLt.so.13 libcurand.so.10; do
  dir=$(find_lib "$name") || dir=""
  if [[ -z "$dir" ]]; then
    say "cannot find $name on this machine (set NEREUS_CUDA_LIB_DIR to the folder that holds it)"
    [[ $DRY == 1 || $HAVE_GPU == 0 ]] || { say "no GPU check without it"; exit 1; }
  else
    say "$name from $dir"
    [[ ":$LIBDIRS:" == *":$dir:"* ]] || LIBDIRS="$LIBDIRS:$dir"
  fi
done
CUDNN_DIR=$(find_lib libcudnn.so.9) || CUDNN_DIR=""
if [[ -n "$CUDNN_DIR" ]]; then
  say "libcudnn.so.9 from $CUDNN_DIR"
  [[ ":$LIBDIRS:" == *":$CUDNN_DIR:"* ]] || LIBDIRS="$LIBDIRS:$CUDNN_DIR"
else
  say "no libcudnn.so.9 on this machine: the convolutions run on the im2col engine"
fi
# PyTorch runs in the environment it came with: none of these on its path.
MACHINE_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
export LD_LIBRARY_PATH="$LIBDIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
torch_env() { env LD_LIBRARY_PATH="$MACHINE_LD_LIBRARY_PATH" "$@"; }

run() {  # TIMEOUT LOG command...: run it (bounded) or, dry, print it
  local limit=$1 log=$2
  shift 2
  if [[ $DRY == 1 || $HAVE_GPU == 0 ]]; then
    echo "would run (timeout ${limit}s, log $log): $*" >&2
    return 0
  fi
  timeout --kill-after=10 "$limit" "$@" >> "$log" 2>&1
}
if [[ $DRY == 1 || $HAVE_GPU == 0 ]]; then
  [[ $HAVE_GPU == 0 ]] && say "no GPU here (nvidia-smi finds none): printing the steps only"
fi

# --- 1. The gpu tests --------------------------------------------------------
TESTS_OK=1
python3 - "$PKG" "$OUTDIR" "$DRY$HAVE_GPU" "$(budget 150)" <<'EOF' || TESTS_OK=0
import json, os, subprocess, sys, time
pkg, out, mode, budget = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
deadline = time.time() + budget
results, ok = {}, True
with open(os.path.join(out, "tests.log"), "a") as log:
    for t in json.load(open(os.path.join(pkg, "bin", "tests.json"))):
        # NEREUS_BIN_DIR: the binaries a multi-process test starts (gpu_job_test's servers and workers);
        # NEREUS_SOURCE_DIR: the archive holds the models and data/mnist where the source tree has them.
        t["env"] = dict(t["env"], NEREUS_BIN_DIR=os.path.join(pkg, "bin"), NEREUS_SOURCE_DIR=pkg)
        env = dict(os.environ, NEREUS_REQUIRE_GPU="1", **t["env"])
        report = os.path.join(out, ".%s.json" % t["name"])
        cmd = [os.path.join(pkg, "bin", t["binary"])] + t["args"] + ["--gtest_output=json:" + report]
        limit = max(1.0, min(float(t["timeout_s"]), deadline - time.time()))
        if mode != "01":
            print("would run (timeout %ds): %s %s" % (limit, " ".join("%s=%s" % kv for kv in sorted(t["env"].items())),
                                                    " ".join(cmd)), file=sys.stderr)
            continue
        log.write("gpu_check: test %s\n" % t["name"])
        log.flush()
        started = time.time()
        try:
            rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=limit).returncode
        except subprocess.TimeoutExpired:
            rc = "timed out after %d s" % limit
        entry = {"exit": rc, "seconds": round(time.time() - started, 1)}
        try:
            doc = json.load(open(report))
            cases = [c for s in doc.get("testsuites", []) for c in s.get("testsuite", [])]
            entry.update({"tests": doc.get("tests"), "failures": doc.get("failures"),
                          "failed": [c["name"] for c in cases if c.get("failures")],
                          "skipped": [c["name"] for c in cases if c.get("result") == "SKIPPED"]})
            os.remove(report)
        except (OSError, ValueError):
            pass
        results[t["name"]] = entry
        # A binary that ran no test (or skipped every one) checked nothing: a failure.
        ran = (entry.get("tests") or 0) - len(entry.get("skipped") or [])
        if rc == 0 and ran <= 0:
            entry["why"] = "ran no test: %s test(s), %d skipped" % (entry.get("tests"), len(entry.get("skipped") or []))
        passed = rc == 0 and not entry.get("failed") and ran > 0
        ok = ok and passed
        print("gpu_check: test %s: %s (%s)" % (t["name"], "passed" if passed else "FAILED", entry), file=sys.stderr)
        log.write("gpu_check: test %s: %s\n" % (t["name"], "passed" if passed else "FAILED"))
json.dump(results, open(os.path.join(out, "tests.json"), "w"), indent=1)
sys.exit(0 if ok else 1)
EOF

# --- 2. LeNet on the CPU and the GPU from the same weights --------------------
LENET_OK=1
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
: > "$OUTDIR/lenet.log"
python3 - "$PKG" "$WORK" <<'EOF'
import re, sys
pkg, work = sys.argv[1], sys.argv[2]
net = open(pkg + "/worker/trainer/models/lenet_train_test.prototxt").read()
net = net.replace('source: "data/mnist/', 'source: "' + pkg + '/data/mnist/')
open(work + "/lenet.prototxt", "w").write(net)
solver = open(pkg + "/worker/trainer/models/lenet_solver.prototxt").read()
keep = []
for line in solver.splitlines():
    if re.match(r"\s*(net|test_iter|test_interval|display|max_iter|snapshot|snapshot_prefix|snapshot_after_train|"
                r"solver_mode|random_seed|average_loss)\s*:", line):
        continue
    keep.append(line)
common = "\n".join(keep) + '\nnet: "%s/lenet.prototxt"\ntest_iter: 20\ntest_interval: 300\nrandom_seed: 1\n' \
    "snapshot: 0\nsnapshot_after_train: false\nsolver_mode: CPU\naverage_loss: 1\n" % work
open(work + "/init.prototxt", "w").write(common + "max_iter: 0\ndisplay: 0\n")
open(work + "/solver.prototxt", "w").write(common + "max_iter: 300\ndisplay: 10\n")
EOF
W="$PKG/bin/nereus_worker"
run "$(budget 60)" "$OUTDIR/lenet.log" "$W" --standalone --solver="$WORK/init.prototxt" --weights_out="$WORK/init.caffemodel" \
  || { say "LeNet: writing the initial weights FAILED"; LENET_OK=0; }
run "$(budget 90)" "$OUTDIR/lenet.log" "$W" --standalone --solver="$WORK/solver.prototxt" \
  --weights="$WORK/init.caffemodel" --summary_json="$WORK/cpu.json" \
  || { say "LeNet on the CPU FAILED"; LENET_OK=0; }
run "$(budget 90)" "$OUTDIR/lenet.log" "$W" --standalone --solver="$WORK/solver.prototxt" \
  --weights="$WORK/init.caffemodel" --summary_json="$WORK/gpu.json" --gpu=0 \
  || { say "LeNet on GPU 0 FAILED"; LENET_OK=0; }
if [[ $DRY == 0 && $HAVE_GPU == 1 ]]; then
  python3 - "$OUTDIR/lenet.log" "$WORK" "$OUTDIR/lenet.json" <<'EOF' || LENET_OK=0
import json, re, sys
log, work, out = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(log).read()
# The CPU run's lines come first, then the GPU run's (each "standalone: Iteration N, loss = X").
runs, current, last = [], None, None
for m in re.finditer(r"standalone: Iteration (\d+), loss = ([-+0-9.eE]+|nan|inf)", text):
    it, loss = int(m.group(1)), float(m.group(2))
    if current is None or it <= last:
        current = {}
        runs.append(current)
    current[it], last = loss, it
result = {"tolerance": "relative 0.05 + absolute 0.005 per displayed loss; final test accuracy within 0.01",
          "ok": False}
if len(runs) != 2:
    result["error"] = "expected two loss traces (CPU, GPU), found %d" % len(runs)
else:
    cpu, gpu = runs
    iters = sorted(set(cpu) & set(gpu))
    worst = max((abs(gpu[i] - cpu[i]) / max(abs(cpu[i]), 1e-12) for i in iters), default=float("nan"))
    bad = [i for i in iters if not abs(gpu[i] - cpu[i]) <= 0.05 * abs(cpu[i]) + 0.005]
    s_cpu, s_gpu = json.load(open(work + "/cpu.json")), json.load(open(work + "/gpu.json"))
    acc = (s_cpu.get("test_accuracy"), s_gpu.get("test_accuracy"))
    acc_ok = None not in acc and abs(acc[0] - acc[1]) <= 0.01
    result.update({"iterations": iters, "cpu_loss": [cpu[i] for i in iters], "gpu_loss": [gpu[i] for i in iters],
                   "first_iteration_relative_difference": abs(gpu[0] - cpu[0]) / abs(cpu[0]) if 0 in iters else None,
                   "max_relative_difference": worst, "outside_tolerance": bad,
                   "test_accuracy_cpu": acc[0], "test_accuracy_gpu": acc[1],
                   "images_per_s_cpu": s_cpu.get("images_per_s"), "images_per_s_gpu": s_gpu.get("images_per_s"),
                   "ok": iters != [] and not bad and acc_ok})
json.dump(result, open(out, "w"), indent=1)
print("LeNet CPU vs GPU: %s (max relative loss difference %s; test accuracy %s)" %
      ("agree" if result["ok"] else "DISAGREE", result.get("max_relative_difference"),
       (result.get("test_accuracy_cpu"), result.get("test_accuracy_gpu"))))
sys.exit(0 if result["ok"] else 1)
EOF
fi

# --- 3. A 1 worker x 1 server job against the standalone trainer ----------------
: > "$OUTDIR/job.log"
JOB_BUDGET=$(budget 150)
run "$((JOB_BUDGET + 10))" "$OUTDIR/job.log" python3 "$PKG/scripts/gpu_job_bench.py" --pkg="$PKG" --work="$WORK/job" \
  --models=resnet50,vgg19 --gpu=0 --sfb=off,auto --iterations=20 --display=10 --batch=32 --rounds=3 --budget_s="$JOB_BUDGET" \
  --json="$WORK/job.json" || say "the job benchmark FAILED (job.log)"

# --- 4. The benchmark beside PyTorch -----------------------------------------
: > "$OUTDIR/bench.log"
MODELS=lenet,cifar10_full,caffenet,vgg19,resnet50
(cd "$PKG" && run "$(budget 90)" "$OUTDIR/bench.log" bin/nereus_bench train --model=$MODELS --gpu=0 --batch=32 --warmup=3 \
   --iterations=10 --json="$WORK/nereus.json") || say "nereus_bench train FAILED"
(cd "$PKG" && run "$(budget 60)" "$OUTDIR/bench.log" bin/nereus_bench train --model=$MODELS --gpu=0 --batch=32 --warmup=3 \
   --iterations=10 --cudnn=false --json="$WORK/nereus_im2col.json") || say "nereus_bench train --cudnn=false FAILED"
(cd "$PKG" && run "$(budget 40)" "$OUTDIR/bench.log" bin/nereus_bench train --model=vgg19,resnet50 --gpu=0 --batch=32 \
   --warmup=3 --iterations=10 --tf32 --json="$WORK/nereus_tf32.json") || say "nereus_bench train --tf32 FAILED"
run "$(budget 80)" "$OUTDIR/bench.log" torch_env python3 "$PKG/scripts/gpu_bench_torch.py" --models=$MODELS --batch=32 \
  --warmup=3 --iterations=10 --json="$WORK/torch.json" || say "the PyTorch baseline FAILED"
run "$(budget 40)" "$OUTDIR/bench.log" torch_env python3 "$PKG/scripts/gpu_bench_torch.py" --models=vgg19,resnet50 \
  --batch=32 --warmup=3 --iterations=10 --tf32 --json="$WORK/torch_tf32.json" || say "the PyTorch TF32 baseline FAILED"
python3 - "$WORK" "$OUTDIR" "$TESTS_OK" "$LENET_OK" "$START" "$DRY$HAVE_GPU" <<'EOF'
import json, os, sys, time
work, out, tests_ok, lenet_ok, start, mode = sys.argv[1:7]
def load(path, default):
    try:
        return json.load(open(path))
    except (OSError, ValueError):
        return default
# Per engine: the rows of nereus_bench train, the PyTorch rows it is compared
# with, and the targets (the GPU speed issue's): model -> largest ratio.
runs = [("cudnn", "nereus.json", "torch.json", {"vgg19": 1.10, "resnet50": 1.10, "caffenet": 1.0, "lenet": 1.0,
                                                   "cifar10_full": 1.0}),
        ("im2col", "nereus_im2col.json", "torch.json", {"vgg19": 1.7, "resnet50": 1.5}),
        ("tf32", "nereus_tf32.json", "torch_tf32.json", {"vgg19": 1.10, "resnet50": 1.10})]
nereus, torch = load(work + "/nereus.json", []), load(work + "/torch.json", [])
rows = []
for engine, ours_file, theirs_file, targets in runs:
    by = {r["model"]: r for r in load(work + "/" + theirs_file, [])}
    for r in load(work + "/" + ours_file, []):
        t = by.get(r["model"])
        row = {"model": r["model"], "engine": engine, "batch": r["batch"], "nereus_iteration_ms": r["iteration_ms"],
               "nereus_images_per_s": r["images_per_s"], "nereus_forward_ms": r["forward_ms"],
               "nereus_backward_ms": r["backward_ms"], "nereus_peak_device_bytes": r.get("peak_device_bytes"),
               "params": r["params"], "device": r["device"]}
        if t:
            row.update({"pytorch_iteration_ms": t["iteration_ms"], "pytorch_images_per_s": t["images_per_s"],
                        "pytorch_forward_ms": t["forward_ms"], "pytorch_backward_ms": t["backward_ms"],
                        "pytorch_peak_reserved_bytes": t.get("peak_memory_reserved_bytes"),
                        "pytorch_cudnn": t.get("cudnn"), "iteration_ratio": r["iteration_ms"] / t["iteration_ms"],
                        "pytorch": t["framework"]})
            if r["model"] in targets:
                row["target"] = "iteration at most %.2fx PyTorch's" % targets[r["model"]]
                row["target_met"] = row["iteration_ratio"] <= targets[r["model"]]
            if engine == "cudnn" and r["model"] in ("vgg19", "resnet50") and t.get("peak_memory_reserved_bytes"):
                row["memory_ratio"] = (r.get("peak_device_bytes") or 0) / t["peak_memory_reserved_bytes"]
                row["memory_target_met"] = row["memory_ratio"] <= 1.3
        rows.append(row)
json.dump({"nereus": nereus, "pytorch": torch, "comparison": rows}, open(out + "/bench.json", "w"), indent=1)
summary = {"ran": mode == "01", "tests_ok": tests_ok == "1", "lenet_ok": lenet_ok == "1",
           "tests": load(out + "/tests.json", {}), "lenet": load(out + "/lenet.json", {}),
           "job": load(work + "/job.json", {}), "bench": rows,
           "seconds": time.time() - float(start)}
json.dump(summary, open(out + "/summary.json", "w"), indent=1)
for row in rows:
    print("%-13s %-6s nereus %8.2f ms %8.1f img/s | pytorch %s | ratio %s %s" % (
        row["model"], row["engine"], row["nereus_iteration_ms"], row["nereus_images_per_s"],
        "%8.2f ms" % row["pytorch_iteration_ms"] if "pytorch_iteration_ms" in row else "-",
        "%.2f" % row["iteration_ratio"] if "iteration_ratio" in row else "-",
        "" if "target_met" not in row else ("(target met)" if row["target_met"] else "(target NOT met)")))
EOF
say "done in $(( $(date +%s) - START )) s: tests $([[ $TESTS_OK == 1 ]] && echo passed || echo FAILED), LeNet $([[ $LENET_OK == 1 ]] && echo agrees || echo DISAGREES); see $OUTDIR/summary.json"
if [[ $DRY == 1 || $HAVE_GPU == 0 ]]; then
  exit 77
fi
[[ $TESTS_OK == 1 && $LENET_OK == 1 ]] && exit 0 || exit 1
