#!/usr/bin/env bash
# scripts/launch.sh: the commands it would run (--dry_run, exact; each
# worker's --gpu with --gpus_per_host), bad arguments, the Slurm task view of
# the plan, and real jobs on a 2-host emulated cluster: two network
# namespaces joined by a veth pair or, where namespaces cannot talk here, the
# addresses 127.0.0.2 and 127.0.0.3. A job runs to the end, a failing process
# stops the others, Ctrl-C stops all.
# Exit 77 (skipped) only where neither emulation works.
set -euo pipefail
SRC=${NEREUS_SOURCE_DIR:?}
BIN=${NEREUS_BIN_DIR:?}
LAUNCH="$SRC/scripts/launch.sh"
T=$(mktemp -d "${TMPDIR:-/tmp}/nereus_launch_test.XXXXXX")
NETNS=()
cleanup() {
  local ns
  for ns in "${NETNS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$T"
}
trap cleanup EXIT
# shellcheck source=tests/scripts/launch_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/launch_test_lib.sh"
# The GPU cases set it themselves; none inherited from the caller.
unset CUDA_VISIBLE_DEVICES
# expect_eq WHAT EXPECTED ACTUAL
expect_eq() {
  if [ "$2" != "$3" ]; then
    diff <(echo "$2") <(echo "$3") >&2 || true
    fail "$1"
  fi
  echo "ok: $1"
}

# ---- 1. --dry_run: placement, flag routing, quoting, exactly.
cat > "$T/hosts" <<'EOF'
# two hosts, the second with two slots
hostA addr=10.0.0.1
hostB addr=10.0.0.2 slots=2
EOF
out=$("$LAUNCH" --hostfile="$T/hosts" --num_servers=2 --num_workers=3 --port=7100 --ssh=none \
  --workdir="/w d" --env=OPENBLAS_NUM_THREADS=1 --dry_run --iterations=5 --consistency=ssp --startup_timeout_s=30 \
  --bin_dir="$BIN" 2>&1) || fail "dry run exited with $?: $out"
B=$BIN
# Slots cycle A B B: servers A B, workers A B B. --iterations is a worker
# flag, --consistency a server flag, --startup_timeout_s both's.
expect_eq "dry run, --ssh=none" \
"[coordinator@hostA] bash -c 'cd '\\''/w d'\\'' && exec env OPENBLAS_NUM_THREADS=1 $B/nereus_server --role=coordinator --coordinator=10.0.0.1:7100 --num_servers=2 --num_workers=3 --consistency=ssp --startup_timeout_s=30'
[server 0@hostA] bash -c 'cd '\\''/w d'\\'' && exec env OPENBLAS_NUM_THREADS=1 $B/nereus_server --role=server --coordinator=10.0.0.1:7100 --rank=0 --bind_host=10.0.0.1 --consistency=ssp --startup_timeout_s=30'
[server 1@hostB] bash -c 'cd '\\''/w d'\\'' && exec env OPENBLAS_NUM_THREADS=1 $B/nereus_server --role=server --coordinator=10.0.0.1:7100 --rank=1 --bind_host=10.0.0.2 --consistency=ssp --startup_timeout_s=30'
[worker 0@hostA] bash -c 'cd '\\''/w d'\\'' && exec env OPENBLAS_NUM_THREADS=1 $B/nereus_worker --coordinator=10.0.0.1:7100 --rank=0 --bind_host=10.0.0.1 --iterations=5 --startup_timeout_s=30'
[worker 1@hostB] bash -c 'cd '\\''/w d'\\'' && exec env OPENBLAS_NUM_THREADS=1 $B/nereus_worker --coordinator=10.0.0.1:7100 --rank=1 --bind_host=10.0.0.2 --iterations=5 --startup_timeout_s=30'
[worker 2@hostB] bash -c 'cd '\\''/w d'\\'' && exec env OPENBLAS_NUM_THREADS=1 $B/nereus_worker --coordinator=10.0.0.1:7100 --rank=2 --bind_host=10.0.0.2 --iterations=5 --startup_timeout_s=30'" \
"$out"

