"""Reducers: what a job's map output means. Each is one object that knows how a piece's
output is combined on the worker, kept exactly once on the ps tasks, reported and written.

Lifecycle, for one run of a job (the runner calls these, in this order):
  1. `piece_spec()`: the type of one piece's output after `combine` (the map step's
     signature, traced once per run).
  2. `combine(output)`: on a worker, inside the map step, the job's `map_fn` output for
     one piece becomes what is sent to the ps tasks (keys counted once, say).
  3. `batch(outputs)`: a step's per-piece outputs, stacked by `tf.map_fn`, become what
     the state's `commit` takes. A step of whole files maps them all at once instead
     (one `map_fn` call): `combine_step(output)` makes that output what `commit` takes.
  4. `new_state(sizes, ps_devices, run_id)`: this run's state on the ps tasks, which
     commits each piece exactly once, checkpoints, and is read back (see `reduce`).
  5. `fields(value)`, `total_fields(value)`, `describe(value, distinct)`: a value as
     named numbers (progress, TensorBoard, per-file output), as the top-level fields of a
     written result, and in words.
Adding a reducer is one class here: nothing else in the package asks which one it is.
"""

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

__all__ = ["Reducer", "PerPiece", "Sum", "VectorSum", "Min", "Max", "KeySum"]

INT64_MIN = np.iinfo(np.int64).min
INT64_MAX = np.iinfo(np.int64).max


def _name(text):
    return text.replace(" ", "_")


class Reducer:
    """Base of every reducer; see the module's docstring for the lifecycle.

    `keyed`: the result is a table of keys on the ps tasks, read back in chunks
    (top keys, entries, written as TSV), rather than one value per piece.
    `additive`: values only grow as pieces are done, so a rate (words/s) means something.
    """

    keyed = False
    additive = True  # values grow as pieces are done: a rate (words/s) means something

    def piece_spec(self):
        raise NotImplementedError

    def combine(self, output):
        raise NotImplementedError

    def batch(self, outputs):
        return outputs

    def combine_step(self, output):
        raise NotImplementedError

    def new_state(self, sizes, ps_devices, run_id):
        raise NotImplementedError

    def fields(self, value) -> dict:
        raise NotImplementedError

    def total_fields(self, value) -> dict:
        return self.fields(value)

    def describe(self, value, distinct=None) -> str:
        raise NotImplementedError


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

    def piece_spec(self):
        return tf.TensorSpec([self.width] if self.width else [], tf.int64)

    def combine(self, output):
        return output[0]

    def combine_step(self, output):
        return output

    def new_state(self, sizes, ps_devices, run_id):
        from tf2_mapreduce import reduce

        return reduce.PerPieceState(sizes, ps_devices, self)

    def to_python(self, folded):
        """The folded value as Python: an int (None for the identity of a min or max:
        nothing done yet), or a tuple for a vector."""
        if self.width:
            return tuple(int(x) for x in folded)
        folded = int(folded)
        return None if self.identity != 0 and folded == self.identity else folded


@dataclass(frozen=True)
class Sum(PerPiece):
    """An exact int64 total. `map_fn(texts)` returns one int64 per text, shape [n];
    any int64, negative ones included."""

    unit: str  # what is counted, for messages: "words"

    def fold_tf(self, values, axis):
        return tf.reduce_sum(values, axis=axis)

    def fold_np(self):
        return np.add

    def fields(self, value):
        return {_name(self.unit): value}

    def total_fields(self, value):
        return {"total_" + _name(self.unit): value}

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

    def fields(self, value):
        return dict(zip(self.names, value))

    def total_fields(self, value):
        return {"totals": self.fields(value)}

    def describe(self, value, distinct=None):
        return ", ".join("%d %s" % pair for pair in zip(value, self.names))


@dataclass(frozen=True)
class _Extreme(PerPiece):
    """A per-piece value folded to its extreme (`Min`, `Max`): named, not summed."""

    name: str  # what the value is, for messages: "longest line"
    unit: str  # its unit: "bytes"

    additive = False

    def fields(self, value):
        return {_name("%s %s" % (self.name, self.unit)): value}

    def describe(self, value, distinct=None):
        return "%s %s" % (self.name, "-" if value is None else "%d %s" % (value, self.unit))


@dataclass(frozen=True)
class Max(_Extreme):
    """The largest int64 value: `map_fn(texts)` returns one per text, shape [n]. A file's
    value is its pieces' largest; None while no piece is done."""

    identity = INT64_MIN

    def fold_tf(self, values, axis):
        return tf.reduce_max(values, axis=axis)

    def fold_np(self):
        return np.maximum


@dataclass(frozen=True)
class Min(_Extreme):
    """The smallest int64 value: `map_fn(texts)` returns one per text, shape [n]. A file's
    value is its pieces' smallest; None while no piece is done."""

    identity = INT64_MAX

    def fold_tf(self, values, axis):
        return tf.reduce_min(values, axis=axis)

    def fold_np(self):
        return np.minimum


@dataclass(frozen=True)
class KeySum(Reducer):
    """Exact int64 totals per key, in tables on the ps tasks, keys sharded over all of them
    by hash. `map_fn(texts)` returns the keys of the whole batch, a 1-D tf.string, each
    counting 1; or (keys, counts), with a 1-D tf.int64 of counts of the same length.
    Keys may repeat: they are combined on the worker before anything is sent."""

    unit: str  # what the keys are, for messages: "words"

    keyed = True

    def piece_spec(self):
        return (
            tf.RaggedTensorSpec([None], tf.string, ragged_rank=0),
            tf.RaggedTensorSpec([None], tf.int64, ragged_rank=0),
        )

    def combine(self, output):
        # Combined on the worker, so that only distinct keys travel to the ps.
        if isinstance(output, tf.Tensor):  # keys alone, each counting 1
            unique, _, counts = tf.unique_with_counts(output, out_idx=tf.int32)
            return unique, tf.cast(counts, tf.int64)
        keys, counts = output
        unique, index = tf.unique(keys)
        return unique, tf.math.unsorted_segment_sum(counts, index, tf.size(unique))

    def batch(self, outputs):
        return outputs[0].flat_values, outputs[1].flat_values

    def combine_step(self, output):
        # The state's commit combines the step's repeated keys: no second pass here.
        if isinstance(output, tf.Tensor):
            return output, tf.ones_like(output, dtype=tf.int64)
        return output

    def new_state(self, sizes, ps_devices, run_id):
        from tf2_mapreduce import reduce

        return reduce.KeyedSum(sizes, ps_devices, run_id)

    def fields(self, value):
        return {_name(self.unit): value}

    def total_fields(self, value):
        return {"total_" + _name(self.unit): value}

    def describe(self, value, distinct=None):
        text = "%d %s" % (value, self.unit)
        return text if distinct is None else "%s (%d distinct)" % (text, distinct)
