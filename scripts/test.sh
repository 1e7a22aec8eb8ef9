#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test through ctest (among
# them thread_safety_test: clang's -Wthread-safety over the sources that use
# nereus::Mutex, scripts/thread_safety.sh, about a minute of CPU); then
# runs the server/client concurrency tests again under ThreadSanitizer
# (skip that stage with NEREUS_SKIP_TSAN=1; ./scripts/sanitize.sh also runs
# ASan+UBSan over everything). Beside the ctest stage, niced, scripts/fuzz.sh
# fuzzes the message decoder and the server for NEREUS_FUZZ_RUNS inputs
# (default 200000, about 30 s on an idle 2-core machine; skip with
# NEREUS_SKIP_FUZZ=1), and the TSan stage is built.
#
# NEREUS_TEST_STAGE=ctest or =tsan runs that one stage exactly as below and
# nothing else (no install, no build, no fuzzer): the two builds must exist.
# tests/scripts/flake_hunt.sh repeats the stages this way.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
STAGE=${NEREUS_TEST_STAGE:-}
case "$STAGE" in
  '') ./scripts/install_deps.sh --tests
      ./scripts/build.sh
      FUZZ=$([[ "${NEREUS_SKIP_FUZZ:-0}" != 1 ]] && echo 1 || echo 0)
      TSAN=$([[ "${NEREUS_SKIP_TSAN:-0}" != 1 ]] && echo 1 || echo 0)
      TSAN_BUILD=$TSAN ;;
  ctest) FUZZ=0 TSAN=0 TSAN_BUILD=0 ;;
  tsan) FUZZ=0 TSAN=1 TSAN_BUILD=0 ;;
  *) echo "test.sh: NEREUS_TEST_STAGE must be ctest or tsan, not '$STAGE'" >&2; exit 2 ;;
esac

# The fuzzer (built and run) and the TSan stage's build go beside the ctest
# stage, at the lowest CPU priority (nice 19): that stage leaves CPU idle
# (its multi-process tests mostly wait on each other), which these take
# without taking it from the tests. In their own session (so that they
# are stopped as one if this script ends first); where the kernel groups the
# CPU by session (autogroup, /proc/sys/kernel/sched_autogroup_enabled), a new
# session would get as much CPU as the tests' whole session whatever each
# process's nice value, so the session's own group is set to nice 19 too (a
# first run without it doubled the times of the CPU-bound tests).
# The TSan stage's tests: all but
#  - those of scripts and the launcher (single-threaded, and the servers and
#    workers they start run under TSan in the tests kept), of the source
#    tree's form, and the benchmarks' smoke runs, whose threads watchdog_test
#    covers: about 280 s of the stage's CPU time on 2 cores;
#  - the unit tests that start no thread (ThreadSanitizer reports races
#    between threads; they would only cost their instrumented build): the
#    shard map, the message codec, the update rules, the launch plan, the
#    client's merge plan, scheduler, send guard and SFB trial bookkeeping, the
#    simulator and its models.
NOT_CONCURRENCY='^((launch_script|launch_ssh|slurm|format|layering|include_graph|scaling_study|scaling_alpha_smoke|gpu_pack|bench_smoke|cluster_emulation)_test'
NOT_CONCURRENCY+='|(shard_map|message|sgd|sgd_rules|hybcomm|sfb_update|launch_plan|merge_plan|priority_scheduler|send_guard|sfb_trials|models|simulator)_test)$'
# The programs of those tests in build-tsan/bin, comma-separated (each is
# named as its target), read from the CTestTestfile.cmake files that
# configuring wrote (ctest itself names no program that is not built yet).
tsan_targets() {
  find build-tsan -name CTestTestfile.cmake -exec grep -h '^add_test(' {} + |
    sed -n 's|^add_test(\([^ ]*\) "[^"]*/build-tsan/bin/\([^"/]*\)".*|\1 \2|p' |
    awk -v re="$NOT_CONCURRENCY" '$1 !~ re { print $2 }' | sort -u | paste -sd, -
}
export NOT_CONCURRENCY
export -f tsan_targets
SIDE=
SIDE_LOG=$(mktemp "${TMPDIR:-/tmp}/nereus_side_builds.XXXXXX")
FUZZ_LOG=$(mktemp "${TMPDIR:-/tmp}/nereus_fuzz.XXXXXX")
stop_side() { [[ -n "$SIDE" ]] && kill -- -"$SIDE" 2>/dev/null; rm -f "$SIDE_LOG" "$FUZZ_LOG"; }
trap stop_side EXIT
if [[ "$FUZZ$TSAN_BUILD" != 00 ]]; then
  setsid nice -n 19 bash -c 'set -e
    echo 19 > /proc/self/autogroup 2> /dev/null || true
    if [[ "$1" == 1 ]]; then ./scripts/fuzz.sh --runs="$3" > "$4" 2>&1 || { echo "the fuzzer failed"; exit 1; }; fi
    if [[ "$2" == 1 ]]; then
      # Only what the stage runs: its tests programs (each named as its
      # target, whose DEPENDS bring the binaries it starts), not the
      # benchmarks and tools its excluded tests use.
      TSAN_ARGS=(-DNEREUS_SANITIZE=thread -DNEREUS_WITH_TRAINER=OFF)
      NEREUS_BUILD_DIR=build-tsan NEREUS_CONFIGURE_ONLY=1 ./scripts/build.sh "${TSAN_ARGS[@]}"
      targets=$(tsan_targets)
      if [[ -z "$targets" ]]; then
        echo "test.sh: no TSan test programs found in build-tsan/**/CTestTestfile.cmake: building every target"
        NEREUS_BUILD_DIR=build-tsan ./scripts/build.sh "${TSAN_ARGS[@]}"
      else
        NEREUS_BUILD_DIR=build-tsan ./scripts/build.sh --target="$targets" "${TSAN_ARGS[@]}"
      fi
    fi' side "$FUZZ" "$TSAN_BUILD" "${NEREUS_FUZZ_RUNS:-200000}" "$FUZZ_LOG" > "$SIDE_LOG" 2>&1 &
  SIDE=$!
