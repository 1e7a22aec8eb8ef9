#!/usr/bin/env bash
# Builds and runs the tests under the sanitizers:
#   address: ASan + UBSan, every test (build-asan/)
#   thread:  TSan, the server/client/concurrency tests (build-tsan/, without the trainer)
# Usage: ./scripts/sanitize.sh [address|thread|all]   (default all)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
./scripts/install_deps.sh
which=${1:-all}

if [[ "$which" == address || "$which" == all ]]; then
  cmake -S . -B build-asan -DNEREUS_SANITIZE=address -DCMAKE_BUILD_TYPE=Debug >/dev/null
  cmake --build build-asan -j "$(nproc)"
  # Convergence runs take minutes uninstrumented; they add nothing here.
  (cd build-asan && UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure --timeout 900 -j "$(nproc)" -LE convergence)
fi
if [[ "$which" == thread || "$which" == all ]]; then
  cmake -S . -B build-tsan -DNEREUS_SANITIZE=thread -DNEREUS_WITH_TRAINER=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build-tsan -j "$(nproc)"
  (cd build-tsan && TSAN_OPTIONS="suppressions=$ROOT/tests/support/tsan.supp" ctest --output-on-failure --timeout 900 -j 1)
fi
