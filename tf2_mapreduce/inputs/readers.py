"""How a piece of input is read: on the coordinator, where a file's cuts fall; in a map
step, whole files at once, byte ranges at their offset, and a file, possibly compressed,
as a tf.data stream in bounded memory (native/text_chunks.cc, record_dataset.cc): text
in chunks cut at record boundaries, or a TFRecord file's records, exactly or an error.
TensorFlow's own readers read a truncated file short without an error (docs/runtime.md,
D1-D2), so without the native ops such inputs are refused (`formats.check`)."""

import os
import re

import tensorflow as tf

from tf2_mapreduce import native
from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.paths import local_path

__all__ = [
    "chunks",
    "records",
    "record_cuts",
    "text_cuts",
    "read_files",
    "read_range",
    "read_range_through",
    "file_sizes",
    "no_rewrites",
    "PIECES_IN_FLIGHT",
]

PIECES_IN_FLIGHT = 2  # pieces a worker reads and maps at once: its memory is about this x read_size
RANGE_BUFFER = 256 << 10  # bytes TF reads at a time for a byte range
WINDOW = 64 * 1024  # bytes read at a time while looking for a text cut
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
    return _ops().tf2_mapreduce_record_cuts(os.fsencode(path), size, piece_bytes).numpy().tolist()


def _ops():
    ops = native.load()
    if ops is None:
        raise UsageError("reading a compressed or TFRecord file needs the native ops: %s" % native.unavailable())
    return ops


def no_rewrites():
    """tf.data options without its default rewrites, which cost milliseconds each time a
    pipeline starts: a map step starts one per byte range or streamed file."""
    options = tf.data.Options()
    options.experimental_optimization.apply_default_optimizations = False
    options.autotune.enabled = False
    return options


_NO_REWRITES = no_rewrites()._to_proto().SerializeToString()  # the raw OptionsDataset op takes the proto


def read_files(paths):
    """The contents of each file of `paths` (1-D tf.string), for use inside a
    `tf.function`: one native op for them all, or `tf.io.read_file` one at a time
    without it (tens of microseconds more a file)."""
    library = native.load()
    if library is not None:
        return library.tf2_mapreduce_read_files(paths)
    return tf.map_fn(tf.io.read_file, paths, parallel_iterations=PIECES_IN_FLIGHT)


def file_sizes(paths):
    """The size of each file of `paths` (1-D tf.string) now, as a 1-D tf.int64, for use
    inside a `tf.function`; None without the native op (TensorFlow has none)."""
    library = native.load()
    return None if library is None else library.tf2_mapreduce_file_sizes(paths)


def read_range(path, start, end, size):
    """Bytes [start, end) of the file at `path`, which must be `size` bytes long; for use
    inside a `tf.function`. A file of another size fails the read (`failures.file_failure` names it).

    With the native op (`native.load()`) the read starts at `start`; without it (no C++
    compiler), at the start of the file, which costs time in proportion to `start`."""
    library = native.load()
    if library is not None:
        return library.tf2_mapreduce_read_range(path, start, end, size)
    return read_range_through(path, start, end, size)


def read_range_through(path, start, end, size):
    """`read_range` without the native op: TF reads the file from its start up to the
    range (docs/runtime.md), so the cost grows with `start`."""
    # One record that is the whole range, with the rest of the file as header and
    # footer: TF returns only the range, and refuses a file whose size is not `size`.
    # Raw ops, no tf.data rewrites, an explicit iterator: the Python dataset API cost
    # about 20 ms of set-up per piece (measured), more than reading 8 MB.
    records = tf.raw_ops.FixedLengthRecordDatasetV2(
        filenames=path,
        header_bytes=start,
        record_bytes=end - start,
        footer_bytes=size - end,
        buffer_size=tf.constant(RANGE_BUFFER, tf.int64),
        compression_type="",
    )
    records = tf.raw_ops.OptionsDataset(
        input_dataset=records, serialized_options=_NO_REWRITES, output_types=[tf.string], output_shapes=[[]]
    )
    iterator = tf.raw_ops.AnonymousIteratorV3(output_types=[tf.string], output_shapes=[[]])
    with tf.control_dependencies([tf.raw_ops.MakeIterator(dataset=records, iterator=iterator)]):
        return tf.raw_ops.IteratorGetNext(iterator=iterator, output_types=[tf.string], output_shapes=[[]])[0]


class _Reader:
    """Reads byte ranges of one file: os.pread locally, GFile elsewhere."""

    def __init__(self, path):
        local = local_path(path)
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


def text_cuts(path, size, read_size, separators) -> list:
    """The offsets, from 0 to `size`, the text file at `path` of `size` bytes is cut at:
    each the first offset after the previous cut + `read_size` that follows a byte of
    `separators`, so that no record spans two pieces. Blocking: reads a few bytes at
    each cut (os.pread locally, GFile elsewhere)."""
    separator = re.compile(b"[" + re.escape(separators) + b"]")
    reader = _Reader(path)
    try:
        cuts = [0]
        while cuts[-1] < size:
            target = cuts[-1] + read_size
            cuts.append(size if target >= size else _boundary(reader, target, size, separator))
        return cuts
    finally:
        reader.close()
