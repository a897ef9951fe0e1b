"""TFDV's definitions of a numeric feature's quantiles, median and histograms, computed from
exact counts. TFDV 1.16 takes them from a quantiles sketch (exact only up to 5,701 distinct
values); here every figure is what that sketch would give if it held every value, but for
the equal-width histogram, whose counts TFDV interpolates and these count exactly."""

import math

import numpy as np

__all__ = ["PARTS", "quantiles", "median", "quantiles_histogram", "standard_histogram"]

PARTS = 10  # buckets of TFDV's histograms, and quantiles asked for (its defaults)


def _cumulative(counts):
    return np.cumsum(np.asarray(counts, dtype=np.int64))


def quantiles(values, counts, parts=PARTS):
    """(boundaries, cumulative counts) of the sorted distinct `values` (NaN left out,
    infinities included) with `counts`: boundary k is the value of rank
    min(floor(k * n / parts), n - 1) (0-based, n values in all), the cumulative count the
    values at most it, k = 0..parts. Boundary 0 is the least value, `parts` the greatest."""
    ends = _cumulative(counts)
    n = int(ends[-1])
    ranks = [min(k * n // parts, n - 1) for k in range(parts + 1)]
    index = np.searchsorted(ends, ranks, side="right")
    return np.asarray(values)[index], ends[index]


def median(values, counts):
    """The value of rank floor(n / 2): TFDV's median, the upper one of an even number."""
    ends = _cumulative(counts)
    return np.asarray(values)[int(np.searchsorted(ends, int(ends[-1]) // 2, side="right"))]


def _shared(boundaries, cumulative):
    """Each bucket [b_k, b_k+1]'s count, as TFDV shares it out: the values in (b_k, b_k+1];
    buckets with one high bound (ties) share their values evenly; the values equal to the
    least go to the first bucket (shared by the first buckets that are all that value)."""
    low, high = boundaries[:-1], boundaries[1:]
    counts = np.diff(cumulative).astype(np.float64)
    i = 0
    while i < len(low):
        j = i + 1
        while j < len(low) and high[j] == high[i]:
            j += 1
        counts[i:j] = counts[i:j].sum() / (j - i)
        i = j
    first = 1
    while first < len(low) and low[first] == low[0] and high[first] == high[0]:
        first += 1
    counts[:first] += cumulative[0] / first
    return [(low[k], high[k], float(counts[k])) for k in range(len(low))]


def quantiles_histogram(values, counts, parts=PARTS):
    """TFDV's QUANTILES histogram: `parts` buckets between the quantiles' boundaries, each
    with the values that fall in it as `_shared` counts them (tied boundaries share)."""
    return _shared(*quantiles(values, counts, parts))


def standard_histogram(values, counts, parts=PARTS):
    """TFDV's STANDARD histogram, exactly counted: -inf values (if any) in a bucket
    [-inf, -inf] first; `parts` buckets of equal width from the least finite value to the
    greatest (one [v, v] if they are equal), every one written, each with the values in
    (low, high], the first [low, high]; +inf values (if any) in [inf, inf] last. With no
    finite value, one bucket [inf, -inf] of every value, as TFDV writes it."""
    values = np.asarray(values, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.int64)
    finite = np.isfinite(values)
    neg_inf, pos_inf = int(counts[values == -math.inf].sum()), int(counts[values == math.inf].sum())
    if not finite.any():
        return [(math.inf, -math.inf, neg_inf + pos_inf)]
    values, counts = values[finite], counts[finite]
    low, high = values[0], values[-1]
    edges = np.array([low, high]) if low == high else np.linspace(low, high, parts + 1)
    buckets = [(-math.inf, -math.inf, neg_inf)] if neg_inf else []
    if not np.isfinite(edges).all():  # an edge overflows: TFDV writes no buckets
        return buckets
    ends = np.concatenate([[0], _cumulative(counts)])
    # Values up to and including each edge: bucket k holds (edge k, edge k+1], the first its low edge too.
    upto = ends[np.searchsorted(values, edges, side="right")]
    upto[0] = 0
    for k in range(len(edges) - 1):
        buckets.append((float(edges[k]), float(edges[k + 1]), int(upto[k + 1] - upto[k])))
    if pos_inf:
        buckets.append((math.inf, math.inf, pos_inf))
    return buckets
