#!/usr/bin/env bash
# HybComm at an H200's rate (issue 20, item 6, CPU part): the pipeline bench,
# VGG19 at --model_scale=4, 4 workers x 4 servers in one process on unshaped
# loopback, compute emulated at 57 TFLOP/s (--device_gflops=57000), the SFB
# rebuild on this CPU (cpu) or on the emulated device (device). Two runs, each
# its settings interleaved round by round so that they share the machine's
# slow and fast moments:
#   a: off, auto/cpu, auto/device, on/cpu, on/device   (6 rounds)
#   b: off, auto/cpu, auto/device, off again            (8 rounds; the second
#      off measures off against itself in the same rounds)
# About 5 minutes on a quiet 2-core machine. Then: python3 bench/results/hybcomm/summarize.py FILE.json
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=bench/results/hybcomm
run() {  # name, --sfb list, rounds
  echo "$1: $(date -u) $(uptime)" >> "$OUT/machine.txt"
  build/bin/nereus_bench pipeline --model=vgg19 --model_scale=4 --workers=4 --servers=4 --batch=32 \
    --schedule=full --device_gflops=57000 --sfb="$2" --sfb_rebuild=cpu,device \
    --warmup=5 --iterations=8 --rounds="$3" --json="$OUT/$1.json" 2>"$OUT/$1.log" | tee "$OUT/$1.txt"
  # The start-up tables of the auto runs (worker 0's log).
  grep -A4 "HybComm (--sfb=auto" "$OUT/$1.log" | grep -E "HybComm|layer  |fc[678]/0" |
    sed -E 's/^I[0-9]+ [0-9:.]+ +[0-9]+ client.cc:[0-9]+\] //' > "$OUT/${1%%_*}_tables.txt"
  rm "$OUT/$1.log"
}
run a_off_auto_on off,auto,on 6
run b_off_auto_off off,auto,off 8
echo "end: $(date -u) $(uptime)" >> "$OUT/machine.txt"
