"""The `Records` sink's piece files: where a map step writes each piece's records, under a
name of its own attempt, the row it commits for them, and which committed ones are gone."""

import numpy as np

from tf2_mapreduce import storage
from tf2_mapreduce.errors import OutputError, cause_of
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs.directory import PIECES
from tf2_mapreduce.paths import join

__all__ = ["PIECE_FIELDS", "SUFFIX", "pieces_dir", "piece_path", "make_dir", "PieceWriter", "missing"]

# What a piece's slot holds: the records its map steps returned, the bytes of the files
# they were written to, the attempt that wrote them (a random id, in the files' names), how
# many files it wrote (one per batch of a streamed piece), and the CRC-32 and length of
# what they compressed (for the GZIP trailer of its shard: `shards`).
PIECE_FIELDS = ("records", "bytes", "attempt", "parts", "crc", "length")
SUFFIX = ".tfrecord.gz"


def pieces_dir(output_dir: str) -> str:
    """Where the map steps of a job writing to `output_dir` write their pieces' files."""
    return join(output_dir, PIECES)


def piece_path(directory: str, piece, attempt, part):
    """The file of `part` (0, 1...) of the records an `attempt` of a map step wrote for
    `piece`, in `directory` (`pieces_dir`): Python ints give a str, tensors a tf.string.
    Named for the piece too: two pieces' attempts never share a name, whatever their ids."""
    if isinstance(attempt, int):
        return join(directory, "%d-%d-%d%s" % (piece, attempt, part, SUFFIX))
    numbers = [tf.strings.as_string(n) for n in (piece, attempt, part)]
    return tf.strings.join([directory.rstrip("/") + "/", numbers[0], "-", numbers[1], "-", numbers[2], SUFFIX])


def make_dir(directory: str) -> None:
    """Makes `directory` (`pieces_dir`), through an outage of its storage; raises
    `OutputError` if it cannot be made. Blocking."""
    try:
        storage.retrying(lambda: tf.io.gfile.makedirs(directory), directory)
    except storage.StorageOutage:
        raise
    except tf.errors.OpError as e:
        raise OutputError(directory, "cannot be made: %s" % cause_of(e)) from None


def _write(path, records, crc):
    """Writes `records` (1-D tf.string) as the new piece file `path`: (its size in bytes,
    the CRC-32 of what it compressed continued from `crc`, that length). Needs the native
    ops (`native.load()`). A storage outage fails it as one (`storage.OUTAGE_MARK`), any
    other error as the output's (`errors.CANNOT_WRITE`)."""
    from tf2_mapreduce import native

    return native.load().tf2_mapreduce_write_records(path, records, tf.cast(crc, tf.int64))


class PieceWriter:
    """What a map step writes its pieces' records with, in its graph on a worker: each
    piece's as files of `directory` (`pieces_dir`) named for the step's attempt, and the
    row (`PIECE_FIELDS`) it then commits for the piece: the last row committed wins, and
    each names whole files."""

    def __init__(self, directory: str):
        self.directory = directory

    def attempts(self, n):
        """An id for each of `n` pieces of this run of a step: random, the time mixed in (a
        seed set before the step was traced makes every worker's random ids the same), so
        that a step run again writes files of other names."""
        drawn = tf.random.uniform([n], minval=1, maxval=tf.int64.max, dtype=tf.int64)
        now = tf.bitcast(tf.timestamp(), tf.int64)
        return tf.bitwise.bitwise_and(tf.bitwise.bitwise_xor(drawn, now), tf.int64.max)

    def _written(self, records, piece, attempt, part, crc):
        """`records` written as the file `part` of `attempt` of `piece`, the CRC-32 of what
        came before it in the piece being `crc`: (records, bytes, crc, length)."""
        size, crc, length = _write(piece_path(self.directory, piece, attempt, part), records, crc)
        return tf.size(records, out_type=tf.int64), size, crc, length

    def write(self, records, piece, attempt):
        """The row of `piece`, its `records` written as one file."""
        records, size, crc, length = self._written(records, piece, attempt, 0, 0)
        return tf.stack([records, size, attempt, 1, crc, length])

    def start(self, attempt):
        """The row of a streamed piece before its first batch (`add`)."""
        return tf.stack([tf.constant(0, tf.int64), 0, attempt, 0, 0, 0])

    def add(self, row, records, piece, attempt):
        """`row` of a streamed piece with the `records` of its next batch written as its
        next file, in order: no more than a batch's records are held."""
        records, size, crc, length = self._written(records, piece, attempt, row[3], row[4])
        return tf.stack([row[0] + records, row[1] + size, attempt, row[3] + 1, crc, row[5] + length])


def missing(directory: str, rows: np.ndarray, done: np.ndarray) -> np.ndarray:
    """The pieces committed (`done`) whose files are not in `directory`: a run resumed from
    a checkpoint into another output directory, or after its pieces were removed. Their
    rows (`rows`, in piece order) name the files. One listing, through an outage of the
    storage. Blocking."""
    from tf2_mapreduce.inputs import lookup

    names = {name.rstrip("/") for name in lookup.children(directory)}
    gone = []
    for piece in np.flatnonzero(done).tolist():
        attempt, parts = int(rows[piece, 2]), int(rows[piece, 3])
        if any(piece_path("", piece, attempt, part).lstrip("/") not in names for part in range(parts)):
            gone.append(piece)
    return np.asarray(gone, dtype=np.int64)
