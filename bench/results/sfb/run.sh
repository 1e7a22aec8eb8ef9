#!/usr/bin/env bash
# Sufficient-factor broadcasting measured (docs/CLIENT.md): VGG19 and VGG19-22K,
# 4 workers x 4 servers in one process, batch 32 per worker, --sfb=off and
# auto run back to back (same process, same machine moment) on a loopback
# shaped to 1000 and then 10000 Mbit/s. One JSON per model; the table in
# README.md here comes from summarize.py.
#   sudo bench/results/sfb/run.sh [OUT] ; python3 bench/results/sfb/summarize.py [OUT]
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT="${1:-bench/results/sfb}"
BIN="${NEREUS_BIN_DIR:-build/bin}"
MODELS="${MODELS:-vgg19 vgg19_22k}"
mkdir -p "$OUT"
for model in $MODELS; do
  echo "== $model $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  "$BIN/nereus_bench" pipeline --model="$model" --workers=4 --servers=4 --batch=32 --schedule=full \
    --link_list=1000,10000 --sfb=off,auto --warmup="${WARMUP:-3}" --iterations="${ITERATIONS:-3}" \
    --phase_timeout_s=1800 --json="$OUT/$model.json" | tee "$OUT/$model.txt"
done
