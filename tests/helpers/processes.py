"""Real processes started by the tests: servers of configured clusters, the coordinator CLI
run to the end or read as it runs, and the in-process cluster's jobs."""

import ctypes
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import portpicker
import pytest

from helpers import forkserver
from tf2_mapreduce.cluster import orphans

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPTS = os.path.join(REPO, "scripts")

# Run in each child before exec: the kernel kills it when the test process dies,
# even when the hang guard ends it with os._exit and nothing is reaped.
die_with_the_tests = orphans.dying_with(os.getpid())

INPROCESS_PS, INPROCESS_WORKERS = 2, 2


def job_run(cluster, job, files, on_progress=None, **options):
    """A `runner.JobRun` of `job` over `files` (`inputs.InputFile`s) on `cluster`, planned
    and not yet run: for tests that change inputs between planning and reading."""
    from tf2_mapreduce.inputs.files import Inputs
    from tf2_mapreduce.run import runner

    prepared = cluster.prepare(job, Inputs(files=list(files)), **options)
    return runner.JobRun(prepared, cluster._coordinator, cluster.spec, None, on_progress)


def run_job(cluster, job, files, on_progress=None, **options):
    """`cluster.run(job, ...)` over `files`: `inputs.InputFile`s as listed, or specs."""
    from tf2_mapreduce.inputs.files import InputFile, Inputs

    files = list(files)
    if files and all(isinstance(f, InputFile) for f in files):
        files = Inputs(files=files)
    return cluster.run(job, files, on_progress=on_progress, **options)


