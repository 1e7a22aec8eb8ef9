#!/usr/bin/env bash
# Packs what a GPU machine needs to check Nereus's GPU code into one archive,
# for machines that have a GPU, nvcc, cmake and python3 with PyTorch but not
# Nereus's build dependencies (docs/GPU.md, /work/shared/GPU.md):
#
#   scripts/gpu_pack.sh OUT.tar.xz [--build_dir=DIR] [--no_build] [--cuda_architectures=LIST] [--xz_level=N]
#
# Builds with CUDA into build-gpu/ (or --build_dir; the flags of
# scripts/test.sh, so ccache reuses build/'s objects; only the targets packed,
# for --cuda_architectures, default 90: Hopper, the H100/H200 machines lent
# here, a third of the nvcc time of the build's default), then packs under
# nereus-gpu/:
#   bin/      nereus_worker, nereus_server, nereus_launch, nereus_bench and
#             every test labelled gpu
#             (stripped), and tests.json: each gpu test's command and
#             environment as ctest runs it
#   lib/      every library they load (ldd) except glibc's (libc, libm, libdl,
#             libpthread, librt, libresolv, ld-linux), libstdc++, libgcc_s and
#             the CUDA libraries the GPU machine has (cuBLAS, cuBLASLt, cuRAND:
#             600 MB between them): gpu_check.sh finds those there (the CUDA
#             toolkit's, or PyTorch's nvidia-* packages). libcudart, small and
#             this build's own, travels.
#   worker/trainer/models/, data/mnist/ (the LeNet LMDBs; scripts/get_mnist.sh
#             makes them when missing), scripts/gpu_check.sh,
#             scripts/gpu_bench_torch.py, scripts/gpu_job_bench.py, and MANIFEST (what was packed from
#             which commit).
# Unpack and run on the GPU machine:  tar -xJf OUT.tar.xz && nereus-gpu/scripts/gpu_check.sh OUTDIR
#
# --no_build packs an existing build (--build_dir) as it is: the packing
# steps alone (tests/scripts/gpu_pack_test.sh). Fails when the build has no
# GPU code (no CUDA toolkit found) or the archive is 60 MiB or more.
# --xz_level: xz's preset, 0-9 (default 6: about 18 MiB, 40 s of CPU; the
# test packs with 1, which is larger and so checks the size limit with room).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

OUT=""
BUILD_DIR="build-gpu"
BUILD=1
XZ_LEVEL=6
CUDA_ARCHS=90  # The H100/H200 machines lent here; "75-real;80-real;90" (the build default) for older GPUs.
for a in "$@"; do
  case "$a" in
    --build_dir=*) BUILD_DIR="${a#--build_dir=}" ;;
    --no_build) BUILD=0 ;;
    --cuda_architectures=*) CUDA_ARCHS="${a#--cuda_architectures=}" ;;
    --xz_level=[0-9]) XZ_LEVEL="${a#--xz_level=}" ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_pack.sh: unknown flag $a (see --help)" >&2; exit 2 ;;
    *) [[ -z "$OUT" ]] || { echo "gpu_pack.sh: one archive name, got '$OUT' and '$a'" >&2; exit 2; }; OUT="$a" ;;
  esac
