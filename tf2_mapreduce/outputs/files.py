"""Writing results where users asked: files written aside and moved into place, JSON
streamed a line at a time, tables, keys escaped reversibly; and the checks, before a job
runs, that its outputs can be written at all.
"""

import json
import os
import shutil

from tf2_mapreduce import storage
from tf2_mapreduce.errors import OutputError, UsageError, cause_of
from tf2_mapreduce.inputs import lookup
from tf2_mapreduce.paths import join, local_path

__all__ = [
    "escape",
    "unescape",
    "check_path",
    "AtomicFile",
    "put_in_place",
    "move",
    "remove_tree",
    "discard",
    "write_json",
    "write_table",
]


def escape(key):
    """`key` (bytes) as printable text, reversibly (see `unescape`).

    Valid UTF-8 stays as it is where it is printable; a backslash becomes two; every
    other byte (invalid UTF-8, control characters, and the bytes of unprintable
    characters such as NBSP) becomes \\xHH. Tabs and newlines cannot appear in a
    word, and never appear in the output.
    """
    out = []
    for char in key.decode("utf-8", "surrogateescape"):
        if char == "\\":
            out.append("\\\\")
        elif "\udc80" <= char <= "\udcff":  # a byte that is not valid UTF-8
            out.append("\\x%02x" % (ord(char) - 0xDC00))
        elif char.isprintable():
            out.append(char)
        else:
            out.extend("\\x%02x" % byte for byte in char.encode("utf-8"))
    return "".join(out)


def unescape(text):
    """The bytes `escape` made `text` from."""
    out = bytearray()
    i = 0
    while i < len(text):
        if text.startswith("\\\\", i):
            out += b"\\"
            i += 2
        elif text.startswith("\\x", i):
            out.append(int(text[i + 2 : i + 4], 16))
            i += 4
        else:
            out += text[i].encode("utf-8")
            i += 1
    return bytes(out)


def _gfile():
    import tensorflow as tf  # here: the CLI checks local outputs before it imports TensorFlow

    return tf.io.gfile


def _gfile_errors():
    import tensorflow as tf

    return tf.errors


def _probe(directory, setting, target):
    """Writes and removes a small file in `directory`: a target that cannot be written is
    refused before the job, not found after it (its work lost)."""
    probe = join(directory or ".", ".tf2_mapreduce-probe-%d" % os.getpid())
    local = local_path(probe)
    try:
        if local is not None:
            with open(local, "wb") as f:
                f.write(b"probe")
            os.unlink(local)
        else:
            storage.retrying(lambda: _write_and_remove(probe), probe)
    except storage.StorageOutage:
        raise
    except Exception as e:  # noqa: BLE001 - OSError locally, TensorFlow's errors elsewhere
        raise UsageError("%s %s: cannot be written there: %s" % (setting, target, cause_of(e))) from None


def _write_and_remove(path):
    with _gfile().GFile(path, "wb") as f:
        f.write(b"probe")
    _gfile().remove(path)


def check_path(path, setting="{setting:output}"):
    """Fails before the job, not after it, where a file cannot be written at `path`: a
    directory there, no parent directory (on a local disk: in a bucket, a name's
    "directories" are only its prefix), or one that refuses a file. Raises `UsageError`."""
    if lookup.isdir(path):
        raise UsageError("%s %s: is a directory" % (setting, path))
    parent = os.path.dirname(path)
    if parent and local_path(parent) is not None and not lookup.isdir(parent):
        raise UsageError("%s %s: directory %s does not exist" % (setting, path, parent))
    _probe(parent, setting, path)


class _Writes:
    """A file's `write`, its failures an `OutputError` naming the file: an error of what
    is written (a ps lost while its table is read) stays that error."""

    def __init__(self, file, path):
        self._file, self._path = file, path

    def write(self, data):
        try:
            self._file.write(data)
        except Exception as e:  # noqa: BLE001 - OSError locally, TensorFlow's errors elsewhere
            raise OutputError(self._path, cause_of(e)) from None


