#!/usr/bin/env bash
# Host-local aggregation off against on (issue 30, item 4's instrument):
# nereus_bench cluster, emulated hosts of several workers each (network
# namespaces with shaped veths), the bytes each host's link carried read from
# the kernel's counters, and the iteration time. The two settings alternate
# round by round, so both see the same moments of a shared machine. Needs
# root (namespaces). Usage:
#   sudo bench/results/hostagg/run.sh [build dir] [rounds] [hosts] [workers per host] [model] [scale]
# Writes OUT/<model>_<H>x<L>_<setting>_r<round>.json and .txt.
set -euo pipefail
BUILD="${1:-build}"
ROUNDS="${2:-3}"
HOSTS="${3:-2}"
PER_HOST="${4:-2}"
MODEL="${5:-vgg19}"
SCALE="${6:-64}"
OUT="$(dirname "$0")"
# 10 Gbit/s-equivalent: the link shrinks with the model's bytes.
LINK=$(python3 -c "print(round(10000 / $SCALE, 3))")
for ((r = 1; r <= ROUNDS; ++r)); do
  for agg in off on; do
    name="${MODEL}_${HOSTS}x${PER_HOST}_${agg}_r${r}"
    "$BUILD/bin/nereus_bench" cluster --model="$MODEL" --model_scale="$SCALE" --hosts="$HOSTS" \
      --workers_per_host="$PER_HOST" --host_aggregation="$agg" --link_mbit="$LINK" --schedule=full \
      --warmup=5 --iterations=10 --json="$OUT/$name.json" 2>/dev/null | tee "$OUT/$name.txt"
  done
done
