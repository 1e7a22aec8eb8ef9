"""Joining a Nereus job from a Python worker: where the coordinator is, which
rank this process is, and (under torchrun) starting the job's own
coordinator and servers.

Three ways, tried in this order (docs/TORCH.md, "Launching"):
  1. arguments to init(): coordinator="host:port", rank=r;
  2. the launcher's environment (scripts/launch.sh --worker_command,
     scripts/slurm/nereus.sbatch): NEREUS_COORDINATOR, NEREUS_RANK,
     NEREUS_NUM_WORKERS, NEREUS_NUM_SERVERS, NEREUS_BIND_HOST,
     NEREUS_LOCAL_RANK, NEREUS_LOCAL_SIZE and NEREUS_WORKER_FLAGS (the
     launcher's flags of nereus_worker that a client understands);
  3. torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
     MASTER_ADDR, MASTER_PORT): rank 0 starts the coordinator on MASTER_ADDR
     at MASTER_PORT + 1 (NEREUS_PORT overrides; torchrun's own store holds
     MASTER_PORT) and each host's local rank 0 starts that host's server(s);
     they exit when the job ends, or with this process (PR_SET_PDEATHSIG).
"""

import ctypes
import os
import shlex
import signal
import socket
import subprocess
import sys

from nereus import capi

# The client options a worker flag may set (c_api.h's names, nereus_worker's flags).
CLIENT_FLAGS = {
    "schedule", "credit_bytes", "batch_bytes", "merge", "merge_alpha_s", "merge_beta_s_per_byte",
    "merge_profile_iterations", "timeline", "timeline_every", "streams", "io_threads", "startup_timeout_s",
    "curve_dir", "resume", "sfb", "sfb_rebuild_gflops", "sfb_update_gbytes", "sfb_apply_gbytes", "sfb_link_gbit",
}


def parse_worker_flags(text):
    """{option: value} of NEREUS_WORKER_FLAGS ("--schedule=full --merge=false"); ValueError naming a flag a
    Python worker cannot take (the trainer's, e.g. --solver)."""
    options = {}
    for word in shlex.split(text or ""):
        if not word.startswith("--"):
            raise ValueError("NEREUS_WORKER_FLAGS: %r is not a --flag" % word)
        name, eq, value = word[2:].partition("=")
        if not eq:
            if name.startswith("no") and name[2:] in CLIENT_FLAGS:
                name, value = name[2:], "false"
            else:
                value = "true"
        if name not in CLIENT_FLAGS:
            raise ValueError("--%s is a flag of nereus_worker that a Python worker does not take (it takes the "
                             "client's: %s); give your script its own arguments instead"
                             % (name, ", ".join("--" + f for f in sorted(CLIENT_FLAGS))))
        options[name] = value
    return options


def _int_env(env, name):
    try:
        return int(env[name])
    except ValueError:
        raise ValueError("%s=%r is not a whole number" % (name, env[name]))


def _address_of(host):
    """An IPv4 address for a host name (ZeroMQ binds and connects to addresses)."""
    try:
        return socket.gethostbyname(host)
    except OSError as e:
        raise ValueError("cannot resolve %r to an IPv4 address: %s" % (host, e))


def _address_towards(peer):
    """This host's address on the route to `peer` (no packet is sent)."""
    if peer.startswith("127."):
        return "127.0.0.1"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((peer, 9))
        return s.getsockname()[0]
    finally:
        s.close()


class Plan:
    """How this process joins: the client's options and, under torchrun, the server processes it starts."""

    def __init__(self):
        self.options = {}     # c_api.h option name -> value
        self.local_rank = 0
        self.local_size = 1
        self.source = ""      # "arguments", "launcher", "torchrun"
        self.processes = []   # [(label, argv)] to start before connecting


