"""What a job returns: one `Result`, the same from Python and behind the CLI, with each
file's value; a per-key table stays on the ps tasks and is read from there on demand.
"""

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from tf2_mapreduce.inputs.files import Files

__all__ = ["FileValue", "PerFile", "NO_FILES", "Result"]


@dataclass(frozen=True)
class FileValue:
    """One input file of a per-piece job: its path, size, and value (an int; a tuple
    for a vector sum; None for a min or max of a file whose pieces were all skipped)."""

    path: str
    size: int
    value: object


class PerFile(Sequence):
    """The `FileValue` of every file counted whole, in input order, each made when it is
    asked for: a job over a million files keeps an array of values here, not a
    million objects."""

    def __init__(self, files, values, done, to_python):
        self._files, self._values, self._to_python = Files.of(files), values, to_python
        self._index = np.flatnonzero(done)

    def __len__(self) -> int:
        return len(self._index)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[n] for n in range(*k.indices(len(self)))]
        index = self._index[k]
        f = self._files[index]
        return FileValue(f.path, f.size, self._to_python(self._values[index]))

    def __iter__(self) -> Iterator:
        # From the columns: a million of them in a second, not through __getitem__'s five.
        paths, index = self._files.paths, self._index.tolist()
        values = self._values[self._index]
        for i, size, value in zip(index, self._files.sizes[self._index].tolist(), values):
            yield FileValue(paths[i], size, self._to_python(value))

    def __repr__(self) -> str:
        return "PerFile(%d files)" % len(self)


NO_FILES = PerFile([], np.zeros(0, np.int64), np.zeros(0, bool), None)


@dataclass
class Result:
    """What a job computed. Everything but a per-key table is read when the job ends
    and stays valid afterwards; a per-key table lives on the ps tasks and is read on
    demand (`top`, `entries`, `table`, `write`, `write_dir`) while the
    cluster is open.

    Guarantee: every input is either counted exactly once or listed in `skipped` with
    its reason; nothing is dropped or counted twice.
    """

    job: str
    total: object  # an int, a tuple for a vector sum, None for a min/max over nothing
    distinct: int | None  # distinct keys of a per-key job, else None
    files_done: int
    bytes_done: int
    per_file: PerFile  # a FileValue per file counted whole, for per-piece jobs; empty for per-key jobs
    skipped: list  # (path, reason) of every input left out (on_error="skip"), listing and reading alike
    resumed_from: str | None  # the checkpoint the run resumed from
    files_resumed: int
    seconds: float  # the run, from its start to its result
    map_seconds: float  # from the first map step scheduled to the result (0 if none ran)
    steps_per_worker: tuple
    config: dict = field(default_factory=dict)  # the job's parameters
    hidden: list = field(default_factory=list)  # hidden names met while listing, left out
    duplicates: list = field(default_factory=list)  # paths (of files, of directories) met again, counted once
    _reducer: object = field(default=None, repr=False)
    _state: object = field(default=None, repr=False)  # the run's state on the ps tasks
    _run: object = field(default=None, repr=False)  # `runner.JobRun`: reads go through it

    def __getattr__(self, name):
        # A job whose value is an object (`Stats`: a `statistics.DatasetStats`) lends the
        # result its public attributes: `result.features`, `result.proto()`.
        total = self.__dict__.get("total")
        if not name.startswith("_") and not isinstance(total, (int, tuple, type(None))) and hasattr(total, name):
            return getattr(total, name)
        raise AttributeError("%r object has no attribute %r" % (type(self).__name__, name))

    def _reading(self):
        return self._run.reading_result()

    def describe(self) -> str:
        """The job's value in words: "901 words (450 distinct)", "12 lines, 901 words, 4997 bytes"."""
        return self._reducer.describe(self.total, self.distinct)

    def top(self, k: int, min_count: int = 1) -> list:
        """The `k` keys with the largest counts (ties by key bytes) as [(key bytes, count)].
        Blocking; reads only the keys at least as frequent as the k-th."""
        with self._reading():
            return self._reducer.top(self._state, k, min_count)

    def entries(self, min_count: int = 1) -> Iterator:
        """Yields every (key, count) with count >= `min_count`, in no order, a chunk at a
        time: the caller never needs the whole table in memory. Keys are bytes; for a
        job over several features, (feature, value bytes)."""
        with self._reading():
            yield from self._reducer.entries(self._state, min_count)

    def table(self, min_count: int = 1) -> dict:
        """The whole table as {key: count}, in local memory: for tables that fit."""
        return dict(self.entries(min_count))

    def document(self, since: float | None = None) -> dict:
        """The run as the JSON outputs say it: inputs, skips, timings. Its timings are the
        run's, or with `since` (a `time.monotonic()` reading, such as when the process
        started) counted from then, start-up apart."""
        timings = {"total": self.seconds if since is None else time.monotonic() - since}
        if since is not None and self.map_seconds:
            timings["startup"] = timings["total"] - self.map_seconds
        timings["map"] = self.map_seconds
        return {
            "job": self.job,
            "config": self.config,
            "files": self.files_done,
            "bytes": self.bytes_done,
            "seconds": round(self.seconds, 3),
            "timings": {name: round(value, 3) for name, value in timings.items()},
            "resumed_from": self.resumed_from,
            "files_resumed": self.files_resumed,
            "steps_per_worker": list(self.steps_per_worker),
            "skipped": [{"path": path, "reason": reason} for path, reason in self.skipped],
            "skipped_hidden": self.hidden,
            "duplicates_ignored": self.duplicates,
        }

    def write(self, path: str, min_count: int = 1, since: float | None = None) -> None:
        """Writes the result as the CLI's --output does: JSON for per-piece jobs; for a
        per-key job the sorted table as TSV, or JSON if `path` ends in .json. Atomic;
        blocking (a table is streamed from the ps tasks). `since`: see `document`."""
        from tf2_mapreduce.outputs import files as output

        output.check_path(path)
        self._reducer.check_output(path)
        with self._reading():
            self._reducer.write_output(self._state, path, self, min_count, self.document(since))

    def write_dir(
        self,
        output_dir: str | None,
        top_k: int | None = None,
        min_count: int = 1,
        file_format: str = "text",
        since: float | None = None,
    ) -> dict:
        """Writes the job's files under `output_dir` (the CLI's --output_dir); None writes
        nothing. For a per-key job, its vocabularies (one per feature for `Vocab`, one
        of the keys otherwise), most frequent first, as `vocabulary.write` describes,
        and summary.json; returns that summary: per vocabulary its values, distinct
        terms, terms written and left out. For `Stats`, stats.pb, stats.json and
        stats.html. Atomic per file; blocking (a table is streamed from the ps tasks)."""
        with self._reading():
            return self._reducer.write_dir(
                self._state, self, output_dir, top_k, min_count, file_format, self.document(since)
            )

    def wrote(self, summary: dict, output_dir: str) -> str:
        """What the CLI says once `write_dir(output_dir)` returned `summary`."""
        return self._reducer.wrote(summary, output_dir)

    def summary_lines(self, top_k: int | None, min_count: int, written: dict | None = None) -> list:
        """What the CLI prints under its headline: a per-key job's top keys, its
        vocabularies' summaries (`written`: what `write_dir` returned), a table of
        statistics."""
        with self._reading():
            return self._reducer.summary_lines(self._state, self, top_k, min_count, written)

    def release(self) -> None:
        """Frees the job's state on the ps tasks (done for every result when the cluster
        is left); a table cannot be read afterwards. Blocking."""
        self._run.release()
