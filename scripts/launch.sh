#!/usr/bin/env bash
# Starts a whole Nereus job from a hostfile: the coordinator on the first host,
# servers and workers round-robin over the hosts' slots (server i beside
# worker i), each host reached over ssh (or run here, or in a network
# namespace). Each process's output is streamed with a "[role rank@host]"
# prefix; when one process fails, or on Ctrl-C, every process is stopped.
# The placement comes from nereus_launch_plan (common/launch_plan.h), the
# same role assignment the Slurm scripts (scripts/slurm/) use.
#
#   scripts/launch.sh --hostfile=FILE [--num_servers=S] [--num_workers=W] [options] [--] [flags...]
#
# Hostfile: one host a line, `NAME [slots=N] [addr=ADDRESS]`, `#` comments.
# slots: server+worker pairs the host takes per round (default 1); addr: the
# address its processes listen on (default: NAME resolved here, IPv4).
#
# Options:
#   --num_servers=S, --num_workers=W   job size (default 1 and 1)
#   --port=P             coordinator port on the first host (default 7000)
#   --ssh=MODE           ssh: `ssh HOST` (default; binaries and working
#                        directory at the same paths on every host);
#                        none: run every process on this machine;
#                        netns: `ip netns exec HOST` (emulated clusters)
#   --ssh_opts="..."     extra ssh options, e.g. "-p 2222 -i key"
#   --bin_dir=DIR        where the binaries are (default: the build's bin/)
#   --workdir=DIR        working directory of every process (default: here)
#   --env=NAME=VALUE     environment variable for every process (repeatable)
#   --log_dir=DIR        also write each process's output to DIR/ROLE[RANK].log
#   --dry_run            print the command of each process, start nothing
# Every other --flag[=value] goes to the binaries that define it: flags of
# nereus_server to the coordinator and servers, flags of nereus_worker to the
# workers, shared flags (--startup_timeout_s, --streams, ...) to all. A flag
# neither defines is an error. --role, --coordinator, --rank, --bind_host are
# set here, per process.
# Exit status: 0 when every process exits 0; 1 when one fails (its name and
# status are printed); 2 on bad arguments; 130 on Ctrl-C / SIGTERM.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

die() { echo "launch.sh: $*" >&2; exit 2; }
# shellcheck source=scripts/launch_lib.sh
NEREUS_LAUNCHER=launch.sh
source "$ROOT/scripts/launch_lib.sh"

