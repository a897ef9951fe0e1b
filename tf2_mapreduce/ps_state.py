"""What every kind of a run's state on the ps tasks shares: its progress figures, what a
checkpoint saves of it, tables named for their run, and freeing it on the ps.

A run's state belongs to that run: every resource it places on a ps is new, named for
the run, so nothing an earlier coordinator left on a server that outlived it (a kept
server, a rerun after a crash) can reach its result (docs/runtime.md, R1-R5).
"""

from dataclasses import dataclass

import tensorflow as tf

__all__ = ["Stats", "CheckpointState", "RunTable", "destroy"]


@dataclass(frozen=True)
class Stats:
    """A state's figures so far: pieces and bytes committed, and the value folded on the
    ps tasks (the reducer's own: an int64 or vector as numpy for a per-piece fold, the
    total of the counts for a per-key sum) with the distinct keys of a per-key sum."""

    pieces_done: int
    bytes_done: int
    value: object
    distinct: int = None


@dataclass(frozen=True)
class CheckpointState:
    """What to checkpoint: objects saved by name, the live objects restored under the
    same names, and a function that makes the saved ones consistent first."""

    save: dict
    restore: dict
    prepare: object = None


def destroy(handles):
    """Frees resources on the ps tasks now, rather than when their server exits:
    a server kept for later jobs would otherwise hold every finished run's state."""
    for handle in handles:
        tf.raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=True)


class RunTable(tf.lookup.experimental.DenseHashTable):
    """A table (string -> int64, missing keys 0) on a ps whose resource is named
    `shared_name`. Two keys are not for use: "" and "\\x00" (`EMPTY_KEY`, `DELETED_KEY`,
    which mark its free buckets).

    Why its name: TF names a table made eagerly "table_<n>", n counting the tables this
    process has made, so a new coordinator process makes the same names again, and on a
    ps that outlived the previous one gets that process's table with its counts.
    (Variables do not have the flaw: the runtime names eager ones uniquely.)

    Why dense (open addressing): a commit looks each of its keys up, then inserts it;
    MutableHashTable's node-based map took twice as long for both (a third of the CPU
    of a statistics job with a key per float bucket, measured). Its export is its
    buckets, [n, 1] keys and values with the empty ones: `entries` filters them.
    """

    EMPTY_KEY, DELETED_KEY = "", "\x00"
    BUCKETS = 4096  # at first: it doubles as it fills, so a small job's table stays small

    def __init__(self, shared_name, name="MutableDenseHashTable"):
        self._run_shared_name = shared_name
        super().__init__(
            tf.string,
            tf.int64,
            default_value=0,
            empty_key=self.EMPTY_KEY,
            deleted_key=self.DELETED_KEY,
            initial_num_buckets=self.BUCKETS,
            name=name,
        )

    def _create_resource(self):
        self._shared_name = self._run_shared_name
        return super()._create_resource()

    def entries(self):
        """Its (keys, values) as vectors, without the free buckets."""
        keys, values = self.export()
        keys, values = tf.reshape(keys, [-1]), tf.reshape(values, [-1])
        used = tf.logical_and(keys != self.EMPTY_KEY, keys != self.DELETED_KEY)
        return tf.boolean_mask(keys, used), tf.boolean_mask(values, used)

    def clear(self):
        """Empties it: its buckets imported back, every one free. In a `tf.function`:
        eagerly, the shapes TF checks an import against on a remote ps ([n]) are not the
        ones the kernel wants ([n, 1])."""
        keys, values = self.export()
        imported = tf.raw_ops.LookupTableImportV2(
            table_handle=self.resource_handle,
            keys=tf.fill(tf.shape(keys), self.EMPTY_KEY),
            values=tf.zeros_like(values),
        )
        with tf.control_dependencies([imported]):
            return tf.constant(True)
