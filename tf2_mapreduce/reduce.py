"""Reducers: accumulators placed on the ps tasks that commit each input's result once.

ClusterCoordinator.schedule() is at-least-once, so a commit must be idempotent: a
map step that is retried after its worker died must not count its files twice.
"""

import numpy as np
import tensorflow as tf

__all__ = ["PerFileSum", "WorkerSteps"]

NOT_DONE = -1


class PerFileSum:
    """An exact sum of one int64 value per file, sharded over the ps tasks.

    File i owns slot i, placed on ps i % P at offset i // P. A map step writes its
    files' values into their slots with `scatter_update` (never `scatter_add`, which
    is not atomic on the ps, design.md), so running it twice writes the same values
    again: the sum is exactly-once however often a step is retried. Slots start at
    -1, which is how progress tells done files from pending ones.

    Created outside the strategy's scope on purpose: ParameterServerStrategy places
    variables round-robin and ignores device scopes, and the sharding here needs
    slot i on a known ps.
    """

    def __init__(self, sizes, ps_devices):
        """`sizes`: the byte size of each file, for progress; `ps_devices`: one per ps."""
        self.num_files = len(sizes)
        self.ps_devices = list(ps_devices)
        num_ps = len(self.ps_devices)
        sizes = np.asarray(sizes, dtype=np.int64)
        self.slots, self.sizes = [], []
        for shard, device in enumerate(self.ps_devices):
            shard_sizes = sizes[shard::num_ps]
            with tf.device(device):
                self.slots.append(
                    tf.Variable(tf.fill([len(shard_sizes)], tf.constant(NOT_DONE, tf.int64)), trainable=False, name="slots_%d" % shard)
                )
                self.sizes.append(tf.Variable(shard_sizes, trainable=False, name="sizes_%d" % shard))
        self._stats = tf.function(self._stats_fn)

    def variables(self):
        """The state to checkpoint, by name: each ps shard's slots."""
        return {"slots_%d" % shard: slots for shard, slots in enumerate(self.slots)}

    def commit(self, ids, values):
        """Writes `values[k]` as the result of file `ids[k]`; idempotent.

        Called inside the scheduled `tf.function` (on a worker); each shard's
        update is one `scatter_update` on its ps.
        """
        num_ps = len(self.slots)
        shard_of = tf.cast(ids % num_ps, tf.int32)
        offsets = tf.dynamic_partition(ids // num_ps, shard_of, num_ps)
        shard_values = tf.dynamic_partition(values, shard_of, num_ps)
        for slots, offset, value in zip(self.slots, offsets, shard_values):
            slots.scatter_update(tf.IndexedSlices(value, offset))

    def _stats_fn(self):
        files = bytes_ = total = tf.constant(0, tf.int64)
        for device, slots, sizes in zip(self.ps_devices, self.slots, self.sizes):
            with tf.device(device):
                values = slots.read_value()
                done = values >= 0
                files += tf.reduce_sum(tf.cast(done, tf.int64))
                bytes_ += tf.reduce_sum(tf.where(done, sizes, 0))
                total += tf.reduce_sum(tf.where(done, values, 0))
        return files, bytes_, total

    def stats(self):
        """(files done, bytes done, sum so far) as ints; reduced on the ps, one RPC each.

        Safe to call while map steps run: each file is either committed or not.
        """
        return tuple(int(x) for x in self._stats())

    def values(self):
        """Every file's value as an int64 array in file order; -1 where not done."""
        out = np.full(self.num_files, NOT_DONE, dtype=np.int64)
        for shard, slots in enumerate(self.slots):
            out[shard :: len(self.slots)] = slots.numpy()
        return out


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
