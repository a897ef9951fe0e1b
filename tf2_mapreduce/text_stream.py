"""A file, possibly compressed, as a tf.data stream in bounded memory (native/text_stream.cc):
text in chunks cut at record boundaries, or a TFRecord file's records, exactly or an error."""

import functools

import tensorflow as tf

from tf2_mapreduce import native

__all__ = ["chunks", "chunks_in_tf", "records", "COMPRESSIONS"]

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

    Usable inside a tf.function (`chunks(...).reduce(...)` in a map step). Where the native
    library cannot be built (`native.load()` is None) this is `chunks_in_tf`: one element
    of the whole text, so memory grows with the file, and the text is as
    tf.io.decode_compressed reads it: a truncated compressed file, or a gzip file with an
    empty member, reads as a short text without an error (TF 2.21)."""
    ops = native.load()
    if ops is None:
        return chunks_in_tf(path, compression)
    variant = ops.tf2_mapreduce_text_chunk_dataset(
        filename=tf.convert_to_tensor(path, tf.string),
        compression_type=tf.convert_to_tensor(compression, tf.string),
        chunk_bytes=tf.convert_to_tensor(chunk_bytes, tf.int64),
        separators=tf.convert_to_tensor(separators, tf.string),
    )
    return tf.data.experimental.from_variant(variant, _ELEMENT)


def records(path, compression) -> tf.data.Dataset:
    """The records of the TFRecord file at `path` (a str or string scalar), inflated if
    `compression` is "GZIP" or "ZLIB", as scalar tf.string elements in order: on a good file
    the records tf.data.TFRecordDataset yields. Memory is one record and the buffers.

    Both checksums of every record are checked; GZIP reads every member of a multi-member
    file (`cat a.tfrecord.gz b.tfrecord.gz`). Errors are tf.errors.DataLossError, their
    message "<path>; <cause>" (failures.file_failure reads the path from it) with offsets
    in the inflated stream as TFRecordDataset gives them: "truncated record at <offset>"
    (the stream ends inside a record), "corrupted record at <offset>" (a checksum does not
    match), or the truncated or corrupt GZIP/ZLIB file of `chunks`; a missing file is
    TensorFlow's NotFoundError.

    Usable inside a tf.function, as `chunks` is. Where the native library cannot be built
    (`native.load()` is None) this is tf.data.TFRecordDataset, with its silent short reads
    (TF 2.21): a file that ends inside a record's 12-byte header, a compressed file cut at
    a record boundary, and a gzip file with an empty member read as the records before
    that point, and a gzip file without its trailer reads whole, all without an error."""
    ops = native.load()
    if ops is None:
        return tf.data.TFRecordDataset(path, compression_type=compression, buffer_size=256 << 10)
    variant = ops.tf2_mapreduce_record_dataset(
        filename=tf.convert_to_tensor(path, tf.string),
        compression_type=tf.convert_to_tensor(compression, tf.string),
    )
    return tf.data.experimental.from_variant(variant, _ELEMENT)


def chunks_in_tf(path, compression) -> tf.data.Dataset:
    """`chunks` in TensorFlow's own ops: the whole text as one element (none if it is
    empty), read and inflated in memory at once, with tf.io.decode_compressed's errors."""
    text = _inflate(tf.io.read_file(path), compression)
    return tf.data.Dataset.from_tensors(text).filter(lambda text: tf.strings.length(text) > 0)


def _inflate(contents, compression):
    if isinstance(compression, bytes):
        compression = compression.decode()
    if isinstance(compression, str):
        return tf.io.decode_compressed(contents, compression_type=compression)
    # decode_compressed takes its compression as an attribute, fixed when the graph is
    # built; the native op, and so `chunks`, takes a tensor.
    matches = tf.equal(tf.constant(COMPRESSIONS), compression)
    known = tf.debugging.Assert(tf.reduce_any(matches), ['compression must be "", "GZIP" or "ZLIB", not', compression])
    with tf.control_dependencies([known]):
        index = tf.argmax(tf.cast(matches, tf.int32), output_type=tf.int32)
    return tf.switch_case(
        index, [functools.partial(tf.io.decode_compressed, contents, compression_type=kind) for kind in COMPRESSIONS]
    )
