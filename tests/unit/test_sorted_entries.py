"""The native op a ps task sorts a vocabulary's entries with (native/sorted_entries.cc):
in the order of the Python orders' encodings of the same entries, sorted by Python."""

import random
import struct

import numpy as np
import pytest
import tensorflow as tf

from tf2_mapreduce import native
from tf2_mapreduce.reducers.keys import TftOrder
from tf2_mapreduce.state import view_chunks
from tf2_mapreduce.transform.sorted_results import ByValue


@pytest.fixture(scope="module")
def library():
    library = native.load()
    if library is None:
        pytest.fail("the native ops are needed: %s" % native.unavailable())
    return library


def _python_order(order):
    return TftOrder() if order == 0 else ByValue({1: tf.int64, 2: tf.float32, 3: tf.float64}[order])


def _parts(library, keys, counts, prefixes, orders, min_count=1):
    """The op's parts: each part's entries encoded as the Python order does, and its sum."""
    terms, counts, totals, splits = (
        part.numpy().tolist()
        for part in library.tf2_mapreduce_sorted_entries(
            tf.constant(keys, tf.string, [len(keys)]),
            tf.constant(counts, tf.int64, [len(counts)]),
            tf.constant(prefixes, tf.string, [len(prefixes)]),
            tf.constant(orders, tf.int32, [len(orders)]),
            min_count,
        )
    )
    assert splits[0] == 0 and splits[-1] == len(terms) and splits == sorted(splits)
    return [
        ([_python_order(order).encode(entry) for entry in zip(terms[begin:end], counts[begin:end])], total)
        for order, begin, end, total in zip(orders, splits, splits[1:], totals)
    ]


def _sorted(library, keys, counts, prefix, order, min_count=1):
    (part,) = _parts(library, keys, counts, [prefix], [order], min_count)
    return part


def _terms(rng, n):
    """Terms of bytes escaped and their neighbours, of 0-4 bytes, and of 8-12 sharing
    their first 8 (which the op compares before the rest)."""
    alphabet = [b"\x00", b"\x01", b"a", b"b", b"\xfe", b"\xff"]
    short = {b"".join(rng.choices(alphabet, k=rng.randint(0, 4))) for _ in range(n)}
    stems = [b"\x00" * 8, b"stem\x00\xff\x01a"]
    return short | {rng.choice(stems) + b"".join(rng.choices(alphabet, k=rng.randint(0, 4))) for _ in range(n)}


def test_terms_are_encoded_and_sorted_as_tf_transforms_order_encodes_them(library):
    rng = random.Random(3)
    ours = [(b"\x00\x07" + term, rng.randint(1, 4)) for term in _terms(rng, 300)]
    others = [(b"\x00\x08" + term, rng.randint(1, 4)) for term in _terms(rng, 50)] + [(b"\xff\xffe", 9)]
    entries = ours + others
    rng.shuffle(entries)
    keys, counts = [k for k, _ in entries], [c for _, c in entries]
    order = TftOrder()
    for min_count in (1, 3):
        kept = [(key[2:], count) for key, count in ours if count >= min_count]
        expected = sorted(order.encode(entry) for entry in kept)
        assert _sorted(library, keys, counts, b"\x00\x07", 0, min_count) == (expected, sum(c for _, c in kept))
        assert [order.decode(data) for data in expected] == sorted(
            kept, key=lambda e: (-e[1], [-b for b in e[0]] + [1])
        )


@pytest.mark.parametrize("dtype", [tf.int64, tf.float32, tf.float64])
def test_values_are_encoded_and_sorted_as_the_quantiles_order_encodes_them_nan_left_out(library, dtype):
    rng = np.random.default_rng(4)
    if dtype.is_integer:
        bits = list(rng.integers(-(2**63), 2**63 - 1, 200)) + [-(2**63), 2**63 - 1, 0, -1]
    else:
        numpy_type, as_int = dtype.as_numpy_dtype, {tf.float32: np.int32, tf.float64: np.int64}[dtype]
        values = np.array(list(rng.normal(0, 1e3, 200)) + [0.0, -0.0, np.inf, -np.inf, np.nan], numpy_type)
        nan_bits = [0x7FC00001, -0x00400001] if dtype == tf.float32 else [0x7FF8000000000001, -0x0008000000000001]
        nans = np.array(nan_bits, as_int).view(numpy_type)  # NaNs of either sign
        bits = list(np.concatenate([values, nans]).view(as_int))
    entries = [(b"%d" % b, int(rng.integers(1, 5))) for b in dict.fromkeys(bits)]
    order = ByValue(dtype)
    kept = [entry for entry in entries if order.keeps(entry)]
    expected = sorted(order.encode(entry) for entry in kept)
    keys = [b"p" + key for key, _ in entries]
    got = _sorted(library, keys, [c for _, c in entries], b"p", order.native)
    assert got == (expected, sum(c for _, c in kept))
    assert len(kept) == len(entries) - (0 if dtype.is_integer else 3)


