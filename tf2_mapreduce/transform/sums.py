"""Exact sums of numbers, and of their squares, as counts of a few keys: every number is
an integer times a power of two, cut into 12-bit chunks; a key is a power of two, its count
the chunks added up. So `sum`, `mean` and `var` are exact in a table of a few hundred keys,
whatever the number of distinct values, and come out the same in any order."""

from fractions import Fraction

import numpy as np

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.numerics import Moments

__all__ = ["terms", "Totals", "rounded"]

_CHUNK = 12  # bits: a product of two chunks, doubled, stays below 2**25; 2**38 of those fit in an int64
_TAGS = ("+", "-", "square", "finite", "nan", "inf", "-inf")
_TAG = {name: code for code, name in enumerate(_TAGS)}
_SHIFT = 100_000  # a key is tag * _SHIFT + exponent + _SHIFT // 2: exponents stay within +-50,000
_PLACE = len(_TAGS) * _SHIFT  # with positions: position * _PLACE + key


def _parts(values):
    """(negative, magnitude as uint64, exponent, finite, nan, +inf, -inf, chunks) of each value."""
    if values.dtype.is_integer:
        values = tf.cast(values, tf.int64)
        negative = values < 0
        # |INT64_MIN| wraps to INT64_MIN, whose bits read unsigned are 2**63: right too.
        magnitude = tf.bitcast(tf.abs(values), tf.uint64)
        exponent = tf.zeros_like(values)
        none = tf.zeros_like(negative)
        return negative, magnitude, exponent, tf.logical_not(none), none, none, none, 6
    if values.dtype == tf.float64:
        bits, width, bias, int_type = tf.bitcast(values, tf.int64), 52, 1075, tf.int64
    else:
        bits, width, bias, int_type = tf.bitcast(tf.cast(values, tf.float32), tf.int32), 23, 150, tf.int32
    top = (1 << (63 - width if int_type == tf.int64 else 31 - width)) - 1  # the exponent field's all-ones
    negative = bits < 0
    field = tf.cast(tf.bitwise.bitwise_and(tf.bitwise.right_shift(bits, width), top), tf.int64)
    fraction = tf.cast(tf.bitwise.bitwise_and(bits, (1 << width) - 1), tf.int64)
    normal = field > 0
    magnitude = tf.cast(tf.where(normal, fraction + (1 << width), fraction), tf.uint64)
    exponent = tf.where(normal, field, 1) - bias
    finite = field < top
    nan = tf.math.is_nan(values)
    infinite = tf.logical_and(tf.logical_not(finite), tf.logical_not(nan))
    chunks = -(-(width + 1) // _CHUNK)
    return negative, magnitude, exponent, finite, nan, infinite & ~negative, infinite & negative, chunks


def terms(values, squares=False, positions=None):
    """The keys (1-D tf.string) and counts (1-D int64) that `values` (1-D, integers or
    floats) add to their analyzer's table: their sum, of finite values, by power of two
    and sign; with `squares`, the sum of their squares too; how many are finite, NaN,
    +inf and -inf. Reduced within the batch: a few keys, whatever its size. With
    `positions` (1-D int64, a value's each), each position's apart, its keys prefixed by
    it ("j:")."""
    negative, magnitude, exponent, finite, nan, plus, minus, count = _parts(values)
    # Every term of a value is a column: a few ops whatever the chunks (a loop of masks per
    # term made thousands, which every map step traced and every worker instantiated).
    offsets = [_CHUNK * k for k in range(count)]  # each chunk's lowest bit
    chunks = tf.cast(
        tf.bitwise.bitwise_and(
            tf.bitwise.right_shift(magnitude[:, None], tf.constant(offsets, tf.uint64)), (1 << _CHUNK) - 1
        ),
        tf.int64,
    )
    exponent = exponent[:, None]
    sign = tf.where(negative, tf.constant(_TAG["-"], tf.int64), _TAG["+"])[:, None]
    tags = [tf.broadcast_to(sign, tf.shape(chunks))]
    powers = [exponent + tf.constant(offsets, tf.int64)]
    amounts = [chunks]
    wheres = [tf.broadcast_to(finite[:, None], tf.shape(chunks))]
    if squares:
        pairs = [(i, j) for i in range(count) for j in range(i, count)]
        first, second = (list(side) for side in zip(*pairs))
        product = tf.gather(chunks, first, axis=1) * tf.gather(chunks, second, axis=1)
        amounts.append(product * tf.constant([1 if i == j else 2 for i, j in pairs], tf.int64))
        powers.append(2 * exponent + tf.constant([_CHUNK * (i + j) for i, j in pairs], tf.int64))
        tags.append(tf.fill(tf.shape(product), tf.constant(_TAG["square"], tf.int64)))
        wheres.append(tf.broadcast_to(finite[:, None], tf.shape(product)))
    counted = {"finite": finite, "nan": nan, "inf": plus, "-inf": minus}  # each a count of the values it holds for
    flags = tf.stack(list(counted.values()), axis=1)
    counted_tags = tf.broadcast_to(tf.constant([[_TAG[name] for name in counted]], tf.int64), tf.shape(flags))
    tags.append(counted_tags)
    powers.append(tf.zeros_like(counted_tags))
    amounts.append(tf.ones_like(counted_tags))
    wheres.append(flags)
    where = tf.concat(wheres, 1)
    ids = tf.concat(tags, 1) * _SHIFT + tf.concat(powers, 1) + _SHIFT // 2
    if positions is not None:  # each id tagged with its value's position
        ids = positions[:, None] * _PLACE + ids
    ids, counts = tf.boolean_mask(ids, where), tf.boolean_mask(tf.concat(amounts, 1), where)
    unique, index = tf.unique(ids)
    counts = tf.math.unsorted_segment_sum(counts, index, tf.size(unique))
    if positions is None:
        return tf.strings.as_string(unique), counts
    keys = tf.strings.join([tf.strings.as_string(unique // _PLACE), tf.strings.as_string(unique % _PLACE)], ":")
    return keys, counts


class Totals:
    """What `terms` counted, added up exactly: `total` (of the finite values, a Fraction),
    `squares`, `finite`, `nan`, `inf`, `minus_inf` (counts)."""

    def __init__(self, entries):
        moments = Moments()
        found = dict.fromkeys(_TAGS, 0)
        for key, count in entries:
            tag, power = divmod(int(key), _SHIFT)
            power -= _SHIFT // 2
            name = _TAGS[tag]
            if name == "square":
                moments.add_square(power, count)
            elif name in ("+", "-"):
                moments.add_sum(power, count if name == "+" else -count)
            else:
                found[name] += count
        self.total, self.squares = moments.total, moments.squares
        self.finite, self.nan, self.inf, self.minus_inf = (found[n] for n in ("finite", "nan", "inf", "-inf"))
        self._moments = moments

    def sum(self) -> float | Fraction:
        """Every value's sum, as numpy would give it of these values: NaN with any NaN, or
        with both infinities; an infinity with one; else exact."""
        if self.nan or (self.inf and self.minus_inf):
            return float("nan")
        if self.inf or self.minus_inf:
            return float("inf") if self.inf else float("-inf")
        return self.total

    def mean_and_var(self):
        """The finite values' mean and population variance, exact (0 and 0 of none)."""
        return self._moments.mean_and_var(self.finite)


def rounded(value, dtype):
    """`value` (a Fraction, or a float for NaN and infinities) as `dtype` (int64, float64,
    float32 or float16), rounded once, to the nearest (ties to even): a Fraction goes
    through float64 first, then the neighbours of that narrower float are weighed against
    it exactly."""
    if dtype == np.int64:
        return np.int64((int(value) + 2**63) % 2**64 - 2**63)  # wrapped, as numpy's int64 sum
    wide = np.float64(float(value))
    if dtype == np.float64 or not isinstance(value, Fraction) or not np.isfinite(wide):
        return dtype(wide)
    with np.errstate(over="ignore"):
        near = dtype(wide)
    if not np.isfinite(near):  # beyond its range: its infinity, as a sum of its floats gives
        return near
    candidates = [np.nextafter(near, dtype(-np.inf)), near, np.nextafter(near, dtype(np.inf))]
    finite = [c for c in candidates if np.isfinite(c)]
    bits = np.int16 if dtype == np.float16 else np.int32
    return min(finite, key=lambda c: (abs(Fraction(float(c)) - value), int(np.array(c).view(bits)) & 1))
