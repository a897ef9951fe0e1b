"""Results as users get them: --output files (JSON for sums; TSV or JSON for per-key
tables, sorted; both streamed, so neither a vocabulary nor a per-file list has to fit
in the coordinator's memory) and the reversible escaping of keys whose bytes are not printable.
"""

import heapq
import json
import os
import struct
import tempfile

import tensorflow as tf

from tf2_mapreduce.client import PerFile
from tf2_mapreduce.errors import UsageError

__all__ = ["escape", "unescape", "sorted_entries", "check_path", "header", "write", "AtomicFile"]

RUN_SIZE = 500_000  # entries sorted in memory at a time; more spill to sorted runs on disk
_RECORD = struct.Struct(">qI")  # count, key length; then the key bytes


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


def _order(entry):
    return -entry[1], entry[0]


def _write_run(entries, directory):
    handle, path = tempfile.mkstemp(dir=directory, suffix=".run")
    with os.fdopen(handle, "wb") as f:
        for key, count in entries:
            f.write(_RECORD.pack(count, len(key)))
            f.write(key)
    return path


def _read_run(path):
    with open(path, "rb", buffering=1 << 20) as f:
        while True:
            header = f.read(_RECORD.size)
            if not header:
                return
            count, length = _RECORD.unpack(header)
            yield f.read(length), count


def sorted_entries(entries, run_size=RUN_SIZE, order=_order):
    """Yields (key, count) pairs from `entries` by count descending, then key bytes
    ascending (or by `order`, a sort key of an entry), holding at most `run_size` of
    them in memory: larger inputs are sorted in runs spilled to a temporary directory
    and merged."""
    run = []
    with tempfile.TemporaryDirectory(prefix="tf2_mapreduce-sort-") as directory:
        runs = []
        for entry in entries:
            run.append(entry)
            if len(run) >= run_size:
                run.sort(key=order)
                runs.append(_write_run(run, directory))
                run = []
        run.sort(key=order)
        if not runs:
            yield from run
            return
        runs.append(_write_run(run, directory))
        run = None
        yield from heapq.merge(*(_read_run(path) for path in runs), key=order)


def check_path(path, job):
    """Fails before the job, not after it, if the result could not be written as asked."""
    if tf.io.gfile.isdir(path):
        raise UsageError("{setting:output} %s: is a directory" % path)
    parent = os.path.dirname(path)
    if parent and not tf.io.gfile.isdir(parent):
        raise UsageError("{setting:output} %s: directory %s does not exist" % (path, parent))
    if not job.reducer.keyed and not path.endswith(".json"):
        raise UsageError("{setting:output} %s: {setting:job}=%s writes JSON; name the file *.json" % (path, job.name))


class AtomicFile:
    """A file written aside and renamed into place, so readers never see half of it."""

    def __init__(self, path, mode="w"):
        self.path = path
        self.mode = mode
        self.temporary = "%s.tmp-%d" % (path, os.getpid())

    def __enter__(self):
        self.file = tf.io.gfile.GFile(self.temporary, self.mode)
        return self.file

    def __exit__(self, kind, *rest):
        self.file.close()
        if kind is None:
            tf.io.gfile.rename(self.temporary, self.path, overwrite=True)
        else:
            tf.io.gfile.remove(self.temporary)


def header(result, found, timings):
    """What every JSON result says, besides the values."""
    skipped = list(found.skipped) + result.skipped
    return {
        "job": result.job.name,
        "config": result.job.config,
        "files": result.files_done,
        "bytes": result.total_bytes,
        "seconds": round(result.seconds, 3),
        "timings": {name: round(value, 3) for name, value in timings.items()},
        "resumed_from": result.resumed_from,
        "files_resumed": result.files_resumed,
        "steps_per_worker": list(result.steps_per_worker),
        "skipped": [{"path": path, "reason": reason} for path, reason in skipped],
        "skipped_hidden": found.hidden,
        "duplicates_ignored": found.duplicates,
    }


def _per_file(result):
    """Yields each file's entry, made as it is written: a million files never make a
    million dicts at once."""
    reducer = result.job.reducer
    for f in PerFile(result.files, result.file_values(), result.file_done, reducer.to_python):
        yield dict(path=f.path, size=f.size, **reducer.fields(f.value))


def _write_json(f, document, name, items):
    """Writes `document` with one more member, `name`: a list of `items` written one at
    a time (one line each) as they come."""
    f.write(json.dumps(document, indent=1)[:-2])  # without the closing "\n}", to append the list
    f.write(',\n "%s": [' % name)
    for n, item in enumerate(items):
        f.write("%s\n  %s" % ("," if n else "", json.dumps(item)))
    f.write("\n ]\n}\n")


def write(path, result, found, min_count=1, timings=None):
    """Writes `result` to `path`: JSON for sums; for a per-key table, TSV lines of
    escaped key, tab, count (or JSON if `path` ends in .json), sorted by count
    descending then key bytes ascending, keys with fewer than `min_count` left out.
    `timings` (name -> seconds) go into JSON as they are. Blocking; streams a table
    from the ps tasks, which must still be up."""
    timings = timings or {}
    with AtomicFile(path) as f:
        if not result.job.reducer.keyed:
            document = header(result, found, timings)
            document.update(result.job.reducer.total_fields(result.total))
            _write_json(f, document, "per_file", _per_file(result))
            return
        entries = sorted_entries(result.reducer.entries(min_count))
        if not path.endswith(".json"):
            for key, count in entries:
                f.write("%s\t%d\n" % (escape(key), count))
            return
        unit = result.job.reducer.unit
        document = header(result, found, timings)
        document.update(
            {"total_" + unit: result.total, "distinct_" + unit: result.stats.distinct, "min_count": min_count}
        )
        _write_json(f, document, unit, ([escape(key), count] for key, count in entries))