fi

# On a machine with a GPU its tests must run there: a gpu test that finds no
# usable device fails instead of skipping (tests/support/layer_test.h).
GPUS=$(nvidia-smi -L 2>/dev/null || true)  # Read whole: a pipe closed early can fail it under pipefail.
if [[ "$GPUS" == GPU\ * ]]; then export NEREUS_REQUIRE_GPU=1; fi
# Half as many tests again as cores: most multi-process tests spend most of
# their time waiting on each other (a quarter to a half of a core each), and
# the fuzzer and the TSan build take what is left, at nice 19.
JOBS=$(($(nproc) + ($(nproc) + 1) / 2))
if [[ "$STAGE" != tsan ]]; then
  (cd "${NEREUS_BUILD_DIR:-build}" && ctest --output-on-failure --timeout 600 -j "$JOBS" "$@")
fi

if [[ -n "$SIDE" ]]; then
  echo "== the fuzzer's run and the TSan stage's build (begun beside ctest)"
  side_status=0
  wait "$SIDE" || side_status=$?
  SIDE=
  if [[ "$FUZZ" == 1 ]]; then
    echo "== libFuzzer: message decoder and server handling (scripts/fuzz.sh)"
    tail -n "$([[ "$side_status" == 0 ]] && echo 12 || echo 80)" "$FUZZ_LOG"
  fi
  if [[ "$side_status" != 0 ]]; then
    tail -n 100 "$SIDE_LOG"
    echo "test.sh: the fuzzer or the TSan stage's build failed (status $side_status)" >&2
    exit 1
  fi
fi
if [[ "$TSAN" == 1 ]]; then
  echo "== ThreadSanitizer: server, client and multi-process tests"
  # As many tests at once as the stage above (resume_test, the longest,
  # in 3 shards). Built above.
  (cd build-tsan && TSAN_OPTIONS="suppressions=$ROOT/tests/support/tsan.supp" \
    ctest --output-on-failure --timeout 600 -j "$JOBS" -E "$NOT_CONCURRENCY")
fi
