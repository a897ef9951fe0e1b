"""Input specs -> validated files -> pieces cut at record boundaries -> a tf.data
pipeline of splits (the pieces of one scheduled map step).

Specs are files, directories, glob patterns and @lists (a file of paths, one a line).
Local paths go through `os` (any bytes in names, no length surprises); every other
path through tf.io.gfile, so gs:// and TF's other filesystems work. TensorFlow is
imported only for those: listing local paths needs none of it (`listing`).
"""

import glob
import math
import os
import re
import stat
import sys
from dataclasses import dataclass, field

import numpy as np

from tf2_mapreduce.errors import InputError, UsageError, op_error_cause

__all__ = [
    "InputFile",
    "Inputs",
    "Piece",
    "ON_ERROR",
    "RECORDS",
    "COMPRESSIONS",
    "FORMATS",
    "expand",
    "compression_of",
    "format_of",
    "check_format",
    "plan",
    "splits",
    "sample_corpus",
]

GLOB_CHARS = frozenset("*?[")
ON_ERROR = ("fail", "skip")
# What a piece boundary must follow, so that no record spans two pieces.
RECORDS = {"words": re.compile(rb"[ \t\n\r\x0b\x0c]"), "lines": re.compile(rb"\n")}
WINDOW = 64 * 1024  # bytes read at a time while looking for a boundary
# What a file's bytes are: text, or TFRecord files of serialized records.
FORMATS = ("text", "tfrecord")
# How a file is compressed: "auto" goes by its name. TF's names for the codecs ("" is none).
COMPRESSIONS = {"auto": None, "none": "", "gzip": "GZIP", "zlib": "ZLIB"}
_COMPRESSED_SUFFIXES = {".gz": "GZIP", ".gzip": "GZIP", ".zz": "ZLIB", ".zlib": "ZLIB"}
_TFRECORD_SUFFIXES = (".tfrecord", ".tfrecords", ".tfr")


@dataclass(frozen=True, slots=True)  # slots: a million files, a hundred MB less
class InputFile:
    path: str
    size: int
    mtime_ns: int  # recorded in checkpoints, so a resume notices a changed file


@dataclass
class Inputs:
    """The files to process, in a stable order, and what was left out and why."""

    files: list = field(default_factory=list)
    # Names starting with "." or "_" met while walking a directory or matching a
    # glob: hidden files, or markers such as Hadoop's _SUCCESS. Named explicitly,
    # they are counted.
    hidden: list = field(default_factory=list)
    duplicates: list = field(default_factory=list)
    skipped: list = field(default_factory=list)  # (path, reason), with on_error="skip"

    @property
    def total_bytes(self):
        return sum(f.size for f in self.files)


