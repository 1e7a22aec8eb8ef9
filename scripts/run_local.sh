#!/usr/bin/env bash
# Runs a whole Nereus job on this machine: installs what is missing, builds,
# starts a coordinator, 2 servers and 2 workers on 127.0.0.1, trains, prints
# progress and a summary, and stops everything. Exit status 0 on success.
# By default the job trains LeNet on MNIST (worker/trainer/models/
# lenet_solver_quick.prototxt; scripts/get_mnist.sh prepares the data first);
# the summary gives worker 0's test accuracy, the job's images/s and the wall
# time.
#
# Environment (all optional):
#   NEREUS_SERVERS, NEREUS_WORKERS   job size (default 2 and 2)
#   NEREUS_PORT                      coordinator port (default: a free one)
#   NEREUS_WORKER_ARGS               flags for every worker, replacing the default
#                                    --solver=worker/trainer/models/lenet_solver_quick.prototxt;
#                                    e.g. the synthetic model:
#                                    NEREUS_WORKER_ARGS="--model=synthetic --iterations=100"
#   NEREUS_SERVER_ARGS               extra flags for the coordinator and servers
#                                    (as with scripts/launch.sh, each flag of
#                                    either variable goes to every binary that
#                                    defines it)
#   OPENBLAS_NUM_THREADS             BLAS threads per worker (default: cores / workers)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

./scripts/install_deps.sh
# Only what the job runs (the tests build when scripts/test.sh asks), in the
# configuration test.sh uses too, so that it rebuilds none of it.
RUN_TARGETS=nereus_server,nereus_worker,nereus_launch,nereus_convert_mnist
echo "== Building ${RUN_TARGETS//,/, } into ${NEREUS_BUILD_DIR:-build}/ (the first build takes several minutes)"
./scripts/build.sh --target="$RUN_TARGETS"

SERVERS=${NEREUS_SERVERS:-2}
WORKERS=${NEREUS_WORKERS:-2}
# The workers share this machine's cores: give each worker's OpenBLAS its share
# (its default, one thread per core in every worker, oversubscribes them; on 2
# cores 2 workers run LeNet ~30% faster with one thread each).
CORES=$(nproc)
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-$((CORES / WORKERS > 0 ? CORES / WORKERS : 1))}
BIN="$ROOT/${NEREUS_BUILD_DIR:-build}/bin"
PORT=${NEREUS_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
COORD="127.0.0.1:$PORT"
LOGDIR=$(mktemp -d "${TMPDIR:-/tmp}/nereus_run.XXXXXX")
read -r -a SERVER_ARGS <<< "${NEREUS_SERVER_ARGS:-}"
read -r -a WORKER_ARGS <<< "${NEREUS_WORKER_ARGS:---solver=worker/trainer/models/lenet_solver_quick.prototxt}"
# The MNIST nets need the data (idempotent: skipped when present).
if [[ " ${WORKER_ARGS[*]} " == *--solver=*lenet* || " ${WORKER_ARGS[*]} " == *--solver=*mnist* ]]; then
  ./scripts/get_mnist.sh
fi

# The same path as a cluster job: launch.sh places the processes (all on this
# host here), streams their output with a prefix, keeps each log in $LOGDIR
# and stops everything when one fails or on Ctrl-C.
echo "127.0.0.1" > "$LOGDIR/hostfile"
echo "== Nereus local job: coordinator $COORD, $SERVERS server(s), $WORKERS worker(s); logs in $LOGDIR"
if ! ./scripts/launch.sh --hostfile="$LOGDIR/hostfile" --ssh=none --port="$PORT" --num_servers="$SERVERS" \
    --num_workers="$WORKERS" --log_dir="$LOGDIR" --bin_dir="$BIN" --env=OPENBLAS_NUM_THREADS="$OPENBLAS_NUM_THREADS" \
    "${SERVER_ARGS[@]}" "${WORKER_ARGS[@]}"; then
  echo "== FAILED: a process exited with an error; see the logs in $LOGDIR:" >&2
  tail -n 5 "$LOGDIR"/*.log >&2
  exit 1
fi
echo "== Summary"
for ((w = 0; w < WORKERS; w++)); do grep -h "^worker $w:" "$LOGDIR/worker$w.log" || true; done
grep -h "shut down cleanly" "$LOGDIR"/*.log | sed 's/^.*\] /  /'
echo "== Done: every process exited cleanly"
