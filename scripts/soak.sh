#!/usr/bin/env bash
# Soak test of checkpoints and resume (docs/RELIABILITY.md). Not run by CI.
#
#   scripts/soak.sh --minutes=M [--seed=S] [--keep_logs] [--rejoin]
#
# Runs a 2 servers x 4 workers synthetic BSP job with checkpoints every 25
# clocks, and over and over: lets it train a random 2-6 s, kills (kill -9) a
# random worker (one round in five a server instead), waits for the job to
# stop, and restarts every process with --resume. Per restart it checks:
#   - the job resumed from the newest checkpoint every server held (no update
#     lost: nothing older is taken; none applied twice: the servers' clock
#     and the workers' start clock are that checkpoint's);
#   - that checkpoint's weights and momentum equal, bit for bit, those of a
#     deterministic replay (the same job run once uninterrupted at the end,
#     checkpointing every clock the soak resumed from);
#   - each server's and the coordinator's RSS (sampled at the kill) stays flat
#     over the rounds (the last rounds' mean within 20% + 8 MiB of the first's).
# The last round runs to the end; its final weights must equal the replay's.
#
# --rejoin: one job runs the whole time instead; each round kills (kill -9) a
# random worker 1-3 (one round in five server 1, one in five the coordinator)
# and restarts only that process, with --resume: it rejoins (the coordinator:
# takes the job back from its state in the checkpoint directory) and every
# process rolls back in place (docs/RELIABILITY.md). Per round it checks that
# the job rolled back to a checkpoint both servers hold, no older than the
# newest one at the kill, that every worker resumed there, and compares that
# checkpoint with the replay; worker 0 and server 0 are never killed, and their
# RSS (and the coordinator's) over the rounds shows whether rolling back in
# place leaks. Then the job is stopped and resumed whole for the final round,
# as above.
# Prints one line per round and a summary; exit status 0 when all checks pass.
# Uses the binaries in ${NEREUS_BUILD_DIR:-build}/bin (scripts/build.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MINUTES=10
SEED=$RANDOM
KEEP_LOGS=0
REJOIN=0
for arg in "$@"; do
  case "$arg" in
    --minutes=*) MINUTES=${arg#--minutes=} ;;
    --seed=*) SEED=${arg#--seed=} ;;
    --keep_logs) KEEP_LOGS=1 ;;
    --rejoin) REJOIN=1 ;;
    -h|--help) sed -n '2,32p' "$0"; exit 0 ;;
    *) echo "soak.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$MINUTES" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "soak.sh: --minutes must be a number, got $MINUTES" >&2; exit 2; }
