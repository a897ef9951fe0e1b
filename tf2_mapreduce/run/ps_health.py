"""The ps tasks of a running job as its run loop sees them: which are down, reads of the
run's state retried while every ps answers, and the error a ps failure means for the run.
"""

import time

import tensorflow as tf

from tf2_mapreduce import storage
from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import ClusterError, JobFailed, connectivity_errors, op_error_cause
from tf2_mapreduce.run import failures

__all__ = ["PsHealth", "CONNECTIVITY_ERRORS", "RETRY_BUDGET"]

CONNECTIVITY_ERRORS = connectivity_errors()
RETRY_BUDGET = 120.0  # seconds of failed reads (or rounds) tolerated while every ps answers
READ_RETRY = 0.2  # seconds between attempts to read state on a ps that answers


class PsHealth:
    """The ps tasks of `cluster`. `interrupted()` returns the error to raise when a stop
    was requested (or None): a read that waits for a ps gives way to it."""

    def __init__(self, cluster, interrupted=lambda: None):
        self.cluster = cluster
        self._interrupted = interrupted

    def down(self) -> dict:
        """{ps index: reason} for the ps tasks that do not accept connections. Blocking, about a second at most."""
        down = {}
        for _, index, address in self.cluster.tasks(roles=("ps",)):
            reason = cluster_spec.probe(address)
            if reason:
                down[index] = reason
        return down

    def failed(self, error) -> dict:
        """{ps index: reason} for the ps tasks that are down or that `error` names as lost."""
        failed = self.down()
        if not failed and not isinstance(error, failures.FILE_ERRORS):
            message = error.message if isinstance(error, tf.errors.OpError) else str(error)
            for index in failures.tasks_named(message, "ps"):
                failed[index] = op_error_cause(error)
        return failed

    def read(self, read):
        """Returns `read()`, a blocking read of the run's state on the ps tasks.

        Retries while it fails with a connectivity error or is cancelled and every ps
        accepts connections (for up to `RETRY_BUDGET` s): when workers fail,
        ClusterCoordinator cancels work in flight, and a read of a ps that is fine
        can be cancelled with it; after a ps restart the other tasks' channels to it
        stay in reconnect backoff for a while (docs/runtime.md). Reads are
        idempotent, so retrying is safe.
        """
        deadline = time.monotonic() + RETRY_BUDGET
        while True:
            try:
                return read()
            except CONNECTIVITY_ERRORS as e:
                if self.down() or time.monotonic() > deadline or storage.outage_cause(e):
                    raise  # an outage of storage (a checkpoint's) is not the cluster's
            stop = self._interrupted()
            if stop is not None:
                raise stop
            time.sleep(READ_RETRY)

    def failure(self, error, how_to_resume, when="during the job", saved=None):
        """The `ClusterError` (a ps failed) or `JobFailed` (anything else) that `error`
        means; `how_to_resume` completes the message, `saved` is the (checkpoint,
        files done) a rerun resumes from, if any."""
        failed = self.failed(error)
        if not failed:
            if isinstance(error, tf.errors.OpError):
                return JobFailed("%s: %s" % (type(error).__name__, op_error_cause(error)))
            return JobFailed(str(error))
        names = ", ".join(
            "ps %d at %s (%s)" % (i, self.cluster.jobs["ps"][i], why) for i, why in sorted(failed.items())
        )
        return ClusterError(
            "%s failed %s, with its part of the results. %s" % (names, when, how_to_resume),
            failed_tasks={("ps", i): why for i, why in failed.items()},
            checkpoint=saved[0] if saved else None,
            files_done=saved[1] if saved else 0,
        )
