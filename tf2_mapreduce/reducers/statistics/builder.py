"""Dataset statistics from the counts of a statistics table, as they stream in: a feature's
figures (`statistics`) are made once all its counts are in, exactly, in any order."""

import functools
import heapq
import math
import operator

import numpy as np

from tf2_mapreduce.numerics import Extremes, Moments
from tf2_mapreduce.reducers.keys import tft_key
from tf2_mapreduce.reducers.statistics import histograms
from tf2_mapreduce.reducers.statistics.model import (
    FLOAT_ERROR,
    KIND_NAMES,
    NUM_RANK_BUCKETS,
    NUM_TOP_VALUES,
    DatasetStats,
    FeatureStats,
    NumericStats,
    StringStats,
)
from tf2_mapreduce.reducers.statistics.numbers import Numbers
from tf2_mapreduce.spilling import Held

__all__ = ["Builder", "FloatSums"]

_SQUARE_SHIFT = {0: 24, 1: 12, 2: 0}  # a square's term: a*a, 2*a*b, b*b of m = a * 2**12 + b


def _python(value):
    return value.item() if isinstance(value, np.generic) else value


def _power(exponent):
    """The power of two of a float32's mantissa, from its biased exponent."""
    return max(exponent, 1) - 150


class FloatSums:
    """What stays exact of a float feature counted by bucket, as the statistics keys give it:
    its finite values' sum and sum of squares (`moments`) from integers per biased exponent
    e (a value is m * 2**(max(e, 1) - 150), m = a * 2**12 + b), and its least and greatest
    value (`extremes`). Filled by `add_*`."""

    def __init__(self):
        self.moments = Moments()
        self.extremes = Extremes()

    def add_sum(self, sign, exponent, total):
        self.moments.add_sum(_power(exponent), -total if sign == "-" else total)

    def add_square(self, term, exponent, total):
        """`total`: the sum of a*a (term 0), 2*a*b (1) or b*b (2) of the values of `exponent`."""
        self.moments.add_square(_SQUARE_SHIFT[term] + 2 * _power(exponent), total)

    def add_extreme(self, value):
        """A batch's least or greatest value (a float)."""
        self.extremes.add(value)


def _buckets(buckets):
    return [(_python(low), _python(high), count) for low, high, count in buckets]


def _float_clipped(chunks, low, high):
    """A float feature's bucket `chunks` without NaN, the finite values clipped to the exact
    extremes `low` and `high` (a bucket is toward zero from its values: the extremes'
    buckets may be beyond them)."""
    for values, counts in chunks:
        keep = ~np.isnan(values)
        values, counts = values[keep], counts[keep]
        if low is not None:
            values = np.where(np.isfinite(values), np.clip(values, np.float32(low), np.float32(high)), values)
        yield values, counts


class _Counted:
    """A number feature's values in a first pass over them in order: how many there are
    (`total`, and of them `zeros`, `nan`, `pos_inf`, `neg_inf`), the least and greatest
    finite one (`low`, `high`), and for an int64 feature their exact sum and sum of squares."""

    def __init__(self, numbers):
        is_float = numbers.kind == "f"
        self.total = self.zeros = self.nan = self.pos_inf = self.neg_inf = self.sums = self.squares = 0
        self.low = self.high = None
        for values, counts in numbers.chunks():
            self.total += int(counts.sum())
            self.zeros += int(counts[values == 0].sum())
            finite = values
            if is_float:
                self.nan += int(counts[np.isnan(values)].sum())
                self.pos_inf += int(counts[values == np.inf].sum())
                self.neg_inf += int(counts[values == -np.inf].sum())
                finite = values[np.isfinite(values)]
            if len(finite):
                self.low = finite[0] if self.low is None else self.low
                self.high = finite[-1]
            if not is_float:
                scaled, weights = values.tolist(), counts.tolist()
                self.sums += sum(map(operator.mul, scaled, weights))
                self.squares += sum(v * v * c for v, c in zip(scaled, weights))


