"""How input files are read: text or TFRecord, and compressed or not, by name or as the
user says, checked against what the job reads before any work."""

import itertools
import os

from tf2_mapreduce.errors import InputError, UsageError
from tf2_mapreduce.inputs.files import Files

__all__ = ["FORMATS", "COMPRESSIONS", "format_read_by", "compression_of", "compressions_of", "format_of", "check"]

# What a file's bytes are: text, or TFRecord files of serialized records.
FORMATS = ("text", "tfrecord")
# How a file is compressed: "auto" goes by its name. TF's names for the codecs ("" is none).
COMPRESSIONS = {"auto": None, "none": "", "gzip": "GZIP", "zlib": "ZLIB"}
_COMPRESSED_SUFFIXES = {".gz": "GZIP", ".gzip": "GZIP", ".zz": "ZLIB", ".zlib": "ZLIB"}
_TFRECORD_SUFFIXES = (".tfrecord", ".tfrecords", ".tfr")


def format_read_by(records: str) -> str:
    """The format a job over `records` ("lines", "words" or "tfrecord", `Job.records`) reads."""
    return "tfrecord" if records == "tfrecord" else "text"


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
    """The format the name of `path` says ("tfrecord" for *.tfrecord, *.tfrecords, *.tfr;
    "text" for *.txt; compressed or not), or None where the name does not say."""
    root = _split_compression_suffix(path)[0].lower()
    if root.endswith(_TFRECORD_SUFFIXES):
        return "tfrecord"
    return "text" if root.endswith(".txt") else None


def check(files, job_format, given="auto", compression="auto", native_missing=None):
    """Checks that `files` can be read as `job_format` (what the job reads: one of
    `FORMATS`), before any is read. `given`: the format the user named, or "auto", which
    refuses a file whose name says another format (`format_of`) rather than misread it.
    `compression`: a key of `COMPRESSIONS`. `native_missing`: why the job goes without
    the native ops, or None: without them a compressed or TFRecord file is refused,
    since TensorFlow's own readers read a truncated one short without an error
    (docs/runtime.md, D1-D2). Raises `UsageError` or `InputError`."""
    if compression not in COMPRESSIONS:
        raise UsageError("{setting:compression}=%s: not a compression (%s)" % (compression, ", ".join(COMPRESSIONS)))
    if given != "auto":
        if given not in FORMATS:
            raise UsageError("{setting:format}=%s: not a format (%s, or auto)" % (given, ", ".join(FORMATS)))
        if given != job_format:
            raise UsageError("{setting:format}=%s, but the job reads %s" % (given, job_format))
    files = Files.of(files)
    named = _named(files)[0] if given == "auto" else itertools.repeat(None)
    compressions = compressions_of(files, compression) if native_missing else itertools.repeat("")
    for path, name, compressed in zip(files.paths, named, compressions):  # each file's first problem, in order
        if name is not None and name != job_format:
            raise InputError(
                path,
                "a %s file by its name, but the job reads %s ({setting:format}=%s reads it as %s anyway)"
                % (name, job_format, job_format, job_format),
            )
        if native_missing and (job_format == "tfrecord" or compressed):
            raise InputError(
                path,
                "a %s file needs tf2_mapreduce's native ops, which this job goes without (%s): TensorFlow's "
                "own readers read a truncated one short without an error"
                % ("TFRecord" if job_format == "tfrecord" else "compressed", native_missing),
            )
