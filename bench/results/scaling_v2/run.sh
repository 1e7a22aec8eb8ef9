#!/usr/bin/env bash
# Re-measurement after the robust link calibration (README in this folder):
# vgg19 and resnet50, full schedule, 1 and 8 emulated hosts, 10 Gbit/s-
# equivalent (scripts/scaling.sh's flags), --merge=auto and --merge=off run
# back to back for each point so that they share the machine's load; ROUNDS
# rounds. One JSON per run in OUT/runs/, worker logs in OUT/logs/. With
# BEFORE_BIN_DIR (a build of the commit before the calibration change, with
# the supervisor fix cherry-picked), --merge=auto with the old calibration runs
# third in each point ("before").
#   sudo bench/results/scaling_v2/run.sh [OUT] ; python3 bench/results/scaling_v2/summarize.py OUT
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT="${1:-bench/results/scaling_v2}"
BIN="${NEREUS_BIN_DIR:-build/bin}"
ROUNDS="${ROUNDS:-2}"
FIRST_ROUND="${FIRST_ROUND:-1}"
MODELS="${MODELS:-vgg19 resnet50}"
HOSTS="${HOSTS:-1 8}"
SHRINK=128 SLOW=2
FACTOR=$((SHRINK * SLOW))
gflops=$(python3 -c "print(3000 / $FACTOR)")   # 11.71875
mbit=$(python3 -c "print(10 * 1000 / $FACTOR)")  # 39.0625
mkdir -p "$OUT/runs" "$OUT/logs"
for round in $(seq "$FIRST_ROUND" $((FIRST_ROUND + ROUNDS - 1))); do
  for model in $MODELS; do
    for hosts in $HOSTS; do
      for variant in auto off ${BEFORE_BIN_DIR:+before}; do
        merge=$variant bin=$BIN
        if [ "$variant" = before ]; then merge=auto bin=$BEFORE_BIN_DIR; fi
        tag="${model}_h${hosts}_${variant}_r${round}"
        echo "== $tag $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        rm -rf "$OUT/logs/$tag"
        "$bin/nereus_bench" cluster --model="$model" --hosts="$hosts" --schedule=full \
          --link_mbit="$mbit" --device_gflops="$gflops" --model_scale="$SHRINK" --batch=32 \
          --warmup=3 --iterations=4 --merge="$merge" --json="$OUT/runs/$tag.json" \
          --cluster_logs="$OUT/logs/$tag" >&2 || echo "   $tag failed" >&2
      done
    done
  done
done
