#!/usr/bin/env bash
# Starts a whole Nereus job from a hostfile: the coordinator on the first host,
# servers and workers round-robin over the hosts' slots (server i beside
# worker i), each host reached over ssh (or run here, or in a network
# namespace). Each process's output is streamed with a "[role rank@host]"
# prefix; when one process fails, or on Ctrl-C, every process is stopped.
#
#   scripts/launch.sh --hostfile=FILE [--num_servers=S] [--num_workers=W] [options] [--] [flags...]
#
# This script finds the build and execs nereus_launch (common/launch/
# launch_main.cc), which places the processes (common/launch/launch_plan.h, as
# the Slurm scripts in scripts/slurm/ do), starts them and watches them (one poll
# over a pidfd and an output pipe per process). `launch.sh --help` lists the
# options: --num_servers, --num_workers, --port, --ssh=ssh|none|netns,
# --ssh_opts, --bin_dir, --workdir, --env=NAME=VALUE, --log_dir, --dry_run,
# --worker_command="python3 train.py ..." (Python workers, docs/TORCH.md);
# every other --flag goes to the binaries that define it.
# Exit status: 0 when every process exits 0; 1 when one fails (its name and
# status are printed); 2 on bad arguments; 130 on Ctrl-C / SIGTERM.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${NEREUS_BUILD_DIR:-build}
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"
BIN_DIR="$BUILD/bin"
for arg in "$@"; do
  case "$arg" in
    --bin_dir=*) BIN_DIR=${arg#*=} ;;
  esac
done
if [ ! -x "$BIN_DIR/nereus_launch" ]; then
  echo "launch.sh: $BIN_DIR/nereus_launch not found; build first (scripts/build.sh) or give --bin_dir" >&2
  exit 2
fi
# The same process (so a signal to this script's PID reaches the launcher),
# named launch.sh in its messages.
exec -a launch.sh "$BIN_DIR/nereus_launch" --bin_dir="$BIN_DIR" "$@"
