#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test through ctest (among
# them thread_safety_test: clang's -Wthread-safety over the sources that use
# nereus::Mutex, scripts/thread_safety.sh, about a minute of CPU); then
# runs the server/client concurrency tests again under ThreadSanitizer
# (skip that stage with NEREUS_SKIP_TSAN=1; ./scripts/sanitize.sh also runs
# ASan+UBSan over everything). Before that, scripts/fuzz.sh fuzzes the message
# decoder and the server for NEREUS_FUZZ_RUNS inputs (default 200000, about
# 30 s on an idle 2-core machine; skip with NEREUS_SKIP_FUZZ=1).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
./scripts/install_deps.sh
# Line tables only (-g1): backtraces and sanitizer reports keep file:line, and
# the build takes about a third less time than with full debug info.
LINES_ONLY=(-DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG"
            -DCMAKE_CUDA_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG -Xcompiler=-g1")
# The GPU code for this machine's GPUs when it has one (the gpu tests run on
# them), else for one architecture: enough to compile every kernel (the code
# has no per-architecture paths), at about 60% of the nvcc time of the
# default three. NEREUS_CUDA_ARCHITECTURES overrides.
if [[ -z "${NEREUS_CUDA_ARCHITECTURES:-}" ]]; then
  # Read whole, not piped to grep -q: a pipe closed early can fail nvidia-smi under pipefail.
  GPUS=$(nvidia-smi -L 2>/dev/null || true)
  if [[ "$GPUS" == GPU\ * ]]; then NEREUS_CUDA_ARCHITECTURES=native; else NEREUS_CUDA_ARCHITECTURES=75-real; fi
fi
./scripts/build.sh "${LINES_ONLY[@]}" -DNEREUS_CUDA_ARCHITECTURES="$NEREUS_CUDA_ARCHITECTURES"
(cd "${NEREUS_BUILD_DIR:-build}" && ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@")

if [[ "${NEREUS_SKIP_FUZZ:-0}" != 1 ]]; then
  echo "== libFuzzer: message decoder and server handling (scripts/fuzz.sh)"
  ./scripts/fuzz.sh --runs="${NEREUS_FUZZ_RUNS:-200000}"
fi

if [[ "${NEREUS_SKIP_TSAN:-0}" != 1 ]]; then
  echo "== ThreadSanitizer: server, client and multi-process tests"
  # As many tests at once as cores, like the stage above: on 2 cores about
  # half of -j 1's time, every test passing (three runs).
  NEREUS_BUILD_DIR=build-tsan ./scripts/build.sh -DNEREUS_SANITIZE=thread -DNEREUS_WITH_TRAINER=OFF "${LINES_ONLY[@]}" >/dev/null
  (cd build-tsan && TSAN_OPTIONS="suppressions=$ROOT/tests/support/tsan.supp" ctest --output-on-failure --timeout 600 -j "$(nproc)")
fi