HOSTFILE="" SERVERS=1 WORKERS=1 PORT=7000 MODE=ssh SSH_OPTS="" DRY_RUN=0 LOG_DIR=""
WORKDIR=$(pwd)
BUILD=${NEREUS_BUILD_DIR:-build}
[[ "$BUILD" = /* ]] || BUILD="$ROOT/$BUILD"
BIN_DIR="$BUILD/bin"
ENVS=() PASS=()
for arg in "$@"; do
  case "$arg" in
    --hostfile=*) HOSTFILE=${arg#*=} ;;
    --num_servers=*) SERVERS=${arg#*=} ;;
    --num_workers=*) WORKERS=${arg#*=} ;;
    --port=*) PORT=${arg#*=} ;;
    --ssh=*) MODE=${arg#*=} ;;
    --ssh_opts=*) SSH_OPTS=${arg#*=} ;;
    --bin_dir=*) BIN_DIR=${arg#*=} ;;
    --workdir=*) WORKDIR=${arg#*=} ;;
    --env=*=*) ENVS+=("${arg#--env=}") ;;
    --log_dir=*) LOG_DIR=${arg#*=} ;;
    --dry_run) DRY_RUN=1 ;;
    --help|-h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --) ;;
    --*) PASS+=("$arg") ;;
    *) die "unexpected argument \"$arg\"; binary flags are passed as --name=value" ;;
  esac
done
[ -n "$HOSTFILE" ] || die "--hostfile=FILE is required (one host a line, NAME [slots=N] [addr=ADDRESS])"
case "$MODE" in ssh|none|netns) ;; *) die "--ssh must be ssh, none or netns, got \"$MODE\"" ;; esac
for b in nereus_server nereus_worker nereus_launch_plan; do
  [ -x "$BIN_DIR/$b" ] || die "$BIN_DIR/$b not found; build first (scripts/build.sh) or give --bin_dir"
done

nereus_route_flags "$BIN_DIR" "${PASS[@]}" || exit 2

PLAN=$("$BIN_DIR/nereus_launch_plan" --hostfile="$HOSTFILE" --num_servers="$SERVERS" \
  --num_workers="$WORKERS" --port="$PORT" --format=table) || exit 2

# One process: its label, log name, host, and the shell line that starts it
# there (CMDS: the whole command, as --dry_run prints it).
LABELS=() LOGNAMES=() HOST_OF=() LINE_OF=() CMDS=()
read -r -a SSH_ARGS <<< "$SSH_OPTS"
while read -r role rank host addr coord; do
  nereus_process_args "$BIN_DIR" "$role" "$rank" "$addr" "$coord" "$SERVERS" "$WORKERS"
  args=("${NEREUS_ARGS[@]}")
  [ ${#ENVS[@]} -eq 0 ] || args=(env "${ENVS[@]}" "${args[@]}")
  line="cd $(nereus_words "$WORKDIR") && exec $(nereus_words "${args[@]}")"
  case "$MODE" in
    none) cmd=(bash -c "$line") ;;
    netns) cmd=(ip netns exec "$host" bash -c "$line") ;;
    ssh)
      # The remote shell stops the process when ssh's stdin, a pipe this script
      # holds open, reads end-of-file: stop_all closed it, or ssh ended (this
      # script died, the link broke). POSIX sh, for any login shell.
      line="cd $(nereus_words "$WORKDIR") || exit 1; exec 3<&0; $(nereus_words "${args[@]}") </dev/null & p=\$!;"
      line+=" ( read -r _ <&3; kill \$p ) >/dev/null 2>&1 & w=\$!; exec 3<&-;"
      line+=" wait \$p; s=\$?; kill \$w 2>/dev/null; exit \$s"
      cmd=(ssh -o BatchMode=yes "${SSH_ARGS[@]}" "$host" "$line") ;;
  esac
  HOST_OF+=("$host")
  LINE_OF+=("$line")
  [ "$role" = coordinator ] && LABELS+=("coordinator@$host") || LABELS+=("$role $rank@$host")
  [ "$role" = coordinator ] && LOGNAMES+=("coordinator") || LOGNAMES+=("$role$rank")
  CMDS+=("$(nereus_words "${cmd[@]}")")
done <<< "$PLAN"

if [ "$DRY_RUN" -eq 1 ]; then
  for i in "${!CMDS[@]}"; do echo "[${LABELS[$i]}] ${CMDS[$i]}"; done
  exit 0
fi

RUN=$(mktemp -d "${TMPDIR:-/tmp}/nereus_launch.XXXXXX")
[ -z "$LOG_DIR" ] || mkdir -p "$LOG_DIR"
PIDS=() READERS=() HOLDS=()
declare -A LABEL_OF=()
# This script holds each output pipe open (read-write, which never blocks)
# from before its reader and its process start until every process has
# ended. So neither side's open of the pipe waits for the other, and a
# process stopped before it opened its end (a job whose first process fails
# at once) cannot leave its reader blocked for ever. Every child closes them
# (close_holds) or its own pipe would never reach end-of-file.
close_holds() {
  local h
  for h in "${HOLDS[@]}"; do exec {h}>&-; done
  HOLDS=()
}
# Stops every process and waits until each has ended. Local processes get
# SIGTERM. Over ssh, this script closes the ssh clients' stdin: each remote
# shell then stops its process and ssh returns once it has. A second Ctrl-C
# kills what is left here.
stop_all() {
  local p
  trap 'for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done' INT TERM
  if [ "$MODE" = ssh ]; then
    exec 9>&-
  else
    for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  fi
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  close_holds  # The readers now read what is left, then end-of-file.
  for p in "${READERS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$RUN"
}
trap 'echo "launch.sh: interrupted; stopping every process" >&2; stop_all; exit 130' INT TERM
if [ "$MODE" = ssh ]; then
  # The ssh clients' stdin: a pipe held open here on fd 9 (read-write, so
  # opening it never blocks) until stop_all or the end of this script. No
  # child keeps fd 9, so closing it here is end-of-file for every client.
  mkfifo "$RUN/stdin"
  exec 9<>"$RUN/stdin"
fi

echo "launch.sh: coordinator at $(awk 'NR==1 {print $5}' <<< "$PLAN"), $SERVERS server(s), $WORKERS worker(s), ${#CMDS[@]} processes"
for i in "${!CMDS[@]}"; do
  # Each process writes into a pipe read by its own prefixer, so its last
  # lines are out before this script returns.
  mkfifo "$RUN/out$i"
  exec {hold}<>"$RUN/out$i"
  HOLDS+=("$hold")
  label=${LABELS[$i]}
  if [ -n "$LOG_DIR" ]; then
    ( close_holds; { tee "$LOG_DIR/${LOGNAMES[$i]}.log" | sed -u "s|^|[$label] |"; } < "$RUN/out$i" 9>&- ) &
  else
    ( close_holds; exec sed -u "s|^|[$label] |" < "$RUN/out$i" 9>&- ) &
  fi
  READERS+=($!)
  # Each subshell execs the command, so that $! is the process itself (bash
  # and ip netns exec replace themselves with it), or the ssh client.
  case "$MODE" in
    none) ( close_holds; exec bash -c "${LINE_OF[$i]}" < /dev/null > "$RUN/out$i" 2>&1 9>&- ) & ;;
    netns) ( close_holds; exec ip netns exec "${HOST_OF[$i]}" bash -c "${LINE_OF[$i]}" < /dev/null > "$RUN/out$i" 2>&1 9>&- ) & ;;
    ssh) ( close_holds; exec ssh -o BatchMode=yes "${SSH_ARGS[@]}" "${HOST_OF[$i]}" "${LINE_OF[$i]}" < "$RUN/stdin" > "$RUN/out$i" 2>&1 9>&- ) & ;;
  esac
  PIDS+=($!)
  LABEL_OF[$!]=$label
done

live=("${PIDS[@]}")
while [ ${#live[@]} -gt 0 ]; do
  finished=""
  status=0
  wait -n -p finished "${live[@]}" || status=$?
  if [ -z "${finished-}" ]; then
    # Bash 5.2's wait -n names no job (status 127, the variable unset) when
    # the processes it is given ended before it and bash already moved them
    # out of its job table (starting a later one does that); `wait PID` still
    # has such a process's status. Take one that has ended (reaped: kill -0
    # fails), else wait for the first.
    finished=${live[0]}
    for p in "${live[@]}"; do
      if ! kill -0 "$p" 2>/dev/null; then
        finished=$p
        break
      fi
    done
    status=0
    wait "$finished" || status=$?
  fi
  next=()
  for p in "${live[@]}"; do [ "$p" = "$finished" ] || next+=("$p"); done
  live=("${next[@]}")
  if [ "$status" -ne 0 ]; then
    echo "launch.sh: ${LABEL_OF[$finished]} exited with status $status; stopping every process" >&2
    stop_all
    exit 1
  fi
done
close_holds
for p in "${READERS[@]}"; do wait "$p" || true; done
rm -rf "$RUN"
echo "launch.sh: every process exited cleanly"