def _numeric(numbers, exact):
    """`NumericStats` of a feature's `numbers.Numbers`, in two passes over its values in
    order (`_Counted`, then their figures); for a float feature, the values are buckets
    and `exact` its `FloatSums`."""
    is_float = numbers.kind == "f"
    counted = _Counted(numbers)
    total, zeros, nan, pos_inf, neg_inf = counted.total, counted.zeros, counted.nan, counted.pos_inf, counted.neg_inf
    low, high = counted.low, counted.high
    n = total - nan - pos_inf - neg_inf
    mean = std_dev = None
    edges = (low, high)  # of the standard histogram: the least and greatest finite value ranked
    if n:
        if is_float:
            moments = exact.moments
            low, high = exact.extremes.low, exact.extremes.high
            edges = tuple(np.clip(edges, np.float32(low), np.float32(high)))
        else:
            moments = Moments()
            moments.add_sum(0, counted.sums)
            moments.add_square(0, counted.squares)
            low, high = _python(low), _python(high)
        mean, variance = moments.mean_and_var(n)
        mean, std_dev = float(mean), math.sqrt(float(variance))
    ranked = total - nan  # infinities are values of the quantiles
    median = None
    quantiles, histogram, quantiles_histogram = [], [], []
    if ranked:
        chunks = _float_clipped(numbers.chunks(), low if n else None, high) if is_float else numbers.chunks()
        bounds, median, standard = histograms.figures(chunks, ranked, *edges, neg_inf=neg_inf, pos_inf=pos_inf)
        quantiles = [_python(v) for v in bounds[0]]
        histogram, quantiles_histogram = _buckets(standard), _buckets(histograms.shared(*bounds))
        median = _python(median)
    return NumericStats(
        count=total,
        quantile_error=FLOAT_ERROR if is_float else 0.0,
        mean=mean,
        std_dev=std_dev,
        num_zeros=zeros,
        min=low,
        max=high,
        median=median,
        quantiles=quantiles,
        histogram=histogram,
        quantiles_histogram=quantiles_histogram,
        num_nan=nan,
        num_pos_inf=pos_inf,
        num_neg_inf=neg_inf,
    )


class _Strings:
    """A bytes feature's values as they stream in: a bounded heap of the most frequent, and
    how many values and distinct values there were (no memory a distinct value)."""

    def __init__(self):
        self.heap = []  # (count, inverted order key, value): the least frequent on top
        self.total = 0
        self.unique = 0
        self.length = 0
        self.invalid_utf8 = 0

    def add(self, value, count):
        self.total += count
        self.unique += 1
        self.length += len(value) * count
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            self.invalid_utf8 += count
        negated, order = tft_key(value, count)
        entry = (-negated, _Reversed(order), value)
        if len(self.heap) < NUM_RANK_BUCKETS:
            heapq.heappush(self.heap, entry)
        elif entry > self.heap[0]:
            heapq.heapreplace(self.heap, entry)

    def finish(self):
        ranked = [(value, count) for count, _, value in sorted(self.heap, reverse=True)]
        return StringStats(
            count=self.total,
            unique=self.unique,
            invalid_utf8_count=self.invalid_utf8,
            top_values=ranked[:NUM_TOP_VALUES],
            avg_length=self.length / self.total if self.total else 0.0,
            rank_histogram=[(rank, value, count) for rank, (value, count) in enumerate(ranked)],
        )