out=$("$LAUNCH" --hostfile="$T/hosts" --num_servers=1 --num_workers=2 --ssh=ssh --ssh_opts="-p 2222" --bin_dir="$BIN" \
  --workdir=/w --dry_run 2>&1) || fail "ssh dry run exited with $?: $out"
expect_eq "dry run, --ssh=ssh, worker 1" \
"[worker 1@hostB] ssh -o BatchMode=yes -p 2222 hostB 'cd /w || exit 1; exec 3<&0; $B/nereus_worker --coordinator=10.0.0.1:7000 --rank=1 --bind_host=10.0.0.2 </dev/null & p=\$!; ( read -r _ <&3; kill \$p ) >/dev/null 2>&1 & w=\$!; exec 3<&-; wait \$p; s=\$?; kill \$w 2>/dev/null; exit \$s'" \
"$(grep '^\[worker 1@' <<< "$out")"

# ---- 1b. One GPU per worker (--gpus_per_host): the k-th worker on a host gets
# --gpu=k (hostB's workers 1 and 2 its GPUs 0 and 1); nothing else changes.
# --gpus_per_host=0 is the job without GPUs, byte for byte.
plain=$("$LAUNCH" --hostfile="$T/hosts" --num_servers=2 --num_workers=3 --port=7100 --ssh=none --workdir=/w \
  --dry_run --iterations=5 --bin_dir="$BIN" 2>&1) || fail "dry run exited with $?: $plain"
out=$("$LAUNCH" --hostfile="$T/hosts" --num_servers=2 --num_workers=3 --port=7100 --ssh=none --workdir=/w \
  --dry_run --iterations=5 --bin_dir="$BIN" --gpus_per_host=0 2>&1) || fail "dry run exited with $?: $out"
expect_eq "--gpus_per_host=0 changes nothing" "$plain" "$out"
out=$("$LAUNCH" --hostfile="$T/hosts" --num_servers=2 --num_workers=3 --port=7100 --ssh=none --workdir=/w \
  --dry_run --iterations=5 --bin_dir="$BIN" --gpus_per_host=2 2>&1) || fail "GPU dry run exited with $?: $out"
expect_eq "dry run, --gpus_per_host=2" \
"[coordinator@hostA] bash -c 'cd /w && exec $B/nereus_server --role=coordinator --coordinator=10.0.0.1:7100 --num_servers=2 --num_workers=3'
[server 0@hostA] bash -c 'cd /w && exec $B/nereus_server --role=server --coordinator=10.0.0.1:7100 --rank=0 --bind_host=10.0.0.1'
[server 1@hostB] bash -c 'cd /w && exec $B/nereus_server --role=server --coordinator=10.0.0.1:7100 --rank=1 --bind_host=10.0.0.2'
[worker 0@hostA] bash -c 'cd /w && exec $B/nereus_worker --coordinator=10.0.0.1:7100 --rank=0 --bind_host=10.0.0.1 --gpu=0 --iterations=5'
[worker 1@hostB] bash -c 'cd /w && exec $B/nereus_worker --coordinator=10.0.0.1:7100 --rank=1 --bind_host=10.0.0.2 --gpu=0 --iterations=5'
[worker 2@hostB] bash -c 'cd /w && exec $B/nereus_worker --coordinator=10.0.0.1:7100 --rank=2 --bind_host=10.0.0.2 --gpu=1 --iterations=5'" \
"$out"
expect_eq "without GPUs only the workers' --gpu differ" "$plain" "${out// --gpu=[01]/}"
# Five workers wrap around the cycle A B B: A takes workers 0 and 3, B 1 2 4.
workers_gpus() { sed -n 's/^\[\(worker [0-9]*@[A-Za-z]*\)\] .* \(--gpu=[0-9]*\).*$/\1 \2/p' <<< "$1"; }
out=$("$LAUNCH" --hostfile="$T/hosts" --num_servers=1 --num_workers=5 --ssh=ssh --dry_run --bin_dir="$BIN" \
  --gpus_per_host=4 2>&1) || fail "ssh GPU dry run exited with $?: $out"
