#!/usr/bin/env bash
# A real Slurm job: starts slurmctld and slurmd on this machine (one node,
# 8 CPUs declared, configuration and state in a temporary directory,
# AuthType=auth/none), submits scripts/slurm/nereus.sbatch for 1 coordinator +
# 2 servers + 2 workers of the synthetic model, and checks that it ends with
# status 0, that each task took the role the plan gives its task id, and that
# both workers finished with the same weights; then that a failing task ends
# the whole job at once; then, with --gpus_per_host and stand-in binaries,
# each worker's --gpu, and a node with too few GPUs refused. Installs
# slurm-wlm if missing.
# Exit 77 (skipped) only where Slurm cannot start: not root, the package
# cannot be installed, or a daemon exits before the job is done.
set -euo pipefail
SRC=${NEREUS_SOURCE_DIR:?}
BIN=${NEREUS_BIN_DIR:?}
T=$(mktemp -d "${TMPDIR:-/tmp}/nereus_slurm_test.XXXXXX")
DAEMONS=()
JOB_ID=""
cleanup() {
  local p
  if [ -n "$JOB_ID" ]; then scancel "$JOB_ID" 2>/dev/null || true; fi
  for p in "${DAEMONS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${DAEMONS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
skip() { echo "SKIPPED: $*" >&2; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || skip "starting slurmctld and slurmd needs root"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null; then
  echo "installing slurm-wlm"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get install -y -qq --no-install-recommends slurm-wlm ||
    { apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm; }; } > "$T/apt.log" 2>&1 ||
    skip "cannot install slurm-wlm: $(tail -n 2 "$T/apt.log")"
fi

free_port() { python3 "$(dirname "$0")/free_port.py"; }
CTLD_PORT=$(free_port)
SLURMD_PORT=$(free_port)
JOB_PORT=$(free_port)
HOST=$(hostname -s)
mkdir -p "$T/state" "$T/spool"
# One node, "localhost" (resolves everywhere), 8 CPUs whatever the hardware
# (config_overrides). MessageTimeout: sbatch retries connecting for this long
# while slurmctld starts.
cat > "$T/slurm.conf" <<EOF
ClusterName=nereustest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
MessageTimeout=60
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=nereus Nodes=localhost Default=YES MaxTime=10 State=UP
EOF
export SLURM_CONF="$T/slurm.conf"
slurmctld -D -f "$SLURM_CONF" > "$T/slurmctld.out" 2>&1 &
CTLD=$!
DAEMONS+=("$CTLD")
slurmd -D -f "$SLURM_CONF" -N localhost > "$T/slurmd.out" 2>&1 &
SLURMD=$!
DAEMONS+=("$SLURMD")

# The job: sbatch waits for the controller, the job for the node to register.
export NEREUS_ROOT="$SRC" NEREUS_BIN_DIR="$BIN"
cd "$T"
timeout 200 sbatch --wait --parsable --nodes=1 --output="$T/job.out" "$SRC/scripts/slurm/nereus.sbatch" \
  --num_servers=2 --num_workers=2 --port="$JOB_PORT" --tensors=1000,250x10 --iterations=5 --display=1 \
  --startup_timeout_s=60 > "$T/sbatch.out" 2> "$T/sbatch.err" &
SBATCH=$!
# Whichever ends first: a daemon (Slurm could not start: skip) or the job.
finished=""
rc=0
wait -n -p finished "$CTLD" "$SLURMD" "$SBATCH" || rc=$?
# Unset when the one that ended did so before a later one was started (bash
# 5.2's wait -n then names no job; see scripts/launch.sh): a daemon.
if [ "${finished-}" != "$SBATCH" ]; then
  which=slurmctld
  [ "${finished-}" = "$SLURMD" ] && which=slurmd
  kill "$SBATCH" 2>/dev/null || true
  wait "$SBATCH" 2>/dev/null || true
  cat "$T/$which.out" "$T/$which.log" 2>/dev/null | tail -n 20 >&2
  skip "$which exited before the job ended: Slurm cannot run here"
fi
JOB_ID=$(head -n 1 "$T/sbatch.out" 2>/dev/null | cut -d';' -f1)
show() { echo "--- sbatch:" >&2; cat "$T/sbatch.out" "$T/sbatch.err" >&2; echo "--- job output:" >&2; cat "$T/job.out" >&2 || true; }
[ "$rc" -eq 0 ] || { show; fail "sbatch --wait exited with $rc (124: no result within 200 s)"; }
JOB_ID=""
echo "ok: the job ended with status 0"

# Task i has the role of line i of the plan: 0 the coordinator, 1-2 the
# servers, 3-4 the workers, all on localhost.
i=0
for who in "coordinator 0" "server 0" "server 1" "worker 0" "worker 1"; do
  want="$i: nereus_task.sh (task $i): $who on localhost (127.0.0.1), coordinator 127.0.0.1:$JOB_PORT"
  grep -qxF "$want" "$T/job.out" || { show; fail "missing line: $want"; }
  i=$((i + 1))
done
echo "ok: every task took its planned role"
grep -q "^0: .*coordinator: every worker finished; job shut down cleanly$" "$T/job.out" || { show; fail "coordinator did not finish cleanly"; }
w0=$(sed -n 's/^3: worker 0: 5 iterations in [0-9.]* s, \(loss .*\), communication.*$/\1/p' "$T/job.out")
w1=$(sed -n 's/^4: worker 1: 5 iterations in [0-9.]* s, \(loss .*\), communication.*$/\1/p' "$T/job.out")
[ -n "$w0" ] && [ "$w0" = "$w1" ] || { show; fail "worker summaries differ or are missing: \"$w0\" vs \"$w1\""; }
echo "ok: both workers trained 5 iterations to the same $w0"

# A task that fails ends the whole job at once (srun --kill-on-bad-exit):
# the coordinator refuses --consistency=bogus; Slurm terminates the others,
# which would otherwise wait 600 s for it.
start=$SECONDS
rc=0
timeout 200 sbatch --wait --parsable --nodes=1 --output="$T/bad.out" "$SRC/scripts/slurm/nereus.sbatch" \
  --num_servers=2 --num_workers=2 --port="$JOB_PORT" --tensors=1000 --consistency=bogus --startup_timeout_s=600 \
  > "$T/sbatch.out" 2> "$T/sbatch.err" || rc=$?
JOB_ID=$(head -n 1 "$T/sbatch.out" 2>/dev/null | cut -d';' -f1)
elapsed=$((SECONDS - start))
{ [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; } || { cat "$T/bad.out" >&2; fail "job with a failing coordinator: sbatch status $rc"; }
grep -q '^0: .*--consistency must be bsp, ssp or async, got "bogus"$' "$T/bad.out" ||
  { cat "$T/bad.out" >&2; fail "the coordinator's error is not in the job output"; }
grep -Eq '^srun: error: localhost: tasks? [0-9,-]+: Terminated$' "$T/bad.out" ||
  { cat "$T/bad.out" >&2; fail "srun did not terminate the other tasks"; }
[ "$elapsed" -lt 150 ] || { cat "$T/bad.out" >&2; fail "the other tasks were not stopped ($elapsed s)"; }
JOB_ID=""
echo "ok: a failing task ends the job (status $rc, $elapsed s)"

# One GPU per worker (--gpus_per_host=2). This machine has no GPU to train on,
# so the job's binaries are stand-ins that print their command line, their
# CUDA_VISIBLE_DEVICES and SLURM_LOCALID, and exit 0 (their --helpxml is the
# real one's, for the flag routing). Worker k gets --gpu=k: its local id (3 and
# 4, after the coordinator and the 2 servers, checked against the plan) less
# those 3; CUDA_VISIBLE_DEVICES reaches it as it was set; nothing else gets a
# --gpu.
FAKE="$T/fakebin"
mkdir -p "$FAKE"
ln -s "$BIN/nereus_launch" "$BIN/nereus_launch_plan" "$FAKE/"
for b in nereus_server nereus_worker; do
  cat > "$FAKE/$b" <<EOF
#!/usr/bin/env bash
if [ "\$1" = --helpxml ]; then exec "$BIN/$b" --helpxml; fi
echo "$b \$* CUDA_VISIBLE_DEVICES=\${CUDA_VISIBLE_DEVICES-unset} SLURM_LOCALID=\${SLURM_LOCALID-unset}"
EOF
  chmod +x "$FAKE/$b"
done
rc=0
CUDA_VISIBLE_DEVICES=5,3 NEREUS_BIN_DIR="$FAKE" timeout 200 sbatch --wait --parsable --nodes=1 --output="$T/gpu.out" \
  "$SRC/scripts/slurm/nereus.sbatch" --num_servers=2 --num_workers=2 --port="$JOB_PORT" --gpus_per_host=2 \
  --iterations=5 > "$T/sbatch.out" 2> "$T/sbatch.err" || rc=$?
JOB_ID=$(head -n 1 "$T/sbatch.out" 2>/dev/null | cut -d';' -f1)
gpu_show() { echo "--- job output:" >&2; cat "$T/gpu.out" >&2 || true; }
[ "$rc" -eq 0 ] || { gpu_show; fail "GPU job (stand-in binaries): sbatch status $rc"; }
JOB_ID=""
for k in 0 1; do
  t=$((3 + k))
  for want in "$t: nereus_task.sh (task $t): worker $k on localhost (127.0.0.1), GPU $k, coordinator 127.0.0.1:$JOB_PORT" \
    "$t: nereus_worker --coordinator=127.0.0.1:$JOB_PORT --rank=$k --bind_host=127.0.0.1 --gpu=$k --iterations=5 CUDA_VISIBLE_DEVICES=5,3 SLURM_LOCALID=$t"; do
    grep -qxF "$want" "$T/gpu.out" || { gpu_show; fail "missing line: $want"; }
  done
done
[ "$(grep -c -- '--gpu' "$T/gpu.out")" -eq 2 ] || { gpu_show; fail "a --gpu on a process other than the 2 workers"; }
echo "ok: worker k got GPU k (--gpu=k, SLURM_LOCALID 3+k), CUDA_VISIBLE_DEVICES passed on"

# More workers on the node than GPUs: nereus.sbatch's plan refuses it before
# any task starts, naming the node and both counts.
rc=0
env -u CUDA_VISIBLE_DEVICES NEREUS_BIN_DIR="$FAKE" timeout 200 sbatch --wait --parsable --nodes=1 \
  --output="$T/gpu_bad.out" "$SRC/scripts/slurm/nereus.sbatch" --num_servers=1 --num_workers=2 --port="$JOB_PORT" \
  --gpus_per_host=1 > "$T/sbatch.out" 2> "$T/sbatch.err" || rc=$?
JOB_ID=$(head -n 1 "$T/sbatch.out" 2>/dev/null | cut -d';' -f1)
{ [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ]; } || { cat "$T/gpu_bad.out" >&2; fail "2 workers on 1 GPU: sbatch status $rc"; }
want='nereus_launch_plan: host "localhost" would run 2 workers but has 1 GPU (--gpus_per_host=1): each worker trains on a GPU of its own'
grep -qxF "$want" "$T/gpu_bad.out" || { cat "$T/gpu_bad.out" >&2; fail "missing line: $want"; }
if grep -q "nereus_task.sh" "$T/gpu_bad.out"; then cat "$T/gpu_bad.out" >&2; fail "tasks started for a job without enough GPUs"; fi
JOB_ID=""
echo "ok: 2 workers on a node of 1 GPU is refused before any task starts"
echo "PASS"
