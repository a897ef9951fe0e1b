"""Reducers of counts per key: exact int64 totals per key in tables on the ps tasks, the
keys of a piece combined on the worker first; and the order of a vocabulary's terms."""

import struct
from dataclasses import dataclass

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.reducers.base import NO_FILES, Collected, MapOutputError, Reducer, assert_in_graph, count_text, label

__all__ = [
    "KeyCounts",
    "ExampleCounts",
    "KeySum",
    "Distinct",
    "KeySpace",
    "TftOrder",
    "TFT",
    "tft_key",
    "most_first",
    "count_of",
    "MOST_FIRST_BYTES",
]

# Complementing every byte turns ascending byte order into descending, but for a term
# that is a prefix of another: the longer must come first, so the end of a term must sort
# after any byte. It is 0xff 0xff, where a byte complemented to 0xff is written 0xff 0x00.
_INVERT = bytes(255 - b for b in range(256))
_END = b"\xff\xff"


def _descending(term: bytes) -> bytes:
    """Bytes that sort ascending as the terms sort descending (a longer term first where
    it begins with a shorter one)."""
    return term.translate(_INVERT).replace(b"\xff", b"\xff\x00") + _END


def _term_of(descending: bytes) -> bytes:
    return descending[: -len(_END)].replace(b"\xff\x00", b"\xff").translate(_INVERT)


def tft_key(term: bytes, count: int):
    """The sort key of a term in tf.Transform's vocabulary order: count descending, then
    the term's bytes descending, as Python orders bytes (tft sorts (count, term) pairs)."""
    return -count, _descending(term)


class TftOrder:
    """tf.Transform's vocabulary order of (key, count) entries (`tft_key`'s), as bytes (an
    `outputs.sorted_runs.Order`): the key's first `prefix` bytes (its vocabulary, in a table of
    several) ascending first."""

    def __init__(self, prefix: int = 0):
        self._prefix = prefix
        self.native = None if prefix else 0

    def keeps(self, entry) -> bool:
        return True

    def encode(self, entry) -> bytes:
        key, count = entry
        at = self._prefix
        return key[:at] + most_first(count) + _descending(key[at:])

    def decode(self, data: bytes):
        at = self._prefix
        return data[:at] + _term_of(data[at + MOST_FIRST_BYTES :]), count_of(data, at)


TFT = TftOrder()  # tf.Transform's order of one vocabulary's (term, count) entries

_COUNT = struct.Struct(">Q")  # unsigned and big-endian: bytewise order is its order
_MOST = (1 << 63) - 1
MOST_FIRST_BYTES = _COUNT.size  # the width of what `most_first` writes


def most_first(count: int) -> bytes:
    """`count` (any int64) as 8 bytes that sort bytewise with the greatest count first."""
    return _COUNT.pack(_MOST - count)


def count_of(data: bytes, at: int = 0) -> int:
    """The count `most_first` wrote at `at` of `data`."""
    return _MOST - _COUNT.unpack_from(data, at)[0]


_PAIR = ("string", "int64")  # the dtypes of a table's keys and counts


def _pending():
    """Keys and counts of batches not yet combined, a batch an element (the first empty:
    TensorFlow joins no elements in a graph, not eagerly)."""
    made = (tf.TensorArray(d, size=1, dynamic_size=True, infer_shape=False, element_shape=[None]) for d in _PAIR)
    return tuple(array.write(0, tf.zeros([0], array.dtype)) for array in made)


def _merge(keys, counts):
    """(keys, counts) with each key once, its counts added: by the native op where map
    steps use the native ops (a third of the time), else by TensorFlow's."""
    from tf2_mapreduce import native

    library = native.load()
    if library is not None:
        return tuple(library.tf2_mapreduce_merge_counts(keys, counts))
    unique, index = tf.unique(keys)
    return unique, tf.math.unsorted_segment_sum(counts, index, tf.size(unique))