expect_eq "5 workers over A B B, ssh" "worker 0@hostA --gpu=0
worker 1@hostB --gpu=0
worker 2@hostB --gpu=1
worker 3@hostA --gpu=1
worker 4@hostB --gpu=2" "$(workers_gpus "$out")"
# CUDA_VISIBLE_DEVICES is passed on unchanged; --gpu=k is its k-th device,
# and it bounds the GPUs a host has. Over ssh the launcher's own does not
# reach the hosts and is not read; with --ssh=none it is the processes'.
out=$("$LAUNCH" --hostfile="$T/hosts" --num_servers=1 --num_workers=3 --ssh=none --workdir=/w --dry_run \
  --bin_dir="$BIN" --gpus_per_host=4 --env=CUDA_VISIBLE_DEVICES=5,3 2>&1) || fail "listed GPUs: exit $?: $out"
expect_eq "--env=CUDA_VISIBLE_DEVICES=5,3, worker 2" \
"[worker 2@hostB] bash -c 'cd /w && exec env CUDA_VISIBLE_DEVICES=5,3 $B/nereus_worker --coordinator=10.0.0.1:7000 --rank=2 --bind_host=10.0.0.2 --gpu=1'" \
"$(grep '^\[worker 2@' <<< "$out")"
out=$(CUDA_VISIBLE_DEVICES=7 "$LAUNCH" --hostfile="$T/hosts" --num_servers=1 --num_workers=3 --ssh=ssh --dry_run \
  --bin_dir="$BIN" --gpus_per_host=2 2>&1) || fail "ssh ignores the launcher's CUDA_VISIBLE_DEVICES: exit $?: $out"
expect_eq "over ssh the launcher's CUDA_VISIBLE_DEVICES is not read" "worker 0@hostA --gpu=0
worker 1@hostB --gpu=0
worker 2@hostB --gpu=1" "$(workers_gpus "$out")"

# ---- 2. Bad arguments: exit 2 and a message naming the problem.
expect_error() {  # WHAT EXPECTED_MESSAGE ARGS...
  local what=$1 want=$2 got rc=0
  shift 2
  got=$("$LAUNCH" --bin_dir="$BIN" --dry_run "$@" 2>&1) || rc=$?
  [ "$rc" -eq 2 ] || fail "$what: exit status $rc, not 2 ($got)"
  expect_eq "$what" "$want" "$got"
}
expect_error "unknown flag" "launch.sh: --iteratons is not a flag of nereus_server or nereus_worker" \
  --hostfile="$T/hosts" --iteratons=5
expect_error "flag set per process" "launch.sh: --rank is set by the launcher for each process" \
  --hostfile="$T/hosts" --rank=1
expect_error "no hostfile" "launch.sh: --hostfile=FILE is required (one host a line, NAME [slots=N] [addr=ADDRESS])"
expect_error "bare argument" "launch.sh: unexpected argument \"5\"; binary flags are passed as --name=value" \
  --hostfile="$T/hosts" --iterations 5
printf 'hostA\nhostA slots=2\n' > "$T/dup"
expect_error "duplicate host" \
  "launch.sh: $T/dup: hostfile line 2: host \"hostA\" is already listed on line 1; give it slots=N instead" \
  --hostfile="$T/dup"
expect_error "bad mode" "launch.sh: --ssh must be ssh, none or netns, got \"rsh\"" --hostfile="$T/hosts" --ssh=rsh
expect_error "more workers on a host than GPUs" \
  "launch.sh: host \"hostB\" would run 3 workers but has 2 GPUs (--gpus_per_host=2): each worker trains on a GPU of its own" \
  --hostfile="$T/hosts" --num_workers=5 --gpus_per_host=2 --ssh=none
