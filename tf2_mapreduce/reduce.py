"""A run's state on the ps tasks, which the reducers (`reducers.py`) ask for: it commits
the result of each piece of input (a file, or a part of a large one) exactly once.
ClusterCoordinator.schedule() is at-least-once, so a commit must be idempotent: a map
step re-run after its worker died must not count its pieces twice.

A reducer's state belongs to one run: every resource it places on a ps is new, named
for that run, so nothing an earlier coordinator left on a server that outlived it
(a kept server, a rerun after a crash) can reach its result; `leftover` verifies it.
"""

import heapq
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

__all__ = ["Stats", "CheckpointState", "PerPieceState", "KeyedSum", "WorkerSteps", "ChangedFiles", "for_job"]

CHUNK = 200_000  # table entries fetched from a ps at a time


@dataclass(frozen=True)
class Stats:
    pieces_done: int
    bytes_done: int
    value: object  # the sum so far: an int, or a tuple for a vector
    distinct: int = None  # keys so far, for per-key sums


@dataclass(frozen=True)
class CheckpointState:
    """What to checkpoint: objects saved by name, the live objects restored under the
    same names, and a function that makes the saved ones consistent first."""

    save: dict
    restore: dict
    prepare: object = None


def for_job(job, sizes, ps_devices, run_id):
    """The state on the ps tasks that `job.reducer` asks for, over pieces of byte sizes
    `sizes`, named for the run `run_id` (unique to the run)."""
    return job.reducer.new_state(sizes, ps_devices, run_id)


def _destroy(handles):
    """Frees resources on the ps tasks now, rather than when their server exits:
    a server kept for later jobs would otherwise hold every finished run's state."""
    for handle in handles:
        tf.raw_ops.DestroyResourceOp(resource=handle, ignore_lookup_error=True)


class _RunTable(tf.lookup.experimental.MutableHashTable):
    """A MutableHashTable whose resource on its ps is named `shared_name`.

    Why: TF names a table made eagerly "table_<n>", n counting the tables this process
    has made, so a new coordinator process makes the same names again, and on a ps
    that outlived the previous one gets that process's table with its counts.
    (Variables do not have the flaw: the runtime names eager ones uniquely.)
    """

    def __init__(self, shared_name, name="MutableHashTable"):
        self._run_shared_name = shared_name
        super().__init__(tf.string, tf.int64, default_value=0, name=name)

    def _create_resource(self):
        self._shared_name = self._run_shared_name
        return super()._create_resource()


