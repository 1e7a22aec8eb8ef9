#!/usr/bin/env bash
# Batching off (--batch_bytes=0) against on (65536) for ResNet-50 under
# --schedule=full, 2 workers x 2 servers, unshaped and shaped (10 Gbit/s)
# loopback, at the default emulated device (1 TFLOP/s: compute-bound) and a
# 10x faster one (communication-bound); at the faster one also with
# --merge=off, so MG-WFBP's plan (timed at start-up, so it differs from run
# to run on a loaded machine) does not change the message count under the
# comparison. Within each invocation the two settings alternate run by run
# (--batch_sweep, --rounds), so both see the same moments of a shared
# machine. Usage: run.sh [build dir] [rounds] [configs: all | mergeoff]
set -euo pipefail
BUILD="${1:-build}"
ROUNDS="${2:-3}"
WHICH="${3:-all}"
OUT="$(dirname "$0")"
run() {  # gflops link merge
  local name="resnet50_full_link$2_gflops$1"
  [ "$3" = off ] && name="${name}_mergeoff"
  "$BUILD/bin/nereus_bench" pipeline --model=resnet50 --schedule=full --workers=2 --servers=2 \
    --device_gflops="$1" --link_mbit="$2" --merge="$3" --batch_sweep=0,65536 --rounds="$ROUNDS" \
    --json="$OUT/$name.json" 2>/dev/null | grep -E '^(resnet50|schedule|full|wrote)' | tee "$OUT/$name.txt"
}
if [ "$WHICH" = all ]; then
  for gflops in 1000 10000; do
    for link in 0 10000; do run "$gflops" "$link" auto; done
  done
fi
for link in 0 10000; do run 10000 "$link" off; done
