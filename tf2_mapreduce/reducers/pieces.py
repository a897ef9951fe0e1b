"""Reducers of one value per piece of input: an exact fold (sum, min, max) of int64s or
fixed-size int64 vectors, each file's value folded from its pieces', written as JSON."""

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.outputs import files as output
from tf2_mapreduce.outputs.result import PerFile
from tf2_mapreduce.reducers.base import Collected, Reducer
from tf2_mapreduce.state.slots import PieceSlots

__all__ = ["Sum", "VectorSum", "Min", "Max"]

INT64_MIN = np.iinfo(np.int64).min
INT64_MAX = np.iinfo(np.int64).max


def _name(text):
    return text.replace(" ", "_")


class PerPiece(Reducer):
    """A value per piece (an int64, or a fixed-size int64 vector), folded into the
    job's value and into each file's value by `fold_tf` / `fold_np`.

    `map_fn(texts)` returns one value per text: shape [n], or [n, width]. The fold must
    be associative, commutative and have `identity`, so that pieces fold in any
    order; a file's pieces fold into the file's value, the files into the total.
    """

    width = None  # None: a scalar per piece
    identity = 0

    def fold_tf(self, values, axis):
        raise NotImplementedError

    def fold_np(self):
        """The numpy ufunc of the fold, for `ufunc.at` over pieces of the same file."""
        raise NotImplementedError

    def total_fields(self, value) -> dict:
        """The value as the top-level fields of a written result."""
        return self.fields(value)

    def piece_spec(self):
        return tf.TensorSpec([self.width] if self.width else [], tf.int64)

    def combine(self, output):
        return output[0]

    def combine_step(self, output):
        return output

    def stream_start(self):
        return tf.fill([self.width] if self.width else [], tf.constant(self.identity, tf.int64))

    def stream_fold(self, value, output):
        return self.fold_tf(tf.concat([value[None], output], 0), axis=0)

    def new_state(self, sizes, ps_devices, run_id):
        # Named for the run by TensorFlow's runtime: variables, unlike tables, always are.
        return PieceSlots(sizes, ps_devices, self.width, self.fold_tf, self.identity)

    def to_python(self, folded):
        """A folded value as Python: an int (None for the identity of a min or max:
        nothing done yet), or a tuple for a vector."""
        if self.width:
            return tuple(int(x) for x in folded)
        folded = int(folded)
        return None if self.identity != 0 and folded == self.identity else folded

    def value(self, stats):
        return self.to_python(stats.value)

    def collect(self, state, plan, piece_done):
        values = state.values()
        per_file = np.full((len(plan.files),) + values.shape[1:], self.identity, dtype=np.int64)
        self.fold_np().at(per_file, plan.piece_files()[piece_done], values[piece_done])
        total = self.to_python(self.fold_np().reduce(values[piece_done], axis=0, initial=self.identity))
        return Collected(total, None, PerFile(plan.files, per_file, plan.file_done(piece_done), self.to_python))

    def check_output(self, path):
        if not path.endswith(".json"):
            raise UsageError("{setting:output} %s: this job writes JSON; name the file *.json" % path)

    def write_output(self, state, path, result, min_count, document):
        rows = (dict(path=f.path, size=f.size, **self.fields(f.value)) for f in result.per_file)
        output.write_json(path, {**document, **self.total_fields(result.total)}, "per_file", rows)


@dataclass(frozen=True)
class Sum(PerPiece):
    """An exact int64 total. `map_fn(texts)` returns one int64 per text, shape [n];
    any int64, negative ones included."""

    unit: str  # what is counted, for messages: "words"

    def fold_tf(self, values, axis):
        return tf.reduce_sum(values, axis=axis)

    def fold_np(self):
        return np.add

    def fields(self, value, distinct=None):
        return {_name(self.unit): value}

    def total_fields(self, value):
        return {"total_" + _name(self.unit): value}

    def rates(self, before, after, seconds):
        return {_name(self.unit): (after - before) / seconds}

    def describe(self, value, distinct=None):
        return "%d %s" % (value, self.unit)


@dataclass(frozen=True)
class VectorSum(PerPiece):
    """Exact int64 totals of a fixed-size vector. `map_fn(texts)` returns shape [n, len(names)]."""

    names: tuple  # one label per component: ("lines", "words", "bytes")

    @property
    def width(self):
        return len(self.names)

    def fold_tf(self, values, axis):
        return tf.reduce_sum(values, axis=axis)

    def fold_np(self):
        return np.add

    def fields(self, value, distinct=None):
        return dict(zip(self.names, value))

    def total_fields(self, value):
        return {"totals": self.fields(value)}

    def rates(self, before, after, seconds):
        return {name: (b - a) / seconds for name, a, b in zip(self.names, before, after)}

    def describe(self, value, distinct=None):
        return ", ".join("%d %s" % pair for pair in zip(value, self.names))


@dataclass(frozen=True)
class _Extreme(PerPiece):
    """A per-piece value folded to its extreme (`Min`, `Max`): named, not summed, and
    with no rate (it does not grow with the pieces done). A subclass names its fold in
    TF (`_reduce`) and numpy (`_ufunc`) and the fold's identity."""

    name: str  # what the value is, for messages: "longest line"
    unit: str  # its unit: "bytes"

    def fold_tf(self, values, axis):
        return type(self)._reduce(values, axis=axis)

    def fold_np(self):
        return type(self)._ufunc

    def fields(self, value, distinct=None):
        return {_name("%s %s" % (self.name, self.unit)): value}

    def describe(self, value, distinct=None):
        return "%s %s" % (self.name, "-" if value is None else "%d %s" % (value, self.unit))


@dataclass(frozen=True)
class Max(_Extreme):
    """The largest int64 value: `map_fn(texts)` returns one per text, shape [n]. A file's
    value is its pieces' largest; None while no piece is done."""

    identity = INT64_MIN
    _reduce = tf.reduce_max
    _ufunc = np.maximum


@dataclass(frozen=True)
class Min(_Extreme):
    """The smallest int64 value: `map_fn(texts)` returns one per text, shape [n]. A file's
    value is its pieces' smallest; None while no piece is done."""

    identity = INT64_MAX
    _reduce = tf.reduce_min
    _ufunc = np.minimum
