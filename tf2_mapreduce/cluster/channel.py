"""Messages from the coordinator to the ps and worker servers: heartbeats while a job
runs, and "the job is over". TF's gRPC servers cannot be stopped or queried from outside,
so each server blocks on a queue on its own device and the coordinator enqueues into it.
A server answers "the job is over" on a second queue: only that answer tells the
coordinator the server heard it.

Every message carries its coordinator's id, the time it started in nanoseconds, so a
server can tell an earlier coordinator's late "job over" from the current one's.
"""

import threading
import time
from dataclasses import dataclass

import tensorflow as tf

from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import op_error_cause

__all__ = ["Heartbeats", "ControlQueue", "Message", "request_exit", "new_coordinator_id", "JOB_OVER", "HEARTBEAT"]

CONTROL_QUEUE = "tf2_mapreduce_control"
ANSWER_QUEUE = "tf2_mapreduce_control_answer"  # a server's answers to "the job is over"
JOB_OVER = 1
HEARTBEAT = 2
HEARTBEAT_EVERY = 1.0  # seconds; servers' --idle_timeout must be well above it


SEND_TIMEOUT = 5.0  # seconds; a message to a task that does not answer in time fails
RETRY_EVERY = 0.5  # seconds between attempts to tell a task that the job is over
# Seconds a server that was told waits for its answer to be taken before it exits
# anyway: a coordinator whose message went through takes it at once.
ANSWER_GRACE = SEND_TIMEOUT


@dataclass(frozen=True)
class Message:
    kind: int  # JOB_OVER or HEARTBEAT
    coordinator: int  # the sending coordinator's id (`new_coordinator_id`)


def new_coordinator_id():
    """An id for a coordinator process: its start time in ns, so that later
    coordinators have larger ids (across hosts, as far as their clocks agree)."""
    return time.time_ns()


def _queue(device, name=CONTROL_QUEUE):
    """The task's queue of messages (kind, coordinator), or of answers (coordinator)."""
    types = [tf.int64, tf.int64] if name == CONTROL_QUEUE else [tf.int64]
    with tf.device(device + "/device:CPU:0"):
        # Unbounded, so that a coordinator never blocks on a server that is busy.
        return tf.raw_ops.FIFOQueueV2(component_types=types, shapes=[[]] * len(types), capacity=-1, shared_name=name)


def _session(target, graph, device, timeout=None):
    # Restricted to the task itself, or the session would first wait for every
    # task of the cluster to answer.
    config = tf.compat.v1.ConfigProto(device_filters=[device])
    if timeout:
        # Also bounds creating the session, which retries an absent task forever.
        config.operation_timeout_in_ms = int(timeout * 1000)
    return tf.compat.v1.Session(target, graph=graph, config=config)


class _Channel:
    """Sends messages to one task through a TF1 session whose master is that task.

    Deliberately not through the coordinator's eager context: ClusterCoordinator
    rebuilds that context when a worker fails, and eager ops that failed against
    the dead worker from other threads make the rebuild fail (measured: a worker
    kill that is otherwise survived ends the job).
    """

    def __init__(self, role, index, address):
        self.address = address
        self.target = "grpc://" + address
        self.device = cluster_spec.task_name(role, index)
        self.graph = tf.Graph()
        with self.graph.as_default():
            self.kind = tf.compat.v1.placeholder(tf.int64, [])
            self.coordinator = tf.compat.v1.placeholder(tf.int64, [])
            self.enqueue = tf.raw_ops.QueueEnqueueV2(
                handle=_queue(self.device), components=[self.kind, self.coordinator]
            )
            [self.answer] = tf.raw_ops.QueueDequeueV2(
                handle=_queue(self.device, ANSWER_QUEUE), component_types=[tf.int64]
            )
        self.session = None

    def send(self, message, timeout=SEND_TIMEOUT):
        """Blocks until the task queued `message` (a `Message`); raises ConnectionError
        or tf.errors.OpError otherwise, within about `timeout` s."""
        refused = cluster_spec.probe(self.address)
        if refused:  # fails at once, where TF would retry until the timeout
            self.session = None
            raise ConnectionError(refused)
        try:
            if self.session is None:
                self.session = _session(self.target, self.graph, self.device, timeout)
            self.session.run(self.enqueue, {self.kind: message.kind, self.coordinator: message.coordinator})
        except tf.errors.OpError:
            self.session = None  # a restarted task needs a new session
            raise

    def tell(self, message, timeout=SEND_TIMEOUT):
        """Sends `message` (JOB_OVER) and blocks until the task answers that it heard
        it; raises ConnectionError or tf.errors.OpError otherwise (DeadlineExceededError:
        no answer within `timeout` s)."""
        self.send(message, timeout)
        options = tf.compat.v1.RunOptions(timeout_in_ms=int(timeout * 1000))
        try:
            while self.session.run(self.answer, options=options) != message.coordinator:
                pass  # another coordinator's answer, left by one that gave up on it
        except tf.errors.OpError:
            self.session = None
            raise


