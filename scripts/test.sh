#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test through ctest; then
# runs the server/client concurrency tests again under ThreadSanitizer
# (skip that stage with NEREUS_SKIP_TSAN=1; ./scripts/sanitize.sh also runs
# ASan+UBSan over everything).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
./scripts/install_deps.sh
./scripts/build.sh
(cd "${NEREUS_BUILD_DIR:-build}" && ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@")

if [[ "${NEREUS_SKIP_TSAN:-0}" != 1 ]]; then
  echo "== ThreadSanitizer: server, client and multi-process tests"
  NEREUS_BUILD_DIR=build-tsan ./scripts/build.sh -DNEREUS_SANITIZE=thread -DNEREUS_WITH_TRAINER=OFF >/dev/null
  (cd build-tsan && TSAN_OPTIONS="suppressions=$ROOT/tests/tsan.supp" ctest --output-on-failure --timeout 600 -j 1)
fi
