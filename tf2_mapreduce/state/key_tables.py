"""Per-key state on the ps tasks: an exact int64 sum per key, one table per ps, each
piece's counts committed exactly once with a done marker in the same table insert.
"""

import heapq

import numpy as np
import tensorflow as tf

from tf2_mapreduce.errors import ClusterError
from tf2_mapreduce.state import view_chunks
from tf2_mapreduce.state.base import CheckpointState, Figures, destroy, run_function
from tf2_mapreduce.state.count_table import RunTable

__all__ = ["KeyTables"]

# How a per-key shard's one table holds everything a commit changes: the job's keys, a
# done marker per piece, and the shard's figures (its total, the pieces and the bytes it
# has committed), told apart by their first byte, so that one insert applies a whole
# commit (_KeyShard.commit says why it must).
_KEY, _DONE, _TOTAL, _PIECES, _BYTES = b"k", b"d", b"t", b"p", b"b"
_FIGURES = [_TOTAL, _PIECES, _BYTES]


def _markers(ids):
    return tf.strings.join([_DONE, tf.strings.as_string(ids)])


class _KeyShard:
    """One ps's part of a `KeyTables`: one table, and the critical section that makes a
    commit to it atomic."""

    def __init__(self, shard, device, num_pieces, run_id, counted, reserved):
        self.device = device
        self.num_pieces = num_pieces
        self._counted, self._reserved = counted, reserved
        prefix = "tf2_mapreduce/%s/" % run_id
        with tf.device(device):
            self.table = RunTable(prefix + "table_%d" % shard, name="table_%d" % shard)
            self.lock = tf.CriticalSection(name="commit_%d" % shard, shared_name=prefix + "commit_%d" % shard)
            # A copy taken inside the critical section, for consistent checkpoints.
            self.saved_table = RunTable(prefix + "saved_table_%d" % shard)
            # The entries being read out: a filtered export of the table.
            self.view_keys = tf.Variable(tf.constant([], tf.string), shape=tf.TensorShape([None]), trainable=False)
            self.view_counts = tf.Variable(tf.constant([], tf.int64), shape=tf.TensorShape([None]), trainable=False)

    def commit(self, ids, keys, counts, piece_bytes):
        """Adds `counts` to `keys`, marks pieces `ids` done and counts them and their
        `piece_bytes` in the shard's figures, unless they are done.

        All or nothing, in one kernel (`RunTable.commit`). A step is a graph split across
        the worker and the ps, and the ps part can stop between two ops when the worker
        dies (a killed worker once left a shard's total counted twice and its table
        once, with separate table, flags and total). One kernel runs whole or not at
        all. Everything it writes is on the ps before the lock is
        taken: the lock waits for its inputs, so a worker that stops mid-step (a
        SIGSTOP) cannot hold it while the ps waits for that worker's tensors.
        """
        # Made on the worker, so that the ps (one for every worker) holds no copy of a
        # step's keys but the one it receives (a float feature's buckets: 500,000).
        all_keys = tf.concat([_markers(ids), _FIGURES, tf.strings.join([_KEY, keys])], 0)
        packed = self.table.pack(all_keys)
        figures = [self._counted(keys, counts), tf.size(ids, out_type=tf.int64), tf.reduce_sum(piece_bytes)]
        deltas = tf.concat([tf.ones_like(ids), figures, counts], 0)
        with tf.device(self.device):
            # Received here before the lock is taken (an identity copies nothing): the
            # lock waits for ops on the ps, not for a worker's.
            n = tf.size(ids, out_type=tf.int64)
            packed, deltas = tf.nest.map_structure(tf.identity, (packed, deltas))

        def update():
            with tf.device(self.device):
                return self.table.commit(packed, deltas, n)

        return self.lock.execute(update)

    def done(self):
        """Which pieces this shard has committed, as a bool vector."""
        with tf.device(self.device):
            return self.table.lookup(_markers(tf.range(self.num_pieces, dtype=tf.int64))) > 0

    def figures(self):
        """[total, pieces, bytes, distinct keys] committed to this shard, as an int64
        vector, in a few lookups whatever the number of pieces. Read in the commit's
        critical section, as one state: read apart, a commit between two reads showed
        its markers as distinct keys (a progress report above the final count). Distinct
        keys are the table's entries but the pieces' markers, the figures and the
        reserved keys (a reducer's own bookkeeping, not keys of the job)."""

        def read():
            with tf.device(self.device):
                figures = tf.ensure_shape(self.table.lookup(tf.constant(_FIGURES)), [len(_FIGURES)])
                total, pieces, bytes_ = tf.unstack(figures)
                distinct = self.table.size() - pieces - len(_FIGURES) * tf.minimum(pieces, 1)
                if self._reserved:
                    found = self.table.lookup(tf.strings.join([_KEY, tf.constant(self._reserved)])) > 0
                    distinct -= tf.reduce_sum(tf.cast(found, tf.int64))
                return tf.stack([total, pieces, bytes_, distinct])

        return self.lock.execute(read)

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

    def make_sorted_view(self, prefixes, orders, min_count):
        """The view: the entries of keys beginning with each of `prefixes`, that cut off,
        each part sorted here, on the ps, in its order of `orders`, end to end
        (`native/sorted_entries.cc`), the table exported once; each part's counts' sum,
        then where each part begins and the view's end."""
        with tf.device(self.device):
            keys, counts = self.table.export()
            sort = self.table.library.tf2_mapreduce_sorted_entries
            terms, counts, totals, splits = sort(keys, counts, prefixes, orders, min_count)
            self.view_keys.assign(terms)
            self.view_counts.assign(counts)
            return tf.concat([totals, splits], 0)

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


