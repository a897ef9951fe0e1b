"""Per-piece state on the ps tasks: a slot per piece of input holding its value, written
so that each piece's result is committed exactly once however often its map step runs.
"""

import numpy as np
import tensorflow as tf

from tf2_mapreduce.state.base import CheckpointState, Figures, destroy, run_function

__all__ = ["PieceSlots"]


class PieceSlots:
    """An exact fold (sum, min, max...) of one int64 value (or fixed-size vector of
    `width`) per piece, sharded over the ps tasks: `fold(values)` folds values along their first axis
    with TF ops (associative, commutative, with `identity`), for the figures so far.

    Piece i owns row i, placed on ps i % P at offset i // P: a committed marker (1; 0
    while pending), then the piece's value. A map step writes its pieces' rows with
    `scatter_update` (never `scatter_add`, which is not atomic on the ps,
    docs/runtime.md), so running it twice writes the same rows again: the result is
    exactly-once however often a step is retried. (A `Records` job's row names the
    attempt that wrote the piece's files: the last written wins, and each names whole files.) One update writes marker and value
    together, so any snapshot of the rows is a consistent set of finished pieces with
    their values, whatever the values are.

    Created outside the strategy's scope on purpose: ParameterServerStrategy places
    variables round-robin and ignores device scopes, and the sharding here needs
    row i on a known ps.
    """

    def __init__(self, sizes, ps_devices, width, fold, identity):
        """`sizes`: each piece's byte size, for progress."""
        self.num_pieces = len(sizes)
        self.width = width
        self._fold, self._identity = fold, identity
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
        self._figures = run_function(self._figures_fn)

    def checkpoint_state(self):
        slots = {"slots_%d" % shard: slots for shard, slots in enumerate(self.slots)}
        return CheckpointState(save=slots, restore=slots)

    def commit(self, ids, values, piece_bytes=None):
        """Writes `values[k]` as the result of piece `ids[k]`; idempotent. `piece_bytes`
        is not needed: a piece's row holds its done flag, and the ps its size.

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

    def _figures_fn(self):
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
                folded.append(self._fold(tf.where(mask, values, tf.constant(self._identity, tf.int64))))
        return pieces, bytes_, self._fold(tf.stack(folded))

    def figures(self):
        """Pieces done, bytes done and the value so far (numpy), folded on the ps (one RPC
        each). Safe to call while map steps run: each piece is either committed or not."""
        pieces, bytes_, value = self._figures()
        return Figures(int(pieces), int(bytes_), value.numpy())

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
        """Which ps tasks hold each piece committed on some only (see `tables.KeyTables.partial`):
        none, a piece's row lives on one."""
        return np.zeros(self.num_pieces, np.int64)

    def forget(self, ids):
        """Empties the rows of pieces `ids` (a piece whose committed result was lost: it is
        mapped again). Blocking; not while map steps run."""
        ids = np.asarray(ids, dtype=np.int64)
        num_ps = len(self.slots)
        for shard, slots in enumerate(self.slots):
            mine = ids[ids % num_ps == shard] // num_ps
            if len(mine):
                rows = tf.zeros([len(mine), slots.shape[1]], tf.int64)
                slots.scatter_update(tf.IndexedSlices(rows, tf.constant(mine)))

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
        destroy(v.handle for v in self.slots + self.sizes)
