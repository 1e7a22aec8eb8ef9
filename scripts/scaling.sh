#!/usr/bin/env bash
# The scaling study (issue 9): every model x hosts x schedule x link rate on
# the emulated cluster (nereus_bench cluster, needs root), next to the
# simulator's prediction of the same run; then the simulator alone for 16 to
# 2048 workers at 10, 25 and 100 Gbit/s. Writes CSVs and gnuplot PNGs.
#
#   sudo scripts/scaling.sh [OUT_DIR]            (default bench/results/scaling)
#   MODELS="resnet50" HOSTS="1 2" scripts/scaling.sh /tmp/quick
#   scripts/scaling.sh --plots-only OUT_DIR      (redraw from the CSVs)
#
# Emulating a Titan-X-class host (3 TFLOP/s sustained, REFERENCE section 6) on
# 10 Gbit/s on a 2-core machine: compute and link are slowed by one factor,
# FACTOR = SHRINK x SLOW. The model is shrunk SHRINK times in bytes and FLOPs
# alike (--model_scale; partition and credit bytes too), and the device and
# link rate are SLOW times slower: --device_gflops = 3000 / FACTOR,
# --link_mbit = 10000 / FACTOR (10 Gbit/s-equivalent). The ratio compute /
# communication, which decides scaling, is that of the real cluster; every
# emulated time is SLOW times the real one (per-message costs aside).
# Needs: a build (scripts/build.sh), python3, gnuplot (gnuplot-nox).
set -euo pipefail
cd "$(dirname "$0")/.."
PLOTS_ONLY=0
if [ "${1:-}" = "--plots-only" ]; then
  PLOTS_ONLY=1
  shift
fi
OUT="${1:-bench/results/scaling}"
BIN="${NEREUS_BIN_DIR:-${NEREUS_BUILD_DIR:-build}/bin}"
MODELS="${MODELS:-vgg19 resnet50 inception_v3}"
HOSTS="${HOSTS:-1 2 4 8}"
SCHEDULES="${SCHEDULES:-sequential full}"
RATES="${RATES:-10 5}"  # Gbit/s-equivalent per host, each way.
SHRINK="${SHRINK:-128}"
SLOW="${SLOW:-2}"
BATCH="${BATCH:-32}"
WARMUP="${WARMUP:-3}"
ITERATIONS="${ITERATIONS:-4}"
# MG-WFBP merging under full (--merge). auto measures the link at start (the
# fastest of repeated pings, alpha bounded by the fastest round trip); before
# that change it took CPU wake-up latency on a loaded 2-core machine (tens of
# ms) as the link's alpha and merged every layer into a few groups (README,
# bench/results/scaling_v2/).
MERGE="${MERGE:-auto}"
# Simulator inputs: per-message cost and server apply cost measured on the
# emulated cluster (README, "Scaling study"), and for the real-hardware
# predictions.
ALPHA_US="${ALPHA_US:-100}"
APPLY_NS="${APPLY_NS:-1}"
REAL_ALPHA_US="${REAL_ALPHA_US:-20}"
REAL_APPLY_NS="${REAL_APPLY_NS:-0.1}"
FACTOR=$((SHRINK * SLOW))
mkdir -p "$OUT"
if ! command -v gnuplot >/dev/null 2>&1; then
  echo "== installing gnuplot-nox for the plots" >&2
  apt-get install -y gnuplot-nox >/dev/null || { echo "scaling.sh: needs gnuplot (apt-get install gnuplot-nox)" >&2; exit 1; }
fi

if [ "$PLOTS_ONLY" = 0 ]; then
  if "$BIN/nereus_bench" simulate --model=vgg19_22k --link_mbit=1000 --host_list=1 >/dev/null 2>&1; then
    MODELS="$MODELS vgg19_22k"
  fi
