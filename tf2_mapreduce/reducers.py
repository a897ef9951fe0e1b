"""Reducers: what a job's map output means. Each is one object that knows how a piece's
output is combined on the worker, kept exactly once on the ps tasks, reported and written.

Lifecycle, for one run of a job (the runner calls these, in this order):
  1. `piece_spec()`: the type of one piece's output after `combine` (the map step's
     signature, traced once per run).
  2. `combine(output)`: on a worker, inside the map step, the job's `map_fn` output for
     one piece becomes what is sent to the ps tasks (keys counted once, say).
     A streamed piece (a compressed or TFRecord file) is mapped a batch at a time
     instead: `stream_start()` is its value before the first batch, and
     `stream_fold(value, output)` folds each batch's `map_fn` output into it, giving
     what `combine` would.
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

import struct
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

__all__ = ["Reducer", "PerPiece", "Sum", "VectorSum", "Min", "Max", "KeySum", "Vocabularies"]

INT64_MIN = np.iinfo(np.int64).min
INT64_MAX = np.iinfo(np.int64).max


def _name(text):
    return text.replace(" ", "_")


class Reducer:
    """Base of every reducer; see the module's docstring for the lifecycle.

    `keyed`: the result is a table of keys on the ps tasks, read back in chunks
    (top keys, entries, written as TSV or vocabularies), rather than one value per piece.
    `additive`: values only grow as pieces are done, so a rate (words/s) means something.
    """

    keyed = False
    additive = True  # values grow as pieces are done: a rate (words/s) means something
    vocabularies_only = False  # a table that only makes sense as vocabularies (`vocabulary.write`)

    def piece_spec(self):
        raise NotImplementedError

    def combine(self, output):
        raise NotImplementedError

    def batch(self, outputs):
        return outputs

    def combine_step(self, output):
        raise NotImplementedError

    def stream_start(self):
        raise NotImplementedError

    def stream_fold(self, value, output):
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

    def stream_start(self):
        return tf.fill([self.width] if self.width else [], tf.constant(self.identity, tf.int64))

    def stream_fold(self, value, output):
        return self.fold_tf(tf.concat([value[None], output], 0), axis=0)

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


def _merge(keys, counts):
    """(keys, counts) with each key once, its counts added."""
    unique, index = tf.unique(keys)
    return unique, tf.math.unsorted_segment_sum(counts, index, tf.size(unique))


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
        return _merge(*output)

    def batch(self, outputs):
        return outputs[0].flat_values, outputs[1].flat_values

    def combine_step(self, output):
        # The state's commit combines the step's repeated keys: no second pass here.
        if isinstance(output, tf.Tensor):
            return output, tf.ones_like(output, dtype=tf.int64)
        return output

    def stream_start(self):
        return tf.zeros([0], tf.string), tf.zeros([0], tf.int64)

    def stream_fold(self, value, output):
        # Combined at every batch, so a file's running value holds each key once.
        keys, counts = self.combine_step(output)
        return _merge(tf.concat([value[0], keys], 0), tf.concat([value[1], counts], 0))

    def new_state(self, sizes, ps_devices, run_id):
        from tf2_mapreduce import reduce

        return reduce.KeyedSum(sizes, ps_devices, run_id, self)

    def counted(self, keys, counts):
        """What a commit of (`keys`, `counts`) adds to the job's total (on the ps, per
        shard): every count, here."""
        return tf.reduce_sum(counts)

    def reserved_keys(self):
        """Keys that hold the reducer's own bookkeeping rather than the job's keys: left
        out of the distinct keys. None here."""
        return []

    def vocabularies(self):
        """The names of the vocabularies the table holds (`vocabulary.write`): one here."""
        return [_name(self.unit)]

    def vocabulary_of(self, key):
        """(index into `vocabularies()`, term) of a table key; (None, key) for a
        reserved key."""
        return 0, key

    def fields(self, value):
        return {_name(self.unit): value}

    def total_fields(self, value):
        return {"total_" + _name(self.unit): value}

    def describe(self, value, distinct=None):
        text = "%d %s" % (value, self.unit)
        return text if distinct is None else "%s (%d distinct)" % (text, distinct)


# Vocabularies' table keys: 2 bytes of feature index (big-endian), then the term; the
# index 0xffff is the reducer's own: the count of examples, and each feature's missing.
_FEATURE = struct.Struct(">H")
_OWN = b"\xff\xff"
_EXAMPLES = _OWN + b"e"
_MISSING = _OWN + b"m"


@dataclass(frozen=True)
class Vocabularies(KeySum):
    """Exact counts of the values of several features, in one table (`KeySum`'s): each
    value is kept under its feature's index, and the examples read and the examples
    missing each feature are counted in the same commit, so all of it is exactly-once
    together. `map_fn(records)` returns {"examples": scalar int64, "values": a tuple with
    one 1-D tf.string of values per feature, "missing": 1-D int64 of examples per
    feature without any value}. The job's total is the examples read."""

    features: tuple = ()  # feature names, in the order of "values"

    vocabularies_only = True

    def __post_init__(self):
        if not 0 < len(self.features) < 0xFFFF:
            raise ValueError("Vocabularies needs 1 to %d features" % (0xFFFF - 1))

    def _keys(self, output):
        keys = [tf.strings.join([_FEATURE.pack(i), values]) for i, values in enumerate(output["values"])]
        own = tf.constant([_EXAMPLES] + [_MISSING + _FEATURE.pack(i) for i in range(len(self.features))])
        keys = tf.concat(keys + [own], 0)
        ones = [tf.ones_like(values, dtype=tf.int64) for values in output["values"]]
        counts = tf.concat(ones + [[output["examples"]], output["missing"]], 0)
        # A zero count would still make an entry: a missing feature is no key at all.
        present = counts > 0
        return tf.boolean_mask(keys, present), tf.boolean_mask(counts, present)

    def combine(self, output):
        return super().combine(self._keys(output))

    def combine_step(self, output):
        return self._keys(output)

    def counted(self, keys, counts):
        return tf.reduce_sum(tf.where(tf.equal(keys, _EXAMPLES), counts, 0))

    def reserved_keys(self):
        return [_EXAMPLES] + [_MISSING + _FEATURE.pack(i) for i in range(len(self.features))]

    def vocabularies(self):
        return list(self.features)

    def vocabulary_of(self, key):
        if key.startswith(_OWN):
            return None, key
        return _FEATURE.unpack_from(key)[0], key[_FEATURE.size :]

    def own_count(self, key):
        """For a reserved key: ("examples", None) or ("missing", feature index)."""
        if key == _EXAMPLES:
            return "examples", None
        return "missing", _FEATURE.unpack_from(key, len(_MISSING))[0]

    def fields(self, value):
        return {"examples": value}

    def total_fields(self, value):
        return {"examples": value}

    def describe(self, value, distinct=None):
        text = "%d examples" % value
        return text if distinct is None else "%s (%d distinct values)" % (text, distinct)
