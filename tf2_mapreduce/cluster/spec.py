"""Who is in the cluster: the tasks of each role and their addresses (a `ClusterSpec`),
parsed from TF_CONFIG or given by a resolver, and whether each task answers.

Free of TensorFlow imports (but for `server_config`): the CLIs read the cluster before
they import TensorFlow.
"""

import json
import os
import socket
import time
from dataclasses import dataclass

from tf2_mapreduce.errors import ClusterError, UsageError

__all__ = [
    "ClusterSpec",
    "ROLES",
    "TASK_ENV",
    "from_tf_config",
    "validated",
    "device",
    "task_name",
    "split_address",
    "server_config",
    "probe",
    "wait_for_tasks",
]

ROLES = ("chief", "ps", "worker")

# The pod labels `--cluster_resolver=kubernetes` selects on, and scripts/make_k8s.py sets.
K8S_JOB_LABEL = "tf2-mapreduce/job"
K8S_ROLE_LABEL = "tf2-mapreduce/role"

# Set on every task before TensorFlow is imported; TF's fault-tolerance guide
# asks for it so that a dead task fails RPCs instead of stalling them.
TASK_ENV = {
    "GRPC_FAIL_FAST": "use_caller",
    # TensorFlow's gs:// client waits 1 s, doubling, before it retries a failed request
    # (plus up to 1 s at random); storage.Patience waits on when it gives up. From 0.1 s,
    # a read answered 503 once costs about 0.6 s instead of 1.5 (docs/runtime.md, G6).
    "GCS_RETRY_CONFIG_INIT_DELAY_TIME_US": "100000",
}


@dataclass(frozen=True)
class ClusterSpec:
    """A validated cluster: addresses per role, and which task this process is. Only a
    description: `client.Cluster` is the cluster this process connects to."""

    jobs: dict  # role -> list of "host:port"
    task_type: str
    task_index: int

    @property
    def num_ps(self):
        return len(self.jobs["ps"])

    @property
    def num_workers(self):
        return len(self.jobs["worker"])

    @property
    def address(self):
        return self.jobs[self.task_type][self.task_index]

    def tasks(self, roles=("ps", "worker")):
        """Yields (role, index, address) for the tasks of `roles`."""
        for role in roles:
            for index, address in enumerate(self.jobs[role]):
                yield role, index, address

    def devices(self, roles=("ps", "worker")):
        """The CPU device of every task of `roles`, as TensorFlow names it."""
        return [device(role, index) for role, index, _ in self.tasks(roles)]

    def tf_config(self, task_type, task_index, indent=None):
        """The TF_CONFIG JSON string that makes a process task `task_type:task_index`."""
        return json.dumps({"cluster": self.jobs, "task": {"type": task_type, "index": task_index}}, indent=indent)

    def describe(self):
        return ", ".join("%d %s" % (len(self.jobs[r]), r if len(self.jobs[r]) == 1 else r + "s") for r in ROLES)


def task_name(role, index):
    """TensorFlow's name for task `role`:`index` of a cluster."""
    return "/job:%s/replica:0/task:%d" % (role, index)


def device(role, index):
    """TensorFlow's name for the CPU of task `role`:`index` of a cluster."""
    return task_name(role, index) + "/device:CPU:0"


