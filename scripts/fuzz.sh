#!/usr/bin/env bash
# Builds the libFuzzer target over the message decoder and the server's
# handling of a decoded message (tests/server/fuzz_message.cc) with clang, ASan and
# UBSan into build-fuzz/ (or $NEREUS_FUZZ_BUILD_DIR), and runs it from the
# seed corpus tests/server/fuzz_corpus/ for a bounded number of inputs. Fails on any
# crash, leak, timeout or sanitizer report (the input is saved in the build
# directory; reproduce with build-fuzz/bin/nereus_fuzz_message FILE).
#   scripts/fuzz.sh [--runs=N] [--build_only] [extra libFuzzer flags...]
# Default N: 200000. CI (scripts/test.sh) runs it; NEREUS_SKIP_FUZZ=1 skips.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=200000
BUILD_ONLY=0
EXTRA=()
for a in "$@"; do
  case "$a" in
    --runs=*) RUNS="${a#--runs=}" ;;
    --build_only) BUILD_ONLY=1 ;;  # scripts/test.sh builds it beside its ctest stage.
    *) EXTRA+=("$a") ;;
  esac
done
BUILD_DIR="${NEREUS_FUZZ_BUILD_DIR:-build-fuzz}"
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}"
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DNEREUS_SANITIZE=fuzzer -DNEREUS_WITH_TRAINER=OFF "${LAUNCHER[@]}" >/dev/null
cmake --build "$BUILD_DIR" --target nereus_fuzz_message -j "$(nproc)"
[[ "$BUILD_ONLY" == 1 ]] && exit 0
# libFuzzer adds what it finds to the first corpus directory: a scratch copy,
# never the seeds in the source tree.
WORK="$BUILD_DIR/fuzz_work"
mkdir -p "$WORK/corpus" "$WORK/artifacts"
cp -n tests/server/fuzz_corpus/* "$WORK/corpus/"
echo "== fuzzing the decoder and ParamServer::Handle for $RUNS inputs"
"$BUILD_DIR/bin/nereus_fuzz_message" -runs="$RUNS" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$WORK/artifacts/" "${EXTRA[@]}" "$WORK/corpus" tests/server/fuzz_corpus
