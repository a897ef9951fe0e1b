"""The coordinator's heartbeats to every ps and worker while a job runs, and when each last
answered: servers that hear none for their --idle_timeout exit (`cluster.serve`)."""

import threading
import time

import tensorflow as tf

from tf2_mapreduce.cluster.channel import HEARTBEAT, Message, _Channel, _close_apart
from tf2_mapreduce.errors import op_error_cause

__all__ = ["Heartbeats", "HEARTBEAT_EVERY", "DOWN_AFTER"]

HEARTBEAT_EVERY = 1.0  # seconds; servers' --idle_timeout must be well above it
DOWN_AFTER = 3.0  # seconds without an answer before a task counts as down


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
        self._lock = threading.RLock()  # `changes` reads and records under one hold
        self.started = time.monotonic()
        self._answered = {}  # (role, index) -> monotonic time of the last answer
        self._errors = {}  # (role, index) -> the last failure, while failing
        self._said_down = set()  # (role, index) of the tasks `changes` last said were down
        # Built here, on the caller's thread: TensorFlow's graph building on several
        # threads at once is not safe (a coordinator crashed tracing on two).
        self._channels = [(role, index, _Channel(role, index, address)) for role, index, address in cluster.tasks()]
        self._threads = [
            threading.Thread(
                target=self._beat,
                args=(role, index, channel),
                daemon=True,
                name="tf2_mapreduce-heartbeat-%s%d" % (role, index),
            )
            for role, index, channel in self._channels
        ]

    def _beat(self, role, index, channel):
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

    def is_down(self, role, index) -> bool:
        """Whether task role:index has not answered for `DOWN_AFTER` s."""
        return self.silent_for(role, index) > DOWN_AFTER

    def changes(self, role: str) -> list:
        """[(index, address, cause)] of the tasks of `role` that went down (`is_down`, their
        last heartbeat failed: `cause` its error) or answered again (`cause` None) since the
        last call, whichever run made it: each change once, over the jobs the cluster runs.
        Silence alone is not enough: a coordinator paused for seconds (stopped, swapped out)
        hears no task meanwhile. Non-blocking."""
        found = []
        with self._lock:
            for _, index, address in self.cluster.tasks(roles=(role,)):
                cause = self.failing(role, index) if self.is_down(role, index) else None
                if (cause is not None) != ((role, index) in self._said_down):
                    (self._said_down.discard if cause is None else self._said_down.add)((role, index))
                    found.append((index, address, cause))
        return found

    def failing(self, role, index):
        """The error of the last heartbeat to role:index, or None if it answered."""
        with self._lock:
            return self._errors.get((role, index))

    def __enter__(self):
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        """Stops the heartbeats; blocks until every thread has ended (at most about
        SEND_TIMEOUT s, for a task that hangs): a daemon thread still in TensorFlow's
        C++ when the interpreter finalizes aborts the process (see `_close_apart`).
        Their sessions are closed apart, as the telling's are. Closed here, before the
        servers were told, they held one in two telling's acknowledgement for about
        10 s (measured: 4 of 6 runs of a local cluster of processes; 0 of 8 closed apart)."""
        self._stop.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join()
        with self._lock:
            channels, self._channels = self._channels, []
        for role, index, channel in channels:
            _close_apart(channel, "tf2_mapreduce-close-heartbeat-%s%d" % (role, index))
