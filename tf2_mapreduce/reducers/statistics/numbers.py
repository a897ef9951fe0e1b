"""A number feature's distinct values and their counts as they stream in, held up to a
limit shared by the features and spilled to disk in sorted runs, given back in order."""

import array
import os
import shutil
import tempfile

import numpy as np

__all__ = ["HELD_VALUES", "BLOCK", "Numbers", "Held"]

# Values of int64 features held in memory together (16 bytes each, with their counts);
# more are sorted and spilled. A float feature is counted by its bucket, at most 2 x 256 x
# 1024 values (`model.FLOAT_BITS`): never spilled.
HELD_VALUES = 4 << 20
_LEAST_RUN = 1 << 16  # a feature's share of HELD_VALUES is never smaller: runs stay few
BLOCK = 1 << 16  # values a run is read at a time as runs are merged
_ROW = 16  # bytes of a run's row on disk: value, count


class Held:
    """The features' `Numbers` that share `HELD_VALUES` (`limit`) and spill to `directory`
    (by default the system's temporary one): each holds at most an equal share."""

    def __init__(self, limit: int | None = None, directory: str | None = None):
        self.limit, self.directory = limit or HELD_VALUES, directory
        self.members = []

    def join(self, numbers) -> None:
        self.members.append(numbers)
        spilling = [member for member in self.members if member.spills]
        for member in spilling:
            member.limit = max(_LEAST_RUN, self.limit // len(spilling))


class Numbers:
    """The distinct values of one feature of `kind` ("i" int64 or "f" float32), each added
    once: its payload appended to `payloads` and its count to `counts` (`add`, or there
    directly: a method call less a value), then `spill` once `counts` holds `limit`.
    `decode(kind, payloads)` gives the values. `chunks()`: every value in ascending order
    (a float's -0.0 before 0.0, NaN last), as (values, counts) arrays of at most about
    `BLOCK` values each but where nothing was spilled; as often as asked until `close`."""

    def __init__(self, kind: str, decode, held: Held):
        self.kind, self._decode = kind, decode
        self.spills = kind == "i"
        self.payloads, self.counts = bytearray(), array.array("q")
        self.limit = 1 << 62
        self._held, self._runs, self._directory = held, [], None
        held.join(self)

    def add(self, payload, count) -> None:
        self.payloads += payload
        self.counts.append(count)
        if len(self.counts) >= self.limit:
            self.spill()

    def _sorted_held(self):
        values = self._decode(self.kind, bytes(self.payloads))
        counts = np.frombuffer(self.counts, dtype=np.int64).copy()
        if self.kind == "f":  # -0.0 before 0.0: values that compare equal must not come in the order the keys did
            order = np.lexsort((~np.signbit(values), values))
        else:
            order = np.argsort(values, kind="stable")
        return values[order], counts[order]

    def spill(self) -> None:
        """Writes the values held as a sorted run on disk, and holds none."""
        if not self.spills or not self.counts:
            return
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="tf2_mapreduce-numbers-", dir=self._held.directory)
        path = os.path.join(self._directory, "%d.run" % len(self._runs))
        np.stack(self._sorted_held(), axis=1).tofile(path)
        self._runs.append(path)
        del self.payloads[:]
        del self.counts[:]

    def chunks(self):
        if not self._runs:
            if self.counts:
                yield self._sorted_held()
            return
        runs = [_Run(path) for path in self._runs]
        if self.counts:
            runs.append(_Run(rows=np.stack(self._sorted_held(), axis=1)))
        yield from _merged(runs)

    def close(self) -> None:
        self._runs = []
        del self.payloads[:]
        del self.counts[:]
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


class _Run:
    """A sorted run's rows (value, count), int64, read `BLOCK` rows at a time from its file
    `path` (read, not mapped: mapped pages would count in the process's memory), or
    held (`rows`)."""

    def __init__(self, path=None, rows=None):
        self._path, self._rows = path, rows
        self.length = len(rows) if path is None else os.path.getsize(path) // _ROW
        self.at = 0
        self._block, self._block_at = None, -1

    def block(self) -> np.ndarray:
        """The rows of the next `BLOCK` from `at`."""
        if self._path is None:
            return self._rows[self.at : self.at + BLOCK]
        if self._block_at != self.at:
            count = 2 * min(BLOCK, self.length - self.at)
            self._block = np.fromfile(self._path, dtype=np.int64, count=count, offset=self.at * _ROW).reshape(-1, 2)
            self._block_at = self.at
        return self._block


def _merged(runs):
    """(values, counts) chunks of `runs` (`_Run`s of sorted distinct values; no value in two
    runs) merged in ascending order: each chunk holds what every run has up to the least of
    the last values of their next blocks, so that no later value comes before it."""
    while True:
        live = [run for run in runs if run.at < run.length]
        if not live:
            return
        blocks = [run.block() for run in live]
        bound = min(block[-1, 0] for block in blocks)
        taken = []
        for run, block in zip(live, blocks):
            count = int(np.searchsorted(block[:, 0], bound, side="right"))
            taken.append(block[:count])
            run.at += count
        rows = np.concatenate(taken)
        rows = rows[np.argsort(rows[:, 0], kind="stable")]
        yield rows[:, 0], rows[:, 1]