class PerPieceState:
    """An exact fold (sum, min, max...) of one int64 value (or fixed-size vector) per
    piece, sharded over the ps tasks; `reducer` (a `reducers.PerPiece`) says which fold.

    Piece i owns row i, placed on ps i % P at offset i // P: a committed marker (1; 0
    while pending), then the piece's value. A map step writes its pieces' rows with
    `scatter_update` (never `scatter_add`, which is not atomic on the ps,
    docs/runtime.md), so running it twice writes the same rows again: the result is
    exactly-once however often a step is retried. One update writes marker and value
    together, so any snapshot of the rows is a consistent set of finished pieces with
    their values, whatever the values are.

    Created outside the strategy's scope on purpose: ParameterServerStrategy places
    variables round-robin and ignores device scopes, and the sharding here needs
    row i on a known ps.
    """

    def __init__(self, sizes, ps_devices, reducer):
        """`sizes`: each piece's byte size, for progress."""
        self.num_pieces = len(sizes)
        self.reducer = reducer
        self.width = reducer.width
        self.ps_devices = list(ps_devices)
        num_ps = len(self.ps_devices)
        sizes = np.asarray(sizes, dtype=np.int64)
        self.slots, self.sizes = [], []
        for shard, device in enumerate(self.ps_devices):
            shard_sizes = sizes[shard::num_ps]
            with tf.device(device):
                self.slots.append(
                    tf.Variable(
                        tf.zeros([len(shard_sizes), 1 + (self.width or 1)], tf.int64),
                        trainable=False,
                        name="slots_%d" % shard,
                    )
                )
                self.sizes.append(tf.Variable(shard_sizes, trainable=False, name="sizes_%d" % shard))
        self._stats = tf.function(self._stats_fn, autograph=False)

    def checkpoint_state(self):
        slots = {"slots_%d" % shard: slots for shard, slots in enumerate(self.slots)}
        return CheckpointState(save=slots, restore=slots)

    def commit(self, ids, values):
        """Writes `values[k]` as the result of piece `ids[k]`; idempotent.

        Called inside the scheduled `tf.function` (on a worker); each shard's
        update is one `scatter_update` on its ps.
        """
        rows = tf.concat([tf.ones_like(ids)[:, None], tf.reshape(values, [tf.size(ids), -1])], axis=1)
        num_ps = len(self.slots)
        shard_of = tf.cast(ids % num_ps, tf.int32)
        offsets = tf.dynamic_partition(ids // num_ps, shard_of, num_ps)
        shard_rows = tf.dynamic_partition(rows, shard_of, num_ps)
        for slots, offset, row in zip(self.slots, offsets, shard_rows):
            slots.scatter_update(tf.IndexedSlices(row, offset))

    def _value(self, rows):
        return rows[:, 1:] if self.width else rows[:, 1]

    def _stats_fn(self):
        pieces = bytes_ = tf.constant(0, tf.int64)
        folded = []
        for device, slots, sizes in zip(self.ps_devices, self.slots, self.sizes):
            with tf.device(device):
                rows = slots.read_value()
                done = rows[:, 0] > 0
                pieces += tf.reduce_sum(tf.cast(done, tf.int64))
                bytes_ += tf.reduce_sum(tf.where(done, sizes, 0))
                values = self._value(rows)
                mask = done[:, None] if self.width else done
                folded.append(
                    self.reducer.fold_tf(tf.where(mask, values, tf.constant(self.reducer.identity, tf.int64)), axis=0)
                )
        return pieces, bytes_, self.reducer.fold_tf(tf.stack(folded), axis=0)

    def stats(self):
        """Pieces done, bytes done and the value so far, folded on the ps (one RPC each).

        Safe to call while map steps run: each piece is either committed or not.
        """
        pieces, bytes_, value = self._stats()
        return Stats(int(pieces), int(bytes_), self.reducer.to_python(value.numpy()))

    def _rows(self):
        out = np.zeros([self.num_pieces, 1 + (self.width or 1)], dtype=np.int64)
        for shard, slots in enumerate(self.slots):
            out[shard :: len(self.slots)] = slots.numpy()
        return out

    def values(self):
        """Every piece's value in piece order (rows for a vector); meaningless where
        `done()` is False."""
        return self._value(self._rows())

    def done(self):
        """Which pieces are committed, as a bool array in piece order."""
        return self._rows()[:, 0] > 0

    def partial(self):
        """Which pieces are committed on some ps tasks only: none, a piece's row lives on one."""
        return np.zeros(self.num_pieces, bool)

    def file_values(self, piece_file, num_files, piece_done):
        """Each file's value (row): its done pieces folded; `piece_file` maps piece to file."""
        values = self.values()
        out = np.full((num_files,) + values.shape[1:], self.reducer.identity, dtype=np.int64)
        self.reducer.fold_np().at(out, piece_file[piece_done], values[piece_done])
        return out

    def reset(self):
        """Empties every row again. Blocking; not while map steps run."""
        for slots in self.slots:
            slots.assign(tf.zeros_like(slots))

    def leftover(self):
        """None while no piece is committed, else where the first one is. Blocking."""
        done = self.done()
        if not done.any():
            return None
        piece = int(np.argmax(done))
        return "the slot of piece %d on %s" % (piece, self.ps_devices[piece % len(self.slots)])

    def release(self):
        """Frees this state on the ps tasks; it cannot be read afterwards."""
        _destroy(v.handle for v in self.slots + self.sizes)


# How a per-key shard's one table holds everything a commit changes: the job's keys, a
# done marker per piece and the shard's total, told apart by their first byte, so that
# one insert applies a whole commit (_KeyShard.commit says why it must).
_KEY, _DONE, _TOTAL = b"k", b"d", b"t"


def _markers(ids):
    return tf.strings.join([_DONE, tf.strings.as_string(ids)])


class _KeyShard:
    """One ps's part of a `KeyedSum`: one table, and the critical section that makes a
    commit to it atomic."""

    def __init__(self, shard, device, num_pieces, run_id, reducer):
        self.device = device
        self.num_pieces = num_pieces
        self.reducer = reducer
        prefix = "tf2_mapreduce/%s/" % run_id
        with tf.device(device):
            self.table = _RunTable(prefix + "table_%d" % shard, name="table_%d" % shard)
            self.lock = tf.CriticalSection(name="commit_%d" % shard, shared_name=prefix + "commit_%d" % shard)
            # A copy taken inside the critical section, for consistent checkpoints.
            self.saved_table = _RunTable(prefix + "saved_table_%d" % shard)
            # The entries being read out: a filtered export of the table.
            self.view_keys = tf.Variable(tf.constant([], tf.string), shape=tf.TensorShape([None]), trainable=False)
            self.view_counts = tf.Variable(tf.constant([], tf.int64), shape=tf.TensorShape([None]), trainable=False)

    def commit(self, ids, keys, counts):
        """Adds `counts` to `keys` and marks pieces `ids` done, unless they are done.

        All or nothing, in one table insert. A step is a graph split across the worker
        and the ps, and the ps part can stop between two ops when the worker dies (a
        killed worker once left a shard's total counted twice and its table once,
        with separate table, flags and total). An insert is one kernel: it runs whole
        or not at all, and it writes values read under the lock, so running it twice
        writes the same values. Everything it writes is made on the ps before the lock
        is taken: the lock waits for its inputs, so a worker that stops mid-step (a
        SIGSTOP) cannot hold it while the ps waits for that worker's tensors.
        """
        with tf.device(self.device):
            n = tf.size(ids)
            all_keys = tf.concat([_markers(ids), [_TOTAL], tf.strings.join([_KEY, keys])], 0)
            deltas = tf.concat([tf.ones_like(ids), [self.reducer.counted(keys, counts)], counts], 0)

        def update():
            with tf.device(self.device):
                old = self.table.lookup(all_keys)
                done = tf.reduce_sum(old[:n])
                # A step's pieces are committed together, so a step finds all of them
                # done (it is a re-run) or none; anything else would be a bug.
                whole = tf.debugging.Assert(
                    tf.logical_or(done == 0, done == tf.cast(n, tf.int64)),
                    ["tf2_mapreduce: a step's pieces were committed in part", self.device],
                )

                def apply():
                    with tf.control_dependencies([self.table.insert(all_keys, old + deltas)]):
                        return tf.constant(True)

                with tf.control_dependencies([whole]):
                    return tf.cond(done == 0, apply, lambda: tf.constant(False))

        return self.lock.execute(update)

    def done(self):
        """Which pieces this shard has committed, as a bool vector."""
        with tf.device(self.device):
            return self.table.lookup(_markers(tf.range(self.num_pieces, dtype=tf.int64))) > 0

    def total(self):
        with tf.device(self.device):
            return self.table.lookup(tf.constant([_TOTAL]))[0]

    def distinct(self, done):
        """Keys in the table: its entries but the markers of the `done` pieces, the total
        and the reducer's own bookkeeping keys (`KeySum.reserved_keys`)."""
        with tf.device(self.device):
            markers = tf.reduce_sum(tf.cast(done, tf.int64))
            distinct = self.table.size() - markers - tf.minimum(markers, 1)
            reserved = self.reducer.reserved_keys()
            if reserved:
                found = self.table.lookup(tf.strings.join([_KEY, tf.constant(reserved)])) > 0
                distinct -= tf.reduce_sum(tf.cast(found, tf.int64))
            return distinct

    def snapshot(self):
        def copy():
            with tf.device(self.device):
                keys, counts = self.table.export()
                imported = tf.raw_ops.LookupTableImportV2(
                    table_handle=self.saved_table.resource_handle, keys=keys, values=counts
                )
                with tf.control_dependencies([imported]):
                    return tf.constant(True)

        return self.lock.execute(copy)

    def export(self):
        """The job's (keys, counts), without the markers and the total."""
        # export() leaves the rank unknown; keys are scalars, so both are vectors.
        keys, counts = self.table.export()
        keys, counts = tf.ensure_shape(keys, [None]), tf.ensure_shape(counts, [None])
        ours = tf.strings.substr(keys, 0, 1) == _KEY
        keys, counts = tf.boolean_mask(keys, ours), tf.boolean_mask(counts, ours)
        lengths = tf.strings.length(keys)
        return tf.strings.substr(keys, tf.ones_like(lengths), lengths - 1), counts

    def make_view(self, min_count):
        with tf.device(self.device):
            keys, counts = self.export()
            keep = counts >= min_count
            self.view_keys.assign(tf.boolean_mask(keys, keep))
            self.view_counts.assign(tf.boolean_mask(counts, keep))
            return tf.size(self.view_keys)

    def view_chunk(self, start, end):
        with tf.device(self.device):
            return self.view_keys[start:end], self.view_counts[start:end]

    def top_counts(self, k):
        with tf.device(self.device):
            _, counts = self.export()
            return tf.math.top_k(counts, k=tf.minimum(k, tf.size(counts))).values

    def handles(self):
        """Every resource of this shard on its ps (the critical section's mutex is
        left: it is tiny, and a step still in flight may be holding it)."""
        return [self.table.resource_handle, self.saved_table.resource_handle] + [
            v.handle for v in (self.view_keys, self.view_counts)
        ]


class KeyedSum:
    """An exact int64 sum per key: one `MutableHashTable` per ps, each key on the ps
    its hash picks, so the reduce scales with the number of ps tasks.

    Exactly-once per piece: each ps's table also holds a done marker per piece. A map
    step combines its keys on the worker (unique + segment sum), then on each ps,
    inside a `tf.CriticalSection` there, checks its pieces' markers and, if they are
    not set, adds its counts and sets them, in one insert (a bare lookup + insert
    loses concurrent updates, docs/runtime.md). A re-run step finds its markers set
    and adds nothing. A piece is done when every ps has its marker set.
    """

    def __init__(self, sizes, ps_devices, run_id, reducer):
        """`reducer`: the job's `reducers.KeySum`, which says what its total counts."""
        self.num_pieces = len(sizes)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.shards = [
            _KeyShard(shard, device, self.num_pieces, run_id, reducer) for shard, device in enumerate(ps_devices)
        ]
        self._stats = tf.function(self._stats_fn, autograph=False)
        self._snapshot = tf.function(lambda: tf.stack([shard.snapshot() for shard in self.shards]), autograph=False)
        self._make_views = tf.function(
            lambda min_count: [shard.make_view(min_count) for shard in self.shards], autograph=False
        )
        self._chunks = [tf.function(shard.view_chunk, autograph=False) for shard in self.shards]
        self._top = tf.function(lambda k: [shard.top_counts(k) for shard in self.shards], autograph=False)
        self._sizes = tf.function(
            lambda: [tf.stack([shard.table.size(), shard.saved_table.size()]) for shard in self.shards], autograph=False
        )

    def checkpoint_state(self):
        save = {"table_%d" % n: shard.saved_table for n, shard in enumerate(self.shards)}
        restore = {"table_%d" % n: shard.table for n, shard in enumerate(self.shards)}
        return CheckpointState(save=save, restore=restore, prepare=self._snapshot)

    def commit(self, ids, output):
        """Adds a step's (keys, counts) for pieces `ids`, once; called in the scheduled step."""
        keys, counts = output
        unique, index = tf.unique(keys)
        sums = tf.math.unsorted_segment_sum(counts, index, tf.size(unique))
        num_ps = len(self.shards)
        shard_of = tf.cast(tf.strings.to_hash_bucket_fast(unique, num_ps), tf.int32)
        shard_keys = tf.dynamic_partition(unique, shard_of, num_ps)
        shard_sums = tf.dynamic_partition(sums, shard_of, num_ps)
        for shard, keys_here, sums_here in zip(self.shards, shard_keys, shard_sums):
            # Every shard sees every piece, with or without keys for it: it must set
            # the pieces' markers either way.
            shard.commit(ids, keys_here, sums_here)

    def _stats_fn(self):
        done = tf.ones([self.num_pieces], tf.bool)
        somewhere = tf.zeros([self.num_pieces], tf.bool)
        total = distinct = tf.constant(0, tf.int64)
        for shard in self.shards:
            shard_done = shard.done()
            done = tf.logical_and(done, shard_done)
            somewhere = tf.logical_or(somewhere, shard_done)
            total += shard.total()
            distinct += shard.distinct(shard_done)
        return done, total, distinct, tf.logical_and(somewhere, tf.logical_not(done))

    def done(self):
        """Which pieces are committed on every ps, as a bool array in piece order."""
        return self._stats()[0].numpy()

    def partial(self):
        """Which pieces are committed on some ps tasks but not on all, as a bool array.

        A step commits to each ps apart, so a checkpoint (each ps's table copied in its
        own critical section) can hold a step's commit on one ps and not on another, and
        so can the tables after a round that failed mid-step. Such a piece must run in a
        step of its own: on a ps, a step's pieces are all done or none (`_KeyShard.commit`).
        """
        return self._stats()[3].numpy()

    def stats(self):
        done, total, distinct, _ = self._stats()
        done = done.numpy()
        return Stats(int(done.sum()), int(self.sizes[done].sum()), int(total), int(distinct))

    def reset(self):
        """Empties every table again. Blocking; not while map steps run."""
        for shard in self.shards:
            with tf.device(shard.device):
                # Importing replaces a table's contents: with nothing, it empties it.
                tf.raw_ops.LookupTableImportV2(
                    table_handle=shard.table.resource_handle,
                    keys=tf.constant([], tf.string),
                    values=tf.constant([], tf.int64),
                )

    def leftover(self):
        """None while every table is empty, else which is not. Blocking."""
        for shard, sizes in zip(self.shards, self._sizes()):
            if sizes.numpy().any():
                return "the table on %s" % shard.device
        return None

    def release(self):
        """Frees this reducer's state on the ps tasks; it cannot be read afterwards."""
        _destroy(handle for shard in self.shards for handle in shard.handles())

    def entries(self, min_count=1):
        """Yields every (key bytes, count) with count >= `min_count`, shard by shard, a
        chunk at a time, in no order: the coordinator never holds a whole table."""
        sizes = self._make_views(tf.constant(min_count, tf.int64))
        for chunk_fn, size in zip(self._chunks, sizes):
            size = int(size)
            for start in range(0, size, CHUNK):
                keys, counts = chunk_fn(tf.constant(start), tf.constant(min(start + CHUNK, size)))
                yield from zip(keys.numpy().tolist(), counts.numpy().tolist())

    def top(self, k, min_count=1):
        """The `k` keys with the largest counts, ties by key bytes, as [(key, count)].

        Only keys at least as frequent as the k-th largest count are fetched."""
        counts = sorted((int(c) for shard in self._top(tf.constant(k)) for c in shard.numpy()), reverse=True)
        if not counts:
            return []
        threshold = max(min_count, counts[min(k, len(counts)) - 1])
        return heapq.nsmallest(k, self.entries(threshold), key=lambda entry: (-entry[1], entry[0]))


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
        _destroy([self.counts.handle])


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
        _destroy([self.sizes.handle])