class KeySpace:
    """How a per-key table's keys name its vocabularies: here one vocabulary, `name`, whose
    terms are the keys themselves. `reserved`: keys that hold a reducer's own counts
    rather than terms (none here)."""

    reserved = ()

    def __init__(self, name):
        self.names = (name,)

    def split(self, key):
        """(vocabulary index, term) of a table key; (None, key) for a reserved key."""
        return 0, key

    def prefix(self, index) -> bytes:
        """What the table keys of vocabulary `index` begin with."""
        return b""

    # (key, count) in tf.Transform's order, vocabulary by vocabulary (an `outputs.sorted_runs.Order`).
    order = TftOrder()


class KeyCounts(Reducer):
    """Counts per key, in tables on the ps tasks (`state.key_tables`), keys sharded over
    them by hash. What is committed is (keys, counts), each key once: a piece's keys are
    combined on the worker before anything is sent. The job's value is what the commits
    add up to (`counted`: every count, here). Subclasses say what the keys mean (`keys`)."""

    def keys(self) -> KeySpace:
        raise NotImplementedError

    def sorted_entries(self, state, wanted: list, min_count=1):
        """For each of `wanted`, (the name of one of `keys().names`, a native order, its
        merge key), (the sum of their counts, chunks of them) of the vocabulary's (term,
        count) entries with count >= `min_count`, sorted in that order on the ps tasks
        (`state.key_tables.KeyTables.sorted_entries`); None where they cannot be."""
        space = self.keys()
        parts = [(space.prefix(space.names.index(name)), order, key) for name, order, key in wanted]
        return state.sorted_entries(parts, min_count)

    def pairs(self, output):
        """(keys, counts) of a map output, keys not combined."""
        if isinstance(output, tf.Tensor):
            return output, tf.ones_like(output, dtype=tf.int64)
        return output

    def check(self, output, items, job, item="text"):
        needs = "%s needs a 1-D tf.string of keys, or (keys, counts) with a 1-D int64 of counts as long" % label(self)
        if isinstance(output, tf.RaggedTensor):
            raise MapOutputError(
                "job %s: map_fn returned a RaggedTensor, but %s (its .flat_values, say)" % (job, needs)
            )
        if isinstance(output, (tuple, list)) and len(output) == 2:
            keys, counts = (tf.convert_to_tensor(x) for x in output)
        elif isinstance(output, (tuple, list, dict)):
            raise MapOutputError("job %s: map_fn returned %s, but %s" % (job, type(output).__name__, needs))
        else:
            keys, counts = tf.convert_to_tensor(output), None
        if keys.dtype != tf.string:
            raise MapOutputError("job %s: map_fn returned keys of %s, but %s" % (job, keys.dtype.name, needs))
        if counts is not None and counts.dtype != tf.int64:
            raise MapOutputError("job %s: map_fn returned counts of %s, but %s" % (job, counts.dtype.name, needs))
        for tensor in (keys, counts):
            if tensor is not None and tensor.shape.rank not in (None, 1):
                raise MapOutputError("job %s: map_fn returned shape %s, but %s" % (job, tensor.shape, needs))
        if counts is None:
            ok = tf.equal(tf.rank(keys), 1)
            text = tf.strings.join(
                ["job %s: map_fn returned keys of rank " % job, tf.strings.as_string(tf.rank(keys)), ", but " + needs]
            )
            return assert_in_graph(ok, text, keys)
        shapes = tf.concat([tf.shape(keys, out_type=tf.int64), tf.shape(counts, out_type=tf.int64)], 0)
        ok = tf.logical_and(tf.equal(tf.size(shapes), 2), tf.equal(tf.reduce_min(shapes), tf.reduce_max(shapes)))
        text = tf.strings.join(
            [
                "job %s: map_fn returned keys and counts of shapes " % job,
                count_text(shapes, items, item),
                ", but " + needs,
            ]
        )
        return assert_in_graph(ok, text, (keys, counts))

    def spec(self):
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

    def merge(self, values):
        # Each piece's keys are distinct already: only those of several pieces are combined.
        keys, counts = values[0].flat_values, values[1].flat_values
        return tf.cond(values[0].nrows() > 1, lambda: _merge(keys, counts), lambda: (keys, counts))

    def combine_step(self, output):
        return self.combine(output)

    def start(self):
        # The keys combined so far (of no static length, as `add` gives them: a state of
        # length 0 made tf.data trace its reduce function, a batch's map and `add`, twice),
        # and those of the batches since, not yet combined: each batch's kept apart (a
        # TensorArray), joined once when combined; joining them batch by batch copied all
        # of them at every batch, a file of millions of distinct keys in time quadratic.
        combined = (tf.raw_ops.PlaceholderWithDefault(input=tf.zeros([0], dtype), shape=[None]) for dtype in _PAIR)
        return (*combined, *_pending(), tf.constant(0))

    def add(self, value, output):
        # Combined once the batches since hold more keys than the combined ones: the work
        # is then about twice the keys mapped, where combining at every batch cost the
        # file's distinct keys once a batch (a float feature's thousands of buckets, say).
        keys, counts, pending_keys, pending_counts, pending = value
        new_keys, new_counts = self.pairs(output)
        at = pending_keys.size()
        pending_keys, pending_counts = pending_keys.write(at, new_keys), pending_counts.write(at, new_counts)
        value = (keys, counts, pending_keys, pending_counts, pending + tf.size(new_keys))
        return tf.cond(value[-1] > tf.size(keys), lambda: (*self.finish(value), *_pending(), 0), lambda: value)

    def finish(self, value):
        keys, counts, pending_keys, pending_counts, _ = value
        return _merge(tf.concat([keys, pending_keys.concat()], 0), tf.concat([counts, pending_counts.concat()], 0))

    def counted(self, keys, counts):
        """What a commit of (`keys`, `counts`) adds to the job's value (TF ops, on the ps,
        per shard): every count, here."""
        return tf.reduce_sum(counts)

    def create_state(self, sizes, ps_devices, run_id):
        from tf2_mapreduce.state.key_tables import KeyTables

        return KeyTables(sizes, ps_devices, run_id, self.counted, self.keys().reserved)

    def value(self, figures):
        return int(figures.value)

    def collect(self, state, plan, piece_done):
        figures = state.figures()
        return Collected(self.value(figures), figures.distinct, NO_FILES)


