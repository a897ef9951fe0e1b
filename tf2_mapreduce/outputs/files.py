"""Writing results where users asked: files written aside and renamed into place, JSON
streamed a line at a time, tables sorted in bounded memory, keys escaped reversibly;
and the checks, before a job runs, that its outputs can be written at all.
"""

import heapq
import json
import os
import shutil
import struct
import tempfile

from tf2_mapreduce import storage
from tf2_mapreduce.errors import OutputError, UsageError, cause_of
from tf2_mapreduce.inputs import lookup
from tf2_mapreduce.paths import join, local_path

__all__ = [
    "escape",
    "unescape",
    "Order",
    "BY_COUNT",
    "COUNT",
    "Held",
    "SortedRuns",
    "sorted_entries",
    "check_path",
    "AtomicFile",
    "put_in_place",
    "discard",
    "write_json",
    "write_table",
]

RUN_BYTES = 64 << 20  # entries sorted in memory at a time; more spill to sorted runs on disk
_ENTRY = 64  # what an entry held costs beside its bytes: its bytes object and list slot
FAN_IN = 64  # runs merged at once
_LENGTH = struct.Struct(">I")  # an encoded entry's length, then its bytes


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


class Order:
    """An order of (key bytes, count) entries, as bytes: `encode(entry)` sorts bytewise as
    the entry does, and `decode` gives the entry back; sorting bytes needs no Python
    comparison of tuples (a third of the time). This one: count descending (any int64),
    then key bytes ascending."""

    def encode(self, entry) -> bytes:
        key, count = entry
        return COUNT.pack(_MOST - count) + key

    def decode(self, data: bytes):
        return data[COUNT.size :], _MOST - COUNT.unpack_from(data)[0]


BY_COUNT = Order()
COUNT = struct.Struct(">Q")  # a count made unsigned and big-endian: bytewise order is its order
_MOST = (1 << 63) - 1


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


class Held:
    """What `SortedRuns` sharing it may hold in memory together (`limit`, bytes, by default
    `RUN_BYTES`) and hold (`size`), and where they spill (`directory`; by default the
    system's temporary one): one that takes them past it spills the largest run of them."""

    def __init__(self, limit: int | None = None, directory: str | None = None):
        self.limit, self.directory, self.size = limit or RUN_BYTES, directory, 0
        self.members = []


class SortedRuns:
    """(key bytes, count) entries taken one at a time (`add`) and given back once in
    `order` (`sorted`; an `Order`, by default `BY_COUNT`), holding at most `run_bytes` of
    them in memory (each encoded: a bytes object), or with `held` (a `Held`) at most its
    limit together with the others sharing it: more are sorted in runs spilled to a
    temporary directory, then merged, `FAN_IN` runs at a time. `close` (or leaving a
    `with` block) removes the runs."""

    def __init__(self, run_bytes: int | None = None, order: Order = BY_COUNT, held: Held | None = None):
        self._held, self._order = held or Held(run_bytes), order
        self._run, self._size, self._runs, self._directory = [], 0, [], None
        self._held.members.append(self)

    def add(self, entry) -> None:
        data = self._order.encode(entry)
        self._run.append(data)
        self._size += len(data) + _ENTRY
        self._held.size += len(data) + _ENTRY
        if self._held.size >= self._held.limit:
            max(self._held.members, key=lambda member: member._size)._spill()

    def _spill(self):
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="tf2_mapreduce-sort-", dir=self._held.directory)
        self._run.sort()
        self._runs.append(_write_run(self._run, self._directory))
        self._forget()

    def _forget(self):
        self._held.size -= self._size
        self._run, self._size = [], 0

    def sorted(self):
        """Every entry added, in order: an iterator, valid until `close`."""
        if not self._runs:
            self._run.sort()
            return map(self._order.decode, self._run)
        self._spill()
        while len(self._runs) > FAN_IN:  # a file open and a buffer a run merged at once
            merged = heapq.merge(*(_read_run(path) for path in self._runs[:FAN_IN]))
            self._runs = self._runs[FAN_IN:] + [_write_run(merged, self._directory)]
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


def sorted_entries(entries, run_bytes=None, order=BY_COUNT):
    """Yields (key, count) pairs from `entries` in `SortedRuns`' order, holding at most
    `run_bytes` of them in memory."""
    with SortedRuns(run_bytes, order) as runs:
        for entry in entries:
            runs.add(entry)
        yield from runs.sorted()


def _gfile():
    import tensorflow as tf  # here: the CLI checks local outputs before it imports TensorFlow

    return tf.io.gfile


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
    """Closes `file`, written at `temporary`, and renames it to `path`, through an outage
    of their storage (`storage.retrying`). A remote file is uploaded whole by its flush
    (TensorFlow's clients hold it on local disk until then), which can be tried again
    until it succeeds; the close then has nothing left to upload (docs/runtime.md, G10).
    Blocking."""
    storage.retrying(file.flush, temporary)
    file.close()
    storage.retrying(lambda: _gfile().rename(temporary, path, overwrite=True), path)


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
