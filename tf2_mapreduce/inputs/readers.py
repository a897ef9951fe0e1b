"""A file, possibly compressed, as a tf.data stream in bounded memory (native/text_stream.cc):
text in chunks cut at record boundaries, or a TFRecord file's records, exactly or an error.
There is no fallback in TensorFlow's own ops: its readers read a truncated file short
without an error (docs/runtime.md, D1-D2), so without the native ops such inputs are
refused (`formats.check`)."""

import tensorflow as tf

from tf2_mapreduce import native
from tf2_mapreduce.errors import UsageError

__all__ = ["chunks", "records", "record_cuts", "COMPRESSIONS"]

# As TextLineDataset and tf.io.decode_compressed name them.
COMPRESSIONS = ("", "GZIP", "ZLIB")

_ELEMENT = tf.TensorSpec([], tf.string)


def chunks(path, compression, chunk_bytes, separators) -> tf.data.Dataset:
    """The text of the file at `path` (a str or string scalar), inflated if `compression`
    is "GZIP" or "ZLIB", as scalar tf.string elements whose concatenation is that text
    byte for byte. Each element is the shortest run of the text left that has at least
    `chunk_bytes` bytes and ends with one of the bytes of `separators` (b"\\n" for lines,
    b" \\t\\n\\r\\x0b\\x0c" for words), or else the rest of the text: no record is split
    between elements, and an empty file has none. Memory is about `chunk_bytes` + the
    longest record + zlib's buffers, whatever the size of the file.

    GZIP reads every member of a multi-member file (`cat a.gz b.gz`), as gzip.decompress
    does. A truncated or corrupt compressed file is a tf.errors.DataLossError when the
    stream gets there, its message "<path>; truncated GZIP file: ..." or "<path>; corrupt
    GZIP file: ..." (failures.file_failure reads the path from it); a missing file is
    TensorFlow's NotFoundError.

    Usable inside a tf.function (`chunks(...).reduce(...)` in a map step). Needs the
    native library (`native.load()`): raises `UsageError` without it."""
    ops = _ops()
    variant = ops.tf2_mapreduce_text_chunk_dataset(
        filename=tf.convert_to_tensor(path, tf.string),
        compression_type=tf.convert_to_tensor(compression, tf.string),
        chunk_bytes=tf.convert_to_tensor(chunk_bytes, tf.int64),
        separators=tf.convert_to_tensor(separators, tf.string),
    )
    return tf.data.experimental.from_variant(variant, _ELEMENT)


def records(path, compression, start=0, end=-1) -> tf.data.Dataset:
    """The records of the TFRecord file at `path` (a str or string scalar), inflated if
    `compression` is "GZIP" or "ZLIB", as scalar tf.string elements in order: on a good file
    the records tf.data.TFRecordDataset yields. Memory is one record and the buffers.

    An uncompressed file may be read as a byte range: from `start`, which must be a
    record's start, to `end` (-1: the file's end), which must be one too, or the file's
    end (int64 scalars). A record that runs past `end` is a tf.errors.DataLossError, "<path>;
    records do not line up at <end>: ...": its ranges were not cut at records' starts
    (`plan.Plan` cuts them where records' checksums say one starts; a payload that holds a
    whole TFRecord file can mislead that), so no record is read twice or skipped.

    Both checksums of every record are checked; GZIP reads every member of a multi-member
    file (`cat a.tfrecord.gz b.tfrecord.gz`). Errors are tf.errors.DataLossError, their
    message "<path>; <cause>" (failures.file_failure reads the path from it) with offsets
    in the inflated stream as TFRecordDataset gives them: "truncated record at <offset>"
    (the stream ends inside a record), "corrupted record at <offset>" (a checksum does not
    match), or the truncated or corrupt GZIP/ZLIB file of `chunks`; a missing file is
    TensorFlow's NotFoundError.

    Usable inside a tf.function, as `chunks` is; needs the native library, as `chunks` does."""
    ops = _ops()
    variant = ops.tf2_mapreduce_record_dataset(
        filename=tf.convert_to_tensor(path, tf.string),
        compression_type=tf.convert_to_tensor(compression, tf.string),
        start=tf.convert_to_tensor(start, tf.int64),
        end=tf.convert_to_tensor(end, tf.int64),
    )
    return tf.data.experimental.from_variant(variant, _ELEMENT)


def record_cuts(path, size, piece_bytes) -> list:
    """The offsets, from 0 to `size`, at which the uncompressed TFRecord file at `path` of
    `size` bytes is cut into byte ranges of about `piece_bytes`: each the first offset
    after the previous cut + `piece_bytes` where a record starts, as far as checksums tell
    (its header's, its data's, and the next header's). Eager; blocking: reads a few bytes
    and one record at each cut. Read errors are TensorFlow's."""
    return _ops().tf2_mapreduce_record_cuts(path, size, piece_bytes).numpy().tolist()


def _ops():
    ops = native.load()
    if ops is None:
        raise UsageError("reading a compressed or TFRecord file needs the native ops: %s" % native.unavailable())
    return ops
