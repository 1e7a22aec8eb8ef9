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
./scripts/install_deps.sh --tests
./scripts/build.sh
# On a machine with a GPU its tests must run there: a gpu test that finds no
# usable device fails instead of skipping (tests/support/layer_test.h).
GPUS=$(nvidia-smi -L 2>/dev/null || true)  # Read whole: a pipe closed early can fail it under pipefail.
if [[ "$GPUS" == GPU\ * ]]; then export NEREUS_REQUIRE_GPU=1; fi
(cd "${NEREUS_BUILD_DIR:-build}" && ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@")

if [[ "${NEREUS_SKIP_FUZZ:-0}" != 1 ]]; then
  echo "== libFuzzer: message decoder and server handling (scripts/fuzz.sh)"
  ./scripts/fuzz.sh --runs="${NEREUS_FUZZ_RUNS:-200000}"
fi

if [[ "${NEREUS_SKIP_TSAN:-0}" != 1 ]]; then
  echo "== ThreadSanitizer: server, client and multi-process tests"
  # As many tests at once as cores, like the stage above: on 2 cores about
  # half of -j 1's time, every test passing (three runs).
  NEREUS_BUILD_DIR=build-tsan ./scripts/build.sh -DNEREUS_SANITIZE=thread -DNEREUS_WITH_TRAINER=OFF >/dev/null
  # Not again here: the tests of scripts and the launcher (single-threaded,
  # and the servers and workers they start run under TSan in the tests kept),
  # of the source tree's form, and the benchmarks' smoke runs, whose threads
  # watchdog_test covers; about 280 s of the stage's CPU time on 2 cores.
  NOT_CONCURRENCY='^(launch_script|launch_ssh|slurm|format|layering|include_graph|scaling_study|gpu_pack|bench_smoke|cluster_emulation)_test$'
  (cd build-tsan && TSAN_OPTIONS="suppressions=$ROOT/tests/support/tsan.supp" \
    ctest --output-on-failure --timeout 600 -j "$(nproc)" -E "$NOT_CONCURRENCY")
fi