BUILD_DIR=${NEREUS_BUILD_DIR:-build}
[[ "$BUILD_DIR" == /* ]] || BUILD_DIR="$ROOT/$BUILD_DIR"
BIN="$BUILD_DIR/bin"
for b in nereus_server nereus_worker; do
  [[ -x "$BIN/$b" ]] || { echo "soak.sh: $BIN/$b not found; run scripts/build.sh first" >&2; exit 2; }
done
RANDOM=$SEED
WORK=$(mktemp -d "${TMPDIR:-/tmp}/nereus_soak.XXXXXX")
CKPT="$WORK/ckpt"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [[ -n "$p" ]] && kill -9 "$p" 2>/dev/null || true; done
  if [[ $KEEP_LOGS == 1 ]]; then echo "soak.sh: logs in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

SERVERS=2
WORKERS=4
EVERY=25
TOTAL=1000000   # Clocks: the soak never reaches it; the last round sets its own end.
# Heartbeats: a killed process is noticed within 5 s; a shorter timeout gives
# false "dead" verdicts on a machine loaded far beyond its cores.
JOB=(--partition_bytes=1024 --heartbeat_interval_ms=200 --heartbeat_timeout_ms=5000)
MODEL=(--model=synthetic --tensors=1000,250x10,64x3x3x3,7 --seed=9 --lr_policy=inv --base_lr=0.05 --gamma=0.001
       --power=0.75 --momentum=0.9 --weight_decay=0.001 --display=0)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# Newest clock that both servers' manifests name (what --resume will pick when
# nothing is damaged).
newest_common() {
  comm -12 <(ls "$1" 2>/dev/null | sed -n 's/^ckpt-\([0-9]*\)\.server-0\.manifest$/\1/p' | sort) \
           <(ls "$1" 2>/dev/null | sed -n 's/^ckpt-\([0-9]*\)\.server-1\.manifest$/\1/p' | sort) | tail -1 |
    awk '{ print $1 + 0 }'
}
# The weights and history arrays of a shard file (everything after its
# header), as a SHA-256.
payload_sha() {
  local magic n
  magic=$(head -c 8 "$1")
  [[ "$magic" == NRSCKPT1 ]] || { echo "not a checkpoint shard: $1" >&2; return 1; }
  n=$(od -An -tu4 -j8 -N4 "$1" | tr -d ' ')
  tail -c +$((13 + n)) "$1" | sha256sum | cut -d' ' -f1
}

# start_job LOGDIR ITERATIONS RESUME(0/1) EXTRA_SERVER_FLAGS...
start_job() {
  local logs=$1 iters=$2 resume=$3; shift 3
  local port; port=$(free_port)
  local coord=(--coordinator=127.0.0.1:$port) r=()
  [[ $resume == 1 ]] && r=(--resume)
  mkdir -p "$logs"
  PIDS=()
  COORD=("${coord[@]}")
  ITERS=$iters
  start_coordinator "$logs" "${r[@]}"
  PIDS+=($!)
  for s in $(seq 0 $((SERVERS - 1))); do start_server "$logs" $s "${r[@]}" "$@"; PIDS+=($!); done
  for w in $(seq 0 $((WORKERS - 1))); do start_worker "$logs" $w "${r[@]}"; PIDS+=($!); done
}
# start_coordinator LOGDIR FLAGS... / start_server LOGDIR RANK FLAGS... /
# start_worker LOGDIR RANK FLAGS...: one process of the job started by
# start_job (logs appended). The coordinator keeps its state beside the
# checkpoints.
start_coordinator() {
  local logs=$1; shift
  nice "$BIN/nereus_server" --role=coordinator "${COORD[@]}" --num_servers=$SERVERS --num_workers=$WORKERS \
    --checkpoint_dir="$CKPT" "${JOB[@]}" "$@" >>"$logs/coordinator.log" 2>&1 &
}
start_server() {
  local logs=$1 s=$2; shift 2
  nice "$BIN/nereus_server" --role=server "${COORD[@]}" --rank=$s --checkpoint_dir="$CKPT" \
    --checkpoint_every=$EVERY "$@" >>"$logs/server$s.log" 2>&1 &
}
start_worker() {
  local logs=$1 w=$2; shift 2
  nice "$BIN/nereus_worker" "${COORD[@]}" --rank=$w --iterations="$ITERS" --compute_ms=5 "${MODEL[@]}" "$@" \
    --weights_out="$logs/weights$w" >>"$logs/worker$w.log" 2>&1 &
}
wait_job() {
  local rc=0
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || rc=1; done
  PIDS=()
  return $rc
}

END=$(( $(date +%s) + $(awk -v m="$MINUTES" 'BEGIN { printf "%d", m * 60 }') ))
ROUND=0
FAIL=0
RESUMED=()          # Clocks the job resumed from.
declare -a RSS_S0 RSS_S1 RSS_C
echo "soak: seed $SEED, ${MINUTES} min, work dir $WORK$([[ $REJOIN == 1 ]] && echo ", rejoin")"
declare -a RSS_W0
if [[ $REJOIN == 1 ]]; then
  LOGS="$WORK/rejoin"
  start_job "$LOGS" $TOTAL 0
  EPOCH=0
  while (( $(date +%s) < END - 20 )); do
    # Train a random while once every worker has (re)joined.
    for _ in $(seq 600); do
      [[ $( (grep -l -E "resuming at clock|tensors, [0-9]+ parameters" "$LOGS"/worker*.log 2>/dev/null || true) |
            wc -l) == "$WORKERS" ]] && break
      sleep 0.1
    done
    sleep "$(( 2 + RANDOM % 5 ))"
    RSS_C+=("$(rss_kib "${PIDS[0]}")")
    RSS_S0+=("$(rss_kib "${PIDS[1]}")")
    RSS_W0+=("$(rss_kib "${PIDS[$((1 + SERVERS))]}")")
    PICK=$(( RANDOM % 5 ))
    if (( PICK == 0 )); then
      VICTIM=1; WHO="server 1"; IDX=2
    elif (( PICK == 1 )); then
      VICTIM=0; WHO="coordinator"; IDX=0
    else
      VICTIM=$(( 1 + RANDOM % (WORKERS - 1) )); WHO="worker $VICTIM"; IDX=$((1 + SERVERS + VICTIM))
    fi
    EXPECT=$(newest_common "$CKPT")
    kill -9 "${PIDS[$IDX]}" 2>/dev/null || true
    wait "${PIDS[$IDX]}" 2>/dev/null || true
    case $WHO in
      server*) start_server "$LOGS" 1 --resume ;;
      coordinator) start_coordinator "$LOGS" --resume ;;
      *) start_worker "$LOGS" "$VICTIM" --resume ;;
    esac
    PIDS[$IDX]=$!
    EPOCH=$((EPOCH + 1))
    LINE="round $ROUND: killed $WHO, restarted it alone;"
    AT=""
    for _ in $(seq 600); do
      AT=$(sed -n "s/.*epoch $EPOCH: the job rolled back to the checkpoint of clock \([0-9]*\).*/\1/p" \
             "$LOGS/coordinator.log" | head -1)
      [[ -n "$AT" ]] && break
      sleep 0.1
    done
    if [[ -z "$AT" ]]; then
      echo "$LINE FAIL: no rollback to epoch $EPOCH within 60 s (logs in $LOGS)"; FAIL=1; KEEP_LOGS=1; break
    fi
    LINE="$LINE epoch $EPOCH rolled back to clock $AT (newest common at the kill ${EXPECT:-none}); RSS KiB coordinator ${RSS_C[-1]} server0 ${RSS_S0[-1]} worker0 ${RSS_W0[-1]}"
    if (( AT < ${EXPECT:-0} )); then LINE="$LINE  FAIL: an older checkpoint than the newest"; FAIL=1; fi
    for f in "$CKPT"/ckpt-$(printf '%012d' "$AT").server-{0,1}.shard; do
      [[ -e "$f" ]] || { LINE="$LINE  FAIL: $f is missing"; FAIL=1; }
    done
    mkdir -p "$WORK/kept"
    cp -n "$CKPT"/ckpt-$(printf '%012d' "$AT").server-*.shard "$WORK/kept/" 2>/dev/null || true
    for w in $(seq 0 $((WORKERS - 1))); do
      for _ in $(seq 600); do
        (( $(grep -c "resuming at clock $AT\b" "$LOGS/worker$w.log" || true) > 0 )) && break
        sleep 0.1
      done
      grep -q "resuming at clock $AT\b" "$LOGS/worker$w.log" || { LINE="$LINE  FAIL: worker $w did not resume at $AT"; FAIL=1; }
    done
    RESUMED+=("$AT")
    echo "$LINE"
    ROUND=$((ROUND + 1))
  done
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  wait_job || true
  # Every process is gone, the coordinator too: its state describes a job
  # that did not end, at an address the final round does not reuse.
  rm -f "$CKPT/coordinator.state"
fi
while [[ $REJOIN == 0 ]] && (( $(date +%s) < END - 20 )); do
  LOGS="$WORK/round$ROUND"
  EXPECT=$(newest_common "$CKPT")
  RESUME=0
  [[ -n "$EXPECT" ]] && RESUME=1  # Killed before the first checkpoint: start afresh.
  start_job "$LOGS" $TOTAL $RESUME
  # Train a random while once every worker has joined and initialized (on a
  # loaded machine start-up alone can take seconds).
  READY=0
  for _ in $(seq 600); do
    READY=$( (grep -l -E "resuming at clock|tensors, [0-9]+ parameters" "$LOGS"/worker*.log 2>/dev/null || true) | wc -l)
    [[ $READY == "$WORKERS" ]] && break
    sleep 0.1
  done
  if [[ $READY != "$WORKERS" ]]; then
    echo "round $ROUND: FAIL: the job did not start within 60 s (logs in $LOGS)"; FAIL=1; KEEP_LOGS=1
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    wait_job || true
    break
  fi
  sleep "$(( 2 + RANDOM % 5 ))"
  RSS_C+=("$(rss_kib "${PIDS[0]}")")
  RSS_S0+=("$(rss_kib "${PIDS[1]}")")
  RSS_S1+=("$(rss_kib "${PIDS[2]}")")
  if (( RANDOM % 5 == 0 )); then
    VICTIM=$(( RANDOM % SERVERS )); WHO="server $VICTIM"; PID=${PIDS[$((1 + VICTIM))]}
  else
    VICTIM=$(( RANDOM % WORKERS )); WHO="worker $VICTIM"; PID=${PIDS[$((1 + SERVERS + VICTIM))]}
  fi
  kill -9 "$PID" 2>/dev/null || true
  wait_job || true
  STARTED=$(sed -n 's/.*resumes from the checkpoint of clock \([0-9]*\).*/\1/p' "$LOGS/coordinator.log" | head -1)
  NOW=$(newest_common "$CKPT")
  LINE="round $ROUND: killed $WHO; resumed from ${STARTED:-0} (expected ${EXPECT:-0}); newest checkpoint now ${NOW:-none}; RSS KiB coordinator ${RSS_C[-1]} server0 ${RSS_S0[-1]} server1 ${RSS_S1[-1]}"
  if [[ $RESUME == 1 && "${STARTED:-x}" != "${EXPECT:-y}" ]]; then
    LINE="$LINE  FAIL: resumed from the wrong clock"; FAIL=1
  fi
  if [[ $RESUME == 1 ]]; then
    for w in $(seq 0 $((WORKERS - 1))); do
      if ! grep -q "resuming at clock ${STARTED:-x}" "$LOGS/worker$w.log"; then
        LINE="$LINE  FAIL: worker $w did not start at clock $STARTED"; FAIL=1
      fi
    done
    RESUMED+=("$STARTED")
  fi
  echo "$LINE"
  # Snapshot the checkpoints resumed from (the soak keeps the newest 2 only).
  if [[ -n "$NOW" ]]; then
    mkdir -p "$WORK/kept"
    cp -n "$CKPT"/ckpt-$(printf '%012d' "$NOW").server-*.shard "$WORK/kept/" 2>/dev/null || true
  fi
  ROUND=$((ROUND + 1))
done

# The last round: resume and run to the end.
FINAL=$(( $(newest_common "$CKPT") + 3 * EVERY ))
EXPECT=$(newest_common "$CKPT")
start_job "$WORK/final" $FINAL 1
if ! wait_job; then echo "soak: FAIL: the final round did not finish cleanly (logs in $WORK/final)"; FAIL=1; KEEP_LOGS=1; fi
RESUMED+=("$EXPECT")
echo "final round: resumed from $EXPECT, ran to $FINAL"

# The deterministic replay: the same job, never interrupted, to $FINAL,
# checkpointing every $EVERY clocks (all kept).
REPLAY="$WORK/replay"
SAVE_CKPT=$CKPT; CKPT="$REPLAY/ckpt"
start_job "$REPLAY" $FINAL 0 --checkpoint_keep=1000000
if ! wait_job; then echo "soak: FAIL: the replay did not finish (logs in $REPLAY)"; FAIL=1; KEEP_LOGS=1; fi
CKPT=$SAVE_CKPT
CHECKED=0
for f in "$WORK"/kept/*.shard; do
  [[ -e "$f" ]] || continue
  b=$(basename "$f")
  if [[ ! -e "$REPLAY/ckpt/$b" ]]; then echo "soak: FAIL: the replay has no $b"; FAIL=1; continue; fi
  if [[ "$(payload_sha "$f")" != "$(payload_sha "$REPLAY/ckpt/$b")" ]]; then
    echo "soak: FAIL: $b differs from the replay's"; FAIL=1
  fi
  CHECKED=$((CHECKED + 1))
done
for w in $(seq 0 $((WORKERS - 1))); do
  if ! cmp -s "$WORK/final/weights$w" "$REPLAY/weights$w"; then
    echo "soak: FAIL: worker $w's final weights differ from the replay's"; FAIL=1
  fi
done

# RSS: mean of the first 3 rounds vs the last 3.
rss_flat() {
  local name=$1; shift
  local v=("$@") n=$#
  (( n >= 6 )) || { echo "RSS $name: too few rounds to compare"; return 0; }
  local first last
  first=$(( (v[0] + v[1] + v[2]) / 3 )); last=$(( (v[n-1] + v[n-2] + v[n-3]) / 3 ))
  local ok=1
  (( last <= first * 12 / 10 + 8192 )) || ok=0
  echo "RSS $name: first rounds ${first} KiB, last rounds ${last} KiB $([[ $ok == 1 ]] && echo flat || echo GROWING)"
  [[ $ok == 1 ]]
}
rss_flat coordinator "${RSS_C[@]}" || FAIL=1
rss_flat server0 "${RSS_S0[@]}" || FAIL=1
if [[ $REJOIN == 1 ]]; then
  rss_flat worker0 "${RSS_W0[@]}" || FAIL=1
else
  rss_flat server1 "${RSS_S1[@]}" || FAIL=1
fi
echo "soak: $ROUND killed rounds + 1 final, final clock $FINAL, $CHECKED checkpoint shards compared with the replay" \
     "bit for bit, resumed from clocks: ${RESUMED[*]}"
if [[ $FAIL == 0 ]]; then echo "soak: PASS"; else echo "soak: FAIL"; KEEP_LOGS=1; fi
exit $FAIL
