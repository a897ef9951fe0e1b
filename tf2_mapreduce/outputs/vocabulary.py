"""Vocabulary files that TensorFlow loads as they are: per vocabulary of a per-key job, its
terms most frequent first, their counts beside them, the terms a text file cannot hold
set aside, and a summary of them all, streamed from the ps tasks in bounded memory.
Which vocabulary a table key belongs to is the key space's business (`reducers`).
"""

import hashlib
import json
import os
import urllib.parse

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs import files as output
from tf2_mapreduce.paths import join

__all__ = [
    "FILE_FORMATS",
    "SUMMARY",
    "Lines",
    "holdable",
    "file_names",
    "summarize",
    "write",
    "write_summary",
]

FILE_FORMATS = ("text", "tfrecord_gzip")
SUMMARY = "summary.json"
_FLUSH = 1 << 20  # bytes of lines gathered before a write


def holdable(term: bytes) -> bool:
    """Whether a text vocabulary file can hold `term`: TensorFlow reads it a line at a
    time (`TextFileInitializer`), so a term must be non-empty and hold no line break."""
    return bool(term) and b"\n" not in term and b"\r" not in term


def file_names(name: str, file_format: str = "text") -> dict:
    """The files of the vocabulary `name` under an output directory: "vocabulary",
    "counts" and "unwritable" (text only); the name is %-escaped where it is not
    [A-Za-z0-9_.-]."""
    safe = urllib.parse.quote(name, safe="")
    if file_format == "tfrecord_gzip":
        return {"vocabulary": "vocab_%s.tfrecord.gz" % safe, "counts": "counts_%s.tfrecord.gz" % safe}
    return {
        "vocabulary": "vocab_%s.txt" % safe,
        "counts": "counts_%s.tsv" % safe,
        "unwritable": "unwritable_%s.tsv" % safe,
    }


class Lines:
    """A file of lines written through tf.io.gfile in large writes, atomically: in place
    whole once closed, or not at all. `lines` and `sha256` (hashlib's) are of what was added."""

    def __init__(self, path):
        self._file = output.AtomicFile(path, "wb")
        self._handle = self._file.__enter__()
        self._lines, self._size = [], 0
        self.lines, self.sha256 = 0, hashlib.sha256()

    def add(self, line: bytes) -> None:
        self._lines.append(line)
        self._size += len(line)
        self.lines += 1
        if self._size >= _FLUSH:
            self._write()

    def extend(self, terms: list) -> None:
        """Adds a line of each of `terms` (bytes, without their newlines)."""
        if terms:
            self.add(b"\n".join(terms) + b"\n")
            self.lines += len(terms) - 1

    def _write(self):
        data = b"".join(self._lines)
        self.sha256.update(data)
        self._handle.write(data)
        self._lines, self._size = [], 0

    def close(self, error=None) -> None:
        """Puts the file in place whole, or with an `error`, removes what was written."""
        if error is None:
            self._write()
        self._file.__exit__(type(error) if error else None, error, None)

    def discard(self) -> None:
        """Removes what was written: nothing is put in place."""
        self.close(OSError("discarded"))


class _Records:
    """A GZIP'd TFRecord file of terms (tf.Transform's "tfrecord_gzip" vocabulary), atomically."""

    def __init__(self, path):
        self.path = path
        self.temporary = "%s.tmp-%d" % (path, os.getpid())
        self._writer = tf.io.TFRecordWriter(self.temporary, tf.io.TFRecordOptions(compression_type="GZIP"))

    def add(self, record):
        self._writer.write(record)

    def close(self, error=None):
        if error is None:
            output.put_in_place(self._writer, self.temporary, self.path)
        else:
            self._writer.close()
            output.discard(self.temporary)


