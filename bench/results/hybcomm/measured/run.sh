#!/usr/bin/env bash
# HybComm's measured choice (issue 35): --sfb=off, on and auto side by side,
# the pipeline bench (emulated compute, real servers and clients in one
# process), the SFB rebuild on this CPU, for VGG-19 and VGG19-22K at
# --model_scale=16, 2 workers x 2 servers and 4 x 4, unshaped, 10 Gbit/s and
# 1 Gbit/s (a network namespace whose loopback tc shapes: every byte of the
# job crosses that one link), at the bench's default emulated device (1000
# GFLOP/s) and at an H200's rate (57000). Each nereus_bench run is one
# (model, size, device): its three link rates one after the other, and at
# each rate 3 rounds of off, on, auto interleaved (round-major), so the
# modes compared share the machine's slow and fast moments.
#
# --warmup=34: auto's trials (a warm-up of 5 clocks, then per fully
# connected layer 3 clocks measured on each path, a settling clock and the
# decision's) end by clock 31 and its reference period is taken at 31-33;
# the 6 timed clocks after show what auto settled on. Every mode runs the
# same warm-up, so its total (warmup_s) against the better fixed mode's is
# what the trials cost.
#
# Needs root (network namespaces). Several hours on a loaded 2-core
# machine. Then: python3 bench/results/hybcomm/measured/summarize.py
#
#   PARTS="vgg19:2:57000 ..."  only these (model:size:gflops) parts
#   TAG=_run2                  appended to each part's file names
set -euo pipefail
cd "$(dirname "$0")/../../../.."
OUT=bench/results/hybcomm/measured
BENCH=${BENCH:-build/bin/nereus_bench}
echo "start: $(date -u) commit $(git rev-parse --short HEAD) $(nproc) cores; $(uptime)" >> "$OUT/machine.txt"
for model in vgg19 vgg19_22k; do
  for size in 2 4; do
    for gflops in 1000 57000; do
      if [[ -n "${PARTS:-}" && " $PARTS " != *" $model:$size:$gflops "* ]]; then continue; fi
      name="${model}_${size}x${size}_${gflops}${TAG:-}"
      echo "$name: $(date -u) $(uptime)" >> "$OUT/machine.txt"
      "$BENCH" pipeline --model="$model" --model_scale=16 --workers="$size" --servers="$size" --batch=32 \
        --schedule=full --device_gflops="$gflops" --sfb=off,on,auto --sfb_rebuild=cpu \
        --link_list=0,10000,1000 --warmup=34 --iterations=6 --rounds=3 --phase_timeout_s=1200 \
        --json="$OUT/$name.json" > "$OUT/$name.log" 2>&1 || echo "$name: FAILED ($?)" >> "$OUT/machine.txt"
      # What auto decided and why (worker 0), and the result rows.
      grep -E "worker 0: HybComm clock|^full |Mbit/s|loopback" "$OUT/$name.log" |
        sed -E 's/^I[0-9]+ [0-9:.]+ +[0-9]+ [a-z_]+\.cc:[0-9]+\] //' > "$OUT/$name.txt" || true
      rm -f "$OUT/$name.log"
    done
  done
done
echo "end: $(date -u) $(uptime)" >> "$OUT/machine.txt"
