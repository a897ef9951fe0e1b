"""Entries sorted in bounded memory: (key bytes, count) pairs encoded as bytes that sort as
they do, held up to a limit shared by every sort of a job, spilled in runs, merged k ways.
"""

import heapq
import itertools
import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tf2_mapreduce import spilling
from tf2_mapreduce.reducers.keys import MOST_FIRST_BYTES, count_of, most_first
from tf2_mapreduce.spilling import Held

__all__ = ["Order", "BY_COUNT", "COUNT", "SortedRuns", "Sorted", "sorted_here", "sorted_entries"]

_ENTRY = 64  # what an entry held costs beside its bytes: its bytes object and list slot
_LENGTH = struct.Struct(">I")  # an encoded entry's length, then its bytes


class Order:
    """An order of (key bytes, count) entries, as bytes: `encode(entry)` sorts bytewise as
    the entry does, and `decode` gives the entry back; sorting bytes needs no Python
    comparison of tuples (a third of the time); an entry it does not `keep` is left out.
    `native`: the native ops' number for it, which encodes as it does
    (`native/sorted_entries.cc`), or None. This one: count descending (any int64), then
    key bytes ascending."""

    native = None

    def keeps(self, entry) -> bool:
        return True

    def encode(self, entry) -> bytes:
        key, count = entry
        return most_first(count) + key

    def decode(self, data: bytes):
        return data[MOST_FIRST_BYTES:], count_of(data)


BY_COUNT = Order()
COUNT = struct.Struct(">Q")  # a count, ascending (not negative), big-endian: bytewise order is its order


def _write_run(encoded, directory):
    handle, path = tempfile.mkstemp(dir=directory, suffix=".run")
    with os.fdopen(handle, "wb", buffering=1 << 20) as f:
        for data in encoded:
            f.write(_LENGTH.pack(len(data)))
            f.write(data)
    return path


def _read_run(path):
    with open(path, "rb", buffering=1 << 20) as f:
        while header := f.read(_LENGTH.size):
            yield f.read(_LENGTH.unpack(header)[0])


class SortedRuns:
    """(key bytes, count) entries taken one at a time (`add`) and given back once in
    `order` (`sorted`; an `Order`, by default `BY_COUNT`), holding at most `run_bytes` of
    them in memory (each encoded: a bytes object), or with `held` (a `spilling.Held`) at
    most its limit together with the others sharing it: more are sorted in runs spilled
    to its directory, then merged, `spilling.FAN_IN` runs at a time. `close` (or leaving a
    `with` block) removes the runs."""

    def __init__(self, run_bytes: int | None = None, order: Order = BY_COUNT, held: Held | None = None):
        self._held, self._order = held or Held(run_bytes), order
        self._run, self.held_bytes, self._runs, self._directory = [], 0, [], None
        self._held.members.append(self)

    def add(self, entry) -> None:
        data = self._order.encode(entry)
        self._run.append(data)
        self.held_bytes += len(data) + _ENTRY
        self._held.size += len(data) + _ENTRY
        if self._held.size >= self._held.limit:
            self._held.spill()

    def spill(self) -> None:
        """Writes the entries held as a sorted run on disk, and holds none."""
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="tf2_mapreduce-sort-", dir=self._held.directory)
        self._run.sort()
        self._runs.append(_write_run(self._run, self._directory))
        self._forget()

    def _forget(self):
        self._held.size -= self.held_bytes
        self._run, self.held_bytes = [], 0

    def sorted(self):
        """Every entry added, in order: an iterator, valid until `close`."""
        if not self._runs:
            self._run.sort()
            return map(self._order.decode, self._run)
        self.spill()
        fan_in = spilling.FAN_IN
        while len(self._runs) > fan_in:
            merged = heapq.merge(*(_read_run(path) for path in self._runs[:fan_in]))
            self._runs = self._runs[fan_in:] + [_write_run(merged, self._directory)]
        return map(self._order.decode, heapq.merge(*(_read_run(path) for path in self._runs)))

    def close(self) -> None:
        self._forget()
        self._runs = []
        if self in self._held.members:
            self._held.members.remove(self)
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass
class Sorted:
    """Entries in an order, in chunks (`chunks`, an iterator of (keys, counts) lists, read
    once), and the sum of their counts (`total`); `release()` lets go of what they hold."""

    total: int
    chunks: Iterator
    release: Callable = lambda: None

    def close(self) -> None:
        """Lets go of what the chunks not read hold (their reads, their runs)."""
        close = getattr(self.chunks, "close", None)
        if close is not None:
            close()
        self.release()


_CHUNK = 10_000  # entries a chunk of `sorted_here`


def sorted_here(entries, orders: list) -> list:
    """`entries`, (part, key bytes, count) with part an index of `orders`, those that the
    part's order keeps sorted here in that order, in bounded memory (`SortedRuns`, every
    part's sharing one `spilling.Held`): a `Sorted` of each part. Blocking until every
    entry is taken; a part's runs are removed once it is read, or closed unread."""
    held = Held()
    runs, totals = [SortedRuns(order=order, held=held) for order in orders], [0] * len(orders)
    try:
        for part, key, count in entries:
            if orders[part].keeps((key, count)):
                runs[part].add((key, count))
                totals[part] += count
    except BaseException:
        for part in runs:
            part.close()
        raise
    return [Sorted(total, _chunks(part), part.close) for total, part in zip(totals, runs)]


def _chunks(runs: SortedRuns):
    with runs:  # removed once read to the end
        ordered = runs.sorted()
        while chunk := list(itertools.islice(ordered, _CHUNK)):
            yield [key for key, _ in chunk], [count for _, count in chunk]


def sorted_entries(entries, run_bytes=None, order=BY_COUNT):
    """Yields (key, count) pairs from `entries` in `SortedRuns`' order, holding at most
    `run_bytes` of them in memory."""
    with SortedRuns(run_bytes, order) as runs:
        for entry in entries:
            runs.add(entry)
        yield from runs.sorted()
