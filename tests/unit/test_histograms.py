"""TFDV's histograms, quantiles and median, as `reducers.statistics.histograms` makes them
from exact counts: against what TFDV 1.16.1 itself wrote for the same values (a captured
fixture, where its sketch was exact), and against plain-Python definitions on random
multisets with ties and infinities."""

import json
import math
import os
import random

import numpy as np
import pytest

from tf2_mapreduce.reducers.statistics import histograms

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "tfdv_1.16.1_histograms.json")


def number(text):
    return float(text) if isinstance(text, str) else text


def captured():
    with open(FIXTURE, encoding="utf-8") as f:
        return json.load(f)["features"]


def columns(pairs):
    values = np.array([number(v) for v, _ in pairs], dtype=np.float64)
    return values, np.array([c for _, c in pairs], dtype=np.int64)


def as_floats(buckets):
    """Buckets as one flat list of floats, as pytest.approx compares them."""
    return [float(x) for bucket in buckets for x in bucket]


@pytest.mark.parametrize("feature", captured(), ids=lambda f: "%s.%s" % (f["dataset"], f["feature"]))
def test_quantiles_median_and_value_counts_are_tfdvs_own(feature):
    expected = lambda name: as_floats([[number(x) for x in bucket] for bucket in feature[name]])  # noqa: E731
    values, counts = columns(feature["values"])
    if len(values):
        assert as_floats(histograms.quantiles_histogram(values, counts)) == pytest.approx(
            expected("quantiles_histogram"), rel=1e-12
        )
        assert float(histograms.median(values, counts)) == number(feature["median"])
    lengths, examples = columns(feature["lengths"])
    assert as_floats(histograms.quantiles_histogram(lengths, examples)) == pytest.approx(
        expected("num_values_histogram"), rel=1e-12
    )


@pytest.mark.parametrize("feature", captured(), ids=lambda f: "%s.%s" % (f["dataset"], f["feature"]))
def test_equal_width_buckets_are_tfdvs_and_their_counts_exact(feature):
    """TFDV interpolates these counts from 1,000 quantiles; the buckets themselves (edges,
    the infinities' buckets, how many) are the same, and each count is the values that
    fall in (low, high], the first bucket's low included."""
    values, counts = columns(feature["values"])
    ours = histograms.standard_histogram(values, counts)
    theirs = [[number(low), number(high), count] for low, high, count in feature["standard_histogram"]]
    assert [[low, high] for low, high, _ in ours] == [[low, high] for low, high, _ in theirs]
    assert sum(c for _, _, c in ours) == pytest.approx(sum(c for _, _, c in theirs))
    finite = [(v, c) for v, c in zip(values, counts) if math.isfinite(v)]
    equal_width = [bucket for bucket in ours if math.isfinite(bucket[0]) and math.isfinite(bucket[1])]
    for k, (low, high, count) in enumerate(equal_width):
        assert count == sum(c for v, c in finite if (low < v or (k == 0 and v == low)) and v <= high)


def plain_quantiles_histogram(ordered):
    """The QUANTILES histogram of sorted `ordered` values, from its definition."""
    n = len(ordered)
    bounds = [ordered[min(k * n // 10, n - 1)] for k in range(11)]
    counts = [float(sum(1 for v in ordered if bounds[k] < v <= bounds[k + 1])) for k in range(10)]
    for high in set(bounds[1:]):  # buckets with one high bound share their values
        run = [k for k in range(10) if bounds[k + 1] == high]
        for k in run:
            counts[k] = sum(sum(1 for v in ordered if bounds[j] < v <= bounds[j + 1]) for j in run) / len(run)
    leading = 1
    while leading < 10 and bounds[leading] == bounds[0] and bounds[leading + 1] == bounds[1]:
        leading += 1
    for k in range(leading):
        counts[k] += ordered.count(ordered[0]) / leading
    return [[bounds[k], bounds[k + 1], counts[k]] for k in range(10)]


@pytest.mark.parametrize("seed", range(40))
def test_random_multisets_with_ties_and_infinities_follow_the_definitions(seed):
    rng = random.Random(seed)
    pool = [-math.inf, math.inf] * (seed % 3) + [rng.choice([0.5, 1.0, 2.0, 3.5, -7.0]) for _ in range(5)]
    ordered = sorted(rng.choice(pool + [rng.uniform(-9, 9)]) for _ in range(rng.randint(1, 300)))
    distinct = sorted(set(ordered))
    values = np.array(distinct, dtype=np.float64)
    counts = np.array([ordered.count(v) for v in distinct], dtype=np.int64)
    assert as_floats(histograms.quantiles_histogram(values, counts)) == pytest.approx(
        as_floats(plain_quantiles_histogram(ordered)), rel=1e-12
    )
    assert histograms.median(values, counts) == ordered[len(ordered) // 2]
    assert list(histograms.quantiles(values, counts)[0]) == [
        ordered[min(k * len(ordered) // 10, len(ordered) - 1)] for k in range(11)
    ]
    standard = histograms.standard_histogram(values, counts)
    assert sum(c for _, _, c in standard) == len(ordered)
