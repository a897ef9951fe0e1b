"""What input files are: a format is one object (its names, what ends its records, how a
file is cut into pieces and how a piece is read) that planning and the map step ask;
and how files are compressed, by name or as the user says, checked before any work."""

import itertools
import os
from dataclasses import dataclass

from tf2_mapreduce.errors import InputError, UsageError
from tf2_mapreduce.inputs.files import Files

__all__ = [
    "Format",
    "LINES",
    "WORDS",
    "TFRECORD",
    "NAMES",
    "COMPRESSIONS",
    "of_records",
    "compression_of",
    "compressions_of",
    "format_of",
    "check",
]

# How a file is compressed: "auto" goes by its name. TF's names for the codecs ("" is none).
COMPRESSIONS = {"auto": None, "none": "", "gzip": "GZIP", "zlib": "ZLIB"}
_COMPRESSED_SUFFIXES = {".gz": "GZIP", ".gzip": "GZIP", ".zz": "ZLIB", ".zlib": "ZLIB"}
# A TFRecord file is mapped this many records at a time: a batch is what map_fn gets, so
# a worker holds this many records per piece in flight.
RECORDS_PER_BATCH = 1024


@dataclass(frozen=True)
class Format:
    """A format of input files. `name`: what `--format` calls it; `records`: what a piece
    holds whole, as `Job.records` names it; `item`: what `map_fn` gets a batch of;
    `suffixes`: names that say a file is of this format, compressed or not; `title`:
    how messages name such a file."""

    name: str
    records: str
    item: str
    suffixes: tuple
    title: str

    def streamed(self, compression: str) -> bool:
        """Whether a piece is read as a stream of batches (`stream`) rather than as bytes
        at once: a compressed file's is."""
        return bool(compression)

    def cuts(self, path: str, size: int, read_size: int) -> list:
        """The offsets, from 0 to `size`, an uncompressed file is cut into pieces at, about
        `read_size` apart, each at a record's start. Blocking: reads near each cut."""
        raise NotImplementedError

    def stream(self, path, compression, read_size, start=0, end=-1):
        """A tf.data pipeline of the piece [start, end) of the file at `path` (-1: to its
        end) as `map_fn` takes it, a batch at a time, in bounded memory. In the graph."""
        raise NotImplementedError


@dataclass(frozen=True)
class Text(Format):
    """Text, cut after any byte of `separators`: no record spans two pieces."""

    separators: bytes = b"\n"

    def cuts(self, path, size, read_size):
        from tf2_mapreduce.inputs import readers

        return readers.text_cuts(path, size, read_size, self.separators)

    def stream(self, path, compression, read_size, start=0, end=-1):
        from tf2_mapreduce.inputs import readers

        return readers.chunks(path, compression, read_size, self.separators).batch(1)


@dataclass(frozen=True)
class TFRecord(Format):
    """TFRecord files, cut where a record starts as its checksums tell, and every piece
    read record by record (both checksums checked), compressed or not."""

    def streamed(self, compression):
        return True

    def cuts(self, path, size, read_size):
        from tf2_mapreduce.inputs import readers

        return readers.record_cuts(path, size, read_size)

    def stream(self, path, compression, read_size, start=0, end=-1):
        from tf2_mapreduce.inputs import readers

        return readers.records(path, compression, start, end).batch(RECORDS_PER_BATCH)


LINES = Text("text", "lines", "text", (".txt",), "text", b"\n")
WORDS = Text("text", "words", "text", (".txt",), "text", b" \t\n\r\x0b\x0c")
TFRECORD = TFRecord("tfrecord", "tfrecord", "record", (".tfrecord", ".tfrecords", ".tfr"), "TFRecord")
_BY_RECORDS = {f.records: f for f in (LINES, WORDS, TFRECORD)}
NAMES = tuple(dict.fromkeys(f.name for f in _BY_RECORDS.values()))  # what --format takes, but "auto"


def of_records(records) -> Format:
    """The `Format` of a job over `records` (a `Format`, or its `records` name); raises
    `ValueError` for another."""
    if isinstance(records, Format):
        return records
    if records not in _BY_RECORDS:
        raise ValueError("records must be one of %s, not %r" % (", ".join(map(repr, _BY_RECORDS)), records))
    return _BY_RECORDS[records]


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


def _named(files):
    """([format_of(path)], [compression_of(path)]) of every path of `files` (`Files`),
    made once, in one pass: each computed once per last suffix (a million calls of
    os.path.splitext cost a second), and per path only where the last suffix is a
    compression's, since the one before it matters then."""

    def make(paths):
        known = {}
        formats, compressions = [], []
        for path in paths:
            dot = path.rfind(".")
            tail = path[dot:] if dot >= 0 else ""
            answer = known.get(tail)
            if answer is None:
                if tail.lower() in _COMPRESSED_SUFFIXES:
                    answer = format_of(path), compression_of(path)
                else:
                    answer = known[tail] = format_of(tail), compression_of(tail)
            formats.append(answer[0])
            compressions.append(answer[1])
        return formats, compressions

    return files.derived("named", make)


def compressions_of(files, compression="auto"):
    """[compression_of(path, compression) for each path] of `files` (`Files`),
    a million in a fraction of a second."""
    forced = COMPRESSIONS[compression]
    return [forced] * len(files) if forced is not None else _named(files)[1]


def format_of(path):
    """The name of the format the name of `path` says (a suffix of `Format.suffixes`,
    compressed or not), or None where the name does not say."""
    root = _split_compression_suffix(path)[0].lower()
    for f in _BY_RECORDS.values():
        if root.endswith(f.suffixes):
            return f.name
    return None


def check(files, job_format, given="auto", compression="auto", native_missing=None):
    """Checks that `files` can be read as `job_format` (the `Format` the job reads),
    before any is read. `given`: the format the user named, or "auto", which refuses a
    file whose name says another format (`format_of`) rather than misread it.
    `compression`: a key of `COMPRESSIONS`. `native_missing`: why the job goes without
    the native ops, or None: without them a compressed file, or a file of a format
    that is always streamed, is refused, since TensorFlow's own readers read a
    truncated one short without an error (docs/runtime.md, D1-D2). Raises `UsageError`
    or `InputError`."""
    if compression not in COMPRESSIONS:
        raise UsageError("{setting:compression}=%s: not a compression (%s)" % (compression, ", ".join(COMPRESSIONS)))
    wanted = job_format.name
    if given != "auto":
        if given not in NAMES:
            raise UsageError("{setting:format}=%s: not a format (%s, or auto)" % (given, ", ".join(NAMES)))
        if given != wanted:
            raise UsageError("{setting:format}=%s, but the job reads %s" % (given, wanted))
    files = Files.of(files)
    named = _named(files)[0] if given == "auto" else itertools.repeat(None)
    compressions = compressions_of(files, compression) if native_missing else itertools.repeat("")
    for path, name, compressed in zip(files.paths, named, compressions):  # each file's first problem, in order
        if name is not None and name != wanted:
            raise InputError(
                path,
                "a %s file by its name, but the job reads %s ({setting:format}=%s reads it as %s anyway)"
                % (name, wanted, wanted, wanted),
            )
        if native_missing and job_format.streamed(compressed):
            raise InputError(
                path,
                "a %s file needs tf2_mapreduce's native ops, which this job goes without (%s): TensorFlow's "
                "own readers read a truncated one short without an error"
                % ("compressed" if compressed else job_format.title, native_missing),
            )
