# What the launch.sh tests share (sourced by launch_script_test.sh and
# launch_ssh_test.sh, which set LAUNCH to scripts/launch.sh and T to their
# temporary folder).

fail() { echo "FAIL: $*" >&2; exit 1; }

# interrupt_long_job WORKER1_PREFIX LAUNCH_FLAGS...: starts launch.sh with
# LAUNCH_FLAGS on a job too long to finish (its output copied to
# $T/live.out), sends launch.sh SIGINT (Ctrl-C) once worker 1's output, whose
# lines start with WORKER1_PREFIX, reports iteration 3, and fails unless
# launch.sh then exits with status 130.
interrupt_long_job() {
  local prefix=$1
  shift
  set -m  # launch.sh in its own process group, SIGINT not ignored
  mkfifo "$T/live"
  "$LAUNCH" "$@" --tensors=1000 --iterations=100000 --compute_ms=20 --display=1 > "$T/live" 2>&1 &
  local pid=$!
  set +m
  local sent=0 line
  while read -r line; do
    echo "$line" >> "$T/live.out"
    if [ "$sent" -eq 0 ] && [[ "$line" == "$prefix"*"worker 1 iteration 3,"* ]]; then
      kill -INT "$pid"
      sent=1
    fi
  done < "$T/live"
  local rc=0
  wait "$pid" || rc=$?
  [ "$sent" -eq 1 ] || { cat "$T/live.out" >&2; fail "the long job never reached iteration 3"; }
  [ "$rc" -eq 130 ] || { cat "$T/live.out" >&2; fail "after Ctrl-C: exit status $rc, not 130"; }
}
