"""What each kind of analyzer is, in one class: the stand-in of its result while the function
is analyzed, the keys it counts the values it reads under (in the map steps), its result
from those counts, and that result as the transform applies it.

tf.Transform pairs each analyzer with a combiner; here an analyzer's values are counted in
one per-key table, exactly, and its `Kind` makes its result of every (key, count). Adding
an analyzer is a class here and a public function (`analyzers`) that calls `trace.analyzer`."""

import hashlib
import math

import numpy as np

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.numerics import Extremes
from tf2_mapreduce.transform import sums
from tf2_mapreduce.transform.sorted_results import EMPTY_VOCABULARY, TFT, Ordered, Ranked, VocabularyFile, decoded

__all__ = [
    "Kind",
    "VocabularyFile",
    "of",
    "counting",
    "counted",
    "sink",
    "result",
    "VOCABULARY",
    "EMPTY_VOCABULARY",
]

VOCABULARY = "vocabulary"
# Strings tft leaves out of a text vocabulary: empty, or holding a newline.
_UNHOLDABLE = r"^$|\C*[\n\r]\C*"


def _as_keys(values):
    """Values as the bytes they are counted under: a string as it is (without those tft
    leaves out of a vocabulary), an integer as decimal text, a float as the decimal text of
    its bits (exact, and NaN kept apart)."""
    if values.dtype == tf.string:
        return tf.boolean_mask(values, tf.logical_not(tf.strings.regex_full_match(values, _UNHOLDABLE)))
    if values.dtype.is_integer:
        return tf.strings.as_string(tf.cast(values, tf.int64))
    if values.dtype == tf.float64:
        return tf.strings.as_string(tf.bitcast(values, tf.int64))
    return tf.strings.as_string(tf.bitcast(tf.cast(values, tf.float32), tf.int32))


def _places(columns):
    """Each value's position, int64, of `columns` ([values, positions]) flattened."""
    shape = tf.shape(columns, out_type=tf.int64)
    return tf.reshape(tf.broadcast_to(tf.range(shape[1]), shape), [-1])


def _prefixed(columns, keys):
    """`keys`, a key a value of `columns` ([values, positions], flattened), each prefixed by
    its value's position ("j:")."""
    return tf.strings.join([tf.strings.as_string(_places(columns)), keys], ":")


class Kind:
    """An analyzer kind. `counted(call, values)`: the keys the 1-D `values` a call reads
    are counted under (in a map step); `result(call, entries)`: the call's result from
    every (key bytes, count); `applied(call, result)`: that result in the traced transform.
    `counted_by_position(call, columns)`: an elementwise call's keys, each position's
    apart, prefixed by it ("j:"), of `columns` ([values, positions]). `counts`: what
    `counted` counts, the same for kinds whose `counted` is the same function."""

    name = ""
    counts = "values"

    def counted(self, call, values):
        return _as_keys(values)

    def counted_by_position(self, call, columns):
        # `counted` gives a key a value here (numbers, which elementwise takes only)
        return _prefixed(columns, self.counted(call, tf.reshape(columns, [-1])))

    def result(self, call, entries):
        raise NotImplementedError

    def sink(self, call, directory):
        """What takes the call's (key, count) entries in its `order` (an
        `outputs.sorted_runs.Order`), after the sum of their counts (`open(total)`), a
        chunk at a time (`take(keys, counts)`, lists) until it is `full`, then gives its
        result (`result()`), then lets go of what it holds (`close()`, whatever happened);
        a file it writes goes into `directory`. Of a kind that counts a few keys (a
        batch's, a power of two's), the entries held, then `result`."""
        return _Kept(call)

    def applied(self, call, result):
        return tf.constant(result)


class _Kept:
    """Every (key, count) of a call, held, then made its result (`result`, elementwise too)."""

    order, full = TFT, False  # any order: what it makes of them is not of their order

    def __init__(self, call):
        self.call, self.entries = call, []

    def open(self, total):
        pass

    def take(self, keys, counts):
        self.entries.extend(zip(keys, counts))

    def result(self):
        return result(self.call, self.entries)

    def close(self):
        self.entries = []


class Size(Kind):
    """How many values: one key, counted once a value."""

    name = "size"
    counts = "size"

    def counted(self, call, values):
        return tf.fill(tf.shape(values), "")

    def result(self, call, entries):
        return np.int64(sum(count for _, count in entries))


class Sums(Kind):
    """`sum`, `mean` or `var`: exact sums of the values (and their squares), rounded once."""

    def __init__(self, name):
        self.name = name
        self.counts = "sums and squares" if name == "var" else "sums"

    def counted(self, call, values):
        return sums.terms(values, squares=self.name == "var")

    def counted_by_position(self, call, columns):
        return sums.terms(tf.reshape(columns, [-1]), self.name == "var", _places(columns))

    def result(self, call, entries):
        totals = sums.Totals(entries)
        out = call.out.as_numpy_dtype  # the stand-in's: tft's output dtype, or output_dtype given
        if self.name == "sum":
            return sums.rounded(totals.sum(), out)
        mean, variance = totals.mean_and_var()
        return sums.rounded(mean if self.name == "mean" else variance, out)


