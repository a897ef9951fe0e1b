"""TFDV's definitions of a numeric feature's quantiles, median and histograms, computed from
exact counts. TFDV 1.16 takes them from a quantiles sketch (exact only up to 5,701 distinct
values); here every figure is what that sketch would give if it held every value, but for
the equal-width histogram, whose counts TFDV interpolates and these count exactly. All of
them in one pass over the sorted values (`figures`), which need not be held at once."""

import math

import numpy as np

__all__ = ["PARTS", "Ranked", "figures", "shared", "quantiles", "median", "quantiles_histogram", "standard_histogram"]

PARTS = 10  # buckets of TFDV's histograms, and quantiles asked for (its defaults)


class Ranked:
    """What one pass over sorted distinct values in chunks finds: the value of each of
    `ranks` (0-based, in a multiset of the values with their counts) and the count of the
    values up to it, and the count of the values at most each of `edges`, filled a chunk
    at a time (`add`)."""

    def __init__(self, ranks, edges=()):
        ranks = np.asarray(ranks, dtype=np.int64)
        self._order = np.argsort(ranks, kind="stable")
        self._ranks = ranks[self._order]
        self._edges = np.asarray(edges, dtype=np.float64)
        self._found, self._seen = 0, 0
        self._values = None
        self._ends = np.zeros(len(ranks), dtype=np.int64)
        self.upto = np.zeros(len(self._edges), dtype=np.int64)

    def add(self, values, counts) -> None:
        """The next chunk: distinct `values`, ascending and above the last chunk's, and their `counts`."""
        if not len(values):
            return
        values = np.asarray(values)
        local = np.concatenate([[0], np.cumsum(np.asarray(counts, dtype=np.int64))])
        ends = self._seen + local[1:]
        if self._values is None:
            self._values = np.zeros(len(self._ranks), dtype=values.dtype)
        pending = self._ranks[self._found :]
        found = int(np.searchsorted(pending, ends[-1], side="left"))  # the ranks below this chunk's end
        index = np.searchsorted(ends, pending[:found], side="right")
        self._values[self._found : self._found + found] = values[index]
        self._ends[self._found : self._found + found] = ends[index]
        self._found += found
        if len(self._edges):
            self.upto += local[np.searchsorted(values.astype(np.float64), self._edges, side="right")]
        self._seen = int(ends[-1])

    def at_ranks(self):
        """(values, counts up to each), in the order the ranks were given."""
        values, ends = np.empty_like(self._values), np.empty_like(self._ends)
        values[self._order], ends[self._order] = self._values, self._ends
        return values, ends


def _edges(low, high, parts):
    return np.array([low, high]) if low == high else np.linspace(low, high, parts + 1)


def figures(chunks, n, low, high, neg_inf=0, pos_inf=0, parts=PARTS):
    """(quantiles, median, standard histogram), as `quantiles`, `median` and
    `standard_histogram` give them, of the sorted distinct values in `chunks` ((values,
    counts) each, ascending; NaN left out, infinities in), in one pass over them: `n`
    values in all, `neg_inf` and `pos_inf` of them infinite, `low` and `high` the least and
    greatest finite one (None if none is), the histogram's edges made from them as float64."""
    ranks = [min(k * n // parts, n - 1) for k in range(parts + 1)] + [n // 2]
    edges = None if low is None else _edges(np.float64(low), np.float64(high), parts)
    counted = edges is not None and np.isfinite(edges).all()
    ranked = Ranked(ranks, edges if counted else ())
    for values, counts in chunks:
        ranked.add(values, counts)
    values, ends = ranked.at_ranks()
    if edges is None:
        return (values[:-1], ends[:-1]), values[-1], [(math.inf, -math.inf, neg_inf + pos_inf)]
    buckets = [(-math.inf, -math.inf, neg_inf)] if neg_inf else []
    if not counted:  # an edge overflows: TFDV writes no buckets
        return (values[:-1], ends[:-1]), values[-1], buckets
    # Finite values up to and including each edge: bucket k holds (edge k, edge k+1], the first its low edge too.
    upto = ranked.upto - neg_inf
    upto[0] = 0
    for k in range(len(edges) - 1):
        buckets.append((float(edges[k]), float(edges[k + 1]), int(upto[k + 1] - upto[k])))
    if pos_inf:
        buckets.append((math.inf, math.inf, pos_inf))
    return (values[:-1], ends[:-1]), values[-1], buckets


def _in_memory(values, counts, parts):
    """`figures` of sorted distinct `values` with `counts`, given whole."""
    values, counts = np.asarray(values), np.asarray(counts, dtype=np.int64)
    as_floats = values.astype(np.float64)
    finite = np.isfinite(as_floats)
    low, high = (as_floats[finite][0], as_floats[finite][-1]) if finite.any() else (None, None)
    neg_inf, pos_inf = int(counts[as_floats == -math.inf].sum()), int(counts[as_floats == math.inf].sum())
    return figures([(values, counts)], int(counts.sum()), low, high, neg_inf, pos_inf, parts)


def quantiles(values, counts, parts=PARTS):
    """(boundaries, cumulative counts) of the sorted distinct `values` (NaN left out,
    infinities included) with `counts`: boundary k is the value of rank
    min(floor(k * n / parts), n - 1) (0-based, n values in all), the cumulative count the
    values at most it, k = 0..parts. Boundary 0 is the least value, `parts` the greatest."""
    return _in_memory(values, counts, parts)[0]


def median(values, counts):
    """The value of rank floor(n / 2): TFDV's median, the upper one of an even number."""
    return _in_memory(values, counts, PARTS)[1]


def shared(boundaries, cumulative):
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
    with the values that fall in it as `shared` counts them (tied boundaries share)."""
    return shared(*quantiles(values, counts, parts))


def standard_histogram(values, counts, parts=PARTS):
    """TFDV's STANDARD histogram, exactly counted: -inf values (if any) in a bucket
    [-inf, -inf] first; `parts` buckets of equal width from the least finite value to the
    greatest (one [v, v] if they are equal), every one written, each with the values in
    (low, high], the first [low, high]; +inf values (if any) in [inf, inf] last. With no
    finite value, one bucket [inf, -inf] of every value, as TFDV writes it."""
    return _in_memory(values, counts, parts)[2]