class KeyTables:
    """An exact int64 sum per key: one table per ps, each key on the ps its hash picks, so
    the reduce scales with the number of ps tasks.

    Exactly-once per piece: each ps's table also holds a done marker per piece. A map
    step combines its keys on the worker (unique + segment sum), then on each ps,
    inside a `tf.CriticalSection` there, checks its pieces' markers and, if they are
    not set, adds its counts and sets them, in one insert (a bare lookup + insert
    loses concurrent updates, docs/runtime.md). A re-run step finds its markers set
    and adds nothing. A piece is done when every ps has its marker set.
    """

    def __init__(self, sizes, ps_devices, run_id, counted, reserved=()):
        """`counted(keys, counts)`: what a commit adds to the total (TF ops, on the ps);
        `reserved`: keys that hold a reducer's own counts, left out of the distinct keys.
        Resources are named for the run `run_id`."""
        self.num_pieces = len(sizes)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.shards = [
            _KeyShard(shard, device, self.num_pieces, run_id, counted, list(reserved))
            for shard, device in enumerate(ps_devices)
        ]
        self._done = run_function(self._done_fn)
        self._figures = run_function(lambda: tf.stack([shard.figures() for shard in self.shards]))
        self._snapshot = run_function(lambda: tf.stack([shard.snapshot() for shard in self.shards]))
        self._make_views = run_function(lambda min_count: [shard.make_view(min_count) for shard in self.shards])
        self._chunks = [run_function(shard.view_chunk) for shard in self.shards]
        if self.sorts:
            self._make_sorted = run_function(
                lambda *how: tf.stack([shard.make_sorted_view(*how) for shard in self.shards])
            )
        self._top = run_function(lambda k: [shard.top_counts(k) for shard in self.shards])
        self.released = False
        self._sizes = run_function(
            lambda: [tf.stack([shard.table.size(), shard.saved_table.size()]) for shard in self.shards]
        )

    def checkpoint_state(self):
        save = {"table_%d" % n: shard.saved_table for n, shard in enumerate(self.shards)}
        restore = {"table_%d" % n: shard.table for n, shard in enumerate(self.shards)}
        return CheckpointState(save=save, restore=restore, prepare=self._snapshot)

    def commit(self, ids, output, piece_bytes):
        """Adds a step's (keys, counts) for pieces `ids` (of `piece_bytes` each), once;
        called in the scheduled step. Each key must be there once (the reducer combined
        them on the worker): a table insert of a key given twice keeps one of its counts."""
        keys, counts = output
        num_ps = len(self.shards)
        if num_ps == 1:
            shard_keys, shard_sums = [keys], [counts]
        else:
            shard_of = tf.cast(tf.strings.to_hash_bucket_fast(keys, num_ps), tf.int32)
            shard_keys = tf.dynamic_partition(keys, shard_of, num_ps)
            shard_sums = tf.dynamic_partition(counts, shard_of, num_ps)
        for shard, keys_here, sums_here in zip(self.shards, shard_keys, shard_sums):
            # Every shard sees every piece, with or without keys for it: it must set
            # the pieces' markers either way.
            shard.commit(ids, keys_here, sums_here, piece_bytes)

    def _done_fn(self):
        done = tf.ones([self.num_pieces], tf.bool)
        where = tf.zeros([self.num_pieces], tf.int64)  # bit n: done on shard n
        for n, shard in enumerate(self.shards):
            shard_done = shard.done()
            done = tf.logical_and(done, shard_done)
            where += tf.cast(shard_done, tf.int64) * (1 << n)
        return done, tf.where(done, tf.zeros_like(where), where)

    def done(self):
        """Which pieces are committed on every ps, as a bool array in piece order; reads
        every piece's marker."""
        return self._done()[0].numpy()

    def partial(self):
        """For each piece committed on some ps tasks but not on all, which: a bit per ps
        (bit n: ps n), 0 for every other piece; an int array in piece order.

        A step commits to each ps apart, so a checkpoint (each ps's table copied in its
        own critical section) can hold a step's commit on one ps and not on another, and
        so can the tables after a round that failed mid-step. On a ps, a step's pieces are
        all done or none (`_KeyShard.commit`): such a piece shares steps only with pieces
        done on the same ps tasks.
        """
        return self._done()[1].numpy()

    def figures(self):
        """The figures so far, from a few keys of each ps's table whatever the number of
        pieces (a progress tick read every piece's marker: 1,000,000 of them). A piece is
        done once every ps has committed it, and every step commits its pieces to every
        ps, all or none on each: the pieces done are those of the ps that has committed
        fewest, exactly so whenever every ps holds the same pieces (not while a step is
        between two ps tasks' commits, nor in a run resumed from a checkpoint with some
        pieces on some ps tasks only). A run's end is confirmed by `done()`."""
        figures = self._figures().numpy()
        behind = int(np.argmin(figures[:, 1]))
        return Figures(
            int(figures[behind, 1]), int(figures[behind, 2]), int(figures[:, 0].sum()), int(figures[:, 3].sum())
        )

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
        """Frees these tables on the ps tasks; they cannot be read afterwards."""
        self.released = True
        destroy(handle for shard in self.shards for handle in shard.handles())

    def _readable(self):
        if self.released:
            raise ClusterError(
                "the table was freed on the ps tasks (its cluster was left, or the result "
                "released): read it while the cluster is open"
            )

    def counts_of(self, keys) -> list:
        """The counts of `keys` (bytes), 0 for a key the table does not hold. Blocking: one
        lookup on each ps (a key lives on one; the others give 0)."""
        self._readable()
        wanted = tf.strings.join([_KEY, tf.constant(list(keys), tf.string)])
        counts = np.zeros(len(keys), dtype=np.int64)
        for shard in self.shards:
            with tf.device(shard.device):
                counts += shard.table.lookup(wanted).numpy()
        return counts.tolist()

    def entries(self, min_count=1):
        """Yields every (key bytes, count) with count >= `min_count`, shard by shard, a
        chunk at a time, in no order: the coordinator never holds a whole table."""
        self._readable()
        sizes = self._make_views(tf.constant(min_count, tf.int64))
        for chunk_fn, size in zip(self._chunks, sizes):
            yield from view_chunks.entries(view_chunks.chunks(chunk_fn, 0, int(size)))

    @property
    def sorts(self) -> bool:
        """Whether the ps tasks sort this table's entries (`sorted_entries`): the native ops."""
        return self.shards[0].table.library is not None

    def sorted_entries(self, parts: list, min_count=1):
        """For each of `parts`, (prefix bytes, order, merge key), (the sum of their counts,
        an iterator of chunks of them: (keys, counts) lists) of every key beginning with the
        prefix (all of one length) that counts at least `min_count`, the prefix cut off,
        sorted in the order (`native/sorted_entries.cc` says how) on each ps, the table
        exported once, and merged here by the merge key (of an entry) where several ps hold
        them; None without the native ops. Blocking; the iterators read the ps tasks as
        they go, and are valid until this state's next read."""
        self._readable()
        if not self.sorts:
            return None
        prefixes = tf.constant([_KEY + prefix for prefix, _, _ in parts], tf.string, [len(parts)])
        orders = tf.constant([order for _, order, _ in parts], tf.int32, [len(parts)])
        made = self._make_sorted(prefixes, orders, tf.constant(min_count, tf.int64)).numpy()
        totals, splits = made[:, : len(parts)], made[:, len(parts) :]
        sorted_parts = []
        for p, (_, _, merge_key) in enumerate(parts):
            streams = [
                view_chunks.chunks(chunk_fn, int(begin), int(end))
                for chunk_fn, begin, end in zip(self._chunks, splits[:, p], splits[:, p + 1])
            ]
            # Summed as Python's ints: each ps checked its own sum fits int64, not theirs.
            sorted_parts.append((sum(int(total) for total in totals[:, p]), view_chunks.merged(streams, merge_key)))
        return sorted_parts

    def top(self, k, min_count=1):
        """The `k` keys with the largest counts, ties by key bytes, as [(key, count)].

        Only keys at least as frequent as the k-th largest count are fetched."""
        self._readable()
        counts = sorted((int(c) for shard in self._top(tf.constant(k)) for c in shard.numpy()), reverse=True)
        if not counts:
            return []
        threshold = max(min_count, counts[min(k, len(counts)) - 1])
        return heapq.nsmallest(k, self.entries(threshold), key=lambda entry: (-entry[1], entry[0]))