class ExampleCounts(KeyCounts):
    """Counts per key over tf.train.Example records, whose job's value is the examples
    read: counted under the key space's `examples_key`, in the same commit as the rest."""

    def counted(self, keys, counts):
        return tf.reduce_sum(tf.where(tf.equal(keys, self.keys().examples_key), counts, 0))


@dataclass(frozen=True)
class KeySum(KeyCounts):
    """Exact int64 totals per key. `map_fn(texts)` returns the keys of the whole batch, a
    1-D tf.string, each counting 1; or (keys, counts), with a 1-D tf.int64 of counts of
    the same length. Keys may repeat. The job's value is the total of the counts; its
    table stays on the ps tasks and is read from there (`entries`, `top`)."""

    unit: str  # what the keys are: "words"

    def keys(self) -> KeySpace:
        return KeySpace(self.unit.replace(" ", "_"))

    def entries(self, state, min_count=1):
        """Yields every (key bytes, count) with count >= `min_count`, in no order, a chunk at a time."""
        return state.entries(min_count)

    def top(self, state, k, min_count=1):
        """The `k` keys with the largest counts, ties by key bytes ascending."""
        return state.top(k, min_count)


@dataclass(frozen=True)
class Distinct(KeySum):
    """The exact number of distinct keys. `map_fn(texts)` returns keys, as for `KeySum`,
    whose table it keeps: `top`, `entries`, `--output` and `--output_dir` give each key
    with its count. The job's value is how many keys the table holds."""

    def value(self, figures):
        return int(figures.distinct)