def plan_from(env, coordinator=None, rank=None, bind_host=None, num_servers=None, consistency="bsp", staleness=0,
              partition_bytes=None, server_flags=()):
    """The Plan for this process from init()'s arguments and the environment `env`."""
    plan = Plan()
    if coordinator is not None:
        plan.source = "arguments"
        plan.options["coordinator"] = coordinator
        if rank is not None:
            plan.options["rank"] = int(rank)
        plan.options["bind_host"] = bind_host or "127.0.0.1"
        plan.local_rank = int(env.get("NEREUS_LOCAL_RANK", env.get("LOCAL_RANK", 0)))
        return plan
    if "NEREUS_COORDINATOR" in env:
        plan.source = "launcher"
        plan.options["coordinator"] = env["NEREUS_COORDINATOR"]
        plan.options["rank"] = _int_env(env, "NEREUS_RANK") if "NEREUS_RANK" in env else -1
        plan.options["bind_host"] = env.get("NEREUS_BIND_HOST", "127.0.0.1")
        plan.local_rank = _int_env(env, "NEREUS_LOCAL_RANK") if "NEREUS_LOCAL_RANK" in env else 0
        plan.local_size = _int_env(env, "NEREUS_LOCAL_SIZE") if "NEREUS_LOCAL_SIZE" in env else 1
        plan.options.update(parse_worker_flags(env.get("NEREUS_WORKER_FLAGS", "")))
        return plan
    if "RANK" in env and "WORLD_SIZE" in env and "MASTER_ADDR" in env:
        plan.source = "torchrun"
        rank_ = _int_env(env, "RANK")
        world = _int_env(env, "WORLD_SIZE")
        plan.local_rank = _int_env(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0
        plan.local_size = _int_env(env, "LOCAL_WORLD_SIZE") if "LOCAL_WORLD_SIZE" in env else world
        if "NEREUS_PORT" in env:
            port = _int_env(env, "NEREUS_PORT")
        elif "MASTER_PORT" in env:
            port = _int_env(env, "MASTER_PORT") + 1
        else:
            raise ValueError("torchrun's environment without MASTER_PORT: set NEREUS_PORT to the coordinator's port")
        master = _address_of(env["MASTER_ADDR"])
        hosts = world // max(plan.local_size, 1)
        if "GROUP_WORLD_SIZE" in env:
            hosts = _int_env(env, "GROUP_WORLD_SIZE")
        host_rank = _int_env(env, "GROUP_RANK") if "GROUP_RANK" in env else rank_ // max(plan.local_size, 1)
        per_host = 1
        if num_servers is not None:
            if num_servers % hosts != 0:
                raise ValueError("num_servers=%d under torchrun must be a multiple of the %d host(s)"
                                 % (num_servers, hosts))
            per_host = num_servers // hosts
        coordinator = "%s:%d" % (master, port)
        here = _address_towards(master)
        server = capi.find_binary("nereus_server")
        if rank_ == 0:
            argv = [server, "--role=coordinator", "--coordinator=" + coordinator,
                    "--num_servers=%d" % (hosts * per_host), "--num_workers=%d" % world,
                    "--consistency=" + consistency, "--staleness=%d" % staleness]
            if partition_bytes:
                argv.append("--partition_bytes=%d" % partition_bytes)
            plan.processes.append(("coordinator", argv + list(server_flags)))
        if plan.local_rank == 0:
            for i in range(per_host):
                r = host_rank * per_host + i
                plan.processes.append(("server %d" % r, [server, "--role=server", "--coordinator=" + coordinator,
                                                         "--rank=%d" % r, "--bind_host=" + here]
                                       + [f for f in server_flags if not f.startswith("--heartbeat")]))
        plan.options.update({"coordinator": coordinator, "rank": rank_, "bind_host": here})
        return plan
    raise ValueError("nereus.torch.init: no job to join: give coordinator= (and rank=), start the script with "
                     "scripts/launch.sh --worker_command (NEREUS_COORDINATOR), or under torchrun "
                     "(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)")


def _die_with_parent():
    # preexec_fn: the child gets SIGTERM when this process ends, however it ends.
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def start_processes(plan):
    """Starts plan.processes (their output goes to this process's stderr); returns [(label, Popen)]."""
    started = []
    for label, argv in plan.processes:
        started.append((label, subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(),
                                                stderr=sys.stderr.fileno(), preexec_fn=_die_with_parent)))
    return started


def stop_processes(started, timeout_s):
    """Waits up to timeout_s for each started process (they exit when the job ends); kills what is left and
    returns the labels of the processes that failed or had to be killed."""
    failed = []
    for label, p in started:
        try:
            code = p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            failed.append("%s (still running after %g s, killed)" % (label, timeout_s))
            continue
        if code != 0:
            failed.append("%s (exit status %d)" % (label, code))
    return failed
