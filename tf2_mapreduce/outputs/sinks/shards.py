"""The `Records` sink's shards: the committed pieces' files joined, in input order, into
the GZIP'd TFRecord files of the result's `data/`, each one GZIP member, the same bytes
every time; the coordinator decides each shard's bytes, the workers copy them in parallel."""

import functools
import re
import struct

import numpy as np

from tf2_mapreduce import storage
from tf2_mapreduce.errors import OutputError, cause_of
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs.sinks.pieces import PIECE_FIELDS, SUFFIX, piece_path
from tf2_mapreduce.paths import join

__all__ = ["DATA", "SHARD_BYTES", "crc32_combine", "shard_name", "cuts", "write"]

DATA = "data"
# Output bytes per shard when their number is not given: large enough that a reader opens
# few files, small enough that a trainer's readers share a dataset's files among them.
SHARD_BYTES = 128 << 20
# A piece file is a raw deflate stream that ends on a byte boundary (native/write_records.cc);
# a shard is one GZIP member: this header, its pieces' files one after the other, an empty
# final block, and the trailer (the CRC-32 and length of it all), as pigz joins blocks.
# Not GZIP files joined: TensorFlow's reader stops early in some files of several members.
_GZIP_HEADER = bytes([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 3])  # deflate, no flags, no time, Unix
_FINAL_BLOCK = bytes([3, 0])  # an empty final block (fixed Huffman codes)


_POLYNOMIAL = 0xEDB88320  # CRC-32's, reflected


def _times(a, b):
    """a times b modulo CRC-32's polynomial (reflected: x^0 is the top bit)."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                return p
        m >>= 1
        b = (b >> 1) ^ _POLYNOMIAL if b & 1 else b >> 1


_X_TO_2N = [1 << 30]  # x^(2^n): x^1, x^2, x^4...
for _ in range(31):
    _X_TO_2N.append(_times(_X_TO_2N[-1], _X_TO_2N[-1]))


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32 of A then B from crc1 = CRC-32(A), crc2 = CRC-32(B) and len(B), as
    zlib's crc32_combine: CRC-32(A) times x^(8 len(B)), plus CRC-32(B). Pure."""
    power, n, k = 1 << 31, length2, 3
    while n:
        if n & 1:
            power = _times(_X_TO_2N[k & 31], power)
        n >>= 1
        k += 1
    return _times(power, crc1) ^ crc2


def shard_name(k: int, n: int) -> str:
    return "part-%05d-of-%05d%s" % (k, n, SUFFIX)


def cuts(sizes, num_shards: int) -> np.ndarray:
    """Where the shards of pieces of `sizes` bytes begin and end: shard k holds pieces
    [cuts[k], cuts[k+1]), cut between pieces as near as they allow to an equal share of
    the bytes each (a shard may be empty, where a piece is larger than a share). `num_shards`:
    0 for one per `SHARD_BYTES`, at least one. Pure and exact (integers): the same
    pieces give the same shards."""
    sizes = np.asarray(sizes, dtype=np.int64)
    total = int(sizes.sum())
    count = num_shards or max(1, -(-total // SHARD_BYTES))
    ends = np.cumsum(sizes)
    shares = [k * total // count for k in range(1, count)]
    return np.concatenate([[0], np.searchsorted(ends, shares, side="right"), [len(sizes)]]).astype(np.int64)


_PIECE_GONE = re.compile(r"tf2_mapreduce: piece file gone: (.+?): not found")  # native/join_files.cc


def _join(paths, head, tail, size, temporary_dir, target):
    """Writes the shard `target`, of `size` bytes, on a worker (native/join_files.cc)."""
    from tf2_mapreduce import native

    return native.load().tf2_mapreduce_join_files(paths, head, tail, size, temporary_dir, target)


@functools.cache
def _joined():
    text = tf.TensorSpec([], tf.string)
    signature = [tf.TensorSpec([None], tf.string), text, text, tf.TensorSpec([], tf.int64), text, text]
    return tf.function(_join, input_signature=signature)


def _shard(directory, pieces, rows):
    """(the paths of the files of `pieces`, in order, the GZIP trailer of the shard
    they make, their bytes): `rows` are theirs, (bytes, attempt, parts, crc, length)
    each. Pure."""
    paths, crc, length = [], 0, 0
    for piece, (_, attempt, parts, piece_crc, piece_length) in zip(pieces.tolist(), rows.tolist()):
        paths += [piece_path(directory, piece, attempt, part) for part in range(parts)]
        crc = crc32_combine(crc, piece_crc, piece_length)
        length += piece_length
    return paths, _FINAL_BLOCK + struct.pack("<II", crc, length & 0xFFFFFFFF), int(rows[:, 0].sum())


def _gone(error):
    """The `OutputError` of a join that failed on a piece file gone (native/join_files.cc),
    or None for another error."""
    gone = _PIECE_GONE.search(error.message)
    if gone is None:
        return None
    return OutputError(
        gone.group(1),
        "a piece file committed by this run (or the run it resumed from) is gone; run the job again "
        "without its {setting:checkpoint_dir}",
    )


def write(directory, pieces, rows, staging, num_shards, workers) -> dict:
    """Has `workers` (`run.on_workers.OnWorkers`) write the shards of a `Records` job into
    `staging/data/`, in parallel: the committed `pieces` (their ids, in order) and their
    `rows` (`pieces.PIECE_FIELDS`), read from their files in `directory`
    (`pieces.pieces_dir`), where each shard is written, checked to be of the bytes
    committed, then renamed into place.
    The coordinator decides every byte (which pieces, the GZIP header and trailer); a
    worker only copies, so a shard is the same whoever joins it and however often.
    Blocking; raises `OutputError` naming a piece's file that is gone (or, from `workers`,
    a file that cannot be written), `StorageOutage` past the storage's patience. Returns the summary:
    records, shards, bytes."""
    pieces = np.asarray(pieces, dtype=np.int64)
    rows = np.asarray(rows, dtype=np.int64).reshape(-1, len(PIECE_FIELDS))
    bounds = cuts(rows[:, 1], num_shards)
    count = len(bounds) - 1
    data = join(staging, DATA)
    arguments, sizes = [], []
    for k in range(count):
        chosen = slice(bounds[k], bounds[k + 1])
        paths, tail, size = _shard(directory, pieces[chosen], rows[chosen, 1:])
        sizes.append(len(_GZIP_HEADER) + size + len(tail))
        target = join(data, shard_name(k, count))
        files = tf.constant(paths, tf.string, [len(paths)])
        arguments.append((files, _GZIP_HEADER, tail, tf.constant(sizes[-1], tf.int64), directory, target))
    try:
        storage.retrying(lambda: tf.io.gfile.makedirs(data), data)
    except tf.errors.OpError as e:
        raise OutputError(data, cause_of(e)) from None
    try:
        workers.each(_joined(), arguments, data)
    except tf.errors.NotFoundError as e:
        gone = _gone(e)
        if gone is None:
            raise
        raise gone from None
    return {"records": int(rows[:, 0].sum()), "shards": count, "bytes": sum(sizes)}