def test_every_part_is_sorted_in_its_own_order_from_one_table(library):
    rng = random.Random(5)
    floats = np.array([1.5, -2.0, 0.0, -0.0, np.nan, 7.25], np.float32).view(np.int32)
    values = {b"\x00\x01" + b"%d" % bits: rng.randint(1, 5) for bits in floats}
    terms = {b"\x00\x02" + term: rng.randint(1, 5) for term in _terms(rng, 80)}
    ints = {b"\x00\x03" + b"%d" % v: rng.randint(1, 5) for v in rng.sample(range(-50, 50), 30)}
    entries = list({**values, **terms, **ints, b"\x00": 3, b"\x01\x00x": 4}.items())  # short, and of no part
    rng.shuffle(entries)
    keys, counts = [k for k, _ in entries], [c for _, c in entries]
    parts = _parts(library, keys, counts, [b"\x00\x02", b"\x00\x01", b"\x00\x03", b"\x00\x09"], [0, 2, 1, 0])
    for (got, total), (table, order) in zip(parts, [(terms, 0), (values, 2), (ints, 1), ({}, 0)]):
        kept = [(key[2:], count) for key, count in table.items() if _python_order(order).keeps((key[2:], count))]
        assert got == sorted(_python_order(order).encode(entry) for entry in kept)
        assert total == sum(count for _, count in kept)
    assert len(parts[1][0]) == len(values) - 1  # the NaN left out
    with pytest.raises(tf.errors.InvalidArgumentError, match="prefixes of different lengths"):
        _parts(library, keys, counts, [b"\x00\x02", b"\x00"], [0, 0])
    # A prefix of two parts (a vocabulary and the quantiles of one integer, one count):
    # its entries in both, each part in its order.
    (as_terms, terms_total), (as_values, values_total) = _parts(library, keys, counts, [b"\x00\x03"] * 2, [0, 1])
    assert as_terms == sorted(TftOrder().encode((key[2:], count)) for key, count in ints.items())
    assert as_values == sorted(ByValue(tf.int64).encode((key[2:], count)) for key, count in ints.items())
    assert terms_total == values_total == sum(ints.values())
    with pytest.raises(tf.errors.InvalidArgumentError, match="2 prefixes but 1 orders"):
        _parts(library, keys, counts, [b"\x00\x02", b"\x00\x01"], [0])
    assert _parts(library, keys, counts, [], []) == []


def test_sorted_streams_are_merged_in_their_order_in_chunks_of_about_a_number_of_bytes(monkeypatch):
    monkeypatch.setattr(view_chunks, "CHUNK_BYTES", 40)
    rng = random.Random(6)
    order = TftOrder()
    entries = [(b"%d" % n + b"x" * rng.randint(0, 9), rng.randint(1, 9)) for n in range(3000)]
    streams = []
    for s in range(3):
        mine = sorted(entries[s::3], key=order.encode)
        cuts = sorted(rng.sample(range(1, len(mine)), 40)) if len(mine) > 40 else []
        chunks = [mine[a:b] for a, b in zip([0] + cuts, cuts + [len(mine)])]
        streams.append(iter([([k for k, _ in c], [n for _, n in c]) for c in chunks]))
    merged = list(view_chunks.merged(streams, order.encode))
    assert [e for keys, counts in merged for e in zip(keys, counts)] == sorted(entries, key=order.encode)
    assert all(len(keys) == len(counts) > 0 for keys, counts in merged)
    # After the first (of 1,000 entries, their width unknown): about 40 bytes of keys
    # each, as many keys as the last chunk's width (1-13 bytes a key) says.
    sizes = [sum(map(len, keys)) for keys, _ in merged[1:]]
    assert len(merged[0][0]) == 1000 and 20 <= sum(sizes) / len(sizes) <= 60, sizes


def test_a_key_that_is_no_integer_is_an_error_not_a_value(library):
    with pytest.raises(tf.errors.InvalidArgumentError, match="no integer"):
        _sorted(library, [b"p12", b"p1x"], [1, 1], b"p", 1)
    with pytest.raises(tf.errors.InvalidArgumentError, match="float32"):
        _sorted(library, [b"p%d" % 2**40], [1], b"p", 2)
    assert _sorted(library, [], [], b"p", 3) == ([], 0)
    assert struct.unpack(">Q", _sorted(library, [b"p-1"], [2], b"p", 1)[0][0][:8])[0] == 2**63 - 1
    with pytest.raises(tf.errors.InvalidArgumentError, match="no order"):
        _parts(library, [], [], [b"p"], [4])