done
[[ -n "$OUT" ]] || { echo "usage: scripts/gpu_pack.sh OUT.tar.xz [--build_dir=DIR] [--no_build]" >&2; exit 2; }
[[ "$OUT" == *.tar.xz ]] || { echo "gpu_pack.sh: the archive name must end in .tar.xz, got $OUT" >&2; exit 2; }
[[ "$OUT" = /* ]] || OUT="$ROOT/$OUT"
[[ "$BUILD_DIR" = /* ]] || BUILD_DIR="$ROOT/$BUILD_DIR"
MAX_BYTES=$((60 * 1024 * 1024))

if [[ $BUILD == 1 ]]; then
  ./scripts/install_deps.sh
  # Configure only: the targets packed are built below, not every CPU test.
  NEREUS_CONFIGURE_ONLY=1 NEREUS_BUILD_DIR="$BUILD_DIR" NEREUS_CUDA_ARCHITECTURES="$CUDA_ARCHS" ./scripts/build.sh \
    -DNEREUS_WITH_CUDA=ON
fi
[[ -f "$BUILD_DIR/CMakeCache.txt" ]] || { echo "gpu_pack.sh: no build in $BUILD_DIR" >&2; exit 1; }

# The binaries packed (ctest -N below names a test's command only once it is built).
if [[ $BUILD == 1 ]]; then
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target nereus_worker nereus_server nereus_launch nereus_bench nereus_gpu_tests
fi

# The gpu tests as ctest runs them: name, binary, environment.
TESTS_JSON=$(mktemp)
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE" "$TESTS_JSON"' EXIT
(cd "$BUILD_DIR" && ctest -N -L gpu --show-only=json-v1) > "$TESTS_JSON"
PKG="$STAGE/nereus-gpu"
mkdir -p "$PKG/bin" "$PKG/lib" "$PKG/scripts" "$PKG/worker/trainer" "$PKG/data/mnist"
python3 - "$TESTS_JSON" "$PKG/bin/tests.json" <<'EOF'
import json, os, sys
doc = json.load(open(sys.argv[1]))
tests = []
for t in doc.get("tests", []):
    labels = next((p["value"] for p in t.get("properties", []) if p["name"] == "LABELS"), [])
    if "gpu" not in labels:
        continue  # A fixture's setup that ctest -L gpu brings along (get_mnist: the archive packs its LMDBs).
    env = {}
    for p in t.get("properties", []):
        if p["name"] == "ENVIRONMENT":
            for kv in p["value"]:
                k, _, v = kv.partition("=")
                if k.startswith("GTEST_"):  # NEREUS_BIN_DIR/SOURCE_DIR are this machine's paths.
                    env[k] = v
    timeout = next((p["value"] for p in t.get("properties", []) if p["name"] == "TIMEOUT"), 300)
    tests.append({"name": t["name"], "binary": os.path.basename(t["command"][0]), "args": t["command"][1:],
                  "env": env, "timeout_s": timeout})
if not any(t["name"] == "gpu_test" for t in tests):
    sys.exit("gpu_pack.sh: this build has no GPU code (gpu_test is missing): was the CUDA toolkit found?")
json.dump(tests, open(sys.argv[2], "w"), indent=1)
print("gpu_pack.sh: %d gpu tests: %s" % (len(tests), " ".join(t["name"] for t in tests)))
EOF

BINARIES=(nereus_worker nereus_server nereus_bench nereus_launch $(python3 -c 'import json,sys; print(" ".join(sorted({t["binary"] for t in json.load(open(sys.argv[1]))})))' "$PKG/bin/tests.json"))
for b in "${BINARIES[@]}"; do
  [[ -x "$BUILD_DIR/bin/$b" ]] || { echo "gpu_pack.sh: $BUILD_DIR/bin/$b is not built" >&2; exit 1; }
  cp "$BUILD_DIR/bin/$b" "$PKG/bin/$b"
  strip --strip-debug "$PKG/bin/$b"
done

# Libraries: every one ldd lists, but those the GPU machine must provide.
is_kept_out() {
  case "$(basename "$1")" in
    libc.so*|libm.so*|libdl.so*|libpthread.so*|librt.so*|libresolv.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) return 0 ;;
    libcublas.so*|libcublasLt.so*|libcurand.so*|libcuda.so*) return 0 ;;
  esac
  return 1
}
for b in "${BINARIES[@]}"; do
  while read -r lib; do
    [[ -n "$lib" && -f "$lib" ]] || continue
    if ! is_kept_out "$lib" && [[ ! -e "$PKG/lib/$(basename "$lib")" ]]; then
      cp -L "$lib" "$PKG/lib/"
    fi
  done < <(ldd "$BUILD_DIR/bin/$b" | awk '/=> \//{print $3}')
done

cp -r worker/trainer/models "$PKG/worker/trainer/"
cp scripts/gpu_check.sh scripts/gpu_bench_torch.py scripts/gpu_job_bench.py "$PKG/scripts/"
if [[ ! -f data/mnist/mnist_train_lmdb/data.mdb || ! -f data/mnist/mnist_test_lmdb/data.mdb ]]; then
  if [[ $BUILD == 1 ]]; then
    NEREUS_BUILD_DIR="$BUILD_DIR" ./scripts/get_mnist.sh
  else
    echo "gpu_pack.sh: data/mnist has no LMDBs (run scripts/get_mnist.sh); packing without them" >&2
  fi
fi
if [[ -d data/mnist/mnist_train_lmdb ]]; then
  cp -r data/mnist/mnist_train_lmdb data/mnist/mnist_test_lmdb "$PKG/data/mnist/"
  [[ -f data/mnist/SOURCE ]] && cp data/mnist/SOURCE "$PKG/data/mnist/"
fi
{
  echo "nereus-gpu archive, packed $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -srm)"
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "build $BUILD_DIR, CUDA architectures $(grep -m1 '^NEREUS_CUDA_ARCHITECTURES' "$BUILD_DIR/CMakeCache.txt" | cut -d= -f2)"
  echo "binaries: ${BINARIES[*]}"
  echo "libraries: $(ls "$PKG/lib" | tr '\n' ' ')"
} > "$PKG/MANIFEST"

mkdir -p "$(dirname "$OUT")"
tar -C "$STAGE" -cf - nereus-gpu | xz -T"$(nproc)" -"$XZ_LEVEL" > "$OUT.partial"
mv "$OUT.partial" "$OUT"
SIZE=$(stat -c %s "$OUT")
RAW=$(du -sb "$PKG" | cut -f1)
echo "gpu_pack.sh: $OUT: $SIZE bytes ($(( (SIZE + 1048575) / 1048576 )) MiB; $(( RAW / 1048576 )) MiB unpacked)"
if (( SIZE >= MAX_BYTES )); then
  echo "gpu_pack.sh: the archive is $SIZE bytes, over the 60 MiB limit" >&2
  exit 1
fi
