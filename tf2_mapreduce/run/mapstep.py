"""The map step every job runs on the workers: reads its pieces (a step's whole files at
once, byte ranges of large files two at a time, compressed and TFRecord files as
streams), maps them with the job's `map_fn`, commits them."""

import tensorflow as tf

from tf2_mapreduce import native

__all__ = [
    "build",
    "read_files",
    "read_range",
    "read_range_through",
    "stream",
    "file_sizes",
    "whole_files_bytes",
    "KINDS",
    "PIECES_IN_FLIGHT",
    "RECORDS_PER_BATCH",
]

PIECES_IN_FLIGHT = 2  # pieces a worker reads and maps at once: its memory is about this x read_size
RANGE_BUFFER = 256 << 10  # bytes TF reads at a time for a byte range
# A TFRecord file is mapped this many records at a time: a batch is what map_fn gets, so
# a worker holds this many records per piece in flight.
RECORDS_PER_BATCH = 1024
# How a step reads its pieces: whole files at once, byte ranges, or files as streams.
KINDS = ("whole", "range", "stream")
# Where a chunk of a streamed text may end, so that no record spans two chunks.
_SEPARATORS = {"words": b" \t\n\r\x0b\x0c", "lines": b"\n"}


def _no_dataset_rewrites():
    """tf.data options without its default rewrites, which cost milliseconds each time a
    pipeline starts: a map step starts one per byte range or streamed file."""
    options = tf.data.Options()
    options.experimental_optimization.apply_default_optimizations = False
    options.autotune.enabled = False
    return options


_NO_REWRITES = _no_dataset_rewrites()._to_proto().SerializeToString()  # the raw OptionsDataset op takes the proto


def whole_files_bytes(read_size):
    """Bytes of whole files in one map step at most: a step reads and maps them all at
    once. Four times `read_size`: a step costs a few ms beyond its bytes (measured: 2,000
    files of 252 KB mapped 0.1 s faster in 32 MB steps than in 16 MB ones), and a worker
    holds 32 MB of text at most by default."""
    return 4 * read_size


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


def stream(job, path, compression, read_size, start=0, end=-1):
    """A tf.data pipeline of the file at `path` as `job.map_fn` takes it, a batch at a time:
    its records (`RECORDS_PER_BATCH` at a time) for a job over TFRecord files, else its
    text (decompressed with `compression`, TF's name: "", "GZIP", "ZLIB") in chunks of
    about `read_size` bytes cut at the job's record boundaries. For use inside a
    `tf.function`; memory is bounded by a batch, not by the file. A TFRecord file may be
    read from `start` to `end` (-1: its end), both records' starts (`text_stream.records`)."""
    from tf2_mapreduce.inputs import readers as text_stream

    if job.records == "tfrecord":
        data = text_stream.records(path, compression, start, end).batch(RECORDS_PER_BATCH)
    else:
        data = text_stream.chunks(path, compression, read_size, _SEPARATORS[job.records]).batch(1)
    return data.with_options(_no_dataset_rewrites())


def _map_stream(job, map_fn, piece, compression, read_size):
    """The job's map step over one streamed piece (path, start, end, the file's size), in
    the form its reducer commits: each batch mapped and folded into the piece's value as
    it comes (`Reducer.stream_fold`), or the piece's batches mapped at once
    (`Job.map_input`). A piece is a whole file but for an uncompressed TFRecord file's
    ranges, read up to `end` unless that is the file's end: there, its end is the
    stream's, and a record cut short by it is a truncated one."""
    reducer = job.reducer
    path, start, end, size = piece
    batches = stream(job, path, compression, read_size, start, tf.where(end < size, end, -1))
    if job.map_input == "dataset":
        return map_fn(batches)
    folded = batches.reduce(reducer.stream_start(), lambda value, batch: reducer.stream_fold(value, map_fn(batch)))
    return reducer.stream_finish(folded)


def _map_piece(job, map_fn, text):
    """The job's map step over one piece, in the form its reducer commits."""
    return job.reducer.combine(map_fn(text[None]))


def build(job, state, worker_steps, changed_files, kind, compression="", read_size=8 << 20):
    """The `tf.function` scheduled for each split: `(ids, paths, starts, ends, sizes)` of
    its pieces, all of one `kind`. Whole files are read and mapped all at once (at most
    `whole_files_bytes`), byte ranges `PIECES_IN_FLIGHT` at a time, streamed files
    (compressed with `compression`, or TFRecord files) `PIECES_IN_FLIGHT` at a time,
    each in batches (`stream`). It commits them to `state` (the run's `reduce` state)
    exactly once, and counts itself in `worker_steps` (anything with `count_this_step()`).

    A variant per kind: a per-piece tf.cond (or tf.debugging.Assert) halved the
    throughput on small files (measured). A whole file whose size changed since it
    was listed fails the step, recorded in `changed_files` (`reduce.ChangedFiles`): it
    is not the file the job was asked to count. So does a streamed file, where the
    native op can tell its size (`file_sizes`).
    """
    signature = job.reducer.piece_spec()
    # AutoGraph only where the job wants it: converting the runner's own code costs
    # half a second of tracing per run (measured), and it has no control flow to convert.
    map_fn = tf.autograph.to_graph(job.map_fn) if job.autograph else job.map_fn

    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.string)]
        + [tf.TensorSpec([None], tf.int64)] * 3,
        autograph=False,
    )
    def map_step(ids, paths, starts, ends, sizes):
        checks = []
        if kind == "whole":
            # All at once: a loop over the files cost about 50 us a file (measured).
            texts = read_files(paths)
            committed = job.reducer.combine_step(map_fn(texts))
            checks = [changed_files.check(ids, sizes, tf.cast(tf.strings.length(texts), tf.int64))]
        else:
            if kind == "range":
                pieces = (paths, starts, ends, sizes)

                def map_one(piece):
                    return _map_piece(job, map_fn, read_range(*piece))
            else:
                pieces = (paths, starts, ends, sizes)
                now = file_sizes(paths)
                if now is not None:  # a stream's length read is not its size: compared before it is read
                    checks = [changed_files.check(ids, sizes, now)]

                def map_one(piece):
                    return _map_stream(job, map_fn, piece, compression, read_size)

            outputs = tf.map_fn(map_one, pieces, fn_output_signature=signature, parallel_iterations=PIECES_IN_FLIGHT)
            committed = job.reducer.batch(outputs)
        with tf.control_dependencies(checks):
            state.commit(ids, committed, ends - starts)
        worker_steps.count_this_step()

    return map_step