expect_error "more workers than listed GPUs (--env)" \
  "launch.sh: host \"hostB\" would run 2 workers but has 1 GPU (--gpus_per_host=4, CUDA_VISIBLE_DEVICES=\"6\" lists 1): each worker trains on a GPU of its own" \
  --hostfile="$T/hosts" --num_workers=3 --gpus_per_host=4 --env=CUDA_VISIBLE_DEVICES=6 --ssh=ssh
rc=0
got=$(CUDA_VISIBLE_DEVICES=2 "$LAUNCH" --bin_dir="$BIN" --dry_run --hostfile="$T/hosts" --num_workers=3 \
  --gpus_per_host=2 --ssh=none 2>&1) || rc=$?
[ "$rc" -eq 2 ] || fail "more workers than the launcher's listed GPUs: exit status $rc, not 2 ($got)"
expect_eq "more workers than the launcher's listed GPUs (--ssh=none)" \
  "launch.sh: host \"hostB\" would run 2 workers but has 1 GPU (--gpus_per_host=2, CUDA_VISIBLE_DEVICES=\"2\" lists 1): each worker trains on a GPU of its own" \
  "$got"
expect_error "--gpu with --gpus_per_host" \
  "launch.sh: --gpu is set by the launcher for each worker with --gpus_per_host (the k-th worker on a host trains on its GPU k)" \
  --hostfile="$T/hosts" --gpus_per_host=2 --gpu=1
expect_error "bad --gpus_per_host" "launch.sh: --gpus_per_host must be a whole number, got \"two\"" \
  --hostfile="$T/hosts" --gpus_per_host=two
expect_error "negative --gpus_per_host" "launch.sh: --gpus_per_host must be >= 0, got -1" \
  --hostfile="$T/hosts" --gpus_per_host=-1

# ---- 3. A Slurm task's view: task 3 of 1+2+2 on localhost is worker 0.
out=$("$BIN/nereus_launch_plan" --slurm_nodelist=localhost --num_servers=2 --num_workers=2 --port=7000 \
  --format=shell --procid=3 --ntasks=5)
expect_eq "Slurm task 3" "NEREUS_ROLE=worker
NEREUS_RANK=0
NEREUS_HOST=localhost
NEREUS_BIND_HOST=127.0.0.1
NEREUS_COORDINATOR=127.0.0.1:7000" "$out"
rc=0
out=$("$BIN/nereus_launch_plan" --slurm_nodelist=localhost --num_servers=2 --num_workers=2 --format=shell \
  --procid=3 --ntasks=6 2>&1) || rc=$?
[ "$rc" -eq 2 ] || fail "wrong task count: exit status $rc"
expect_eq "wrong task count" "nereus_launch_plan: the launcher started 6 tasks but the job has 5 processes (1 coordinator + 2 servers + 2 workers); start exactly 5" "$out"
# With GPUs: the table's last column is each worker's GPU, the shell view a
# worker's NEREUS_GPU; CUDA_VISIBLE_DEVICES here is the hosts' list.
out=$("$BIN/nereus_launch_plan" --hostfile="$T/hosts" --num_servers=1 --num_workers=4 --port=7000 --gpus_per_host=2 \
  --format=table 2>&1) || fail "plan table with GPUs: exit $?: $out"
expect_eq "plan table, --gpus_per_host=2" "coordinator 0 hostA 10.0.0.1 10.0.0.1:7000 -
server 0 hostA 10.0.0.1 10.0.0.1:7000 -
worker 0 hostA 10.0.0.1 10.0.0.1:7000 0
worker 1 hostB 10.0.0.2 10.0.0.1:7000 0
worker 2 hostB 10.0.0.2 10.0.0.1:7000 1
worker 3 hostA 10.0.0.1 10.0.0.1:7000 1" "$out"
out=$("$BIN/nereus_launch_plan" --slurm_nodelist=localhost --num_servers=2 --num_workers=2 --port=7000 \
  --gpus_per_host=2 --format=shell --procid=4 --ntasks=5)
