"""Reducers of one value per piece of input: an exact fold (sum, min, max, or one's own)
of int64 values or fixed-size int64 vectors, each file's value folded from its pieces'."""

from dataclasses import dataclass

import numpy as np

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.reducers.base import (
    Collected,
    MapOutputError,
    PerFile,
    Reducer,
    as_tensor,
    assert_in_graph,
    count_text,
    label,
)

__all__ = ["Fold", "Sum", "VectorSum", "Min", "Max"]

INT64_MIN = np.iinfo(np.int64).min
INT64_MAX = np.iinfo(np.int64).max
# Integer types that widen to int64 without loss; any other is refused, not cast.
_WIDENED = ("int8", "int16", "int32", "uint8", "uint16", "uint32")


class Fold(Reducer):
    """A value per piece of input, folded into each file's value and into the job's: the
    base of `Sum`, `VectorSum`, `Min`, `Max`, and of a reducer of one's own.

    A subclass gives `fold(values)`, TensorFlow ops that fold int64 values along their
    first axis (shape [k] to [], or [k, width] to [width]), and the fold's `identity`
    (an int, or a tuple of `width` ints). The fold must be associative and commutative,
    so that pieces fold in any order, on the workers (a streamed file's batches), on the
    ps tasks (the value so far) and on the coordinator (each file's value, and the job's).
    `width`: None for a scalar value, else the length of its vector. `names` (optional):
    a name per component, for the result's fields.

    The job's `map_fn(texts)` returns one value per text (or per record): int64 of shape
    [n] (or [n, width]); narrower integers are widened, anything else fails the job
    with a message naming what it returned. Each piece's value is committed once to a
    slot of its own on a ps (`state.slots`): exactly once however often a step runs.
    """

    width = None
    identity = 0
    names = ()

    def fold(self, values):
        raise NotImplementedError

    def _shape(self):
        return [self.width] if self.width else []

    def _identity(self):
        return np.broadcast_to(np.asarray(self.identity, np.int64), self._shape())

    def check(self, output, items, job, item="text"):
        needs = "%s needs one int64 per %s, shape [n%s]" % (
            label(self),
            item,
            ", %d" % self.width if self.width else "",
        )
        output = as_tensor(output, job, needs)
        if output.dtype != tf.int64:
            if output.dtype.name not in _WIDENED:
                raise MapOutputError("job %s: map_fn returned %s values, but %s" % (job, output.dtype.name, needs))
            output = tf.cast(output, tf.int64)
        # A whole piece's value (`Job.map_input="dataset"`) is one value, else one per item.
        wanted = ([] if items is None else [items]) + ([self.width] if self.width else [])
        static = output.shape
        if static.rank is not None and (
            static.rank != len(wanted) or (self.width and static[-1] not in (None, self.width))
        ):
            raise MapOutputError("job %s: map_fn returned values of shape %s, but %s" % (job, static, needs))
        got = tf.shape(output, out_type=tf.int64)
        ok = tf.reduce_all(tf.equal(got, tf.cast(tf.stack(wanted), tf.int64))) if wanted else tf.constant(True)
        text = tf.strings.join(
            ["job %s: map_fn returned values of shape " % job, count_text(got, items, item), ", but " + needs]
        )
        return assert_in_graph(ok, text, output)

    def spec(self):
        return tf.TensorSpec(self._shape(), tf.int64)

    def combine(self, output):
        return output[0]

    def combine_step(self, output):
        return output

    def start(self):
        return tf.constant(self._identity())

    def add(self, value, output):
        return self.fold(tf.concat([value[None], output], 0))

    def create_state(self, sizes, ps_devices, run_id):
        from tf2_mapreduce.state.slots import PieceSlots

        # Named for the run by TensorFlow's runtime: variables, unlike tables, always are.
        return PieceSlots(sizes, ps_devices, self.width, self.fold, self.identity)

    def as_python(self, folded):
        """A folded value as Python: an int (None for a fold whose identity is no value,
        a min or max of nothing), or a tuple for a vector."""
        if self.width:
            return tuple(int(x) for x in folded)
        folded = int(folded)
        return None if self.identity != 0 and folded == self.identity else folded

    def value(self, figures):
        return self.as_python(figures.value)

    def _folded(self, values):
        if not len(values):
            return self._identity()
        return self.fold(tf.constant(values)).numpy()

    def collect(self, state, plan, piece_done):
        values = state.values()
        files = plan.piece_files()
        done = np.flatnonzero(piece_done)
        per_file = np.empty((len(plan.files),) + values.shape[1:], dtype=np.int64)
        per_file[...] = self._identity()
        # A file's pieces are consecutive, and most files are one piece: those are copied,
        # the few of several folded.
        pieces_per_file = np.bincount(files[done], minlength=len(plan.files))
        single = done[pieces_per_file[files[done]] == 1]
        per_file[files[single]] = values[single]
        for f in np.flatnonzero(pieces_per_file > 1).tolist():
            per_file[f] = self._folded(values[done[files[done] == f]])
        total = self.as_python(self._folded(values[done]))
        return Collected(total, None, PerFile(plan.files, per_file, plan.file_done(piece_done), self.as_python))


@dataclass(frozen=True)
class Sum(Fold):
    """An exact int64 total. `map_fn(texts)` returns one int64 per text, shape [n];
    any int64, negative ones included."""

    unit: str  # what is counted: "words"

    def fold(self, values):
        return tf.reduce_sum(values, axis=0)


@dataclass(frozen=True)
class VectorSum(Fold):
    """Exact int64 totals of a fixed-size vector. `map_fn(texts)` returns shape [n, len(names)]."""

    names: tuple  # one label per component: ("lines", "words", "bytes")

    @property
    def width(self):
        return len(self.names)

    @property
    def identity(self):
        return (0,) * len(self.names)

    def fold(self, values):
        return tf.reduce_sum(values, axis=0)


@dataclass(frozen=True)
class Max(Fold):
    """The largest int64 value: `map_fn(texts)` returns one per text, shape [n]. A file's
    value is its pieces' largest; None while no piece is done."""

    name: str  # what the value is: "longest line"
    unit: str  # its unit: "bytes"
    identity = INT64_MIN

    def fold(self, values):
        return tf.reduce_max(values, axis=0)


@dataclass(frozen=True)
class Min(Fold):
    """The smallest int64 value: `map_fn(texts)` returns one per text, shape [n]. A file's
    value is its pieces' smallest; None while no piece is done."""

    name: str
    unit: str
    identity = INT64_MAX

    def fold(self, values):
        return tf.reduce_min(values, axis=0)