class _Vocabulary:
    """One vocabulary being written: its files and its part of the summary."""

    def __init__(self, directory, name, top_k, min_count, file_format):
        self.top_k, self.min_count, self.text = top_k, min_count, file_format == "text"
        self.names = file_names(name, file_format)
        self.summary = dict(values=0, distinct=0, written=0, below_min_count=0, beyond_top_k=0)
        if self.text:
            self.summary.update(unwritable=0, unwritable_values=0)
        self.summary["files"] = self.names
        self._files = []
        if directory is not None:
            self._files = [
                (self._add_vocabulary, self._open(directory, "vocabulary", Lines if self.text else _Records)),
                (self._add_counts, self._open(directory, "counts", Lines if self.text else _Records)),
            ]
            if self.text:
                self._unwritable = self._open(directory, "unwritable", Lines)
                self._files.append((None, self._unwritable))

    def _open(self, directory, kind, writer):
        return writer(join(directory, self.names[kind]))

    @staticmethod
    def _add_vocabulary(f, term, count):
        f.add(term + b"\n" if isinstance(f, Lines) else term)

    @staticmethod
    def _add_counts(f, term, count):
        f.add(b"%d\t%s\n" % (count, term) if isinstance(f, Lines) else b"%d\t%s" % (count, term))

    def add(self, term, count):
        """Takes the vocabulary's terms in tf.Transform's order (`reducers.keys.tft_key`), or in
        any order for a summary alone."""
        summary = self.summary
        summary["values"] += count
        summary["distinct"] += 1
        if count < self.min_count:
            summary["below_min_count"] += 1
            return
        if self.text and not holdable(term):
            summary["unwritable"] += 1
            summary["unwritable_values"] += count
            if self._files:
                self._unwritable.add(b"%d\t%s\n" % (count, output.escape(term).encode()))
            return
        if self.top_k is not None and summary["written"] >= self.top_k:
            summary["beyond_top_k"] += 1
            return
        summary["written"] += 1
        for add, f in self._files:
            if add:
                add(f, term, count)

    def close(self, error=None):
        for _, f in self._files:
            f.close(error)


def _terms(space, entries, reserved):
    """The (key, count) of `entries` that are terms; the reserved keys' counts go to `reserved`."""
    for key, count in entries:
        if space.split(key)[0] is None:
            reserved[key] = count
        else:
            yield key, count


def _check_format(file_format):
    if file_format not in FILE_FORMATS:
        raise UsageError("{setting:vocabulary_format}=%s: one of %s" % (file_format, ", ".join(FILE_FORMATS)))


def summarize(space, entries, top_k=None, min_count=1, file_format="text"):
    """What `write` would say of the vocabularies of a per-key table, without writing or
    sorting it: one pass over its entries. Returns ({vocabulary name: its summary},
    {reserved key: count})."""
    _check_format(file_format)
    vocabularies = [_Vocabulary(None, name, top_k, min_count, file_format) for name in space.names]
    reserved = {}
    for key, count in _terms(space, entries, reserved):
        index, term = space.split(key)
        vocabularies[index].add(term, count)
    return {name: v.summary for name, v in zip(space.names, vocabularies)}, reserved


def write(space, terms, output_dir, top_k=None, min_count=1, file_format="text") -> dict:
    """Writes the vocabularies of a per-key table into `output_dir` (any tf.io.gfile
    path). Returns {vocabulary name: its summary}.

    `space`: the table's key space (`reducers.keys.KeySpace`: its vocabularies' `names`);
    `terms`: (vocabulary index, term, count) in tf.Transform's order, vocabulary by
    vocabulary (`outputs.result.Result.sorted_entries`). Each vocabulary gets the terms
    counted at least `min_count` times, the `top_k` first of them (None: all): with
    file_format="text", a file of one term a line (`vocab_<name>.txt`) where the terms
    that a line cannot hold (`holdable`) are left out and listed, escaped
    (`files.escape`), in `unwritable_<name>.tsv`; with "tfrecord_gzip", every term as a
    record. Beside it, `counts_<name>.tsv`: count, tab, term, line for line (records of
    the same, for "tfrecord_gzip"). A summary: its values, distinct terms, the terms
    written and left out. A file is in place whole, or not at all.
    """
    _check_format(file_format)
    vocabularies = [_Vocabulary(output_dir, name, top_k, min_count, file_format) for name in space.names]
    error = None
    try:
        for index, term, count in terms:
            vocabularies[index].add(term, count)
    except BaseException as e:
        error = e
        raise
    finally:
        for vocabulary in vocabularies:
            vocabulary.close(error)
    return {name: v.summary for name, v in zip(space.names, vocabularies)}


def write_summary(output_dir, summary):
    """Writes `summary` as `summary.json` under `output_dir`, atomically."""
    with output.AtomicFile(join(output_dir, SUMMARY)) as f:
        f.write(json.dumps(summary, indent=1) + "\n")