class AtomicFile:
    """A file written aside and renamed into place, so readers never see half of it.
    A failure to write is an `OutputError` naming the file; the file is discarded if
    what it was written from fails."""

    def __init__(self, path, mode="w"):
        self.path = path
        self.mode = mode
        self.temporary = "%s.tmp-%d" % (path, os.getpid())

    def __enter__(self):
        try:
            self.file = _gfile().GFile(self.temporary, self.mode)
        except Exception as e:  # noqa: BLE001 - as in _probe
            raise OutputError(self.path, cause_of(e)) from None
        return _Writes(self.file, self.path)

    def __exit__(self, kind, error, traceback):
        try:
            if kind is None:
                put_in_place(self.file, self.temporary, self.path)
            else:
                self.file.close()
        except storage.StorageOutage:
            discard(self.temporary)
            raise
        except Exception as e:  # noqa: BLE001 - as in _probe
            discard(self.temporary)
            raise OutputError(self.path, cause_of(e)) from None
        if kind is not None:
            discard(self.temporary)


def put_in_place(file, temporary, path):
    """Closes `file`, written at `temporary`, and moves it to `path` (`move`), through an
    outage of their storage (`storage.retrying`). A remote file is uploaded whole by its
    flush (TensorFlow's clients hold it on local disk until then), which can be tried again
    until it succeeds; the close then has nothing left to upload (docs/runtime.md, G10).
    Blocking."""
    storage.retrying(file.flush, temporary)
    file.close()
    move(temporary, path)


def move(source: str, target: str) -> None:
    """Renames `source`, a file of this job's own (no other job removes it: the output's
    claim), to `target`, replacing it, through an outage of their storage. Blocking. On
    object storage a rename is a copy, then a delete of `source`, and a try can be done
    with its answer lost (docs/runtime.md, G11): a try after one that failed so finds no
    `source`, and `target`, of `source`'s size, is then the file moved."""
    size = None

    def attempt():
        nonlocal size
        again = size is not None
        if size is None:
            size = _gfile().stat(source).length
        try:
            _gfile().rename(source, target, overwrite=True)
        except _gfile_errors().NotFoundError:
            if not again or _size(target) != size:
                raise

    storage.retrying(attempt, target)


def _size(path):
    """The size of the file at `path`, None if there is none."""
    try:
        return _gfile().stat(path).length
    except _gfile_errors().NotFoundError:
        return None


def remove_tree(path: str) -> None:
    """Removes the directory `path`, this job's own, and all under it, through an outage of
    its storage; one already gone is removed (a try done with its answer lost). Blocking."""
    local = local_path(path)
    if local is not None:
        shutil.rmtree(local, ignore_errors=True)
        return

    def attempt():
        try:
            _gfile().rmtree(path)
        except _gfile_errors().NotFoundError:
            pass

    storage.retrying(attempt, path)


def discard(temporary):
    """Removes `temporary`, if it was made; best effort."""
    try:
        _gfile().remove(temporary)
    except Exception:  # noqa: BLE001 - it may never have been made, or storage is out
        pass


_LINES_PER_WRITE = 4096


def write_json(path, document, name, items):
    """Writes `document` to `path` as JSON, atomically, with one more member, `name`: a
    list of `items` written one at a time (one line each) as they come, so that a
    million of them need not be held at once."""
    with AtomicFile(path) as f:
        f.write(json.dumps(document, indent=1)[:-2])  # without the closing "\n}", to append the list
        f.write(',\n "%s": [' % name)
        lines = []  # written a few thousand at a time: a write costs as much as a line's JSON
        for n, item in enumerate(items):
            lines.append("%s\n  %s" % ("," if n else "", json.dumps(item)))
            if len(lines) == _LINES_PER_WRITE:
                f.write("".join(lines))
                lines = []
        f.write("".join(lines) + "\n ]\n}\n")


def write_table(path, entries):
    """Writes (key bytes, count) `entries` to `path` as TSV lines of escaped key, tab,
    count, in their order, atomically."""
    with AtomicFile(path) as f:
        for key, count in entries:
            f.write("%s\t%d\n" % (escape(key), count))