fi
if [ "$PLOTS_ONLY" = 0 ] && [ -z "${NO_CLUSTER:-}" ]; then
  gflops=$(python3 -c "print(3000 / $FACTOR)")
  CSV="$OUT/scaling.csv"
  echo "model,schedule,hosts,rate_gbit,link_mbit,iteration_s,compute_s,measured_compute_s,wait_s,samples_per_s,real_samples_per_s,predicted_s,error_pct" >"$CSV"
  for rate in $RATES; do
    mbit=$(python3 -c "print($rate * 1000 / $FACTOR)")
    for model in $MODELS; do
      for schedule in $SCHEDULES; do
        for hosts in $HOSTS; do
          json="$OUT/run.json"
          rm -f "$json"
          echo "== $model rate ${rate}G-equivalent ($mbit Mbit/s) $schedule $hosts host(s)" >&2
          if ! "$BIN/nereus_bench" cluster --model="$model" --hosts="$hosts" --schedule="$schedule" \
              --link_mbit="$mbit" --device_gflops="$gflops" --model_scale="$SHRINK" --batch="$BATCH" \
              --warmup="$WARMUP" --iterations="$ITERATIONS" --merge="$MERGE" --json="$json" >&2; then
            echo "   failed; left out of the CSV" >&2
            continue
          fi
          # The simulator gets the compute the workers really did (sleeps
          # overshoot on a loaded machine).
          overhead=$(python3 -c "import json; r = json.load(open('$json'))[0]
print(max(0, 1e6 * (r['measured_compute_s'] - r['compute_s']) / (2 * r['layers'])))")
          predicted=$("$BIN/nereus_bench" simulate --layer_overhead_us="$overhead" --model="$model" --host_list="$hosts" --schedule="$schedule" \
              --link_list="$mbit" --device_gflops="$gflops" --model_scale="$SHRINK" --batch="$BATCH" \
              --alpha_us="$ALPHA_US" --apply_ns_per_byte="$APPLY_NS" | tail -1 | cut -d, -f6)
          python3 - "$json" "$model" "$schedule" "$hosts" "$rate" "$mbit" "$predicted" "$SLOW" >>"$CSV" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))[0]
model, schedule, hosts, rate, mbit, predicted, slow = sys.argv[2:]
it = r["iteration_s"]
p = float(predicted)
print(f'{model},{schedule},{hosts},{rate},{mbit},{it:.5f},{r["compute_s"]:.5f},{r["measured_compute_s"]:.5f},'
      f'{r["wait_s"]:.5f},{r["samples_per_s"]:.3f},{r["samples_per_s"] * float(slow):.3f},{p:.5f},'
      f'{100 * (p - it) / it:.2f}')
EOF
          tail -1 "$CSV" >&2
        done
      done
    done
  done
  rm -f "$OUT/run.json"
fi
if [ "$PLOTS_ONLY" = 0 ] && [ -z "${NO_PREDICTIONS:-}" ]; then
  # What the hardware here cannot run: the simulator at full size and speed.
  PRED="$OUT/predictions.csv"
  rm -f "$PRED"
  first=1
  for model in $MODELS; do
    for schedule in $SCHEDULES; do
      "$BIN/nereus_bench" simulate --model="$model" --schedule="$schedule" --batch="$BATCH" \
          --host_list=16,32,64,128,256,512,1024,2048 --link_list=10000,25000,100000 --device_gflops=3000 \
          --alpha_us="$REAL_ALPHA_US" --apply_ns_per_byte="$REAL_APPLY_NS" --sim_iterations="${SIM_ITERATIONS:-2}" |
        if [ $first = 1 ]; then cat; else tail -n +2; fi >>"$PRED"
      first=0
    done
  done
fi

# Validation with the server cost measured where there is no network: the
# sequential 1-host run's waiting is its whole model's push, apply and pull
# through one server, per byte C = waiting / bytes. Every run is predicted
# again with that C; validation.csv has both predictions and errors.
if [ -f "$OUT/scaling.csv" ] && [ -z "${NO_VALIDATION:-}" ]; then
  python3 - "$OUT" "$BIN" "$SHRINK" "$SLOW" "$BATCH" "$ALPHA_US" <<'EOF'
