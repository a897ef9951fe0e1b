"""Messages from the coordinator to the ps and worker servers (heartbeats while a job runs:
`cluster.heartbeats`), and "the job is over". TF's gRPC servers cannot be stopped or queried from outside,
so each server blocks on a queue on its own device and the coordinator enqueues into it.

"The job is over" is a handshake: the server answers on a second queue, and exits only
once the coordinator acknowledges that answer (or, the coordinator gone, after
`ACK_GRACE` s). An answer can be lost: a dequeue that timed out on the coordinator's
side may still take it on the server's. The coordinator then tells the server again and
the server, still there, answers again; so only an answer counts as told, and a slow
server is told again, within --shutdown_timeout, rather than taken for gone.

Every message carries its coordinator's id, the time it started in nanoseconds, so a
server can tell an earlier coordinator's late "job over" from the current one's.
"""

import threading
import time
from dataclasses import dataclass

import tensorflow as tf

from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import op_error_cause

__all__ = [
    "ControlQueue",
    "Message",
    "request_exit",
    "new_coordinator_id",
    "JOB_OVER",
    "HEARTBEAT",
    "ACK",
    "ACK_GRACE",
]

CONTROL_QUEUE = "tf2_mapreduce_control"
ANSWER_QUEUE = "tf2_mapreduce_control_answer"  # a server's answers to "the job is over"
JOB_OVER = 1
HEARTBEAT = 2
ACK = 3  # the coordinator took the server's answer to JOB_OVER: the server may exit


SEND_TIMEOUT = 5.0  # seconds; a message to a task that does not answer in time fails
RETRY_EVERY = 0.5  # seconds between attempts to tell a task that the job is over
# Seconds a told server waits for its coordinator's next word (ACK, or JOB_OVER again)
# before it exits anyway. Between two words of a live coordinator: at most a failed
# attempt (a 1 s probe, a send and an answer's wait, and dropping the failed session:
# SEND_TIMEOUT each), then RETRY_EVERY s, 16.5 s in all; a margin above that.
ACK_GRACE = 21.0
# Seconds of the first attempt to send an ACK: the longest wait on a call whose server
# exited as it took the ACK. A live server queues one in milliseconds.
ACK_ATTEMPT = 0.25


@dataclass(frozen=True)
class Message:
    kind: int  # JOB_OVER, HEARTBEAT or ACK
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
            self._drop_session()
            raise ConnectionError(refused)
        try:
            if self.session is None:
                self.session = _session(self.target, self.graph, self.device, timeout)
            self.session.run(self.enqueue, {self.kind: message.kind, self.coordinator: message.coordinator})
        except tf.errors.OpError:
            self._drop_session()  # a restarted task needs a new session
            raise

    def close(self):
        """Closes the session, if any. Blocks for up to its timeout when the task is gone."""
        if self.session is not None:
            session, self.session = self.session, None
            _close(session)

    def _drop_session(self):
        """Forgets the session, if any, closing it in a thread of its own (as `_close_apart`
        does, for the same reasons): closing a session whose task is gone waits out its
        timeout, and dropped here it was closed by its finalizer, there and then: a
        heartbeat to a worker killed mid-job held the coordinator's exit for up to
        SEND_TIMEOUT s."""
        if self.session is not None:
            session, self.session = self.session, None
            threading.Thread(target=_close, args=(session,), name="tf2_mapreduce-close-session", daemon=False).start()

    def tell(self, message, timeout=SEND_TIMEOUT):
        """Sends `message` (JOB_OVER), blocks until the task answers that it heard it,
        then acknowledges the answer; raises ConnectionError or tf.errors.OpError if
        there was no answer (DeadlineExceededError: none within `timeout` s)."""
        self.send(message, timeout)
        options = tf.compat.v1.RunOptions(timeout_in_ms=int(timeout * 1000))
        try:
            while self.session.run(self.answer, options=options) != message.coordinator:
                pass  # another coordinator's answer, left by one that gave up on it
        except tf.errors.OpError:
            self._drop_session()
            raise
        self._acknowledge(message.coordinator, timeout)

    def _acknowledge(self, coordinator, timeout):
        """Sends the ACK of `coordinator`'s JOB_OVER; returns once the task queued it, is
        gone, answered with an error, or `timeout` s passed (the task was told either way:
        unacknowledged, it exits after ACK_GRACE s). Never raises.

        The server exits as soon as it dequeues the ACK, which can be before this call's
        reply leaves it; a call to a task that is gone waits out its whole timeout (then
        closing its session another: docs/runtime.md). So the ACK is sent in attempts of
        ACK_ATTEMPT s, each twice as long as the one before (a loaded server still gets
        one long enough), and a task whose port refuses connections between them counts
        as acknowledged: a told server exits only on an ACK, after ACK_GRACE s, or by a
        crash, and in none of these is there anyone left to tell. One that does not
        answer (a cut link) is tried until `timeout`. The session is kept for `close`,
        which runs apart. An ACK queued twice is harmless: a server takes the first and
        exits, and one that serves on ignores ACKs.
        """
        deadline = time.monotonic() + timeout
        attempt = ACK_ATTEMPT
        feed = {self.kind: ACK, self.coordinator: coordinator}
        while True:
            options = tf.compat.v1.RunOptions(timeout_in_ms=int(attempt * 1000))
            try:
                self.session.run(self.enqueue, feed, options=options)
                return
            except (tf.errors.DeadlineExceededError, tf.errors.UnavailableError):
                if cluster_spec.refuses(self.address):
                    return
            except tf.errors.OpError:
                return  # it answered, with an error of its own (a server restarted since): no retry mends that
            left = deadline - time.monotonic()
            if left < ACK_ATTEMPT:
                return
            attempt = min(2 * attempt, left)


