#!/usr/bin/env bash
# One task of a Nereus Slurm job (started by srun from nereus.sbatch): finds
# this task's role, rank, listening address and the coordinator's address
# from SLURM_PROCID, SLURM_NTASKS and SLURM_JOB_NODELIST (the placement
# launch.sh uses, common/launch/launch_plan.h), routes the binary flags as launch.sh
# does, then becomes that process. The work is nereus_launch --slurm_task's
# (common/launch/launch_main.cc).
#   srun ... bash scripts/slurm/nereus_task.sh --num_servers=S --num_workers=W --port=P [binary flags...]
# Needs NEREUS_BIN_DIR (nereus.sbatch exports it).
set -euo pipefail
ROOT=${NEREUS_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN_DIR=${NEREUS_BIN_DIR:-$ROOT/build/bin}
if [ ! -x "$BIN_DIR/nereus_launch" ]; then
  echo "nereus_task.sh (task ${SLURM_PROCID:-?}): $BIN_DIR/nereus_launch not found; build first or set NEREUS_BIN_DIR" >&2
  exit 2
fi
exec -a nereus_task.sh "$BIN_DIR/nereus_launch" --slurm_task --bin_dir="$BIN_DIR" "$@"
