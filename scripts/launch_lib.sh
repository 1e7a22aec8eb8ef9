# Shared by scripts/launch.sh and scripts/slurm/nereus_task.sh (sourced, not
# run): the command line of each process of a job, given its place in the
# plan that nereus_launch_plan prints (common/launch_plan.h).

# nereus_route_flags BIN_DIR FLAG...: splits binary flags between the
# binaries that define them, into NEREUS_SERVER_ARGS (coordinator and
# servers) and NEREUS_WORKER_ARGS (workers); a flag both define goes to both.
# Prints an error and returns 2 on a flag that neither defines or that the
# launcher sets itself.
nereus_route_flags() {
  local bin_dir=$1 f name bare known server_known worker_known
  shift
  server_known=" $("$bin_dir/nereus_server" --helpxml 2>/dev/null | sed -n 's:.*<name>\(.*\)</name>.*:\1:p' | tr '\n' ' ') "
  worker_known=" $("$bin_dir/nereus_worker" --helpxml 2>/dev/null | sed -n 's:.*<name>\(.*\)</name>.*:\1:p' | tr '\n' ' ') "
  if [ "$server_known" = "  " ] || [ "$worker_known" = "  " ]; then
    echo "${NEREUS_LAUNCHER:-nereus}: cannot list the flags of $bin_dir/nereus_server and nereus_worker (--helpxml)" >&2
    return 2
  fi
  NEREUS_SERVER_ARGS=()
  NEREUS_WORKER_ARGS=()
  for f in "$@"; do
    if [[ "$f" != --?* ]]; then
      echo "${NEREUS_LAUNCHER:-nereus}: unexpected argument \"$f\"; binary flags are passed as --name=value" >&2
      return 2
    fi
    name=${f#--}
    name=${name%%=*}
    case "$name" in
      role|coordinator|rank|bind_host|num_servers|num_workers)
        echo "${NEREUS_LAUNCHER:-nereus}: --$name is set by the launcher for each process" >&2
        return 2 ;;
    esac
    bare=$name
    # --noX sets boolean flag X to false.
    if [[ "$f" != *=* && "$name" == no* && "$server_known$worker_known" != *" $name "* ]]; then bare=${name#no}; fi
    known=0
    if [[ "$server_known" == *" $bare "* ]]; then NEREUS_SERVER_ARGS+=("$f"); known=1; fi
    if [[ "$worker_known" == *" $bare "* ]]; then NEREUS_WORKER_ARGS+=("$f"); known=1; fi
    if [ "$known" -eq 0 ]; then
      echo "${NEREUS_LAUNCHER:-nereus}: --$name is not a flag of nereus_server or nereus_worker" >&2
      return 2
    fi
  done
}

# nereus_process_args BIN_DIR ROLE RANK ADDRESS COORDINATOR SERVERS WORKERS:
# sets NEREUS_ARGS to the command line of that process (after
# nereus_route_flags).
nereus_process_args() {
  local bin_dir=$1 role=$2 rank=$3 addr=$4 coord=$5 servers=$6 workers=$7
  case "$role" in
    coordinator)
      NEREUS_ARGS=("$bin_dir/nereus_server" --role=coordinator --coordinator="$coord" --num_servers="$servers"
                   --num_workers="$workers" "${NEREUS_SERVER_ARGS[@]}") ;;
    server)
      NEREUS_ARGS=("$bin_dir/nereus_server" --role=server --coordinator="$coord" --rank="$rank" --bind_host="$addr"
                   "${NEREUS_SERVER_ARGS[@]}") ;;
    worker)
      NEREUS_ARGS=("$bin_dir/nereus_worker" --coordinator="$coord" --rank="$rank" --bind_host="$addr"
                   "${NEREUS_WORKER_ARGS[@]}") ;;
    *)
      echo "${NEREUS_LAUNCHER:-nereus}: unknown role \"$role\"" >&2
      return 2 ;;
  esac
}

# nereus_words WORD...: the words as one shell line, quoted only where needed.
nereus_words() {
  local out="" w
  for w in "$@"; do
    if [[ "$w" =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then out+=" $w"; else out+=" '${w//\'/\'\\\'\'}'"; fi
  done
  printf '%s' "${out# }"
}
