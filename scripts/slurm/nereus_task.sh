#!/usr/bin/env bash
# One task of a Nereus Slurm job (started by srun from nereus.sbatch): finds
# this task's role, rank, listening address and the coordinator's address
# from SLURM_PROCID, SLURM_NTASKS and SLURM_JOB_NODELIST through
# nereus_launch_plan (the role assignment launch.sh uses), then becomes that
# process.
#   srun ... bash scripts/slurm/nereus_task.sh --num_servers=S --num_workers=W --port=P [binary flags...]
# Needs NEREUS_BIN_DIR (nereus.sbatch exports it).
set -euo pipefail
ROOT=${NEREUS_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN_DIR=${NEREUS_BIN_DIR:-$ROOT/build/bin}
NEREUS_LAUNCHER="nereus_task.sh (task ${SLURM_PROCID:-?})"
# shellcheck source=scripts/launch_lib.sh
source "$ROOT/scripts/launch_lib.sh"
fail() { echo "$NEREUS_LAUNCHER: $*" >&2; exit 2; }

for v in SLURM_PROCID SLURM_NTASKS SLURM_JOB_NODELIST; do
  [ -n "${!v:-}" ] || fail "$v is not set; run this under srun (see scripts/slurm/nereus.sbatch)"
done
SERVERS="" WORKERS="" PORT=""
PASS=()
for arg in "$@"; do
  case "$arg" in
    --num_servers=*) SERVERS=${arg#*=} ;;
    --num_workers=*) WORKERS=${arg#*=} ;;
    --port=*) PORT=${arg#*=} ;;
    *) PASS+=("$arg") ;;
  esac
done
[ -n "$SERVERS" ] && [ -n "$WORKERS" ] && [ -n "$PORT" ] || fail "--num_servers, --num_workers and --port are required"

ASSIGNMENT=$("$BIN_DIR/nereus_launch_plan" --slurm_nodelist="$SLURM_JOB_NODELIST" --num_servers="$SERVERS" \
  --num_workers="$WORKERS" --port="$PORT" --format=shell --procid="$SLURM_PROCID" --ntasks="$SLURM_NTASKS") || exit 2
NEREUS_ROLE="" NEREUS_RANK="" NEREUS_HOST="" NEREUS_BIND_HOST="" NEREUS_COORDINATOR=""
# The tool prints NAME=VALUE lines of plain characters only.
while IFS='=' read -r name value; do
  case "$name" in
    NEREUS_ROLE|NEREUS_RANK|NEREUS_HOST|NEREUS_BIND_HOST|NEREUS_COORDINATOR) printf -v "$name" '%s' "$value" ;;
  esac
done <<< "$ASSIGNMENT"
if [ -n "${SLURMD_NODENAME:-}" ] && [ "$SLURMD_NODENAME" != "$NEREUS_HOST" ]; then
  fail "this task runs on $SLURMD_NODENAME but the plan puts $NEREUS_ROLE $NEREUS_RANK on $NEREUS_HOST;" \
       "start the tasks with srun --distribution=arbitrary and SLURM_HOSTFILE from nereus_launch_plan" \
       "--format=slurm_hostfile (nereus.sbatch does)"
fi
nereus_route_flags "$BIN_DIR" "${PASS[@]}" || exit 2
nereus_process_args "$BIN_DIR" "$NEREUS_ROLE" "$NEREUS_RANK" "$NEREUS_BIND_HOST" "$NEREUS_COORDINATOR" "$SERVERS" "$WORKERS"
echo "$NEREUS_LAUNCHER: $NEREUS_ROLE $NEREUS_RANK on $NEREUS_HOST ($NEREUS_BIND_HOST), coordinator $NEREUS_COORDINATOR"
exec "${NEREUS_ARGS[@]}"
