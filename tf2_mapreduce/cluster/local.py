"""A cluster on this machine: the ps and worker servers of a `ClusterSpec` of free
localhost ports, started inside this process or as child processes, and reaped.

Free of TensorFlow imports at module level: child servers are started before the
coordinator imports TensorFlow, so that they boot while it loads.
"""

import os
import socket
import subprocess
import sys
import tempfile
import time

from tf2_mapreduce.cluster.spec import TASK_ENV, ClusterSpec, server_config
from tf2_mapreduce.errors import ClusterError, UsageError

__all__ = ["local_spec", "InProcessServers", "ChildServers"]


def _free_ports(count):
    """Ports free on all interfaces (TF servers bind every interface, docs/runtime.md)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def local_spec(num_ps: int, num_workers: int) -> ClusterSpec:
    """A `ClusterSpec` of free localhost ports: one chief, `num_ps` ps, `num_workers` workers."""
    if num_ps < 1 or num_workers < 1:
        raise UsageError(
            "a cluster needs at least 1 ps and 1 worker (got {setting:num_ps}=%d {setting:num_workers}=%d)"
            % (num_ps, num_workers)
        )
    addresses = ["localhost:%d" % p for p in _free_ports(1 + num_ps + num_workers)]
    jobs = {"chief": addresses[:1], "ps": addresses[1 : 1 + num_ps], "worker": addresses[1 + num_ps :]}
    return ClusterSpec(jobs, "chief", 0)


class InProcessServers:
    """Every ps and worker server of `spec`, inside this process: one TensorFlow import
    instead of one per task. The servers live as long as the process (TF cannot stop
    them); they need no end-of-job message and no heartbeats."""

    in_process = True

    def __init__(self, spec: ClusterSpec):
        self.spec = spec
        self._servers = []

    def start(self) -> None:
        """Starts the servers (once); blocking: imports TensorFlow first."""
        if self._servers:
            return
        import tensorflow as tf

        cluster_spec = tf.train.ClusterSpec(self.spec.jobs)
        tasks = list(self.spec.tasks())
        self._servers = [
            tf.distribute.Server(
                cluster_spec,
                job_name=role,
                task_index=index,
                protocol="grpc",
                config=server_config(self.spec.num_workers, tasks_in_process=len(tasks)),
                start=True,
            )
            for role, index, _ in tasks
        ]

    def check_alive(self) -> None:
        """Servers in this process cannot die apart from it."""

    def await_exit(self, timeout):
        """{(role, index): status} of servers that did not exit 0: none here."""
        return {}

    def close(self) -> None:
        """Nothing to reap: the servers go with the process."""


class ChildServers:
    """The ps and worker servers of `spec` as child processes of this one, on localhost.

    Each child is `python -m tf2_mapreduce.server`, the same program a real cluster
    runs, and is killed by the kernel if this process dies (even by SIGKILL), so a
    local job never leaves a server behind. `close()` reaps every child.
    """

    in_process = False

    def __init__(self, spec: ClusterSpec):
        self.spec = spec
        self.log_dir = tempfile.mkdtemp(prefix="tf2_mapreduce-")
        self.processes = {}  # (role, index) -> Popen
        self.keep_logs = False  # set once an error has pointed the user at a log

    def start(self) -> None:
        """Starts every ps and worker (once); returns at once (see `cluster_spec.wait_for_tasks`)."""
        if self.processes:
            return
        env = {**TASK_ENV, **os.environ}  # what the user set wins
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        for role, index, _ in self.spec.tasks():
            env["TF_CONFIG"] = self.spec.tf_config(role, index)
            with open(self.log_path(role, index), "wb") as log:
                self.processes[role, index] = subprocess.Popen(
                    [sys.executable, "-m", "tf2_mapreduce.server", "--parent_pid=%d" % os.getpid()],
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    # Out of the terminal's process group: Ctrl-C must reach only the
                    # coordinator, which still needs the ps to save a checkpoint.
                    start_new_session=True,
                )

    def log_path(self, role, index):
        return os.path.join(self.log_dir, "%s-%d.log" % (role, index))

    def log_tail(self, role, index, lines=1):
        try:
            with open(self.log_path(role, index), "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        kept = [line.strip() for line in text.splitlines() if line.strip()]
        return " | ".join(kept[-lines:])

    def check_alive(self) -> None:
        """Raises `ClusterError` naming the first child that has exited."""
        for (role, index), proc in self.processes.items():
            code = proc.poll()
            if code is not None:
                self.keep_logs = True
                raise ClusterError(
                    "local %s %d exited with status %d during the job: %s (log: %s)"
                    % (role, index, code, self.log_tail(role, index) or "no output", self.log_path(role, index))
                )

    def await_exit(self, timeout):
        """Waits up to `timeout` s for every child to exit; returns {(role, index): (status or
        None if still running, the last line of its log)} of those that did not exit 0."""
        deadline = time.monotonic() + timeout
        failed = {}
        for (role, index), proc in self.processes.items():
            try:
                code = proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                code = None
            if code != 0:
                failed[role, index] = (code, self.log_tail(role, index))
        return failed

    def close(self) -> None:
        """Kills whatever still runs, reaps every child, and removes the logs (unless an
        error named one)."""
        for proc in self.processes.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.processes.values():
            proc.wait()
        if self.keep_logs:
            return
        for name in os.listdir(self.log_dir):
            os.unlink(os.path.join(self.log_dir, name))
        os.rmdir(self.log_dir)
