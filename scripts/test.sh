#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
./scripts/build.sh
cd "${NEREUS_BUILD_DIR:-build}"
ctest --output-on-failure --timeout 600 -j "$(nproc)" "$@"
