"""Exact sums and squares as counted keys (`transform.sums`), against Fractions over the
same values: floats of every magnitude (subnormals, the largest), NaN and infinities,
int64's extremes."""

import math
import random
from fractions import Fraction

import numpy as np
import pytest
import tensorflow as tf

from tf2_mapreduce.transform import sums


def counted(values, dtype, squares=True):
    keys, counts = sums.terms(tf.constant(values, dtype), squares=squares)
    assert all(c >= 0 for c in counts.numpy())  # zeros the table leaves out
    return sums.Totals(zip(keys.numpy(), counts.numpy().tolist()))


def floats(rng, n, numpy_type):
    info = np.finfo(numpy_type)
    pool = [0.0, -0.0, float(info.tiny), float(info.tiny) / 8, float(info.max), -float(info.max), 1.0, -1.5, 3.25e-30]
    return [
        rng.choice(pool) if rng.random() < 0.2 else float(numpy_type(rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30)))
        for _ in range(n)
    ]


@pytest.mark.parametrize("dtype, numpy_type", [(tf.float32, np.float32), (tf.float64, np.float64)])
def test_float_sums_and_squares_are_exact(dtype, numpy_type):
    values = [float(numpy_type(v)) for v in floats(random.Random(3), 2000, numpy_type)]
    totals = counted(values, dtype)
    exact = [Fraction(v) for v in values]
    assert totals.total == sum(exact)
    assert totals.squares == sum(v * v for v in exact)
    assert totals.finite == len(values) and totals.nan == totals.inf == totals.minus_inf == 0
    mean, variance = totals.mean_and_var()
    assert mean == sum(exact) / len(exact)
    assert variance == sum((v - mean) ** 2 for v in exact) / len(exact)


def test_int64_extremes_sum_exactly():
    values = [2**63 - 1, -(2**63), -1, 0, 1, 12345678901234, -987654321] * 3
    totals = counted(values, tf.int64)
    assert totals.total == sum(values) and totals.squares == sum(v * v for v in values)
    assert sums.rounded(totals.sum(), np.int64) == np.array(values, np.int64).sum()


def test_nan_and_infinities_are_counted_apart_as_numpy_sums_them():
    assert math.isnan(counted([1.0, math.nan, 2.0], tf.float32).sum())
    assert counted([1.0, math.inf, 2.0], tf.float32).sum() == math.inf
    assert math.isnan(counted([math.inf, -math.inf], tf.float32).sum())
    totals = counted([1.0, math.nan, math.inf, 3.0], tf.float32)
    assert totals.mean_and_var() == (Fraction(2), Fraction(1))  # the finite values only, as tft
    assert counted([], tf.float32).mean_and_var() == (0, 0)


def test_a_fraction_is_rounded_to_float32_once():
    # Halfway between two float32s, just above: float64 rounding first would land on the halfway point.
    low = np.float32(1.0)
    high = np.nextafter(low, np.float32(2))
    halfway = (Fraction(float(low)) + Fraction(float(high))) / 2
    assert sums.rounded(halfway + Fraction(1, 2**80), np.float32) == high
    assert sums.rounded(halfway - Fraction(1, 2**80), np.float32) == low
    assert sums.rounded(halfway, np.float32) == low  # ties to even
