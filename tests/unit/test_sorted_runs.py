"""Entries sorted through disk when they outgrow memory, in their order as bytes, runs
sharing a limit."""

import random

from tf2_mapreduce import spilling
from tf2_mapreduce.outputs import sorted_runs


def test_sorted_entries_spills_to_disk_and_merges():
    rng = random.Random(2)
    entries = [
        (bytes(rng.randrange(97, 100) for _ in range(rng.randint(1, 4))), rng.randint(1, 5)) for _ in range(5000)
    ]
    expected = sorted(entries, key=lambda e: (-e[1], e[0]))
    assert list(sorted_runs.sorted_entries(iter(entries), run_bytes=333 * 70)) == expected
    assert list(sorted_runs.sorted_entries(iter(entries))) == expected


def test_tf_transforms_order_puts_a_term_before_its_prefix_whatever_byte_follows():
    from tf2_mapreduce.reducers.keys import tft_key

    rng = random.Random(4)
    alphabet = [0, 1, 97, 98, 254, 255]  # the bytes where complementing and prefixes meet
    entries = list(
        {(bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 5))), rng.randint(1, 4)) for _ in range(4000)}
    )
    rng.shuffle(entries)
    # tf.Transform's order, said independently: count descending, then bytes descending.
    expected = sorted(entries, key=lambda e: (e[1], e[0]), reverse=True)
    assert sorted(entries, key=lambda e: tft_key(*e)) == expected


def test_sorted_entries_order_counts_of_any_int64():
    rng = random.Random(3)
    counts = [-(2**63), -5, -1, 0, 1, 7, 2**62, 2**63 - 1]
    entries = [(bytes([rng.randrange(256)]), rng.choice(counts)) for _ in range(3000)]
    expected = sorted(entries, key=lambda e: (-e[1], e[0]))
    assert list(sorted_runs.sorted_entries(iter(entries), run_bytes=101 * 70)) == expected


def test_tf_transforms_order_as_bytes_sorts_as_its_key_vocabulary_by_vocabulary():
    from tf2_mapreduce.reducers.keys import TftOrder, tft_key

    rng = random.Random(6)
    alphabet = [0, 1, 97, 98, 254, 255]
    entries = list(
        {(bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 5))), rng.randint(1, 4)) for _ in range(4000)}
    )
    rng.shuffle(entries)
    expected = sorted(entries, key=lambda e: tft_key(*e))
    assert list(sorted_runs.sorted_entries(iter(entries), run_bytes=77 * 70, order=TftOrder())) == expected
    # With a 2-byte prefix (a vocabulary's index): vocabulary by vocabulary, each in that order.
    prefixed = [(bytes([0, rng.randrange(3)]) + key, count) for key, count in entries]
    by_vocabulary = sorted(prefixed, key=lambda e: (e[0][:2], *tft_key(e[0][2:], e[1])))
    assert (
        list(sorted_runs.sorted_entries(iter(prefixed), run_bytes=77 * 70, order=TftOrder(prefix=2))) == by_vocabulary
    )


def test_sorted_runs_sharing_a_limit_hold_at_most_it_together():
    rng = random.Random(8)
    held = spilling.Held(700)
    runs = [sorted_runs.SortedRuns(held=held) for _ in range(3)]
    added = [[], [], []]
    for _ in range(2000):
        which = rng.randrange(3)
        entry = (bytes([rng.randrange(256)]), rng.randint(1, 9))
        runs[which].add(entry)
        added[which].append(entry)
        assert held.size < 700
    for one, entries in zip(runs, added):
        with one:
            assert list(one.sorted()) == sorted(entries, key=lambda e: (-e[1], e[0]))
    assert held.size == 0 and not held.members


def test_the_largest_run_spills_not_the_one_added_to(tmp_path):
    # One sort holding nearly the whole limit must not make another spill an entry a run.
    held = spilling.Held(1000 * 70, directory=str(tmp_path))
    first, second = sorted_runs.SortedRuns(held=held), sorted_runs.SortedRuns(held=held)
    for n in range(990):
        first.add((b"%03d" % n, 1))
    for n in range(5000):
        second.add((b"%04d" % n, 2))
    assert len(first._runs) + len(second._runs) < 20
    with first, second:
        assert [key for key, _ in second.sorted()] == [b"%04d" % n for n in range(5000)]
    assert not list(tmp_path.iterdir())  # the runs spilled where asked, and removed


def test_more_runs_than_merged_at_once_are_merged_in_stages(monkeypatch):
    monkeypatch.setattr(spilling, "FAN_IN", 4)
    rng = random.Random(9)
    entries = [(bytes([rng.randrange(256), rng.randrange(256)]), rng.randint(1, 50)) for _ in range(5000)]
    with sorted_runs.SortedRuns(run_bytes=50 * 70) as runs:
        for entry in entries:
            runs.add(entry)
        assert len(runs._runs) > 20
        assert list(runs.sorted()) == sorted(entries, key=lambda e: (-e[1], e[0]))
