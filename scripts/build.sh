#!/usr/bin/env bash
# Configures and builds Nereus into build/ (or $NEREUS_BUILD_DIR). Uses ccache
# when it is installed (paths relative to the checkout, so worktrees share it).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${NEREUS_BUILD_DIR:-build}"
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}"
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${NEREUS_BUILD_TYPE:-RelWithDebInfo}" "${LAUNCHER[@]}" "$@" >/dev/null
[[ "${NEREUS_CONFIGURE_ONLY:-0}" == 1 ]] && exit 0  # scripts/gpu_pack.sh builds only what it packs.
cmake --build "$BUILD_DIR" -j "$(nproc)"