@functools.total_ordering
class _Reversed:
    """Orders bytes backwards, so that a min-heap keeps the values that come first."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key

    def __lt__(self, other):
        return self.key > other.key

    def __eq__(self, other):
        return self.key == other.key


class _Feature:
    """What is known of one feature while the counts stream in."""

    def __init__(self):
        self.examples = {}  # kind -> {number of values: examples}
        self.numbers = {}  # kind -> `Numbers`
        self.strings = _Strings()
        self.exact = FloatSums()


class Builder:
    """Statistics from counted keys: `add_examples`, `add_lengths`, `add_value` and the
    `float_sums` of float features in any order, then `finish`. `decode(kind, payloads)`:
    the numbers (a numpy array) of number payloads end to end (bytes-like). `features`: names every
    one of which is reported, even if absent from all examples (empty: those found).
    A feature with values of two types keeps the type of most examples; the others'
    examples are left out of its figures, counted in `left_out`, and said in `problems`
    (one line per such feature, for the run to fail with unless on_error="skip")."""

    def __init__(self, decode, features=(), held: Held | None = None):
        self.decode = decode
        self.held = held or Held()
        self.finished = False
        self.num_examples = 0
        self.named = tuple(features)
        self.features = {name: _Feature() for name in self.named}
        self.problems = []

    def _feature(self, name):
        found = self.features.get(name)
        if found is None:
            found = self.features[name] = _Feature()
        return found

    def add_examples(self, count):
        self.num_examples += count

    def add_lengths(self, name, kind, length, count):
        """`count` examples hold `length` values of feature `name` of `kind` ("b", "f", "i", "x")."""
        by_length = self._feature(name).examples.setdefault(kind, {})
        by_length[length] = by_length.get(length, 0) + count

    def float_sums(self, name) -> FloatSums:
        """What stays exact of float feature `name`, to fill in."""
        return self._feature(name).exact

    def add_value(self, name, kind, payload, count):
        """`payload` (bytes, or a number's payload for `decode`: a float's bucket) occurs
        `count` times as a value of `name`."""
        if kind == "b":
            self._feature(name).strings.add(payload, count)
            return
        self.number_values(name, kind).add(payload, count)

    def number_values(self, name, kind) -> Numbers:
        """The `Numbers` that `add_value` adds an "f" or "i" value of `name` to."""
        found = self._feature(name).numbers.get(kind)
        if found is None:
            found = self._feature(name).numbers[kind] = Numbers(kind, self.decode, self.held)
        return found

    def finish(self) -> DatasetStats:
        """The statistics, once; then, whatever happens, `close`."""
        if self.finished:
            raise RuntimeError("the statistics of a Builder are made once, and not after close")
        self.finished = True
        try:
            return DatasetStats(
                self.num_examples, {name: self._finish(name, self.features[name]) for name in sorted(self.features)}
            )
        finally:
            self.close()

    def close(self) -> None:
        """Forgets its features' values held, and removes those spilled to disk."""
        self.finished = True
        for feature in self.features.values():
            for numbers in feature.numbers.values():
                numbers.close()

    def _kind(self, name, feature):
        """The feature's kind, and {type: examples} of the lists of other kinds (empty
        ones too: TFDV fails on them as well)."""
        holding = {kind: sum(by.values()) for kind, by in feature.examples.items() if kind != "x"}
        if not holding:
            return None, {}
        kind = max(sorted(holding), key=lambda k: holding[k])
        others = {KIND_NAMES[k]: examples for k, examples in holding.items() if k != kind}
        if others:
            self.problems.append(
                "feature %s holds lists of %s; a feature has one type (with {setting:on_error}=skip, the "
                "examples of all but the type of most are left out of its statistics)"
                % (name, " and ".join("%s in %d examples" % (KIND_NAMES[k], holding[k]) for k in sorted(holding)))
            )
        return kind, others

    def _finish(self, name, feature):
        kind, others = self._kind(name, feature)
        lengths = {}
        for k, by_length in feature.examples.items():
            if k == "x" or KIND_NAMES[k] in others:
                continue
            for n, c in by_length.items():
                lengths[n] = lengths.get(n, 0) + c
        present = sum(lengths.values())
        quantiles, lengths_histogram = [], []
        if lengths:
            sizes = np.array(sorted(lengths), np.int64)
            weights = np.array([lengths[n] for n in sorted(lengths)], np.int64)
            total = int((sizes * weights).sum())
            quantiles = [int(v) for v in histograms.quantiles(sizes, weights)[0]]
            lengths_histogram = _buckets(histograms.quantiles_histogram(sizes, weights))
            low, high, average = int(sizes[0]), int(sizes[-1]), total / present
        else:
            total, low, high, average = 0, 0, 0, 0.0
        numeric = string = None
        if kind == "b":
            string = feature.strings.finish()
        elif kind in ("i", "f"):
            numeric = _numeric(self.number_values(name, kind), feature.exact)
        return FeatureStats(
            name=name,
            type=KIND_NAMES[kind] if kind else None,
            num_present=present,
            num_missing=self.num_examples - present,
            num_unset=sum(feature.examples.get("x", {}).values()),
            min_num_values=low,
            max_num_values=high,
            avg_num_values=average,
            tot_num_values=total,
            num_values_quantiles=quantiles,
            num_values_histogram=lengths_histogram,
            numeric=numeric,
            string=string,
            left_out=others,
        )
