"""A number feature's distinct values and their counts as they stream in, held up to a
limit shared by the features (`spilling.Held`) and spilled to disk in sorted runs, given
back in order."""

import array
import os
import shutil
import tempfile

import numpy as np

from tf2_mapreduce import spilling
from tf2_mapreduce.spilling import Held

__all__ = ["VALUE_BYTES", "MERGE_ROWS", "Numbers"]

# What an int64 value held costs in its `spilling.Held` (its payload and count), and a row
# of a run on disk (value, count). A float feature is counted by its bucket, at most 2 x
# 256 x 1024 values (`model.FLOAT_BITS`): never spilled, and not counted there.
VALUE_BYTES = 16
MERGE_ROWS = 1 << 20  # values read from the runs merged at once, in all (16 MB), and at most a chunk's


class Numbers:
    """The distinct values of one feature of `kind` ("i" int64 or "f" float32), each added
    once (`add`; or as it does, a method call less: its payload appended to `payloads`,
    its count to `counts`, and for an int64 feature (`spills`) `VALUE_BYTES` added to what
    `held` (a `spilling.Held`) holds, spilled when that reaches its limit). `decode(kind, payloads)` gives the
    values. `chunks()`: every value in ascending order (a float's -0.0 before 0.0, NaN
    last), as (values, counts) arrays of at most `MERGE_ROWS` values each; as often as
    asked until `close`."""

    def __init__(self, kind: str, decode, held: Held):
        self.kind, self._decode = kind, decode
        self.spills = kind == "i"
        self.payloads, self.counts = bytearray(), array.array("q")
        self.held, self._runs, self._directory, self._made = held, [], None, 0
        held.members.append(self)

    def add(self, payload, count) -> None:
        self.payloads += payload
        self.counts.append(count)
        if self.spills:
            self.held.size += VALUE_BYTES
            if self.held.size >= self.held.limit:
                self.held.spill()

    @property
    def held_bytes(self) -> int:
        """What it holds in `held`'s count: none for a float feature, never spilled."""
        return VALUE_BYTES * len(self.counts) if self.spills else 0

    def _sorted_held(self):
        values = self._decode(self.kind, bytes(self.payloads))
        counts = np.frombuffer(self.counts, dtype=np.int64).copy()
        if self.kind == "f":  # -0.0 before 0.0: values that compare equal must not come in the order the keys did
            order = np.lexsort((~np.signbit(values), values))
        else:
            order = np.argsort(values, kind="stable")
        return values[order], counts[order]

    def _forget_held(self):
        self.held.size -= self.held_bytes
        del self.payloads[:]
        del self.counts[:]

    def _new_run(self):
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="tf2_mapreduce-numbers-", dir=self.held.directory)
        path = os.path.join(self._directory, "%d.run" % self._made)
        self._made += 1
        return path

    def spill(self) -> None:
        """Writes the values held as a sorted run on disk, and holds none."""
        if not self.spills or not self.counts:
            return
        path = self._new_run()
        np.stack(self._sorted_held(), axis=1).tofile(path)
        self._runs.append(path)
        self._forget_held()

    def chunks(self):
        if not self._runs:
            values, counts = self._sorted_held()
            for start in range(0, len(values), MERGE_ROWS):
                yield values[start : start + MERGE_ROWS], counts[start : start + MERGE_ROWS]
            return
        self.spill()
        fan_in = spilling.FAN_IN
        while len(self._runs) > fan_in:  # a buffer a run merged: their number is bounded
            path = self._new_run()
            with open(path, "wb") as f:
                for values, counts in _merged([_Run(run) for run in self._runs[:fan_in]]):
                    np.stack((values, counts), axis=1).tofile(f)
            for run in self._runs[:fan_in]:
                os.remove(run)
            self._runs = self._runs[fan_in:] + [path]
        yield from _merged([_Run(path) for path in self._runs])

    def close(self) -> None:
        self._forget_held()
        self._runs = []
        if self in self.held.members:
            self.held.members.remove(self)
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


class _Run:
    """A sorted run's rows (value, count), int64, from its file `path`: `buffer` holds
    those read and not yet merged, `fill` reads the next ones (read, not mapped: mapped
    pages would count in the process's memory)."""

    def __init__(self, path):
        self._path = path
        self._length = os.path.getsize(path) // VALUE_BYTES
        self._read = 0
        self.buffer = np.empty((0, 2), dtype=np.int64)

    def fill(self, rows: int) -> None:
        """Reads the next `rows` rows if the buffer is empty."""
        if len(self.buffer) or self._read >= self._length:
            return
        count = min(rows, self._length - self._read)
        self.buffer = np.fromfile(self._path, dtype=np.int64, count=2 * count, offset=self._read * VALUE_BYTES).reshape(
            -1, 2
        )
        self._read += count


def _merged(runs):
    """(values, counts) chunks of `runs` (`_Run`s of sorted distinct values; no value in two
    runs) merged in ascending order, `MERGE_ROWS` rows read at most: each chunk holds what
    every run has read up to the least of their last values read, so that no later value
    comes before it."""
    share = max(1, MERGE_ROWS // max(1, len(runs)))
    while True:
        for run in runs:
            run.fill(share)
        live = [run for run in runs if len(run.buffer)]
        if not live:
            return
        bound = min(run.buffer[-1, 0] for run in live)
        taken = []
        for run in live:
            count = int(np.searchsorted(run.buffer[:, 0], bound, side="right"))
            taken.append(run.buffer[:count])
            run.buffer = run.buffer[count:]
        rows = np.concatenate(taken)
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
        yield rows[:, 0], rows[:, 1]
