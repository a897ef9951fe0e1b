"""Input specs -> validated files -> a tf.data pipeline of file batches.

Specs are files, directories, glob patterns and @lists (a file of paths, one a
line). All access goes through tf.io.gfile, so gs:// and TF's other filesystems work.
"""

import os
import stat
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from tf2_mapreduce.errors import InputError

__all__ = ["InputFile", "Inputs", "expand", "batches", "sample_corpus"]

GLOB_CHARS = frozenset("*?[")


@dataclass(frozen=True)
class InputFile:
    path: str
    size: int


@dataclass
class Inputs:
    """The files to process, in a stable order, and what was left out and why."""

    files: list = field(default_factory=list)
    # Names starting with "." or "_" met while walking a directory or matching a
    # glob: hidden files, or markers such as Hadoop's _SUCCESS. Named explicitly,
    # they are counted.
    hidden: list = field(default_factory=list)
    duplicates: list = field(default_factory=list)

    @property
    def total_bytes(self):
        return sum(f.size for f in self.files)


def sample_corpus():
    """The directory of the small sample corpus shipped inside the package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sample")


def _is_hidden(name):
    return name.startswith((".", "_"))


def _is_local(path):
    return "://" not in path or path.startswith("file://")


def _check_file(path):
    """Returns the size of `path`, or raises `InputError` saying why it can't be read."""
    if _is_local(path):
        local = path[len("file://") :] if path.startswith("file://") else path
        try:
            st = os.stat(local)
        except FileNotFoundError:
            why = "broken symbolic link" if os.path.islink(local) else "no such file or directory"
            raise InputError("%s: %s" % (path, why)) from None
        except OSError as e:
            raise InputError("%s: %s" % (path, e.strerror.lower())) from None
        if stat.S_ISDIR(st.st_mode):
            raise InputError("%s: is a directory" % path)
        if not stat.S_ISREG(st.st_mode):
            raise InputError("%s: not a regular file (FIFOs, sockets and devices are not supported)" % path)
        try:
            os.close(os.open(local, os.O_RDONLY))
        except OSError as e:
            raise InputError("%s: %s" % (path, e.strerror.lower())) from None
        return st.st_size
    try:
        st = tf.io.gfile.stat(path)
    except tf.errors.NotFoundError:
        raise InputError("%s: no such file or directory" % path) from None
    except tf.errors.OpError as e:
        raise InputError("%s: %s" % (path, e.message.splitlines()[0])) from None
    if st.is_directory:
        raise InputError("%s: is a directory" % path)
    return st.length


class _Expander:
    def __init__(self):
        self.result = Inputs()
        self.seen = set()

    def add_file(self, path):
        size = _check_file(path)
        key = os.path.realpath(path) if _is_local(path) else path
        if key in self.seen:
            self.result.duplicates.append(path)
            return
        self.seen.add(key)
        self.result.files.append(InputFile(path, size))

    def _reached(self):
        return len(self.result.files) + len(self.result.duplicates)

    def add_directory(self, top):
        before = self._reached()
        try:
            for directory, subdirs, names in tf.io.gfile.walk(top):
                self.result.hidden.extend(os.path.join(directory, n) for n in subdirs + names if _is_hidden(n))
                subdirs[:] = sorted(d for d in subdirs if not _is_hidden(d))
                for name in sorted(names):
                    if not _is_hidden(name):
                        self.add_file(os.path.join(directory, name))
        except tf.errors.OpError as e:
            raise InputError("%s: cannot list directory: %s" % (top, e.message.splitlines()[0])) from None
        if self._reached() == before:
            raise InputError("%s: directory holds no input files" % top)

    def add_glob(self, pattern):
        try:
            matches = sorted(tf.io.gfile.glob(pattern))
        except tf.errors.OpError as e:
            raise InputError("%s: %s" % (pattern, e.message.splitlines()[0])) from None
        visible = []
        for match in matches:
            hidden = _is_hidden(os.path.basename(match.rstrip("/")))
            (self.result.hidden if hidden else visible).append(match)
        if not visible:
            raise InputError("%s: no path matched" % pattern)
        for match in visible:
            self.add_path(match)

    def add_path(self, path):
        if tf.io.gfile.isdir(path):
            self.add_directory(path)
        else:
            self.add_file(path)

    def add_list(self, list_path):
        try:
            if tf.io.gfile.isdir(list_path):
                raise InputError("@%s: is a directory, not a list of paths" % list_path)
            with tf.io.gfile.GFile(list_path, "rb") as f:
                data = f.read()
        except tf.errors.NotFoundError:
            raise InputError("@%s: no such file or directory" % list_path) from None
        except tf.errors.OpError as e:
            raise InputError("@%s: %s" % (list_path, e.message.splitlines()[0])) from None
        lines = [(n, os.fsdecode(line.strip())) for n, line in enumerate(data.splitlines(), 1)]
        lines = [(n, line) for n, line in lines if line]
        if not lines:
            raise InputError("@%s: the list holds no paths" % list_path)
        for number, line in lines:
            try:
                self.add_spec(line, allow_list=False)
            except InputError as e:
                raise InputError("@%s line %d: %s" % (list_path, number, e)) from None

    def add_spec(self, spec, allow_list=True):
        if allow_list and spec.startswith("@"):
            self.add_list(spec[1:])
        elif GLOB_CHARS & set(spec):
            self.add_glob(spec)
        else:
            self.add_path(spec)


def expand(specs):
    """Expands input specs into an `Inputs` of regular files, checked readable.

    Specs: a file; a directory (walked recursively, hidden entries skipped); a glob
    pattern; or "@list" (a file of paths, one a line, blank lines ignored, relative
    paths taken from the current directory). A file reached twice is kept once.
    Raises `InputError` naming the first spec or path that cannot be used; a spec
    that yields nothing (a glob without match, an empty directory) is an error.
    """
    if not specs:
        raise InputError("no input given")
    expander = _Expander()
    for spec in specs:
        expander.add_spec(spec)
    return expander.result


def batches(files, files_per_step):
    """A tf.data pipeline of (ids, paths) batches: ids index `files`, paths are bytes.

    Each element becomes the tensor arguments of one scheduled map step; tensors,
    not Python values, so the step is traced once.
    """
    ids = np.arange(len(files), dtype=np.int64)
    paths = np.array([os.fsencode(f.path) for f in files], dtype=object)
    return tf.data.Dataset.from_tensor_slices((ids, paths)).batch(files_per_step)