import csv, os, subprocess, sys
out, bin_dir, shrink, slow, batch, alpha = sys.argv[1:]
params = {"vgg19": 143667240, "resnet50": 25557032, "inception_v3": 23834568}
layers = {"vgg19": 19, "resnet50": 54, "inception_v3": 95}
rows = list(csv.DictReader(open(os.path.join(out, "scaling.csv"))))
cost = {}
for r in rows:
    if r["schedule"] == "sequential" and r["hosts"] == "1" and r["model"] in params:
        wait = float(r["iteration_s"]) - float(r["measured_compute_s"])
        cost[(r["model"], r["rate_gbit"])] = max(0.0, wait) / (params[r["model"]] * 4 / float(shrink)) * 1e9
with open(os.path.join(out, "validation.csv"), "w") as f:
    f.write("model,schedule,hosts,rate_gbit,measured_s,predicted_s,error_pct,server_ns_per_byte,calibrated_s,"
            "calibrated_error_pct\n")
    for r in rows:
        c = cost.get((r["model"], r["rate_gbit"]))
        if c is None:
            continue
        gflops = 3000 / (float(shrink) * float(slow))
        overhead = max(0.0, 1e6 * (float(r["measured_compute_s"]) - float(r["compute_s"])) / (2 * layers[r["model"]]))
        line = subprocess.run([os.path.join(bin_dir, "nereus_bench"), "simulate", "--model=" + r["model"],
                               "--schedule=" + r["schedule"], "--host_list=" + r["hosts"],
                               "--link_list=" + r["link_mbit"], "--device_gflops=%g" % gflops,
                               "--model_scale=" + shrink, "--batch=" + batch, "--alpha_us=" + alpha,
                               "--apply_ns_per_byte=%g" % c, "--layer_overhead_us=%g" % overhead],
                              capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        cal = float(line.split(",")[5])
        m, p = float(r["iteration_s"]), float(r["predicted_s"])
        f.write(f'{r["model"]},{r["schedule"]},{r["hosts"]},{r["rate_gbit"]},{m:.4f},{p:.4f},{100 * (p - m) / m:.1f},'
                f'{c:.2f},{cal:.4f},{100 * (cal - m) / m:.1f}\n')
EOF
fi

# Plots.
python3 - "$OUT" <<'EOF'
import collections, csv, os, sys
out = sys.argv[1]
path = os.path.join(out, "scaling.csv")
rows = list(csv.DictReader(open(path))) if os.path.exists(path) else []
models = sorted({r["model"] for r in rows}, key=lambda m: ["vgg19", "resnet50", "inception_v3", "vgg19_22k"].index(m)
                if m in ["vgg19", "resnet50", "inception_v3", "vgg19_22k"] else 9)
one = {}
for r in rows:
    if int(r["hosts"]) == 1:
        one[(r["model"], r["schedule"], r["rate_gbit"])] = float(r["real_samples_per_s"])
eff = open(os.path.join(out, "efficiency.csv"), "w")
eff.write("model,schedule,rate_gbit,hosts,real_samples_per_s,efficiency\n")
for m in models:
    with open(os.path.join(out, f"throughput_{m}.dat"), "w") as f:
        f.write("# hosts ideal full@10 sequential@10 full@5 sequential@5 (real-equivalent samples/s)\n")
        hosts = sorted({int(r["hosts"]) for r in rows if r["model"] == m})
        base = one.get((m, "full", "10"))
        for h in hosts:
            vals = [str(base * h) if base else "?"]
            for s, rate in [("full", "10"), ("sequential", "10"), ("full", "5"), ("sequential", "5")]:
                v = [float(r["real_samples_per_s"]) for r in rows
                     if r["model"] == m and r["schedule"] == s and r["rate_gbit"] == rate and int(r["hosts"]) == h]
                vals.append(str(v[0]) if v else "?")
                if v and (m, s, rate) in one:
                    eff.write(f"{m},{s},{rate},{h},{v[0]:.3f},{v[0] / (h * one[(m, s, rate)]):.4f}\n")
            f.write(f"{h} " + " ".join(vals) + "\n")
    with open(os.path.join(out, f"split_{m}.dat"), "w") as f:
        f.write("# label compute waiting other (emulated seconds per iteration), full and sequential at 10G\n")
        for s in ["full", "sequential"]:
            for r in rows:
                if r["model"] == m and r["schedule"] == s and r["rate_gbit"] == "10":
                    it, c, w = float(r["iteration_s"]), float(r["measured_compute_s"]), float(r["wait_s"])
                    f.write(f'"{s[:4]} {r["hosts"]}" {c:.4f} {w:.4f} {max(0.0, it - c - w):.4f}\n')
eff.close()
pred = os.path.join(out, "predictions.csv")
if os.path.exists(pred):
    prows = list(csv.DictReader(open(pred)))
    for m in models:
        with open(os.path.join(out, f"predicted_{m}.dat"), "w") as f:
            f.write("# workers efficiency(full@10G) (full@25G) (full@100G) (sequential@10G)\n")
            hs = sorted({int(r["hosts"]) for r in prows if r["model"] == m})
            for h in hs:
                vals = []
                for s, rate in [("full", 10000), ("full", 25000), ("full", 100000), ("sequential", 10000)]:
                    v = [r["efficiency"] for r in prows if r["model"] == m and r["schedule"] == s
                         and int(r["hosts"]) == h and float(r["link_mbit"]) == rate]
                    vals.append(v[0] if v else "?")
                f.write(f"{h} " + " ".join(vals) + "\n")
with open(os.path.join(out, "models.txt"), "w") as f:
    f.write(" ".join(models))
EOF
MODELS_DONE=$(cat "$OUT/models.txt")
N=$(echo $MODELS_DONE | wc -w)
{
  echo "set terminal pngcairo size $((N * 420)),800 font 'sans,9'"
  echo "set termoption noenhanced"
  echo "set output '$OUT/scaling.png'"
  echo "set datafile missing '?'"
  echo "set multiplot layout 2,$N title 'Emulated cluster (1 worker + 1 server a host, 3 TFLOP/s, 10G-eq), slowed ${FACTOR}x'"
  for m in $MODELS_DONE; do
    echo "set title '$m: throughput'; set xlabel 'hosts'; set ylabel 'samples/s (real-equivalent)'; set key top left"
    echo "set xtics (1,2,4,8); set style data linespoints; set style histogram clustered"
    echo "plot '$OUT/throughput_$m.dat' u 1:2 w l dt 2 lc rgb 'black' t 'ideal (N x 1 host, full)', '' u 1:3 t 'full 10G', '' u 1:4 t 'sequential 10G', '' u 1:5 t 'full 5G', '' u 1:6 t 'sequential 5G'"
  done
  for m in $MODELS_DONE; do
    echo "set title '$m: time split, 10G-equivalent'; set xlabel ''; set ylabel 'emulated s / iteration'; set key top left"
    echo "set style data histogram; set style histogram rowstacked; set style fill solid 0.8 border -1; set boxwidth 0.7; set xtics rotate by -45 ()"
    echo "plot '$OUT/split_$m.dat' u 2:xtic(1) t 'compute', '' u 3 t 'waiting for weights', '' u 4 t 'other'"
  done
  echo "unset multiplot"
  if [ -f "$OUT/predictions.csv" ]; then
    echo "set terminal pngcairo size $((N * 420)),420 font 'sans,9'"
    echo "set termoption noenhanced"
    echo "set output '$OUT/predicted.png'"
    echo "set multiplot layout 1,$N title 'Simulator: scaling efficiency, real speed (3 TFLOP/s per worker)'"
    for m in $MODELS_DONE; do
      echo "set title '$m'; set logscale x 2; set xlabel 'workers'; set ylabel 'efficiency'; set yrange [0:1.05]; set key bottom left"
      echo "set style data linespoints; set xtics auto"
      echo "plot '$OUT/predicted_$m.dat' u 1:2 t 'full 10G', '' u 1:3 t 'full 25G', '' u 1:4 t 'full 100G', '' u 1:5 t 'sequential 10G'"
    done
    echo "unset multiplot"
  fi
} >"$OUT/plots.gp"
gnuplot "$OUT/plots.gp"
echo "wrote $OUT/scaling.csv, $OUT/efficiency.csv, $OUT/scaling.png$( [ -f "$OUT/predictions.csv" ] && echo ", $OUT/predictions.csv, $OUT/predicted.png")" >&2
