#!/usr/bin/env bash
# Host-local aggregation off against on (issue 30, item 4): nereus_bench
# cluster, emulated hosts of several workers each (network namespaces with
# shaped veths), --sfb=off (every layer through the servers, the path
# aggregation changes), the bytes each host's link carried (the kernel's
# counters) and the iteration time. The counters cover the whole job, start-up
# included (INIT, each worker's prefetch of clock 0, the link calibration), so
# each setting runs twice, SHORT and LONG timed iterations, and the bytes per
# iteration are the difference over LONG - SHORT (summarize.py). The settings
# alternate within each round, so both see the same moments of a shared
# machine. Needs root (namespaces). Usage:
#   sudo bench/results/hostagg/run.sh [build dir] [rounds] [hosts] [workers per host] [model] [scale]
# Writes OUT/<model>_<H>x<L>_<setting>_<iterations>_r<round>.json and .txt.
set -euo pipefail
BUILD="${1:-build}"
ROUNDS="${2:-3}"
HOSTS="${3:-2}"
PER_HOST="${4:-2}"
MODEL="${5:-vgg19}"
SCALE="${6:-256}"
SHORT=5
LONG=20
OUT="$(dirname "$0")"
# 10 Gbit/s-equivalent: the link shrinks with the model's bytes.
LINK=$(python3 -c "print(round(10000 / $SCALE, 3))")
for ((r = 1; r <= ROUNDS; ++r)); do
  for agg in off on; do
    for it in $SHORT $LONG; do
      name="${MODEL}_${HOSTS}x${PER_HOST}_${agg}_${it}_r${r}"
      "$BUILD/bin/nereus_bench" cluster --model="$MODEL" --model_scale="$SCALE" --hosts="$HOSTS" \
        --workers_per_host="$PER_HOST" --host_aggregation="$agg" --sfb=off --link_mbit="$LINK" --schedule=full \
        --warmup=3 --iterations="$it" --json="$OUT/$name.json" 2>/dev/null | grep -v '^wrote' | tee "$OUT/$name.txt"
    done
  done
done
