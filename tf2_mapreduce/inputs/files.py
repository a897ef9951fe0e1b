"""Input files as the rest of the package sees them: their paths, sizes and times as
columns (`Files`), what a listing found and left out (`Inputs`)."""

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["InputFile", "Files", "Inputs", "sample_corpus", "tf_error"]


@dataclass(frozen=True, slots=True)
class InputFile:
    path: str
    size: int
    mtime_ns: int  # recorded in checkpoints, so a resume notices a changed file


class Files(Sequence):
    """Input files as columns: their paths, and their sizes and modification times as
    int64 arrays. A million files are a list and two arrays, not a million objects
    (seconds to make, pickle and walk). Indexing and iterating give `InputFile`s."""

    __slots__ = ("paths", "sizes", "mtimes", "_derived")

    def __init__(self, paths=(), sizes=(), mtimes=()):
        self.paths = list(paths)
        self.sizes = np.asarray(sizes, dtype=np.int64).reshape(-1)
        self.mtimes = np.asarray(mtimes, dtype=np.int64).reshape(-1)
        if not len(self.paths) == len(self.sizes) == len(self.mtimes):
            raise ValueError("Files: %d paths, %d sizes, %d mtimes" % (len(paths), len(sizes), len(mtimes)))
        self._derived = {}

    @classmethod
    def of(cls, files) -> "Files":
        """`files` as `Files`: itself, or made from `InputFile`s."""
        if isinstance(files, Files):
            return files
        files = list(files)
        return cls([f.path for f in files], [f.size for f in files], [f.mtime_ns for f in files])

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        if isinstance(i, slice):  # a list, as a list's slice is: for tests that splice inputs
            return [self[k] for k in range(*i.indices(len(self)))]
        return InputFile(self.paths[i], int(self.sizes[i]), int(self.mtimes[i]))

    def __iter__(self):
        return map(InputFile, self.paths, self.sizes.tolist(), self.mtimes.tolist())

    def __eq__(self, other):
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self):
        return "Files(%d files, %d bytes)" % (len(self), self.sizes.sum())

    def derived(self, name: str, make):
        """`make(self.paths)`, made once: what other modules compute from every path."""
        if name not in self._derived:
            self._derived[name] = make(self.paths)
        return self._derived[name]


@dataclass
class Inputs:
    """The files to process, in a stable order, and what was left out and why."""

    files: Files = field(default_factory=Files)
    # Names starting with "." or "_" met while walking a directory or matching a
    # glob: hidden files, or markers such as Hadoop's _SUCCESS. Named explicitly,
    # they are counted.
    hidden: list = field(default_factory=list)
    duplicates: list = field(default_factory=list)
    skipped: list = field(default_factory=list)  # (path, reason), with on_error="skip"

    def __post_init__(self):
        self.files = Files.of(self.files)

    @property
    def total_bytes(self):
        return int(self.files.sizes.sum())


def sample_corpus():
    """The directory of the small sample corpus shipped inside the package."""
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "sample")


class _NeverRaised(Exception):
    pass


def tf_error(name="OpError"):
    """TensorFlow's error class `name` for an except clause, without importing TF:
    while it is not imported, no TF error can have been raised."""
    tf = sys.modules.get("tensorflow")
    return getattr(tf.errors, name) if tf is not None else _NeverRaised