def _tell_job_over(channel, message, deadline):
    """Tells one task that the job is over, trying until `deadline` (monotonic): a
    worker being restarted, or whose link is down, may answer a few seconds later.
    Only the task's answer counts: a task that cannot be reached may be coming back.
    Returns None once the task was told, else the last reason it could not be."""
    while True:
        try:
            channel.tell(message)
            return None
        except ConnectionError as e:
            reason = str(e)
        except tf.errors.OpError as e:
            reason = op_error_cause(e)
        if time.monotonic() + RETRY_EVERY >= deadline:
            return reason
        time.sleep(RETRY_EVERY)  # a retry interval for a task that is down, not a wait for a result


def request_exit(cluster, coordinator, within=0.0, on_retry=None):
    """Tells every ps and worker of `cluster` that the job of `coordinator` (its id)
    is over, all at once; a task that cannot be told at first is tried again until
    `within` s have passed.

    Blocking, at most about `within` + `SEND_TIMEOUT` s in all (one attempt each
    when `within` is 0). `on_retry(role, index, address, reason)` is called once
    for each task whose first attempt failed. Returns {(role, index): reason} for
    the tasks that could not be told in time, such as tasks that are gone.
    """
    deadline = time.monotonic() + within
    message = Message(JOB_OVER, coordinator)
    failed = {}

    def tell(role, index, address):
        channel = _Channel(role, index, address)
        reason = _tell_job_over(channel, message, time.monotonic())
        if reason is not None and within > 0:
            if on_retry:
                on_retry(role, index, address, reason)
            reason = _tell_job_over(channel, message, deadline)
        if reason is not None:
            failed[role, index] = reason

    threads = [threading.Thread(target=tell, args=task, daemon=True) for task in cluster.tasks(roles=("worker", "ps"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failed


class Heartbeats:
    """Sends every ps and worker a heartbeat each second while a job runs, and records
    when each last answered: the coordinator's view of which tasks are alive.

    One daemon thread per task, so that a task that hangs delays no other. Servers
    that hear nothing for their --idle_timeout exit, so a dead coordinator does not
    leave them behind forever. Use as a context manager around the job.
    """

    def __init__(self, cluster, coordinator, every=HEARTBEAT_EVERY):
        self.cluster = cluster
        self.message = Message(HEARTBEAT, coordinator)
        self.every = every
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self._answered = {}  # (role, index) -> monotonic time of the last answer
        self._errors = {}  # (role, index) -> the last failure, while failing
        self._threads = [
            threading.Thread(
                target=self._beat,
                args=(role, index, address),
                daemon=True,
                name="tf2_mapreduce-heartbeat-%s%d" % (role, index),
            )
            for role, index, address in cluster.tasks()
        ]

    def _beat(self, role, index, address):
        channel = _Channel(role, index, address)
        while not self._stop.is_set():
            try:
                channel.send(self.message)
                with self._lock:
                    self._answered[role, index] = time.monotonic()
                    self._errors.pop((role, index), None)
            except (ConnectionError, tf.errors.OpError) as e:
                with self._lock:
                    self._errors[role, index] = str(e) if isinstance(e, ConnectionError) else op_error_cause(e)
            self._stop.wait(self.every)

    def silent_for(self, role, index):
        """Seconds since task role:index last answered (since the start if never)."""
        return time.monotonic() - (self.last_answer(role, index) or self.started)

    def last_answer(self, role, index):
        """When task role:index last answered (time.monotonic()), or None if never."""
        with self._lock:
            return self._answered.get((role, index))

    def failing(self, role, index):
        """The error of the last heartbeat to role:index, or None if it answered."""
        with self._lock:
            return self._errors.get((role, index))

    def __enter__(self):
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()


class ControlQueue:
    """The server side: this task's queue, read in a session of the server's own, and
    its answers to "the job is over"."""

    def __init__(self, server, role, index):
        device = cluster_spec.task_name(role, index)
        self._graph = tf.Graph()
        with self._graph.as_default():
            self._dequeue = tf.raw_ops.QueueDequeueV2(handle=_queue(device), component_types=[tf.int64, tf.int64])
            answers = _queue(device, ANSWER_QUEUE)
            self._coordinator = tf.compat.v1.placeholder(tf.int64, [])
            self._answer = tf.raw_ops.QueueEnqueueV2(handle=answers, components=[self._coordinator])
            self._answers_left = tf.raw_ops.QueueSizeV2(handle=answers)
        self._session = _session(server.target, self._graph, device)

    def answer(self, message, grace=ANSWER_GRACE):
        """Answers `message` (JOB_OVER: it was heard), then blocks until its coordinator
        took the answer, or for `grace` s at most: a server that exits at once would
        cut its answer off."""
        self._session.run(self._answer, {self._coordinator: message.coordinator})
        deadline = time.monotonic() + grace
        while self._session.run(self._answers_left) and time.monotonic() < deadline:
            time.sleep(0.02)  # polls the queue: TF has no op that waits for a queue to empty

    def next(self, timeout=None):
        """Blocks for the next `Message`; None after `timeout` s."""
        options = tf.compat.v1.RunOptions(timeout_in_ms=int(timeout * 1000)) if timeout else None
        try:
            kind, coordinator = self._session.run(self._dequeue, options=options)
        except tf.errors.DeadlineExceededError:
            return None
        return Message(int(kind), int(coordinator))
