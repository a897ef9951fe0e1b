"""The analyzers' results made of their counts streamed a (key, count) at a time in order:
sorted on the ps tasks by the native op, or here, through disk when they outgrow memory;
against orders and ranks said here independently."""

import collections
import hashlib
import math
import random

import numpy as np
import pytest
import tensorflow as tf
from helpers.counted import Counted

from tf2_mapreduce import native, spilling
from tf2_mapreduce.transform import analysis, kinds
from tf2_mapreduce.transform.trace import Call


@pytest.fixture(params=["spilled", "in_memory", "native"])
def counted(request, monkeypatch):
    if request.param == "spilled":
        monkeypatch.setattr(spilling, "RUN_BYTES", 7 * 80)
        monkeypatch.setattr(spilling, "FAN_IN", 3)  # merged in stages too
    if request.param == "native" and native.load() is None:
        pytest.fail("the native ops are needed: %s" % native.unavailable())
    return lambda entries: Counted(entries, native=request.param == "native")


def _keys(values, dtype):
    """Each value as the key a map step counts it under (`kinds._as_keys`)."""
    return [key.numpy() for key in kinds.counted(Call("quantiles", dtype), tf.constant(values, dtype))]


def _vocabulary_call(top_k=None, frequency_threshold=None):
    params = {"top_k": top_k, "frequency_threshold": frequency_threshold, "filename": "v", "key": "v"}
    return Call(kinds.VOCABULARY, tf.string, params, name="vocabulary:v", counts="values:v")


@pytest.mark.parametrize(
    "top_k,threshold", [(None, None), (5, None), (7, None), (14, None), (None, 3), (4, 2), (1000, None)]
)
def test_a_vocabulary_is_its_terms_written_in_tf_transforms_order(counted, tmp_path, top_k, threshold):
    rng = random.Random(top_k or 0)
    alphabet = [b"\x00", b"a", b"b", b"\xff"]
    counts = collections.Counter(b"".join(rng.choices(alphabet, k=rng.randint(1, 3))) for _ in range(400))
    entries = [(("values:v", term), count) for term, count in counts.items()]
    rng.shuffle(entries)
    (made,) = analysis.results([_vocabulary_call(top_k, threshold)], counted(entries), str(tmp_path))
    # tf.Transform's order: count descending, then the term's bytes descending.
    kept = sorted(((c, t) for t, c in counts.items() if not threshold or c >= threshold), reverse=True)
    terms = [t for _, t in kept][:top_k]
    with open(made.path, "rb") as f:
        assert f.read() == b"".join(t + b"\n" for t in terms)
    assert made.size == len(terms)
    assert made.sha256 == hashlib.sha256(b"".join(t + b"\n" for t in terms)).hexdigest()


def test_a_vocabulary_of_no_term_is_tf_transforms_one_dummy_term(counted, tmp_path):
    (made,) = analysis.results(
        [_vocabulary_call(frequency_threshold=5)], counted([(("values:v", b"x"), 4)]), str(tmp_path)
    )
    with open(made.path, "rb") as f:
        assert f.read() == kinds.EMPTY_VOCABULARY["string"] + b"\n"
    assert made.size == 1


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64, tf.int64])
def test_quantiles_are_the_values_at_their_ranks_of_every_value_sorted(counted, dtype):
    rng = np.random.default_rng(11)
    if dtype.is_integer:
        values = list(rng.integers(-(2**62), 2**62, 300)) + [-(2**63), 2**63 - 1, 0, -1, 5, 5]
    else:
        tiny = np.finfo(dtype.as_numpy_dtype).tiny
        values = list(rng.normal(0, 1e3, 300)) + [0.0, -0.0, math.inf, -math.inf, tiny / 4, -tiny / 4, 1.5, 1.5]
        values += [math.nan] * 3  # left out
    values = np.array(values, dtype.as_numpy_dtype)
    counts = collections.Counter(_keys(values, dtype))
    call = Call("quantiles", dtype, {"num_buckets": 7}, name="quantiles:q", counts="values:q")
    entries = [(("values:q", key), count) for key, count in counts.items()]
    random.Random(1).shuffle(entries)
    (boundaries,) = analysis.results([call], counted(entries), None)
    ordered = np.sort(values[~np.isnan(values)] if not dtype.is_integer else values)
    n = len(ordered)
    expected = np.array([[ordered[k * n // 7] for k in range(1, 7)]], np.float32)
    np.testing.assert_array_equal(boundaries, expected)


def test_a_vocabulary_and_the_quantiles_of_one_integer_share_one_count_each_in_its_order(counted, tmp_path):
    """`kinds.counting` gives them one count: the ps tasks sort it once for each."""
    rng = np.random.default_rng(12)
    values = rng.integers(-40, 40, 500)
    counts = collections.Counter(_keys(values, tf.int64))
    entries = [(("values:n", key), count) for key, count in counts.items()]
    params = {"top_k": 10, "frequency_threshold": None, "filename": "n", "key": "n"}
    calls = [
        Call(kinds.VOCABULARY, tf.int64, params, name="vocabulary:n", counts="values:n"),
        Call("quantiles", tf.int64, {"num_buckets": 5}, name="quantiles:n", counts="values:n"),
    ]
    made, boundaries = analysis.results(calls, counted(entries), str(tmp_path))
    terms = [t for _, t in sorted(((c, t) for t, c in counts.items()), reverse=True)][:10]
    with open(made.path, "rb") as f:
        assert f.read() == b"".join(t + b"\n" for t in terms)
    ordered = np.sort(values)
    np.testing.assert_array_equal(boundaries, [[ordered[k * 500 // 5] for k in range(1, 5)]])
