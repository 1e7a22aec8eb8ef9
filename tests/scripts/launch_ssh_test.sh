#!/usr/bin/env bash
# scripts/launch.sh over real ssh: a private sshd (temporary host key,
# authorized key and config, a free port on 127.0.0.1 and 127.0.0.2) serves
# two "hosts". A 2 x 2 job trains as on one host; Ctrl-C stops every remote
# process before launch.sh returns (it closes the ssh clients' stdin and waits
# for them). Exit 77 (skipped) where there is no sshd (openssh-server is not a
# dependency: installing it starts a system sshd on many machines) or it
# cannot start.
set -euo pipefail
SRC=${NEREUS_SOURCE_DIR:?}
BIN=${NEREUS_BIN_DIR:?}
LAUNCH="$SRC/scripts/launch.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/nereus_ssh_test.XXXXXX")
SSHD_PID=""
cleanup() {
  # SIGKILL: on SIGTERM sshd logs to its stderr, a pipe nobody may read any more.
  if [ -n "$SSHD_PID" ]; then kill -KILL "$SSHD_PID" 2>/dev/null || true; wait "$SSHD_PID" 2>/dev/null || true; fi
  rm -rf "$T"
}
trap cleanup EXIT
skip() { echo "SKIPPED: $*" >&2; exit 77; }
# shellcheck source=tests/scripts/launch_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/launch_test_lib.sh"

SSHD=$(command -v sshd || echo /usr/sbin/sshd)
[ -x "$SSHD" ] || skip "no sshd (package openssh-server)"
command -v ssh >/dev/null || skip "no ssh client"
[ "$(id -u)" -eq 0 ] || skip "the test logs in as root through its own sshd"
python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.2", 0))' 2>/dev/null || skip "127.0.0.2 is not local here"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.2", 0)); print(s.getsockname()[1])')
ssh-keygen -q -t ed25519 -N '' -f "$T/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$T/id"
cp "$T/id.pub" "$T/authorized_keys"
cat > "$T/sshd_config" <<EOF
Port $PORT
ListenAddress 127.0.0.1
ListenAddress 127.0.0.2
HostKey $T/host_key
AuthorizedKeysFile $T/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile $T/sshd.pid
EOF
mkdir -p /run/sshd  # sshd's privilege-separation directory
mkfifo "$T/sshd.err"
"$SSHD" -D -e -f "$T/sshd_config" 2> "$T/sshd.err" &
SSHD_PID=$!
# sshd says when it listens (on both addresses); keep draining its log after.
exec {log}< "$T/sshd.err"
listening=0
while [ "$listening" -lt 2 ] && read -r line <&"$log"; do
  line=${line%$'\r'}  # sshd ends its stderr lines with \r\n
  echo "sshd: $line"
  [[ "$line" == "Server listening on 127.0.0."[12]" port $PORT." ]] && listening=$((listening + 1))
done
[ "$listening" -eq 2 ] || skip "sshd did not start"
cat <&"$log" > "$T/sshd.log" &
exec {log}<&-

SSH_OPTS="-p $PORT -i $T/id -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
printf '127.0.0.1\n127.0.0.2\n' > "$T/hosts"
JOB=(--tensors=1000,250x10 --iterations=5 --startup_timeout_s=60)
# ssh starts each remote process with a fresh environment: a sanitizer build's
# options (TSan's suppressions file, in CI) must travel as --env.
SAN_ENV=()
for v in TSAN_OPTIONS ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
  [ -z "${!v:-}" ] || SAN_ENV+=("--env=$v=${!v}")
done
JOB_PORT=$(python3 "$(dirname "$0")/free_port.py")
"$LAUNCH" --hostfile="$T/hosts" --num_servers=2 --num_workers=2 --port="$JOB_PORT" --ssh=ssh --ssh_opts="$SSH_OPTS" \
  --bin_dir="$BIN" --workdir="$T" "${SAN_ENV[@]}" "${JOB[@]}" > "$T/job.out" 2>&1 || { rc=$?; cat "$T/job.out" >&2; fail "ssh job exited with $rc"; }
grep -q "^\[worker 1@127.0.0.2\] .* at tcp://127.0.0.2:[0-9]* registering with coordinator tcp://127.0.0.1:$JOB_PORT$" \
  "$T/job.out" || { cat "$T/job.out" >&2; fail "worker 1 did not run on 127.0.0.2"; }
summary() { sed -n 's/^.*\(worker [0-9]*\): 5 iterations in [0-9.]* s, \(loss .*\), communication.*$/\1 \2/p' "$1" | sort; }
printf '127.0.0.1\n' > "$T/one"
"$LAUNCH" --hostfile="$T/one" --num_servers=2 --num_workers=2 --port="$JOB_PORT" --ssh=none --bin_dir="$BIN" \
  "${JOB[@]}" > "$T/local.out" 2>&1 || { rc=$?; cat "$T/local.out" >&2; fail "local job exited with $rc"; }
[ "$(summary "$T/job.out" | wc -l)" -eq 2 ] || { cat "$T/job.out" >&2; fail "expected 2 worker summaries"; }
[ "$(summary "$T/job.out")" = "$(summary "$T/local.out")" ] || fail "ssh job and local job differ"
echo "ok: a 2-host job over ssh trains as on one host"

# Ctrl-C while the job trains: every remote process is gone when launch.sh
# has returned.
interrupt_long_job "[worker 1@127.0.0.2]" --hostfile="$T/hosts" --num_servers=2 --num_workers=2 --port="$JOB_PORT" \
  --ssh=ssh --ssh_opts="$SSH_OPTS" --bin_dir="$BIN" "${SAN_ENV[@]}"
if pgrep -f -- "--coordinator=127.0.0.1:$JOB_PORT" >/dev/null; then
  pgrep -af -- "--coordinator=127.0.0.1:$JOB_PORT" >&2
  fail "remote processes left after Ctrl-C"
fi
echo "ok: Ctrl-C stops every remote process before launch.sh returns"
echo "PASS"
