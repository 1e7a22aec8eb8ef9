"""What the nereus.torch tests run jobs with: a coordinator and servers (nereus_server) as processes on
127.0.0.1, Python workers as processes, every wait bounded and every process reaped.

Environment (ctest sets it, tests/worker/torch/CMakeLists.txt): NEREUS_BIN_DIR (the built binaries),
NEREUS_LIBRARY (libnereus_c.so), PYTHONPATH (worker/torch, this folder)."""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
FREE_PORT = os.path.join(ROOT, "tests", "scripts", "free_port.py")
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch; never another python3 on PATH.


def skip_without_torch():
    """Exit 77 (ctest: skipped) where Debian's python3-torch is missing."""
    try:
        import torch  # noqa: F401
    except ImportError:
        print("SKIPPED: no torch for %s (scripts/install_deps.sh --tests installs python3-torch)" % sys.executable)
        sys.exit(77)


def free_port():
    return int(subprocess.check_output([sys.executable, FREE_PORT], universal_newlines=True).strip())


def bin_dir():
    return os.environ.get("NEREUS_BIN_DIR", os.path.join(ROOT, "build", "bin"))


def binary(name):
    path = os.path.join(bin_dir(), name)
    if not os.access(path, os.X_OK):
        raise FileNotFoundError("%s not built (scripts/build.sh --target=%s)" % (path, name))
    return path


def launch_sh_argv(d, worker_command, flags=()):
    """scripts/launch.sh's command line for a job of 2 servers and 2 workers on this machine (its hostfile
    written in the folder d), the workers started by worker_command, launch.sh also given flags."""
    hostfile = os.path.join(d, "hosts")
    with open(hostfile, "w") as f:
        f.write("localhost slots=2 addr=127.0.0.1\n")
    return [os.path.join(ROOT, "scripts", "launch.sh"), "--hostfile=" + hostfile, "--ssh=none", "--num_servers=2",
            "--num_workers=2", "--port=%d" % free_port(), "--bin_dir=" + bin_dir(),
            "--worker_command=" + worker_command] + list(flags)


def worker_env():
    env = dict(os.environ)
    paths = [os.path.join(ROOT, "worker", "torch"), HERE]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("NEREUS_LIBRARY", os.path.join(ROOT, "build", "lib", "libnereus_c.so"))
    env["OMP_NUM_THREADS"] = "1"
    return env


class Servers:
    """A job's coordinator and servers; its workers join at `address`."""

    def __init__(self, log_dir, name, servers=2, workers=2, flags=(), startup_timeout_s=400):
        self.port = free_port()
        self.address = "127.0.0.1:%d" % self.port
        self.procs = []
        server = binary("nereus_server")
        # A test starts every scenario's job at once and its workers reach the last one minutes later on a
        # loaded machine: the jobs wait that long to form.
        common = ["--coordinator=" + self.address, "--heartbeat_interval_ms=200", "--heartbeat_timeout_ms=5000",
                  "--startup_timeout_s=%d" % startup_timeout_s]
        argvs = [("coordinator", [server, "--role=coordinator", "--num_servers=%d" % servers,
                                  "--num_workers=%d" % workers] + common + list(flags))]
        for r in range(servers):
            argvs.append(("server%d" % r, [server, "--role=server", "--rank=%d" % r, "--coordinator=" + self.address,
                                           "--startup_timeout_s=%d" % startup_timeout_s]))
        for label, argv in argvs:
            log = open(os.path.join(log_dir, "%s.%s.log" % (name, label)), "w")
            self.procs.append((label, subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                                       stdin=subprocess.DEVNULL), log))

    def wait(self, timeout_s):
        """Exit codes {label: code}, killing what has not exited within timeout_s (code None)."""
        codes = {}
        for label, p, log in self.procs:
            try:
                codes[label] = p.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                codes[label] = None
            log.close()
        return codes

    def kill(self):
        for _, p, log in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            log.close()


def run_workers(argvs, timeout_s, env=None):
    """Runs one process per argv at once; returns [(exit code or None if killed at timeout_s, output)]."""
    procs = [subprocess.Popen(a, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              env=env or worker_env(), universal_newlines=True) for a in argvs]
    results = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout_s)
            results.append((p.returncode, out))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            results.append((None, out))
    return results


def temp_dir():
    return tempfile.TemporaryDirectory(prefix="nereus_torch_test.")