def _close(session):
    try:
        session.close()
    except tf.errors.OpError:
        pass  # the task is gone: nothing of the session is left to release


def _try_telling(channel, message):
    """One attempt to tell a task that the job is over: None once told (it answered),
    else (why not, whether the task refused the connection)."""
    try:
        channel.tell(message)
        return None
    except ConnectionError as e:
        return str(e), True
    except tf.errors.OpError as e:
        return op_error_cause(e), False


def _close_apart(channel, name):
    """Closes `channel` in a thread of its own: closing waits out the session's timeout
    (SEND_TIMEOUT) when the server has exited, as a told one does.

    Not a daemon (explicitly: a thread inherits its starter's daemon flag, and a telling
    thread is one), so that an exiting interpreter waits for it before finalizing: a
    daemon thread that comes back from TensorFlow's C++ once the interpreter finalizes
    is ended by pthread_exit, whose unwinding through TensorFlow's frames aborts the
    process ("FATAL: exception not rethrown"). Started before the telling thread says it
    is done, so it is registered before request_exit returns and the interpreter can
    begin to exit.
    """
    threading.Thread(target=channel.close, name=name, daemon=False).start()


def request_exit(cluster, coordinator, within=0.0, on_retry=None, gone_is_final=False):
    """Tells every ps and worker of `cluster` that the job of `coordinator` (its id)
    is over, all at once; a task that cannot be told at first is tried again until
    `within` s have passed. With `gone_is_final`, a task that refuses connections is
    not tried again (a local child cannot come back once gone).

    Blocking, at most about `within` + 4 * `SEND_TIMEOUT` s in all (one attempt each
    when `within` is 0). `on_retry(role, index, address, reason)` is called once
    for each task whose first attempt failed. Returns {(role, index): reason} for
    the tasks that could not be told in time, such as tasks that are gone.
    """
    deadline = time.monotonic() + within
    message = Message(JOB_OVER, coordinator)
    failed = {}

    def tell(role, index, channel, done):
        # A task may be coming back (a worker being restarted, a link down), or answer
        # after an attempt gave up (a loaded one): only its answer counts as told.
        try:
            failure = _try_telling(channel, message)
            if failure and within > 0 and not (gone_is_final and failure[1]):
                if on_retry:
                    on_retry(role, index, channel.address, failure[0])
                while failure and not (gone_is_final and failure[1]) and time.monotonic() + RETRY_EVERY < deadline:
                    time.sleep(RETRY_EVERY)  # a retry interval for a task that is down, not a wait for a result
                    failure = _try_telling(channel, message)
            if failure:
                failed[role, index] = failure[0]
        except Exception as e:  # not told, whatever went wrong
            failed[role, index] = "%s: %s" % (type(e).__name__, e)
        finally:
            try:
                _close_apart(channel, "tf2_mapreduce-close-%s%d" % (role, index))
            finally:
                done.set()

    told = []
    for role, index, address in cluster.tasks(roles=("worker", "ps")):
        # Built here, on this thread: TensorFlow's graph building on several threads at
        # once is not safe (a coordinator crashed tracing on two).
        channel = _Channel(role, index, address)
        told.append(threading.Event())
        threading.Thread(target=tell, args=(role, index, channel, told[-1]), daemon=True).start()
    for done in told:
        done.wait()
    return failed


class ControlQueue:
    """The server side: this task's queue, read in a session of the server's own, and
    its answers to "the job is over"."""

    def __init__(self, server, role, index):
        device = cluster_spec.task_name(role, index)
        self._graph = tf.Graph()
        with self._graph.as_default():
            self._dequeue = tf.raw_ops.QueueDequeueV2(handle=_queue(device), component_types=[tf.int64, tf.int64])
            self._coordinator = tf.compat.v1.placeholder(tf.int64, [])
            self._answer = tf.raw_ops.QueueEnqueueV2(
                handle=_queue(device, ANSWER_QUEUE), components=[self._coordinator]
            )
        self._session = _session(server.target, self._graph, device)

    def answer(self, message):
        """Answers `message` (JOB_OVER: it was heard). Not blocking: the coordinator
        acknowledges the answer with an ACK message on this queue."""
        self._session.run(self._answer, {self._coordinator: message.coordinator})

    def next(self, timeout=None):
        """Blocks for the next `Message`; None after `timeout` s."""
        options = tf.compat.v1.RunOptions(timeout_in_ms=int(timeout * 1000)) if timeout else None
        try:
            kind, coordinator = self._session.run(self._dequeue, options=options)
        except tf.errors.DeadlineExceededError:
            return None
        return Message(int(kind), int(coordinator))