def task_env(**extra):
    env = dict(os.environ, GRPC_FAIL_FAST="use_caller", TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


def user_env():
    """This environment as a user's shell has it: none of what `task_env` or this package
    (at import, for TensorFlow's log level) set."""
    env = dict(os.environ)
    for name in ("TF_CPP_MIN_LOG_LEVEL", "TF_CONFIG", "GRPC_FAIL_FAST"):
        env.pop(name, None)
    return env


NO_DAC = "-dac_override,-dac_read_search"


def unprivileged(command):
    """`command` without root's power to read any file, if run as root."""
    if os.geteuid() != 0:
        return command
    if not shutil.which("setpriv"):
        pytest.skip("running as root and util-linux's setpriv is missing: cannot make a file unreadable")
    return ["setpriv", "--bounding-set=" + NO_DAC, "--inh-caps=" + NO_DAC] + command


class Processes:
    """Real processes started by a test; every one is killed and reaped at teardown."""

    def __init__(self):
        self.procs = []

    def start(self, args, env, log_path):
        log = open(log_path, "wb")
        proc = subprocess.Popen(
            args, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_the_tests
        )
        log.close()
        self.procs.append(proc)
        return proc

    def reap(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs:
            proc.wait(timeout=30)


@dataclass
class CliRun:
    pid: int
    returncode: int
    stdout: str
    stderr: str


def run_cli(args, env, timeout=180, command=None):
    """Runs `python -m tf2_mapreduce.coordinator args` (or `command` + args) to the
    end, within `timeout` s."""
    proc = subprocess.Popen(
        (command or [sys.executable, "-m", "tf2_mapreduce.coordinator"]) + list(args),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
        preexec_fn=die_with_the_tests,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail("coordinator still running after %ds; stderr:\n%s" % (timeout, err.decode(errors="replace")))
    return CliRun(proc.pid, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def servers_of(parent_pid):
    """Live tf2_mapreduce.server processes started by the coordinator `parent_pid`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"tf2_mapreduce.server" in argv and b"--parent_pid=%d" % parent_pid in argv:
            found.append(int(pid))
    return found


SERVER_EXIT_TIMEOUT = 30


class ConfiguredCluster:
    """A cluster described by make_configs.py files, its servers started on demand."""

    def __init__(self, tmp_path, processes, num_ps, num_workers):
        self.dir = str(tmp_path / "configs")
        self.processes = processes
        ports = [portpicker.pick_unused_port() for _ in range(1 + num_ps + num_workers)]
        hosts = ["localhost:%d" % p for p in ports]
        subprocess.run(
            [
                sys.executable,
                os.path.join(SCRIPTS, "make_configs.py"),
                "--out_dir",
                self.dir,
                "--chief_host",
                hosts[0],
                "--ps_hosts",
                ",".join(hosts[1 : 1 + num_ps]),
                "--worker_hosts",
                ",".join(hosts[1 + num_ps :]),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.tasks = [("ps", i) for i in range(num_ps)] + [("worker", i) for i in range(num_workers)]
        self.addresses = dict(zip([("chief", 0)] + self.tasks, hosts))
        self.servers = {}

    def config(self, role, index):
        return os.path.join(self.dir, "config_%s_%d.sh" % (role, index))

    def start(self, role, index, *flags, wrap=None, env=None):
        """Starts a server as docs/deploying.md does: source its config file, run the module.
        `wrap` may prefix the server's command (to run it with fewer privileges, say);
        `env` adds to its environment. Forked from this test process's fork server
        (TensorFlow imported once) where neither is given, exec'd where either is. Started
        again, once its previous process has exited (a kill is only sent; the port is held till then)."""
        if (role, index) in self.servers:
            self.servers[role, index].wait(timeout=SERVER_EXIT_TIMEOUT)
        log_path = os.path.join(self.dir, "%s-%d.log" % (role, index))
        if wrap is None and env is None:
            proc = self._forked(role, index, flags, log_path)
        else:
            server = (wrap or (lambda command: command))([sys.executable, "-m", "tf2_mapreduce.server", *flags])
            proc = self.processes.start(
                ["bash", "-c", 'source "$1" && shift && exec "$@"', "-", self.config(role, index), *server],
                env=task_env(**(env or {})),
                log_path=log_path,
            )
        self.servers[role, index] = proc
        return proc

    def _forked(self, role, index, flags, log_path):
        """The server forked with the environment its config file gives (sourced by bash)."""
        sourced = subprocess.run(
            ["bash", "-c", 'source "$1" && env -0', "-", self.config(role, index)],
            env=task_env(),
            capture_output=True,
            check=True,
            timeout=30,
        )
        env = dict(item.split("=", 1) for item in sourced.stdout.decode().split("\0") if item)
        proc = forkserver.for_env(env, die_with_the_tests).start(flags, env, log_path, os.getcwd())
        self.processes.procs.append(proc)
        return proc

    def start_all(self, *flags, env=None):
        for role, index in self.tasks:
            self.start(role, index, *flags, env=env)

    def chief_env(self):
        out = subprocess.run(
            ["bash", "-c", 'source "$1" && printf %s "$TF_CONFIG"', "-", self.config("chief", 0)],
            capture_output=True,
            check=True,
            timeout=30,
        )
        return task_env(TF_CONFIG=out.stdout.decode())

    def exit_codes(self):
        """Waits for every started server to exit by itself; returns their statuses."""
        codes = {}
        for key, proc in self.servers.items():
            try:
                codes[key] = proc.wait(timeout=SERVER_EXIT_TIMEOUT)
            except subprocess.TimeoutExpired:
                codes[key] = "still running after %ds" % SERVER_EXIT_TIMEOUT
        return codes

    def log(self, role, index):
        with open(os.path.join(self.dir, "%s-%d.log" % (role, index)), "rb") as f:
            return f.read().decode(errors="replace")


def wait_serving(cluster, role, index, timeout=120):
    deadline = time.monotonic() + timeout
    while "serving on" not in cluster.log(role, index):
        assert cluster.servers[role, index].poll() is None, cluster.log(role, index)
        assert time.monotonic() < deadline, "%s %d did not start: %s" % (role, index, cluster.log(role, index))
        time.sleep(0.1)  # polls a log file that the server writes when it is up


# A killed worker that stays down delays the coordinator's exit by its --shutdown_timeout
# (30 s by default: room for a supervisor to bring it back and have it told the job is
# over). A test whose killed worker stays down sets it short and checks the coordinator
# gave up on that worker with a warning.
GONE_WORKER_SHUTDOWN = ("--shutdown_timeout", "2")


def gave_up_on(stderr, role, index):
    """Whether the coordinator warned that it could not tell `role` `index` the job is over."""
    return ("could not tell %s %d that the job is over: connection refused" % (role, index)) in stderr


def live_args(inputs, output, *extra):
    """A job's flags for a test that acts mid-job: one file a step and progress reported
    often, so that there is a moment to act on."""
    return ["--input", str(inputs), "--files_per_step", "1", "--progress_every", "0.2", "--output", str(output), *extra]


class LiveCoordinator:
    """`python -m tf2_mapreduce.coordinator` running in the background; its stderr
    is read as it comes, so a test can act at a point the job reports reaching."""

    def __init__(self, args, env, processes, log_path, command=None):
        self.proc = subprocess.Popen(
            (command or [sys.executable, "-m", "tf2_mapreduce.coordinator"]) + list(args),
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=die_with_the_tests,
        )
        processes.procs.append(self.proc)
        self.lines = queue.Queue()
        self.stderr = []
        self.log_path = log_path
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        # Kept in the log file too, for a failure's post-mortem: pytest shows only the tail.
        with open(self.log_path, "w", encoding="utf-8") as log:
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                log.write(line + "\n")
                log.flush()
                self.stderr.append(line)
                self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pattern, timeout=120):
        """Blocks until a stderr line matches `pattern`; returns the match."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                pytest.fail("no stderr line matched %r; stderr:\n%s" % (pattern, "\n".join(self.stderr[-30:])))
            match = re.search(pattern, line)
            if match:
                return match

    def wait_for_files(self, count, timeout=120):
        """Blocks until progress reports at least `count` files done; returns the count."""
        while True:
            done = int(self.wait_for(r"\] (\d+)/\d+ files", timeout).group(1))
            if done >= count:
                return done

    def finish(self, timeout=180):
        """Waits for the exit; returns (status, stdout, stderr)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail("coordinator still running after %ds; stderr:\n%s" % (timeout, "\n".join(self.stderr[-30:])))
        stdout = self.proc.stdout.read().decode(errors="replace")
        while self.lines.get() is not None:  # the reader has seen the end of stderr
            pass
        self.lines.put(None)
        return self.proc.returncode, stdout, "\n".join(self.stderr)

    def signal_another_thread(self, signum):
        """Sends `signum` to one of the process's threads other than its main one, as the
        kernel may deliver a signal sent to the process: its Python handler then runs
        only when the main thread next wakes."""
        threads = sorted(int(tid) for tid in os.listdir("/proc/%d/task" % self.proc.pid))
        other = next(tid for tid in threads if tid != self.proc.pid)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.tgkill(self.proc.pid, other, signum) != 0:
            raise OSError(ctypes.get_errno(), "tgkill %d %d" % (self.proc.pid, other))
