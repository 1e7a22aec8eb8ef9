#!/usr/bin/env bash
# scripts/gpu_pack.sh's packing steps on this build (--no_build) and
# scripts/gpu_check.sh on the unpacked archive where there is no GPU: the
# archive holds the binaries, every gpu test, their libraries (glibc's and the
# CUDA libraries the GPU machine provides left out), the models and the
# MNIST LMDBs, and is under 60 MiB; gpu_check.sh checks those contents, then,
# finding no GPU (or with --dry_run), prints every step it would run and exits
# 77. Skipped (77) in a build without CUDA, where there is nothing to pack.
#   gpu_pack_test.sh BUILD_DIR
set -euo pipefail
BUILD_DIR=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
GPU_TESTS=$(cd "$BUILD_DIR" && ctest -N -L gpu)
if [[ "$GPU_TESTS" != *": gpu_test"* || ! -x "$BUILD_DIR/bin/gpu_test" ]]; then
  echo "gpu_pack_test: this build has no GPU code (no CUDA toolkit found): nothing to pack"
  exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "gpu_pack_test: FAIL: $*" >&2; exit 1; }

"$ROOT/scripts/gpu_pack.sh" "$TMP/nereus-gpu.tar.xz" --no_build --build_dir="$BUILD_DIR" --xz_level=1 > "$TMP/pack.log" 2>&1 \
  || { cat "$TMP/pack.log"; fail "gpu_pack.sh failed"; }
cat "$TMP/pack.log"
SIZE=$(stat -c %s "$TMP/nereus-gpu.tar.xz")
(( SIZE < 60 * 1024 * 1024 )) || fail "the archive is $SIZE bytes, not under 60 MiB"
grep -q "gpu_pack.sh: $TMP/nereus-gpu.tar.xz: $SIZE bytes" "$TMP/pack.log" || fail "gpu_pack.sh did not report the size"

tar -C "$TMP" -xJf "$TMP/nereus-gpu.tar.xz"
PKG="$TMP/nereus-gpu"
for f in bin/nereus_worker bin/nereus_server bin/nereus_launch bin/nereus_bench bin/gpu_test bin/gpu_job_test bin/layer_gpu_test bin/layer_device_test bin/tests.json \
         lib/libcudart.so.13 scripts/gpu_check.sh scripts/gpu_bench_torch.py scripts/gpu_job_bench.py MANIFEST \
         worker/trainer/models/vgg19_train_val.prototxt data/mnist/mnist_train_lmdb/data.mdb; do
  [[ -e "$PKG/$f" ]] || fail "the archive lacks $f"
done
# Left out: glibc's, libstdc++/libgcc_s, and the CUDA libraries the GPU machine has.
for f in "$PKG"/lib/*; do
  case "$(basename "$f")" in
    libc.so*|libm.so*|libstdc++*|libgcc_s*|ld-linux*|libcublas*|libcurand*|libcuda.so*) fail "packed $(basename "$f")" ;;
  esac
done
ls "$PKG/lib" | grep -q '^libprotobuf' || fail "protobuf's library is not packed"
# Every test ctest labels gpu, with its filter.
python3 - "$PKG/bin/tests.json" "$BUILD_DIR" <<'PY' || fail "tests.json does not list ctest's gpu tests"
import json, re, subprocess, sys
tests = json.load(open(sys.argv[1]))
# ctest -L gpu also lists the fixtures those tests need (get_mnist): only the labelled ones are gpu tests.
listed = json.loads(subprocess.run(["ctest", "-N", "-L", "gpu", "--show-only=json-v1"], cwd=sys.argv[2],
                                   stdout=subprocess.PIPE, text=True).stdout)
names = sorted(t["name"] for t in listed["tests"]
               if "gpu" in next((p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"), []))
assert "gpu_job_test" in names and "get_mnist" not in names, names
assert sorted(t["name"] for t in tests) == names, (sorted(t["name"] for t in tests), names)
device = [t for t in tests if t["name"] == "layer_device_test_gpu"][0]
assert device["binary"] == "layer_device_test" and device["env"] == {"GTEST_FILTER": "*/Gpu.*"}, device
PY

# gpu_check.sh from the unpacked archive: contents checked, then no GPU: 77.
set +e
NEREUS_CUDA_LIB_DIR=/nonexistent "$PKG/scripts/gpu_check.sh" "$TMP/out" --dry_run > "$TMP/check.log" 2>&1
rc=$?
set -e
cat "$TMP/check.log"
[[ $rc == 77 ]] || fail "gpu_check.sh --dry_run exited $rc, expected 77"
grep -q "archive $PKG: [0-9]* gpu tests" "$TMP/check.log" || fail "gpu_check.sh did not check the archive"
for t in gpu_test layer_gpu_test layer_device_test_gpu; do
  grep -q "would run.*bin/${t%_gpu}" "$TMP/check.log" || fail "gpu_check.sh would not run $t"
done
grep -q "would run.*GTEST_FILTER=\*/Gpu\.\*" "$TMP/check.log" || fail "the device test's filter is lost"
grep -q "would run.*NEREUS_BIN_DIR=$PKG/bin .*bin/gpu_job_test" "$TMP/check.log" || fail "no GPU job test with its binaries"
grep -q "would run.*nereus_worker --standalone .*--gpu=0" "$TMP/check.log" || fail "no LeNet run on the GPU"
grep -q "would run.*nereus_bench train --model=lenet,cifar10_full,caffenet,vgg19,resnet50 --gpu=0" "$TMP/check.log" \
  || fail "no benchmark run"
grep -q "would run.*gpu_bench_torch.py" "$TMP/check.log" || fail "no PyTorch baseline"
grep -q "would run.*gpu_job_bench.py --pkg=$PKG .*--models=resnet50,vgg19 --gpu=0 --sfb=off,auto" "$TMP/check.log" \
  || fail "no job benchmark"
[[ -f "$TMP/out/summary.json" ]] || fail "no summary.json"
# A damaged archive is named.
rm "$PKG/bin/nereus_bench"
set +e
"$PKG/scripts/gpu_check.sh" "$TMP/out2" --dry_run > "$TMP/check2.log" 2>&1
rc=$?
set -e
[[ $rc == 1 ]] && grep -q "lacks: bin/nereus_bench" "$TMP/check2.log" || { cat "$TMP/check2.log"; fail "a missing binary is not named (exit $rc)"; }
echo "gpu_pack_test: passed (archive $SIZE bytes)"
