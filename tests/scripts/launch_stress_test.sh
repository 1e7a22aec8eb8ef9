#!/usr/bin/env bash
# The launcher cannot hang (scripts/launch.sh -> nereus_launch):
#  1. A job whose coordinator and servers refuse a flag value
#     (--consistency=bogus) and so exit at once, often before the launcher
#     has started the rest, 50 times beside 2 busy loops: every run ends
#     within its bound with status 1, names the process that failed, and
#     leaves nothing running.
#  2. Ctrl-C (SIGINT to the launcher) at 20 random moments of a job's
#     start-up, uniform over its first second (from before the launcher has
#     read its arguments to the processes training: a 2 x 2 job here trains
#     after about 0.4 s): every run ends within its bound with status 130 and
#     leaves nothing running.
# NEREUS_STRESS_RUNS and NEREUS_STRESS_INTERRUPTS change the counts (ctest
# runs 15 and 10). About 40 s on 2 loaded cores with the defaults.
# "Nothing running": every process a launch starts runs a binary through
# $T/bin (symbolic links to the build's), so anything of it left over,
# launcher included, shows in `pgrep -f $T/bin/`.
set -euo pipefail
SRC=${NEREUS_SOURCE_DIR:?}
BIN=${NEREUS_BIN_DIR:?}
LAUNCH="$SRC/scripts/launch.sh"
RUNS=${NEREUS_STRESS_RUNS:-50}
INTERRUPTS=${NEREUS_STRESS_INTERRUPTS:-20}
T=$(mktemp -d "${TMPDIR:-/tmp}/nereus_launch_stress.XXXXXX")
BUSY=()
cleanup() {
  local p
  for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${BUSY[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
mkdir "$T/bin"
for b in nereus_launch nereus_server nereus_worker; do ln -s "$BIN/$b" "$T/bin/$b"; done
printf '127.0.0.1\n' > "$T/one"
free_port() { python3 "$(dirname "$0")/free_port.py"; }
left_over() { pgrep -af -- "$T/bin/" || true; }

# ---- 1. A process failing at once, 50 times beside 2 busy loops.
for _ in 1 2; do
  ( while :; do :; done ) &
  BUSY+=($!)
done
start=$SECONDS
port=$(free_port)
for run in $(seq "$RUNS"); do
  rc=0
  timeout -k 5 60 "$LAUNCH" --hostfile="$T/one" --num_servers=2 --num_workers=3 --port="$port" --ssh=none \
    --bin_dir="$T/bin" --consistency=bogus > "$T/bad.out" 2>&1 || rc=$?
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { cat "$T/bad.out" >&2; fail "run $run: the launcher hung"; }
  [ "$rc" -eq 1 ] || { cat "$T/bad.out" >&2; fail "run $run: exit status $rc, not 1"; }
  grep -q "^launch.sh: \(coordinator\|server [01]\)@127.0.0.1 exited with status 2; stopping every process$" \
    "$T/bad.out" || { cat "$T/bad.out" >&2; fail "run $run: no line naming the process that failed"; }
  grep -q '^\[\(coordinator\|server [01]\)@127.0.0.1\] .*--consistency must be bsp, ssp or async, got "bogus"$' \
    "$T/bad.out" || { cat "$T/bad.out" >&2; fail "run $run: the failed process's own error is not in the output"; }
  left=$(left_over)
  [ -z "$left" ] || fail "run $run: processes left running: $left"
done
for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${BUSY[@]}"; do wait "$p" 2>/dev/null || true; done
BUSY=()
echo "ok: a process failing at once stops the job, $RUNS of $RUNS runs beside 2 busy loops ($((SECONDS - start)) s)"

# ---- 2. Ctrl-C at random moments of start-up.
start=$SECONDS
said=0
port=$(free_port)  # Free again after each run: nothing is left running.
for run in $(seq "$INTERRUPTS"); do
  delay_ms=$((RANDOM % 1000))
  set -m  # The launcher in its own process group, SIGINT not ignored (as in a terminal).
  "$LAUNCH" --hostfile="$T/one" --num_servers=2 --num_workers=2 --port="$port" --ssh=none --bin_dir="$T/bin" \
    --tensors=1000 --iterations=100000 --compute_ms=20 --display=1 > "$T/int.out" 2>&1 &
  pid=$!
  set +m
  # A random moment, not a synchronisation: anywhere from before the
  # launcher has read its arguments to the job training.
  sleep "$((delay_ms / 1000)).$(printf '%03d' $((delay_ms % 1000)))"
  kill -INT "$pid" 2>/dev/null || true
  # The bound: a launcher still there after 60 s has hung. (The watchdog
  # takes its sleep with it when stopped, and holds none of our output.)
  ( sleep 60 & s=$!; trap 'kill $s; exit 0' TERM; wait $s; kill -KILL "$pid" ) > /dev/null 2>&1 &
  watchdog=$!
  rc=0
  wait "$pid" || rc=$?
  kill "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
  [ "$rc" -ne 137 ] || { cat "$T/int.out" >&2; fail "Ctrl-C $run (after $delay_ms ms): the launcher hung"; }
  [ "$rc" -eq 130 ] || { cat "$T/int.out" >&2; fail "Ctrl-C $run (after $delay_ms ms): exit status $rc, not 130"; }
  left=$(left_over)
  [ -z "$left" ] || fail "Ctrl-C $run (after $delay_ms ms): processes left running: $left"
  # Before its handler is in place (the first milliseconds) SIGINT ends the
  # launcher as it ends any program: 130 too, and nothing had started.
  if grep -q "^launch.sh: interrupted; \(stopping every process\|nothing was started\)$" "$T/int.out"; then
    said=$((said + 1))
  fi
done
echo "ok: Ctrl-C at $INTERRUPTS random moments of start-up: status 130, nothing left running" \
  "($said said so; $((SECONDS - start)) s)"
echo "PASS"
