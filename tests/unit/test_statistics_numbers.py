"""An int64 feature's values spilled to disk in sorted runs and merged
(`reducers.statistics.numbers`): the same statistics as when held whole, checked against
the sorted multiset itself, and nothing left on disk."""

import math
import os
import random
import struct
import tempfile

import numpy as np
import pytest

from tf2_mapreduce import spilling
from tf2_mapreduce.reducers.statistics import numbers as numbers_module
from tf2_mapreduce.reducers.statistics.builder import Builder
from tf2_mapreduce.reducers.statistics.keys import StatKeys
from tf2_mapreduce.reducers.statistics.numbers import VALUE_BYTES
from tf2_mapreduce.spilling import Held


def int_payload(value):
    return struct.pack(">Q", (value & (2**64 - 1)) ^ (1 << 63))


def counted(seed, size):
    """`size` distinct int64 values (the extremes, 0 and ties of rank among them) with counts."""
    rng = random.Random(seed)
    values = {-(2**63), 2**63 - 1, 0}
    while len(values) < size:
        values.add(rng.choice([rng.randint(-(2**63), 2**63 - 1), rng.randint(-50, 50), rng.randint(0, 10**6)]))
    values = list(values)
    rng.shuffle(values)  # the table's order: any
    return [(v, rng.choice([1, 1, 2, 7, 1000])) for v in values]


def stats_of(pairs, held, names=("ids",)):
    builder = Builder(StatKeys.numbers, held=held)
    builder.add_examples(sum(c for _, c in pairs))
    for name in names:
        builder.add_lengths(name, "i", 1, sum(c for _, c in pairs))
        for value, count in pairs:
            builder.add_value(name, "i", int_payload(value), count)
    return builder.finish()


@pytest.fixture
def small_runs(monkeypatch):
    """Runs merged a few values at a time, 3 at once: many chunks, runs merged into runs."""
    monkeypatch.setattr(numbers_module, "MERGE_ROWS", 5)
    monkeypatch.setattr(spilling, "FAN_IN", 3)


@pytest.mark.parametrize("seed", range(6))
def test_spilled_runs_give_the_figures_of_the_values_held_whole(small_runs, tmp_path, seed):
    pairs = counted(seed, random.Random(seed).randint(20, 400))
    whole = stats_of(pairs, Held()).features["ids"].numeric
    spilled = stats_of(pairs, Held(limit=40 * VALUE_BYTES, directory=str(tmp_path))).features["ids"].numeric
    assert spilled == whole
    ordered = sorted(v for v, c in pairs for _ in range(c))
    n = len(ordered)
    assert (spilled.count, spilled.min, spilled.max) == (n, ordered[0], ordered[-1])
    assert spilled.num_zeros == ordered.count(0) and spilled.median == ordered[n // 2]
    assert spilled.quantiles == [ordered[min(k * n // 10, n - 1)] for k in range(11)]
    assert spilled.mean == pytest.approx(math.fsum(ordered) / n, rel=1e-9)
    assert os.listdir(tmp_path) == []  # the runs removed


def test_features_share_what_is_held_and_each_spills_its_own(small_runs, tmp_path):
    """A large feature among many small ones, their keys interleaved or one after the
    other: never more held than the limit, chunks never larger than the merge reads."""
    pairs = counted(11, 300)
    small = [("small%d" % k, counted(k, 3)) for k in range(40)]
    for interleaved in (True, False):
        held = Held(limit=60 * VALUE_BYTES, directory=str(tmp_path))
        builder = Builder(StatKeys.numbers, held=held)
        added = [(name, pair) for name, values in small for pair in values] + [("big", pair) for pair in pairs]
        if interleaved:
            random.Random(1).shuffle(added)
        for name, (value, count) in added:
            builder.add_lengths(name, "i", 1, count)
            builder.add_value(name, "i", int_payload(value), count)
            assert held.size == VALUE_BYTES * sum(len(member.counts) for member in held.members) <= 60 * VALUE_BYTES
        chunks = list(builder.number_values("big", "i").chunks())
        assert max(len(values) for values, _ in chunks) <= 5
        stats = builder.finish()
        assert stats.features["big"].numeric == stats_of(pairs, Held(), names=("big",)).features["big"].numeric
        for name, values in small:
            assert stats.features[name].numeric == stats_of(values, Held(), names=(name,)).features[name].numeric
        assert os.listdir(tmp_path) == [] and held.size == 0


def test_merged_chunks_come_in_order_and_hold_every_value(small_runs, tmp_path):
    pairs = counted(3, 250)
    builder = Builder(StatKeys.numbers, held=Held(limit=30 * VALUE_BYTES, directory=str(tmp_path)))
    for value, count in pairs:
        builder.add_value("ids", "i", int_payload(value), count)
    chunks = list(builder.number_values("ids", "i").chunks())
    values = np.concatenate([v for v, _ in chunks])
    counts = np.concatenate([c for _, c in chunks])
    assert len(chunks) > 10 and max(len(v) for v, _ in chunks) <= 5
    assert values.tolist() == sorted(v for v, _ in pairs)
    assert counts.tolist() == [dict(pairs)[v] for v in values.tolist()]
    assert [np.concatenate([v for v, _ in builder.number_values("ids", "i").chunks()]).tolist()] == [values.tolist()]
    builder.finish()


def test_statistics_are_made_once(tmp_path):
    builder = Builder(StatKeys.numbers, held=Held(directory=str(tmp_path)))
    builder.add_lengths("x", "i", 1, 1)
    builder.add_value("x", "i", int_payload(5), 1)
    assert builder.finish().features["x"].numeric.count == 1
    with pytest.raises(RuntimeError, match="once"):
        builder.finish()
    closed = Builder(StatKeys.numbers, held=Held(directory=str(tmp_path)))
    closed.add_value("x", "i", int_payload(5), 1)
    closed.close()
    with pytest.raises(RuntimeError, match="after close"):
        closed.finish()


def test_builders_sharing_what_is_held_keep_their_own_values(small_runs, tmp_path):
    held = Held(limit=30 * VALUE_BYTES, directory=str(tmp_path))
    first, second = Builder(StatKeys.numbers, held=held), Builder(StatKeys.numbers, held=held)
    pairs = counted(8, 100)
    for builder, name in ((first, "a"), (second, "b")):
        builder.add_lengths(name, "i", 1, sum(c for _, c in pairs))
        for value, count in pairs:
            builder.add_value(name, "i", int_payload(value), count)
    whole = stats_of(pairs, Held()).features["ids"].numeric
    assert first.finish().features["a"].numeric == whole
    assert second.finish().features["b"].numeric == whole
    assert os.listdir(tmp_path) == [] and held.size == 0


class _FailingTable:
    """A statistics table whose reading fails after `after` keys of one int64 feature."""

    def __init__(self, after):
        self.after = after

    def entries(self):
        for value, count in counted(5, self.after):
            yield b"v2:idi" + int_payload(value), count  # a value of int64 feature "id" (`StatKeys`)
        raise OSError("the table could not be read")


def test_a_failed_read_leaves_no_run_on_disk(monkeypatch, tmp_path):
    from tf2_mapreduce.reducers.statistics.reducer import Statistics

    monkeypatch.setattr(spilling, "RUN_BYTES", 10 * VALUE_BYTES)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(OSError, match="could not be read"):
        Statistics().collect(_FailingTable(100), None, None)
    assert os.listdir(tmp_path) == []