def sample_corpus():
    """The directory of the small sample corpus shipped inside the package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sample")


def _is_hidden(name):
    return name.startswith((".", "_"))


def _tf():
    import tensorflow as tf

    return tf


class _NeverRaised(Exception):
    pass


def _tf_error(name="OpError"):
    """TensorFlow's error class `name` for an except clause, without importing TF:
    while it is not imported, no TF error can have been raised."""
    tf = sys.modules.get("tensorflow")
    return getattr(tf.errors, name) if tf is not None else _NeverRaised


def _local(path):
    """The local filesystem path of `path`, or None for a path of another filesystem."""
    if path.startswith("file://"):
        return path[len("file://") :]
    return None if "://" in path else path


def _reason(error):
    """A lower-case cause: "no such file or directory", "permission denied", ..."""
    if isinstance(error, OSError):
        return (error.strerror or str(error)).lower()
    return op_error_cause(error)


class _Directory(InputError):
    """A path that is a directory where a file was looked for."""


def _stat_file(path):
    """Returns (size, mtime_ns, inode) of a readable regular file, or raises `InputError`;
    inode is device and inode number in one int for a local file, None on another
    filesystem."""
    local = _local(path)
    if local is None:
        try:
            st = _tf().io.gfile.stat(path)
        except _tf_error("NotFoundError"):
            raise InputError(path, "no such file or directory") from None
        except _tf_error() as e:
            raise InputError(path, _reason(e)) from None
        if st.is_directory:
            raise _Directory(path, "is a directory")
        return st.length, st.mtime_nsec, None
    try:
        st = os.stat(local)
    except FileNotFoundError:
        raise InputError(
            path, "broken symbolic link" if os.path.islink(local) else "no such file or directory"
        ) from None
    except OSError as e:
        raise InputError(path, _reason(e)) from None
    if stat.S_ISDIR(st.st_mode):
        raise _Directory(path, "is a directory")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(path, "not a regular file (FIFOs, sockets and devices are not supported)")
    try:
        os.close(os.open(local, os.O_RDONLY))
    except OSError as e:
        raise InputError(path, _reason(e)) from None
    return st.st_size, st.st_mtime_ns, st.st_dev << 64 | st.st_ino


def _isdir(path):
    local = _local(path)
    return os.path.isdir(local) if local is not None else _tf().io.gfile.isdir(path)


class _Expander:
    def __init__(self, on_error):
        if on_error not in ON_ERROR:
            raise ValueError("on_error must be one of %s" % (ON_ERROR,))
        self.skip = on_error == "skip"
        self.result = Inputs()
        self.seen = {}  # inode (or path) -> the local path met with it, or a list of them

    def problem(self, error):
        """Raises `error`, or with on_error="skip" records it and carries on."""
        if not self.skip:
            raise error
        self.result.skipped.append((error.path, error.reason))

    def _reached(self):
        return len(self.result.files) + len(self.result.duplicates) + len(self.result.skipped)

    def add_file(self, path):
        try:
            self._add(path, *_stat_file(path))
        except InputError as e:
            self.problem(e)

    def _add(self, path, size, mtime_ns, inode):
        local = _local(path)
        key = path if inode is None else inode
        met = self.seen.get(key)
        # A path met before, itself or through a symbolic link, is a duplicate; a hard
        # link is a file of its own. Resolved only when an inode comes back: realpath
        # costs a stat per path component (5 s for 100,000 files).
        if met is not None:
            met = met if isinstance(met, list) else [met]
            if local is None or os.path.realpath(local) in {os.path.realpath(p) for p in met}:
                self.result.duplicates.append(path)
                return
            self.seen[key] = met + [local]
        else:
            self.seen[key] = path if local is None else local  # a str shared with its InputFile
        self.result.files.append(InputFile(path, size, mtime_ns))

    def _walk(self, top):
        """Yields (directory, subdirs, names) top-down; subdirs may be pruned in place."""
        local = _local(top)
        if local is not None:

            def unlistable(error):
                self.problem(InputError(error.filename, "cannot list directory: " + _reason(error)))

            for directory, subdirs, names in os.walk(local, onerror=unlistable):
                if local != top:  # keep the file:// form the user gave
                    directory = "file://" + directory
                yield directory, subdirs, names
            return
        try:
            yield from _tf().io.gfile.walk(top)
        except _tf_error() as e:
            self.problem(InputError(top, "cannot list directory: " + _reason(e)))

    def add_directory(self, top):
        before = self._reached()
        for directory, subdirs, names in self._walk(top):
            self.result.hidden.extend(os.path.join(directory, n) for n in subdirs + names if _is_hidden(n))
            subdirs[:] = sorted(d for d in subdirs if not _is_hidden(d))
            for name in sorted(names):
                if not _is_hidden(name):
                    self.add_file(os.path.join(directory, name))
        if self._reached() == before:
            self.problem(InputError(top, "directory holds no input files"))

    def add_glob(self, pattern):
        local = _local(pattern)
        try:
            if local is None:
                matches = sorted(_tf().io.gfile.glob(pattern))
            else:
                # Names starting with "." match too, to be reported as hidden.
                matches = sorted(glob.glob(local, include_hidden=True))
                if local != pattern:
                    matches = ["file://" + m for m in matches]
        except (OSError, _tf_error()) as e:
            self.problem(InputError(pattern, _reason(e)))
            return
        visible = []
        for match in matches:
            hidden = _is_hidden(os.path.basename(match.rstrip("/")))
            (self.result.hidden if hidden else visible).append(match)
        if not visible:
            self.problem(InputError(pattern, "no path matched"))
        for match in visible:
            self.add_path(match)

    def add_path(self, path):
        try:
            found = _stat_file(path)  # one stat for a file, rather than isdir's and then its own
        except _Directory:
            self.add_directory(path)
        except InputError as e:
            self.problem(e)
        else:
            self._add(path, *found)

    def add_list(self, list_path):
        where = "@" + list_path
        if _isdir(list_path):
            self.problem(InputError(where, "is a directory, not a list of paths"))
            return
        local = _local(list_path)
        try:
            with open(local, "rb") if local is not None else _tf().io.gfile.GFile(list_path, "rb") as f:
                data = f.read()
        except (FileNotFoundError, _tf_error("NotFoundError")):
            self.problem(InputError(where, "no such file or directory"))
            return
        except (OSError, _tf_error()) as e:
            self.problem(InputError(where, _reason(e)))
            return
        lines = [(n, os.fsdecode(line.strip())) for n, line in enumerate(data.splitlines(), 1)]
        lines = [(n, line) for n, line in lines if line]
        if not lines:
            self.problem(InputError(where, "the list holds no paths"))
        for number, line in lines:
            try:
                self.add_spec(line, allow_list=False)
            except InputError as e:
                raise InputError("%s line %d: %s" % (where, number, e.path), e.reason) from None

    def add_spec(self, spec, allow_list=True):
        if allow_list and spec.startswith("@"):
            self.add_list(spec[1:])
        elif GLOB_CHARS & set(spec):
            self.add_glob(spec)
        else:
            self.add_path(spec)


def expand(specs, on_error="fail"):
    """Expands input specs into an `Inputs` of regular files, checked readable.

    Specs: a file; a directory (walked recursively, hidden entries skipped); a glob
    pattern; or "@list" (a file of paths, one a line, blank lines ignored, relative
    paths taken from the current directory). A file reached twice is kept once.
    With on_error="fail", raises `InputError` naming the first spec or path that
    cannot be used, a spec that yields nothing included; with "skip", records each
    in `Inputs.skipped` with its reason and goes on. Either way, no input at all
    is an `InputError`.
    """
    if not specs:
        raise InputError("{setting:input}", "no input given")
    expander = _Expander(on_error)
    for spec in specs:
        expander.add_spec(spec)
    if not expander.result.files:
        skipped = expander.result.skipped
        raise InputError(
            ", ".join(specs) if len(specs) < 4 else "%d inputs" % len(specs),
            "no readable input file" + (" (%d skipped, first %s: %s)" % (len(skipped), *skipped[0]) if skipped else ""),
        )
    return expander.result


def _split_compression_suffix(path):
    root, suffix = os.path.splitext(path)
    codec = _COMPRESSED_SUFFIXES.get(suffix.lower())
    return (root, codec) if codec else (path, "")


def compression_of(path, compression="auto"):
    """TF's name for how the file at `path` is compressed ("", "GZIP" or "ZLIB"):
    `compression` (a key of `COMPRESSIONS`), or with "auto" its name's suffix:
    .gz/.gzip for gzip, .zz/.zlib for zlib, anything else none."""
    forced = COMPRESSIONS[compression]
    return _split_compression_suffix(path)[1] if forced is None else forced


def format_of(path):
    """The format the name of `path` says ("tfrecord" for *.tfrecord, *.tfrecords, *.tfr;
    "text" for *.txt; compressed or not), or None where the name does not say."""
    root = _split_compression_suffix(path)[0].lower()
    if root.endswith(_TFRECORD_SUFFIXES):
        return "tfrecord"
    return "text" if root.endswith(".txt") else None


def check_format(files, job_format, given="auto"):
    """Checks that `files` can be read as `job_format` (what the job reads: one of
    `FORMATS`). `given`: the format the user named, or "auto", which refuses a file
    whose name says another format (`format_of`) rather than misread it. Raises
    `UsageError` or `InputError`."""
    if given != "auto":
        if given not in FORMATS:
            raise UsageError("{setting:format}=%s: not a format (%s, or auto)" % (given, ", ".join(FORMATS)))
        if given != job_format:
            raise UsageError("{setting:format}=%s, but the job reads %s" % (given, job_format))
        return
    for f in files:
        named = format_of(f.path)
        if named is not None and named != job_format:
            raise InputError(
                f.path,
                "a %s file by its name, but the job reads %s ({setting:format}=%s reads it as %s anyway)"
                % (named, job_format, job_format, job_format),
            )


def encode_path(path):
    """The bytes TensorFlow must be given for `path` (local names may be any bytes)."""
    return os.fsencode(path)


@dataclass(frozen=True, slots=True)
class Piece:
    """Bytes [start, end) of file number `file`: the unit a worker reads at once, and
    the unit whose result is committed exactly once."""

    file: int
    start: int
    end: int

    @property
    def size(self):
        return self.end - self.start


def whole_file(piece, files):
    """Whether `piece` is the whole of its file (in `files`), not a byte range of it."""
    return piece.size == files[piece.file].size


class _Reader:
    """Reads byte ranges of one file: os.pread locally, GFile elsewhere."""

    def __init__(self, path):
        local = _local(path)
        if local is not None:
            self._fd = os.open(local, os.O_RDONLY)
            self.read = lambda offset, n: os.pread(self._fd, n, offset)
            self.close = lambda: os.close(self._fd)
        else:
            self._file = _tf().io.gfile.GFile(path, "rb")

            def read(offset, n):
                self._file.seek(offset)
                return self._file.read(n)

            self.read = read
            self.close = self._file.close


def _boundary(reader, position, size, separator):
    """The first offset >= `position` that follows a separator byte (or `size`)."""
    offset = position - 1
    while offset < size:
        window = reader.read(offset, WINDOW)
        if not window:
            break
        found = separator.search(window)
        if found:
            return offset + found.start() + 1
        offset += len(window)
    return size


def plan(files, read_size, records="words", on_error="fail", compression="auto"):
    """Cuts `files` into `Piece`s of about `read_size` bytes, each boundary moved
    forward to just after the next separator (ASCII whitespace for records="words",
    a newline for "lines"), so that every word (or line) lies in exactly one piece:
    the one in which it starts. A compressed file (`compression_of`) and a TFRecord
    file (records="tfrecord") cannot be cut: each is one piece, read as a stream.
    Returns (pieces, skipped): a file that can no longer be read is an `InputError`,
    or with on_error="skip" is left out and listed in skipped as (path, reason).
    Reads a few bytes at each boundary of a large file.
    """
    separator = RECORDS.get(records)
    pieces, skipped = [], []
    for number, f in enumerate(files):
        if f.size <= read_size or separator is None or compression_of(f.path, compression):
            pieces.append(Piece(number, 0, f.size))
            continue
        try:
            reader = _Reader(f.path)
            try:
                cuts = [0]
                while cuts[-1] < f.size:
                    target = cuts[-1] + read_size
                    cuts.append(f.size if target >= f.size else _boundary(reader, target, f.size, separator))
            finally:
                reader.close()
        except (OSError, _tf_error()) as e:
            error = InputError(f.path, "cannot be read to plan its pieces: " + _reason(e))
            if on_error == "fail":
                raise error from None
            skipped.append((error.path, error.reason))
            continue
        pieces.extend(Piece(number, a, b) for a, b in zip(cuts, cuts[1:]))
    return pieces, skipped


def splits(files, pieces, ids, split_size, max_pieces):
    """A tf.data pipeline of splits: each element, the tensor arguments of one map
    step (piece ids, paths, starts, ends, file sizes), holds consecutive pieces of
    `ids` adding up to at most `split_size` bytes (a larger piece alone) and at most
    `max_pieces` pieces. Tensors, not Python values, so the step is traced once.
    """
    lengths, count, size = [], 0, 0
    for i in ids:
        if count and (size + pieces[i].size > split_size or count >= max_pieces):
            lengths.append(count)
            count, size = 0, 0
        count += 1
        size += pieces[i].size
    if count:
        lengths.append(count)
    ids = np.asarray(ids, dtype=np.int64)
    chosen = [pieces[i] for i in ids]
    columns = (
        ids,
        np.array([encode_path(files[p.file].path) for p in chosen], dtype=object),
        np.array([p.start for p in chosen], dtype=np.int64),
        np.array([p.end for p in chosen], dtype=np.int64),
        np.array([files[p.file].size for p in chosen], dtype=np.int64),
    )
    tf = _tf()
    ragged = tuple(tf.RaggedTensor.from_row_lengths(column, lengths) for column in columns)
    return tf.data.Dataset.from_tensor_slices(ragged)


def split_bytes(total_bytes, num_workers, split_size, steps_per_worker):
    """Bytes per split: at most `split_size`, and small enough that every worker gets
    about `steps_per_worker` splits, so that none idles at the end."""
    return max(1, min(split_size, math.ceil(total_bytes / (steps_per_worker * num_workers))))
