"""Files -> pieces: each file cut at record boundaries into pieces of about `read_size`,
the unit a worker reads at once and the unit whose result is committed exactly once;
and the tf.data pipeline of splits, the pieces of one scheduled map step."""

import hashlib
import json
import os
import re
from dataclasses import dataclass

import numpy as np

from tf2_mapreduce import formats, inputs
from tf2_mapreduce.errors import InputError, cause_of

__all__ = ["Piece", "Plan", "RECORDS"]

# What a piece boundary must follow, so that no record spans two pieces.
RECORDS = {"words": re.compile(rb"[ \t\n\r\x0b\x0c]"), "lines": re.compile(rb"\n")}
WINDOW = 64 * 1024  # bytes read at a time while looking for a boundary


@dataclass(frozen=True, slots=True)
class Piece:
    """Bytes [start, end) of file number `file`."""

    file: int
    start: int
    end: int

    @property
    def size(self):
        return self.end - self.start


class _Reader:
    """Reads byte ranges of one file: os.pread locally, GFile elsewhere."""

    def __init__(self, path):
        local = inputs.local_path(path)
        if local is not None:
            fd = os.open(local, os.O_RDONLY)
            self.read = lambda offset, n: os.pread(fd, n, offset)
            self.close = lambda: os.close(fd)
        else:
            import tensorflow as tf

            gfile = tf.io.gfile.GFile(path, "rb")

            def read(offset, n):
                gfile.seek(offset)
                return gfile.read(n)

            self.read = read
            self.close = gfile.close


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


def _text_cuts(f, read_size, separator):
    """The offsets `f` is cut at, from 0 to its size. Reads a few bytes at each cut."""
    reader = _Reader(f.path)
    try:
        cuts = [0]
        while cuts[-1] < f.size:
            target = cuts[-1] + read_size
            cuts.append(f.size if target >= f.size else _boundary(reader, target, f.size, separator))
        return cuts
    finally:
        reader.close()


def _record_cuts(f, read_size):
    """The offsets an uncompressed TFRecord file `f` is cut at, from 0 to its size: where
    records start as their checksums tell. Reads a few bytes and one record at each cut."""
    from tf2_mapreduce import text_stream

    return text_stream.record_cuts(inputs.encode_path(f.path), f.size, read_size)


class Plan:
    """`files` (`inputs.InputFile`s) cut into `Piece`s of about `read_size` bytes, each cut
    moved forward to just after the next separator (ASCII whitespace for records="words",
    a newline for "lines"), so that every word (or line) lies in exactly one piece: the
    one in which it starts. A TFRecord file (records="tfrecord") is cut where a record
    starts as its checksums tell (`text_stream.record_cuts`), and each piece read as a
    stream of its records that must end exactly at the next cut, so a misleading cut
    fails the job rather than count a record twice or never. A compressed file
    (`formats.compression_of`) cannot be cut: it is one piece, read as a stream.

    Blocking: reads a few bytes (a record, for TFRecord files) at each cut of a large file. A file that can no longer
    be read is an `InputError`, or with on_error="skip" is left out and listed in
    `skipped` as (path, reason).
    """

    def __init__(self, files, read_size, records="words", on_error="fail", compression="auto"):
        self.files = files
        self.on_error = on_error
        self.read_size = read_size
        self.records = records
        self.compressions = [formats.compression_of(f.path, compression) for f in files]
        self.skipped = []
        self.pieces = []
        separator = RECORDS.get(records)
        for number, f in enumerate(files):
            if f.size <= read_size or self.compressions[number]:
                self.pieces.append(Piece(number, 0, f.size))
                continue
            try:
                cuts = _record_cuts(f, read_size) if records == "tfrecord" else _text_cuts(f, read_size, separator)
            except (OSError, inputs.tf_error()) as e:
                error = InputError(f.path, "cannot be read to plan its pieces: " + cause_of(e))
                if on_error == "fail":
                    raise error from None
                self.skipped.append((error.path, error.reason))
                continue
            self.pieces.extend(Piece(number, a, b) for a, b in zip(cuts, cuts[1:]))
        self.sizes = np.array([p.size for p in self.pieces], dtype=np.int64)
        self._piece_file = np.array([p.file for p in self.pieces], dtype=np.int64)

    @property
    def total_bytes(self) -> int:
        return int(self.sizes.sum())

    def whole(self, piece_id) -> bool:
        """Whether the piece is the whole of its file, not a byte range of it."""
        piece = self.pieces[piece_id]
        return piece.size == self.files[piece.file].size

    def kind(self, piece_id):
        """How a map step reads the piece: ("whole" | "range" | "stream", compression),
        compression as TF names it; one map step is traced per kind. A TFRecord file's
        pieces are streams of records, a range of the file or all of it."""
        compression = self.compressions[self.pieces[piece_id].file]
        if compression or self.records == "tfrecord":
            return "stream", compression
        return ("whole" if self.whole(piece_id) else "range"), ""

    def describe(self, piece_id) -> str:
        """A piece as users know it: its file, and the byte range if the file has several."""
        piece = self.pieces[piece_id]
        path = self.files[piece.file].path
        return path if self.whole(piece_id) else "%s (bytes %d-%d)" % (path, piece.start, piece.end)

    def file_of(self, piece_id):
        return self.files[self.pieces[piece_id].file]

    def piece_files(self) -> np.ndarray:
        """The file number of each piece, in piece order."""
        return self._piece_file

    def file_done(self, piece_done) -> np.ndarray:
        """Which files are done whole (every piece of them), as a bool array in file order."""
        total = np.bincount(self._piece_file, minlength=len(self.files))
        done = np.bincount(self._piece_file[piece_done], minlength=len(self.files))
        return (total > 0) & (done == total)

    def fingerprint(self) -> str:
        """A digest of the cuts: a checkpoint's state is per piece, so other cuts are another job."""
        return hashlib.sha256(json.dumps([[p.file, p.start, p.end] for p in self.pieces]).encode()).hexdigest()

    def splits(self, ids, split_size, max_pieces):
        """A tf.data pipeline of splits: each element, the tensor arguments of one map
        step (piece ids, paths, starts, ends, file sizes), holds consecutive pieces of
        `ids` adding up to at most `split_size` bytes (a larger piece alone) and at most
        `max_pieces` pieces. Tensors, not Python values, so the step is traced once."""
        import tensorflow as tf

        lengths, count, size = [], 0, 0
        for i in ids:
            if count and (size + self.pieces[i].size > split_size or count >= max_pieces):
                lengths.append(count)
                count, size = 0, 0
            count += 1
            size += self.pieces[i].size
        if count:
            lengths.append(count)
        ids = np.asarray(ids, dtype=np.int64)
        chosen = [self.pieces[i] for i in ids]
        columns = (
            ids,
            np.array([inputs.encode_path(self.files[p.file].path) for p in chosen], dtype=object),
            np.array([p.start for p in chosen], dtype=np.int64),
            np.array([p.end for p in chosen], dtype=np.int64),
            np.array([self.files[p.file].size for p in chosen], dtype=np.int64),
        )
        ragged = tuple(tf.RaggedTensor.from_row_lengths(column, lengths) for column in columns)
        return tf.data.Dataset.from_tensor_slices(ragged)