class Extreme(Kind):
    """`min` or `max`: only each batch's least (greatest) value is counted, one key a batch
    (elementwise: a position); NaN if any is (TensorFlow's reductions give NaN, as tft's);
    of none, tft's default."""

    def __init__(self, name):
        self.name = self.counts = name
        self._reduce = tf.reduce_min if name == "min" else tf.reduce_max

    def counted(self, call, values):
        extreme = tf.boolean_mask(tf.reshape(self._reduce(values), [1]), tf.reshape(tf.size(values) > 0, [1]))
        return _as_keys(extreme)

    def counted_by_position(self, call, columns):
        extremes = tf.reshape(self._reduce(columns, axis=0), [1, -1])[: tf.minimum(tf.shape(columns)[0], 1)]
        return _prefixed(extremes, _as_keys(tf.reshape(extremes, [-1])))  # of no rows: none

    def result(self, call, entries):
        values = [decoded(call.dtype, key) for key, _ in entries]
        numpy_type = call.dtype.as_numpy_dtype
        low = self.name == "min"
        if call.dtype.is_floating and any(math.isnan(v) for v in values):
            return np.array(math.nan, numpy_type)
        if not values:
            if call.dtype.is_floating:
                return np.array(math.inf if low else -math.inf, numpy_type)
            most = np.iinfo(numpy_type).max
            return np.array(most if low else -most, numpy_type)
        extremes = Extremes()
        for value in values:
            extremes.add(value)
        return np.array(extremes.low if low else extremes.high, numpy_type)


class Quantiles(Kind):
    """The boundaries between `num_buckets` buckets of equal counts: boundary k is the value
    at rank floor(k n / num_buckets) of the n values sorted (tft's rule, exact); NaN left out.
    The values are taken in order, never held, however many are distinct."""

    name = "quantiles"

    def sink(self, call, directory):
        return Ranked(call)


class Vocabulary(Kind):
    """tft's vocabulary: the terms in tft's order (count descending, then bytes descending),
    kept as its parameters say; of none, tft's one dummy term. Its result is its file
    (`VocabularyFile`), written as its terms come in order, never held; saved,
    an asset; applied, that file's path, which `apply_vocabulary` looks up, and a table of
    the user's (a tf.lookup.TextFileInitializer) reads."""

    name = VOCABULARY

    def sink(self, call, directory):
        return Ordered(call, directory)

    def applied(self, call, result):
        return tf.identity(result)


_KINDS = {kind.name: kind for kind in (Size(), *map(Sums, ("sum", "mean", "var")), Extreme("min"), Extreme("max"))}
_KINDS.update({kind.name: kind for kind in (Quantiles(), Vocabulary())})


def of(call) -> Kind:
    """The `Kind` of `call` (a `trace.Call`)."""
    return _KINDS[call.kind]


def counting(call, computed: str) -> str:
    """The name of what `call` counts, of `computed` (a digest of what its values compute
    from the raw features): calls that count the same keys of the same values have the
    same, and share one count of them (a whole vocabulary and a top_k one of a feature, a
    vocabulary and quantiles of an integer count each value once)."""
    kind = of(call)
    described = repr((kind.counts, call.dtype.name, call.params.get("elementwise"))).encode()
    return "%s:%s" % (kind.counts.replace(" ", "_"), hashlib.sha256(described + computed.encode()).hexdigest()[:20])


def counted(call, values):
    """The keys `call` counts its `values` (1-D, flattened from a batch) under; an
    elementwise call's (`reduce_instance_dims=False`: its params' "elementwise", the shape
    of an example's values) each position's apart, prefixed by its place in an example."""
    kind, shape = of(call), call.params.get("elementwise")
    if shape is None:
        return kind.counted(call, values)
    return kind.counted_by_position(call, tf.reshape(values, [-1, int(np.prod(shape))]))


def sink(call, directory):
    """What makes `call`'s result of its (key, count) entries, taken in order (`Kind.sink`)."""
    return of(call).sink(call, directory)


def result(call, entries):
    """`call`'s result from every (key bytes, count) it counted; an elementwise call's, of
    its shape, each position's from its own."""
    kind, shape = of(call), call.params.get("elementwise")
    if shape is None:
        return kind.result(call, entries)
    positions = [[] for _ in range(int(np.prod(shape)))]
    for key, count in entries:
        place, _, key = key.partition(b":")
        positions[int(place)].append((key, count))
    return np.array([kind.result(call, entries) for entries in positions]).reshape(shape)