def split_address(address):
    """ "host:port" or "[v6]:port" -> (host, port); raises ValueError."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("expected host:port")
    return host.strip("[]"), int(port)


def from_tf_config(text, expect_roles=ROLES):
    """Parses and validates a TF_CONFIG string into a `ClusterSpec`.

    Raises `UsageError` with a one-line message naming the offending key. TF's own
    resolver accepts more shapes; we accept what ParameterServerStrategy can run.
    Other keys (Vertex AI adds "environment", "job", and "trial" in "task") are
    ignored, and so is an "evaluator" role: it takes no part in this job.
    """

    def bad(why):
        return UsageError("malformed TF_CONFIG: " + why)

    try:
        config = json.loads(text)
    except ValueError as e:
        raise bad("not valid JSON (%s)" % e) from None
    if not isinstance(config, dict):
        raise bad("expected a JSON object with 'cluster' and 'task'")
    cluster = config.get("cluster")
    if not isinstance(cluster, dict) or not cluster:
        raise bad("'cluster' must be an object mapping roles to address lists")
    task = config.get("task")
    if not isinstance(task, dict):
        raise bad("'task' must be an object with 'type' and 'index'")
    cluster = {role: addresses for role, addresses in cluster.items() if role != "evaluator"}
    return validated(cluster, task.get("type"), task.get("index", 0), expect_roles, "malformed TF_CONFIG")


def validated(jobs, task_type, task_index, expect_roles, source):
    """A `ClusterSpec` of `jobs` (role -> list of "host:port"), this process being task
    `task_type`:`task_index`; raises `UsageError` "<source>: <what is wrong>"."""

    def bad(why):
        return UsageError("%s: %s" % (source, why))

    for role, addresses in jobs.items():
        if role not in ROLES:
            raise bad("unknown role %r in 'cluster' (roles are chief, ps, worker)" % role)
        if not isinstance(addresses, list) or not addresses:
            raise bad("cluster role %r must be a non-empty list of host:port" % role)
        for address in addresses:
            try:
                split_address(address if isinstance(address, str) else "")
            except ValueError:
                raise bad("cluster %s address %r is not host:port" % (role, address)) from None
    for role, count in (("chief", "exactly one"), ("ps", "at least one"), ("worker", "at least one")):
        if role not in jobs:
            raise bad("the cluster needs %s %r task" % (count, role))
    if len(jobs["chief"]) != 1:
        raise bad("the cluster needs exactly one 'chief' task, got %d" % len(jobs["chief"]))
    seen = {}
    for role, addresses in jobs.items():
        for index, address in enumerate(addresses):
            if address in seen:
                raise bad("%s %d and %s %d share the address %s" % (*seen[address], role, index, address))
            seen[address] = (role, index)
    if task_type not in expect_roles:
        raise bad("task type %r cannot run here (expected %s)" % (task_type, " or ".join(expect_roles)))
    if not isinstance(task_index, int) or not 0 <= task_index < len(jobs[task_type]):
        raise bad("task index %r is out of range for %d %s task(s)" % (task_index, len(jobs[task_type]), task_type))
    return ClusterSpec({role: list(jobs[role]) for role in ROLES}, task_type, task_index)


def server_config(num_workers, tasks_in_process=1):
    """The ConfigProto every ps and worker server of a cluster with `num_workers` needs,
    when `tasks_in_process` of its servers share one process."""
    import tensorflow as tf

    # A server with fewer inter-op threads than workers + 1 deadlocks schedule()/join()
    # (docs/runtime.md). Servers in one process share one pool, sized by the first
    # server started (docs/runtime.md): it needs that many for each of them.
    threads = tasks_in_process * (num_workers + 1)
    return tf.compat.v1.ConfigProto(inter_op_parallelism_threads=max(threads, os.cpu_count() or 1))


def _connect(address, timeout):
    """None if something accepts TCP connections at `address`, else the OSError of trying."""
    try:
        socket.create_connection(split_address(address), timeout=timeout).close()
        return None
    except OSError as e:
        return e


def probe(address, timeout=1.0):
    """None if something accepts TCP connections at `address`, else why not."""
    e = _connect(address, timeout)
    return None if e is None else (e.strerror or str(e) or type(e).__name__).lower()


def refuses(address, timeout=1.0) -> bool:
    """Whether nothing listens at `address`: its host refuses TCP connections there (a
    task that exited), as opposed to accepting them, or not answering in `timeout` s (a
    cut link, a loaded host: the task may still be there)."""
    return isinstance(_connect(address, timeout), ConnectionRefusedError)


def wait_for_tasks(cluster, timeout, check=None):
    """Blocks until every ps and worker accepts TCP connections, or `timeout` s pass.

    ParameterServerStrategy neither waits for tasks nor bounds how long it stalls
    on one that is down (docs/runtime.md), so the coordinator checks first. `check` is
    called between attempts and may raise (a local cluster reports dead children).
    Raises `ClusterError` naming every task that did not answer and why.
    """
    pending = {(role, index): address for role, index, address in cluster.tasks()}
    reasons = {}
    deadline = time.monotonic() + timeout
    while pending:
        for key, address in list(pending.items()):
            reasons[key] = probe(address)
            if reasons[key] is None:
                del pending[key]
        if not pending:
            return
        if check:
            check()
        if time.monotonic() >= deadline:
            raise ClusterError(
                "no answer within %gs from %s; start the servers or fix TF_CONFIG"
                % (
                    timeout,
                    ", ".join(
                        "%s %d at %s (%s)" % (role, index, address, reasons[role, index])
                        for (role, index), address in sorted(pending.items())
                    ),
                )
            )
        time.sleep(0.2)  # a retry interval for servers still booting, not a wait for a result
