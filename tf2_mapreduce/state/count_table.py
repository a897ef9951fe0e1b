"""The one table a per-key state keeps on a ps: int64 counts by string key, named for its
run, whose commit adds a step's counts and marks its pieces done in one kernel."""

import tensorflow as tf

__all__ = ["RunTable", "COMMITTED_IN_PART"]

# The assertion a commit fails with if a step's pieces are done on a ps in part: never an
# input's fault, but a bug (`key_tables._KeyShard.commit`; the run keeps it from happening).
COMMITTED_IN_PART = "tf2_mapreduce: a step's pieces were committed in part"


class RunTable(tf.lookup.experimental.MutableHashTable):
    """A table of int64 counts by string key (missing keys 0) on a ps, whose resource
    is named `shared_name`, and its commit (`commit`). The native op library's
    `Tf2MapreduceKeyCountTable` where this process has it (`native.load()`; the client
    checks that every task does), else TensorFlow's `MutableHashTable`: both take
    TensorFlow's lookup, insert, export and import ops, so a checkpoint is the same.

    Why its name: TF names a table made eagerly "table_<n>", n counting the tables this
    process has made, so a new coordinator process makes the same names again, and on a
    ps that outlived the previous one gets that process's table with its counts.
    (Variables do not have the flaw: the runtime names eager ones uniquely.)

    Why our own (native/key_count_table.cc): a commit changes all of a step's keys, most
    of them in the table already. MutableHashTable looks each up, then inserts it, in a
    node map: a third of a statistics job's CPU. `DenseHashTable` grows as if each key
    inserted were new: a float feature's 557,000 bucket keys made it 2M buckets, and the
    ps's peak 140 MB more than the node map's (1 GB of stats, measured).
    """

    def __init__(self, shared_name, name="MutableHashTable"):
        from tf2_mapreduce import native

        self._run_shared_name = shared_name
        self.library = native.load()
        super().__init__(tf.string, tf.int64, default_value=0, name=name)

    def _create_resource(self):
        self._shared_name = self._run_shared_name
        if self.library is None:
            return super()._create_resource()
        handle = self.library.tf2_mapreduce_key_count_table(shared_name=self._shared_name, name=self._name)
        # What the base class's export and checkpoint name themselves after.
        self._table_name = None if tf.executing_eagerly() else handle.op.name.split("/")[-1]
        return handle

    def pack(self, keys):
        """`keys` (a string vector) in the form `commit` takes them: for our table, their
        bytes end to end and their lengths (a string tensor travels to a ps as a protobuf
        string per key: parsing a float feature's 557,000 bucket keys took the ps 60 MB,
        measured); for TensorFlow's, as they are. Made where the keys are, on the worker."""
        if self.library is None:
            return keys
        return tf.io.decode_raw(tf.strings.reduce_join(keys), tf.uint8), tf.strings.length(keys)

    def commit(self, packed, deltas, markers):
        """Adds `deltas` to the counts of the keys `packed` (`pack`) unless the first
        `markers` keys (done markers, whose deltas are 1) are in the table; True if it
        did. All or nothing: one kernel (a step's ps part can stop between two ops when
        its worker dies), whose writes are values read under the caller's lock where it
        is TensorFlow's table. Raises (`COMMITTED_IN_PART`) if some of the
        markers are in and some not: a bug."""
        if self.library is not None:
            key_bytes, key_lengths = packed
            return self.library.tf2_mapreduce_key_count_commit(
                self.resource_handle, key_bytes, key_lengths, deltas, markers
            )
        keys = packed
        old = self.lookup(keys)
        done = tf.reduce_sum(old[:markers])
        # A step's pieces are committed together, so a step finds all of them done (it
        # is a re-run) or none.
        whole = tf.debugging.Assert(
            tf.logical_or(done == 0, done == tf.cast(markers, tf.int64)),
            [COMMITTED_IN_PART, self.resource_handle.device],
        )

        def apply():
            with tf.control_dependencies([self.insert(keys, old + deltas)]):
                return tf.constant(True)

        with tf.control_dependencies([whole]):
            return tf.cond(done == 0, apply, lambda: tf.constant(False))
