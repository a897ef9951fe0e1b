"""Listing inputs in a child process, forked before TensorFlow is imported, so that
listing many files overlaps TensorFlow's import and the cluster's start."""

import os
import pickle
import sys

from tf2_mapreduce.errors import InputError
from tf2_mapreduce.inputs import forked
from tf2_mapreduce.inputs.files import Files, Inputs
from tf2_mapreduce.inputs.listing import expand, first_files
from tf2_mapreduce.inputs.lists import read_streams
from tf2_mapreduce.paths import local_path
from tf2_mapreduce.storage import StorageOutage

__all__ = ["BackgroundListing"]


class BackgroundListing:
    """`expand(specs, on_error)`, started at once in a child process.

    `result()` blocks until the listing is done, then returns its `Inputs` or raises
    its `InputError`, exactly as `expand` would have. Where a child cannot help (no
    fork, or TensorFlow already imported: its threads do not survive a fork) or dies
    before it answers, `result()` lists in this process instead: the same answer,
    later. So are remote specs (gs://...): a child would import TensorFlow to list them,
    as this process does meanwhile, and two imports at once on 2 cores made a job of 40
    objects start about 1.5 s later than one listing after the import. The child dies
    with this process; `close()` ends it early.

    An @list that is a stream (a FIFO, `@/dev/stdin`, `@<(find ...)`) is read here, before
    the fork, blocking: its lines can be read only once, and the child could die with them
    (`lists.read_streams`). The files it names are still statted in the child.
    """

    def __init__(self, specs: list, on_error: str = "fail"):
        """Raises at once the `InputError` of a missing or unreadable file named first
        (`listing.first_files`): the user hears of a mistyped path before the wait."""
        first_files(specs, on_error)
        self.specs, self.on_error = list(specs), on_error
        self._child = None
        self._streams = None  # read by `expand` itself when no child lists
        local = all(local_path(spec[1:] if spec.startswith("@") else spec) is not None for spec in self.specs)
        if local and "tensorflow" not in sys.modules and hasattr(os, "fork"):
            self._streams = read_streams(self.specs)
            self._child = forked.Forked.start(self._pickled_answer)

    def _pickled_answer(self) -> bytes:
        """In the child: the listing's answer, or its `InputError` or `StorageOutage`, pickled."""
        try:
            found = self._expand()
            files = found.files
            # One string, not a list of a million: pickled and read back in a tenth of the time.
            paths = "\0".join(files.paths).encode("utf-8", "surrogateescape")
            answer = (paths, files.sizes, files.mtimes, found.hidden, found.duplicates, found.skipped)
        except (InputError, StorageOutage) as e:
            answer = e
        return pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)

    def result(self) -> "Inputs":
        """The listing's `Inputs`; raises its `InputError`. Blocking; call once."""
        child, self._child = self._child, None
        data = child.answer() if child is not None else None
        if not data:
            return self._expand()
        answer = pickle.loads(data)
        if isinstance(answer, (InputError, StorageOutage)):
            raise answer
        paths, sizes, mtimes, hidden, duplicates, skipped = answer
        paths = paths.decode("utf-8", "surrogateescape").split("\0") if len(sizes) else []
        if len(paths) != len(sizes):  # a NUL in a path of another file system: listed here
            return self._expand()
        return Inputs(Files(paths, sizes, mtimes), hidden, duplicates, skipped)

    def _expand(self) -> "Inputs":
        return expand(self.specs, self.on_error, self._streams)

    def close(self) -> None:
        """Ends the child if `result()` was not called. Non-blocking but for the reap."""
        if self._child is not None:
            self._child.close()
            self._child = None
