"""What a job returns: one `Result`, the same from Python and behind the CLI, with each
file's value; a per-key table stays on the ps tasks and is read from there on demand.
"""

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.outputs import sorted_runs
from tf2_mapreduce.outputs.sinks import sink_of
from tf2_mapreduce.reducers.base import PerFile

__all__ = ["Result"]


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
    written: dict | None = None  # what `write_dir` wrote, where the run wrote its output itself (a job of passes)
    _reducer: object = field(default=None, repr=False)
    _state: object = field(default=None, repr=False)  # the run's state on the ps tasks
    _run: object = field(default=None, repr=False)  # `runner.JobRun`: reads go through it

    def __getattr__(self, name):
        # A statistics job's value (a `DatasetStats`) lends the result its figures:
        # `result.features`, `result.num_examples`.
        total = self.__dict__.get("total")
        if name in ("features", "num_examples") and hasattr(total, name):
            return getattr(total, name)
        raise AttributeError("%r object has no attribute %r" % (type(self).__name__, name))

    @property
    def reducer(self):
        """The job's reducer: what its value means (`reducers`)."""
        return self._reducer

    def _reading(self):
        return self._run.reading_result()

    def _keyed(self, what):
        if not hasattr(self._reducer, "entries"):
            raise TypeError("job %s has no per-key table to %s: its result is %s" % (self.job, what, self.describe()))

    def describe(self) -> str:
        """The job's value in words: "901 words (450 distinct)", "12 lines, 901 words, 4997 bytes"."""
        from tf2_mapreduce.outputs import words

        return words.describe(self._reducer, self.total, self.distinct)

    def proto(self):
        """A statistics job's result as TFDV's `DatasetFeatureStatisticsList` (tensorflow-metadata)."""
        from tf2_mapreduce.outputs.stats import proto

        if not hasattr(self.total, "features"):
            raise TypeError("job %s has no statistics: proto() is for a statistics job's result" % self.job)
        return proto.to_proto(self.total)

    def top(self, k: int, min_count: int = 1) -> list:
        """The `k` keys with the largest counts (ties by key bytes) as [(key bytes, count)].
        Blocking; reads only the keys at least as frequent as the k-th."""
        self._keyed("read")
        with self._reading():
            return self._reducer.top(self._state, k, min_count)

    def entries(self, min_count: int = 1) -> Iterator:
        """Yields every (key, count) with count >= `min_count`, in no order, a chunk at a
        time: the caller never needs the whole table in memory. Keys are bytes; for a
        job over several features, (feature, value bytes)."""
        self._keyed("read")
        with self._reading():
            yield from self._reducer.entries(self._state, min_count)

    def sorted_entries(self, wanted: list, min_count: int = 1) -> list:
        """For each of `wanted`, (the name of a vocabulary of a per-key job: a feature's,
        for `reducers.Vocabularies`; an `outputs.sorted_runs.Order`), the vocabulary's
        (term bytes, count) entries with count >= `min_count` in that order, in chunks,
        and the sum of their counts: a `sorted_runs.Sorted`. Sorted on the ps tasks, the
        table read once, and merged here, where every order is one of the native ops'
        (`order.native`); else sorted here, in one pass over the table. Blocking; in
        bounded memory; the entries are valid until the next read of this result."""
        self._keyed("read")
        with self._reading():
            if all(order.native is not None for _, order in wanted):
                native = [(name, order.native, order.encode) for name, order in wanted]
                made = self._reducer.sorted_entries(self._state, native, min_count)
                if made is not None:
                    return [sorted_runs.Sorted(total, self._read(chunks)) for total, chunks in made]
            space = self._reducer.keys()
            parts = {}  # {vocabulary index: the indexes of `wanted` of it}
            for at, (name, _) in enumerate(wanted):
                parts.setdefault(space.names.index(name), []).append(at)
            entries = (space.split(key) + (count,) for key, count in self._state.entries(min_count))
            apart = ((at, term, count) for index, term, count in entries for at in parts.get(index, ()))
            return sorted_runs.sorted_here(apart, [order for _, order in wanted])

    def _read(self, chunks):
        with self._reading():
            yield from chunks

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
        from tf2_mapreduce.outputs import files, writers

        files.check_path(path)
        writers.check_output(self._reducer, path)
        with self._reading():
            writers.write_output(self._reducer, self, path, min_count, self.document(since))

    def write_dir(
        self,
        output_dir: str,
        top_k: int | None = None,
        min_count: int = 1,
        file_format: str = "text",
        since: float | None = None,
        claimed=None,
        also=None,
    ) -> dict:
        """Writes the job's files into `output_dir` (the CLI's --output_dir), which then
        holds this result alone: for a per-key job its vocabularies (one per feature for
        `Vocab`, one of the keys otherwise), most frequent first, and summary.json; for
        `Stats`, stats.pb, stats.json and stats.html. Returns the summary (per
        vocabulary its values, distinct terms, terms written and left out).

        The directory is made if absent; it may hold an earlier tf2_mapreduce result,
        which this one replaces whole, but no other files (`UsageError`), nor be written
        by another job at the same time. The files are written aside and put in place
        when complete (`directory.ResultDirectory`; `claimed`: one already claimed).
        `also(staging)`, if given, writes more files beside the result's and returns their
        summary. Blocking (a table is streamed from the ps tasks)."""
        from tf2_mapreduce.outputs import writers
        from tf2_mapreduce.outputs.directory import ResultDirectory

        writers.check_output_dir(self._reducer)
        ran_for = getattr(self._run, "options", None) and self._run.options.output_dir
        if sink_of(self._reducer) is not None and output_dir.rstrip("/") != (ran_for or "").rstrip("/"):
            raise UsageError(
                "job %s wrote its records for %s as it ran; write its result there, not to %s"
                % (self.job, ran_for, output_dir)
            )
        document = self.document(since)
        summary = {}

        def make(staging):
            with self._reading():
                summary.update(writers.write_dir(self._reducer, self, staging, top_k, min_count, file_format, document))
            if also is not None:
                summary.update(also(staging))

        if claimed is not None:
            claimed.write(make, self.job)
        else:
            with ResultDirectory(output_dir) as directory:
                directory.write(make, self.job)
        return summary

    def release(self) -> None:
        """Frees the job's state on the ps tasks (done for every result when the cluster
        is left); a table cannot be read afterwards. Blocking."""
        self._run.release()