expect_eq "Slurm task 4 with GPUs" "NEREUS_ROLE=worker
NEREUS_RANK=1
NEREUS_HOST=localhost
NEREUS_BIND_HOST=127.0.0.1
NEREUS_COORDINATOR=127.0.0.1:7000
NEREUS_GPU=1" "$out"
rc=0
out=$(CUDA_VISIBLE_DEVICES=GPU-1a2b "$BIN/nereus_launch_plan" --slurm_nodelist=localhost --num_workers=2 \
  --gpus_per_host=2 --format=table 2>&1) || rc=$?
[ "$rc" -eq 2 ] || fail "plan with one listed GPU for 2 workers: exit status $rc, not 2"
expect_eq "plan with one listed GPU for 2 workers" "nereus_launch_plan: host \"localhost\" would run 2 workers but has 1 GPU (--gpus_per_host=2, CUDA_VISIBLE_DEVICES=\"GPU-1a2b\" lists 1): each worker trains on a GPU of its own" "$out"

# ---- 3b. --worker_command: a Slurm task that is a worker becomes the command,
# its place in the job in its environment (nereus.torch.init reads it); the
# launcher's dry run shows the same line.
out=$(SLURM_PROCID=4 SLURM_NTASKS=5 SLURM_JOB_NODELIST=localhost SLURMD_NODENAME=localhost NEREUS_BIN_DIR="$BIN" \
  bash "$SRC/scripts/slurm/nereus_task.sh" --num_servers=2 --num_workers=2 --port=7000 --schedule=wfbp \
  --worker_command='env | grep -E "^NEREUS_(BIND_HOST|COORDINATOR|LOCAL|NUM|RANK|WORKER_FLAGS)" | sort' 2>&1)
expect_eq "Slurm task 4 with --worker_command" "nereus_task.sh (task 4): worker 1 on localhost (127.0.0.1), coordinator 127.0.0.1:7000
NEREUS_BIND_HOST=127.0.0.1
NEREUS_COORDINATOR=127.0.0.1:7000
NEREUS_LOCAL_RANK=1
NEREUS_LOCAL_SIZE=2
NEREUS_NUM_SERVERS=2
NEREUS_NUM_WORKERS=2
NEREUS_RANK=1
NEREUS_WORKER_FLAGS=--schedule=wfbp" "$out"
out=$("$LAUNCH" --hostfile="$T/hosts" --num_servers=1 --num_workers=2 --ssh=none --bin_dir="$BIN" --workdir=/w \
  --worker_command="python3 train.py --epochs=1" --schedule=full --dry_run 2>&1) || fail "worker command dry run: $out"
expect_eq "dry run, --worker_command, worker 1" \
"[worker 1@hostB] bash -c 'cd /w && exec /usr/bin/env NEREUS_COORDINATOR=10.0.0.1:7000 NEREUS_RANK=1 NEREUS_NUM_WORKERS=2 NEREUS_NUM_SERVERS=1 NEREUS_BIND_HOST=10.0.0.2 NEREUS_LOCAL_RANK=0 NEREUS_LOCAL_SIZE=1 NEREUS_WORKER_FLAGS=--schedule=full bash -c '\\''python3 train.py --epochs=1'\\'''" \
"$(grep '^\[worker 1@' <<< "$out")"

