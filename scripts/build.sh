#!/usr/bin/env bash
# Configures and builds Nereus into build/ (or $NEREUS_BUILD_DIR), in the one
# configuration that run_local.sh, test.sh and gpu_pack.sh share, so that
# running them one after the other, in any order, compiles each object once:
#   - RelWithDebInfo with line tables only (-g1): backtraces and sanitizer
#     reports keep file:line, and the build takes about a third less time
#     than with full debug info;
#   - the GPU code for this machine's GPUs when it has one (native), else for
#     one architecture (75-real), enough to compile every kernel (the code has
#     no per-architecture paths); NEREUS_CUDA_ARCHITECTURES overrides.
# Uses ccache when it is installed (paths relative to the checkout, so
# worktrees share it).
#
#   scripts/build.sh [--target=T[,T...]] [CMAKE_ARG...]
#     --target  build only these targets (default: everything, tests included)
#     CMAKE_ARG passed to cmake's configure step (e.g. -DNEREUS_SANITIZE=thread)
#   NEREUS_CONFIGURE_ONLY=1 configures and builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${NEREUS_BUILD_DIR:-build}"
TARGETS=()
CMAKE_ARGS=()
for a in "$@"; do
  case "$a" in
    --target=*) IFS=, read -r -a more <<< "${a#--target=}"; TARGETS+=("${more[@]}") ;;
    *) CMAKE_ARGS+=("$a") ;;
  esac
done
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}"
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
# LLVM's linker where installed (install_deps.sh --tests): measured on a
# 2-core machine, the 74 programs of a full build linked in 14.7 s wall (28 s
# of CPU) against GNU ld's 30.7 s (61 s).
if command -v ld.lld >/dev/null 2>&1; then
  LAUNCHER+=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld)
fi
if [[ -z "${NEREUS_CUDA_ARCHITECTURES:-}" ]]; then
  # Read whole, not piped to grep -q: a pipe closed early can fail nvidia-smi under pipefail.
  GPUS=$(nvidia-smi -L 2>/dev/null || true)
  if [[ "$GPUS" == GPU\ * ]]; then NEREUS_CUDA_ARCHITECTURES=native; else NEREUS_CUDA_ARCHITECTURES=75-real; fi
fi
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${NEREUS_BUILD_TYPE:-RelWithDebInfo}" "${LAUNCHER[@]}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DCMAKE_CUDA_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG -Xcompiler=-g1" \
  -DNEREUS_CUDA_ARCHITECTURES="$NEREUS_CUDA_ARCHITECTURES" ${CMAKE_ARGS[@]+"${CMAKE_ARGS[@]}"} >/dev/null
[[ "${NEREUS_CONFIGURE_ONLY:-0}" == 1 ]] && exit 0  # scripts/gpu_pack.sh builds only what it packs.
if [[ ${#TARGETS[@]} -gt 0 ]]; then
  cmake --build "$BUILD_DIR" -j "$(nproc)" --target "${TARGETS[@]}"
else
  cmake --build "$BUILD_DIR" -j "$(nproc)"
fi
