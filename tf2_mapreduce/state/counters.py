"""What a run keeps on a ps beside its result: the map steps each worker ran, the whole
files a map step found changed since they were listed, and the flag that stops its steps."""

import numpy as np
import tensorflow as tf

from tf2_mapreduce.state.base import destroy

__all__ = ["WorkerSteps", "ChangedFiles", "StopFlag"]


class WorkerSteps:
    """How many map steps each worker has run, on one ps: for progress and
    diagnostics only. An at-least-once count: a step re-run after its worker failed
    counts again, so these counts never feed a result."""

    def __init__(self, num_workers, device):
        with tf.device(device):
            self.counts = tf.Variable(tf.zeros([num_workers], tf.int64), trainable=False, name="worker_steps")

    def count_this_step(self):
        """Called inside a scheduled `tf.function`: adds one to this worker's count."""
        worker = tf.distribute.coordinator.experimental_get_current_worker_index()
        self.counts.scatter_nd_add([[worker]], [tf.constant(1, tf.int64)])

    def read(self):
        return tuple(int(x) for x in self.counts.numpy())

    def release(self):
        destroy([self.counts.handle])


class ChangedFiles:
    """Whole files that a map step found at another size than they were listed with, on
    one ps: the size read for each such piece (-1: none). The step records them, then
    fails without committing anything, so the run reads the facts here as data (TF can
    carry only text back from a failed step) and never counts a file it was not asked to.
    """

    ASSERTION = "tf2_mapreduce: a file changed since it was listed"

    def __init__(self, num_pieces, device):
        with tf.device(device):
            self.sizes = tf.Variable(tf.fill([num_pieces], tf.constant(-1, tf.int64)), trainable=False, name="changed")

    def check(self, ids, listed, read):
        """Inside a map step: records the pieces in `ids` whose size `read` is not the size
        `listed`, then fails the step if there are any. Idempotent."""
        changed = tf.not_equal(listed, read)

        def record():
            self.sizes.scatter_update(tf.IndexedSlices(tf.boolean_mask(read, changed), tf.boolean_mask(ids, changed)))
            return tf.constant(True)

        # Only a step with a changed file writes to the ps: the others pay no RPC.
        recorded = tf.cond(tf.reduce_any(changed), record, lambda: tf.constant(False))
        return tf.debugging.Assert(tf.logical_not(recorded), [self.ASSERTION])

    def read(self):
        """{piece: size read} of every changed file recorded so far. Blocking."""
        sizes = self.sizes.numpy()
        return {int(piece): int(sizes[piece]) for piece in np.flatnonzero(sizes >= 0)}

    def release(self):
        destroy([self.sizes.handle])


class StopFlag:
    """Whether a run is stopping, on one ps: a map step that starts once it is set fails
    at once, reading nothing, so that ClusterCoordinator cancels the steps still queued
    instead of running each before a stop can end the round (measured: 20 queued steps
    of about 0.7 s each kept a Ctrl-C waiting 7 s). A failed step commits nothing, and
    the run stops anyway: nothing is lost or counted twice."""

    STOPPING = "tf2_mapreduce: the run is stopping"

    def __init__(self, device):
        with tf.device(device):
            self.flag = tf.Variable(False, trainable=False, name="stopping")

    def check(self):
        """Inside a map step: fails it if the run is stopping."""
        return tf.debugging.Assert(tf.logical_not(self.flag.read_value()), [self.STOPPING])

    def set(self):
        """Stops the steps that start from now on. Blocking: one write to the ps; where
        the ps cannot be written, the steps queued run as they would (best effort)."""
        try:
            self.flag.assign(True)
        except tf.errors.OpError:
            pass

    def release(self):
        destroy([self.flag.handle])