# ---- 4. Real jobs on two emulated hosts.
MODE=""
free_port() {  # ADDRESS
  python3 -c 'import socket, sys; s = socket.socket(); s.bind((sys.argv[1], 0)); print(s.getsockname()[1])' "$1"
}
# Two namespaces joined by a veth pair, used only if a TCP connection
# crosses it (some sandboxes create namespaces whose links carry nothing).
try_netns() {
  [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null || return 1
  local a="nlt$$a" b="nlt$$b"
  ip netns add "$a" 2>/dev/null || return 1
  NETNS+=("$a")
  ip netns add "$b" 2>/dev/null || return 1
  NETNS+=("$b")
  ip link add "v$$a" type veth peer name "v$$b" 2>/dev/null || return 1
  ip link set "v$$a" netns "$a" && ip link set "v$$b" netns "$b" || return 1
  ip -n "$a" addr add 10.213.0.1/24 dev "v$$a" && ip -n "$b" addr add 10.213.0.2/24 dev "v$$b" || return 1
  ip -n "$a" link set "v$$a" up && ip -n "$b" link set "v$$b" up || return 1
  ip -n "$a" link set lo up && ip -n "$b" link set lo up || return 1
  # The listener says "ready" once it listens; the connection then has 3 s.
  mkfifo "$T/probe"
  ip netns exec "$b" timeout 5 python3 -c '
import socket
s = socket.socket(); s.bind(("10.213.0.2", 7999)); s.listen(); print("ready", flush=True)
s.settimeout(3); c, _ = s.accept(); print("connected", flush=True)' > "$T/probe" 2>/dev/null &
  local probe=$! line="" ok=1
  exec {pf}< "$T/probe"
  read -r line <&"$pf" || true
  if [ "$line" = ready ] &&
     ip netns exec "$a" timeout 4 python3 -c 'import socket; socket.create_connection(("10.213.0.2", 7999), timeout=3)' \
       2>/dev/null && read -r line <&"$pf" && [ "$line" = connected ]; then
    ok=0
  fi
  exec {pf}<&-
  wait "$probe" 2>/dev/null || true
  [ "$ok" -eq 0 ] || return 1
  printf '%s addr=10.213.0.1\n%s addr=10.213.0.2\n' "$a" "$b" > "$T/cluster"
  HOST_A=$a HOST_B=$b ADDR_A=10.213.0.1 ADDR_B=10.213.0.2 MODE=netns PORT=7100
}
try_aliases() {
  python3 -c 'import socket; a = socket.socket(); a.bind(("127.0.0.2", 0)); a.listen()
b = socket.socket(); b.bind(("127.0.0.3", 0)); b.connect(a.getsockname())' 2>/dev/null || return 1
  printf '127.0.0.2\n127.0.0.3\n' > "$T/cluster"
  HOST_A=127.0.0.2 HOST_B=127.0.0.3 ADDR_A=127.0.0.2 ADDR_B=127.0.0.3 MODE=none PORT=$(free_port 127.0.0.2)
}
if try_netns; then
  echo "emulated cluster: network namespaces $HOST_A and $HOST_B"
else
  for ns in "${NETNS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  NETNS=()
  if try_aliases; then
    echo "emulated cluster: network namespaces unusable here; addresses 127.0.0.2 and 127.0.0.3"
  else
    echo "SKIPPED: neither network namespaces nor 127.0.0.2/127.0.0.3 work here" >&2
    exit 77
  fi
fi
JOB=(--tensors=1000,250x10 --iterations=5 --display=1 --startup_timeout_s=20)

# 4a. 2 servers, 2 workers, one of each a host; every process where the plan
# puts it, and the training equal to the same job on one host.
"$LAUNCH" --hostfile="$T/cluster" --num_servers=2 --num_workers=2 --port="$PORT" --ssh="$MODE" --bin_dir="$BIN" \
  --log_dir="$T/logs" "${JOB[@]}" > "$T/job.out" 2>&1 || { cat "$T/job.out" >&2; fail "2-host job exited with $?"; }
grep -q "^launch.sh: every process exited cleanly$" "$T/job.out" || fail "no clean-exit line"
for who in "server 0@$HOST_A:$ADDR_A" "server 1@$HOST_B:$ADDR_B" "worker 0@$HOST_A:$ADDR_A" "worker 1@$HOST_B:$ADDR_B"; do
  label=${who%:*}
  grep -q "^\[$label\] .* at tcp://${who##*:}:[0-9]* registering with coordinator tcp://$ADDR_A:$PORT$" "$T/job.out" ||
    { cat "$T/job.out" >&2; fail "$label did not listen on ${who##*:}"; }
done
echo "ok: each server and worker listened on its host's address"
grep -q "coordinator: every worker finished; job shut down cleanly" "$T/logs/coordinator.log" || fail "coordinator log"
summary() { sed -n 's/^.*\(worker [0-9]*\): 5 iterations in [0-9.]* s, \(loss .*\), communication.*$/\1 \2/p' "$1" | sort; }
two_hosts=$(summary "$T/job.out")
[ "$(wc -l <<< "$two_hosts")" -eq 2 ] || fail "expected 2 worker summaries, got: $two_hosts"
printf '127.0.0.1\n' > "$T/one"
"$LAUNCH" --hostfile="$T/one" --num_servers=2 --num_workers=2 --port="$(free_port 127.0.0.1)" --ssh=none \
  --bin_dir="$BIN" "${JOB[@]}" > "$T/local.out" 2>&1 || { cat "$T/local.out" >&2; fail "1-host job exited with $?"; }
expect_eq "2 hosts train exactly as 1 host (final losses)" "$(summary "$T/local.out")" "$two_hosts"

# 4b. A process that fails stops the others at once: worker 1's host has an
# address that is not local, so it cannot listen; the coordinator, server 0
# and worker 0 would wait 60 s for it.
printf '%s addr=%s\n%s addr=192.0.2.1\n' "$HOST_A" "$ADDR_A" "$HOST_B" > "$T/broken"
start=$SECONDS
rc=0
"$LAUNCH" --hostfile="$T/broken" --num_servers=1 --num_workers=2 --port="$PORT" --ssh="$MODE" --bin_dir="$BIN" \
  --tensors=1000 --startup_timeout_s=60 > "$T/broken.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] || { cat "$T/broken.out" >&2; fail "job with a failing worker: exit status $rc, not 1"; }
grep -q "^launch.sh: worker 1@$HOST_B exited with status 1; stopping every process$" "$T/broken.out" ||
  { cat "$T/broken.out" >&2; fail "no line naming the failed worker"; }
[ $((SECONDS - start)) -lt 30 ] || fail "the others were not stopped at once ($((SECONDS - start)) s)"
if pgrep -f -- "--coordinator=$ADDR_A:$PORT" >/dev/null; then fail "processes of the failed job are left"; fi
echo "ok: a failed worker stops the job ($((SECONDS - start)) s), nothing left running"

# 4b'. A process that fails at once, often before launch.sh has started the
# rest (a flag value the coordinator and servers refuse): launch.sh used to
# hang for ever on the output pipe of a process it stopped before that
# process had opened it, or die in its wait loop ("finished: unbound
# variable") when bash had already dropped the failed process from its job
# table. Five runs, each bounded.
bad_port=$(free_port 127.0.0.1)
for run in 1 2 3 4 5; do
  rc=0
  timeout 60 "$LAUNCH" --hostfile="$T/one" --num_servers=2 --num_workers=3 --port="$bad_port" --ssh=none \
    --bin_dir="$BIN" --consistency=bogus > "$T/early.out" 2>&1 || rc=$?
  [ "$rc" -ne 124 ] || { cat "$T/early.out" >&2; fail "run $run: launch.sh hung after a process failed at once"; }
  [ "$rc" -eq 1 ] || { cat "$T/early.out" >&2; fail "run $run: exit status $rc, not 1"; }
  grep -q "^launch.sh: \(coordinator\|server [01]\)@127.0.0.1 exited with status 2; stopping every process$" \
    "$T/early.out" || { cat "$T/early.out" >&2; fail "run $run: no line naming the process that failed"; }
  if pgrep -f -- "--coordinator=127.0.0.1:$bad_port" >/dev/null; then fail "run $run: processes left"; fi
done
echo "ok: a process failing at once stops the job, 5 of 5 runs"

# 4c. Ctrl-C (SIGINT to launch.sh) while the job trains stops every process.
interrupt_long_job "[worker 1@$HOST_B]" --hostfile="$T/cluster" --num_servers=2 --num_workers=2 --port="$PORT" \
  --ssh="$MODE" --bin_dir="$BIN"
grep -q "^launch.sh: interrupted; stopping every process$" "$T/live.out" || fail "no interruption line"
if pgrep -f -- "--coordinator=$ADDR_A:$PORT" >/dev/null; then fail "processes left after Ctrl-C"; fi
echo "ok: Ctrl-C stops every process"
echo "PASS"
