"""The map step every job runs on the workers: reads its pieces (a step's whole files at
once, byte ranges of large files two at a time, streamed files in batches), checks and
maps them with the job's `map_fn` and its reducer (or writes what it returns, for a job
that writes records), and commits them exactly once."""

import tensorflow as tf

from tf2_mapreduce.inputs.readers import PIECES_IN_FLIGHT, file_sizes, no_rewrites, read_files, read_range
from tf2_mapreduce.outputs import shards
from tf2_mapreduce.state.base import run_function

__all__ = ["build", "whole_files_bytes"]


def whole_files_bytes(read_size):
    """Bytes of whole files in one map step at most: a step reads and maps them all at
    once. Four times `read_size`: a step costs a few ms beyond its bytes (measured: 2,000
    files of 252 KB mapped 0.1 s faster in 32 MB steps than in 16 MB ones), and a worker
    holds 32 MB of text at most by default."""
    return 4 * read_size


def _mapped(job, map_fn, texts, items):
    """`map_fn(texts)`, checked by the job's reducer (`Reducer.check`); `items`: how many
    texts or records `texts` holds (None: a whole piece's dataset)."""
    return job.reducer.check(map_fn(texts), items, job.name, job.format.item)


def _batches(job, piece, compression, read_size):
    path, start, end, size = piece
    batches = job.format.stream(path, compression, read_size, start, tf.where(end < size, end, -1))
    return batches.with_options(no_rewrites())


def _map_stream(job, map_fn, piece, compression, read_size):
    """The job's map step over one streamed piece (path, start, end, the file's size), in
    the form its reducer commits: each batch mapped and folded into the piece's value as
    it comes (`Reducer.add`), or the piece's batches mapped at once (`Job.map_input`). A
    piece is a whole file but for an uncompressed TFRecord file's ranges, read up to
    `end` unless that is the file's end: there, its end is the stream's, and a record
    cut short by it is a truncated one."""
    reducer = job.reducer
    batches = _batches(job, piece, compression, read_size)
    if job.map_input == "dataset":
        return _mapped(job, map_fn, batches, None)
    folded = batches.reduce(
        reducer.start(), lambda value, batch: reducer.add(value, _mapped(job, map_fn, batch, tf.size(batch)))
    )
    return reducer.finish(folded)


def _map_piece(job, map_fn, text):
    """The job's map step over one piece, in the form its reducer commits."""
    return job.reducer.combine(_mapped(job, map_fn, text[None], 1))


def _attempts(n):
    """An id for each of `n` pieces of this run of a step: random, the time mixed in (a
    seed set before the step was traced makes every worker's random ids the same), so
    that a step run again writes files of other names (`reducers.Records`)."""
    drawn = tf.random.uniform([n], minval=1, maxval=tf.int64.max, dtype=tf.int64)
    now = tf.bitcast(tf.timestamp(), tf.int64)
    return tf.bitwise.bitwise_and(tf.bitwise.bitwise_xor(drawn, now), tf.int64.max)


def _written(records, directory, piece, attempt, part, crc):
    """`records` written as the file `part` of `attempt` of `piece`, the CRC-32 of what
    came before it in the piece being `crc`: (records, bytes, crc, length)."""
    size, crc, length = shards.write_piece(shards.piece_path(directory, piece, attempt, part), records, crc)
    return tf.size(records, out_type=tf.int64), size, crc, length


def _write_piece(job, map_fn, text, directory, piece, attempt):
    """A writing job's map step over one piece: its records written as one file; the
    piece's slot row (`reducers.records.PIECE_FIELDS`)."""
    records, size, crc, length = _written(_mapped(job, map_fn, text[None], 1), directory, piece, attempt, 0, 0)
    return tf.stack([records, size, attempt, 1, crc, length])


def _write_stream(job, map_fn, piece, compression, read_size, directory, piece_id, attempt):
    """A writing job's map step over one streamed piece: a file per batch, in order, so
    that no more than a batch's records are held."""

    def add(row, batch):
        records = _mapped(job, map_fn, batch, tf.size(batch))
        records, size, crc, length = _written(records, directory, piece_id, attempt, row[3], row[4])
        return tf.stack([row[0] + records, row[1] + size, attempt, row[3] + 1, crc, row[5] + length])

    start = tf.stack([tf.constant(0, tf.int64), 0, attempt, 0, 0, 0])
    return _batches(job, piece, compression, read_size).reduce(start, add)


def build(job, run_state, kind, compression="", read_size=8 << 20, directory=None):
    """The `tf.function` scheduled for each split: `(ids, paths, starts, ends, sizes)` of
    its pieces, all of one `kind`. Whole files are read and mapped all at once (at most
    `whole_files_bytes`), byte ranges `PIECES_IN_FLIGHT` at a time, streamed files
    (compressed with `compression`, or TFRecord files) `PIECES_IN_FLIGHT` at a time,
    each in batches (`Format.stream`). It commits them to the run's state on the ps tasks
    (`run_state.values`) exactly once, counts itself in `run_state.worker_steps`, and fails
    at once, reading nothing, once the run is stopping (`run_state.stop_flag`).

    A variant per kind: a per-piece tf.cond (or tf.debugging.Assert) halved the
    throughput on small files (measured). A whole file whose size changed since it
    was listed fails the step, recorded in `run_state.changed_files` (`state.counters.ChangedFiles`): it
    is not the file the job was asked to count. So does a streamed file, where the
    native op can tell its size (`file_sizes`).

    A job that writes records (`reducers.Records`) writes each piece's into `directory`
    (`outputs.shards.pieces_dir`) and commits where it wrote them, as its slot's row.
    """
    state, worker_steps, changed_files = run_state.values, run_state.worker_steps, run_state.changed_files
    signature = job.reducer.spec()
    # AutoGraph only where the job wants it: converting the runner's own code costs
    # half a second of tracing per run (measured), and it has no control flow to convert.
    map_fn = tf.autograph.to_graph(job.map_fn) if job.autograph else job.map_fn

    def map_step(ids, paths, starts, ends, sizes):
        with tf.control_dependencies([run_state.stop_flag.check()]):  # before anything is read
            paths = tf.identity(paths)
        checks = []
        attempts = _attempts(tf.size(ids)) if directory is not None else tf.zeros_like(ids)
        if kind == "whole":
            # All at once: a loop over the files cost about 50 us a file (measured).
            texts = read_files(paths)
            if directory is None:
                committed = job.reducer.combine_step(_mapped(job, map_fn, texts, tf.size(texts)))
            else:
                committed = tf.map_fn(
                    lambda one: _write_piece(job, map_fn, one[0], directory, one[1], one[2]),
                    (texts, ids, attempts),
                    fn_output_signature=signature,
                    parallel_iterations=PIECES_IN_FLIGHT,
                )
            checks = [changed_files.check(ids, sizes, tf.cast(tf.strings.length(texts), tf.int64))]
        else:
            pieces = (paths, starts, ends, sizes, ids, attempts)
            if kind == "range":

                def map_one(piece):
                    text = read_range(*piece[:4])
                    if directory is not None:
                        return _write_piece(job, map_fn, text, directory, *piece[4:])
                    return _map_piece(job, map_fn, text)
            else:
                now = file_sizes(paths)
                if now is not None:  # a stream's length read is not its size: compared before it is read
                    checks = [changed_files.check(ids, sizes, now)]

                def map_one(piece):
                    if directory is not None:
                        return _write_stream(job, map_fn, piece[:4], compression, read_size, directory, *piece[4:])
                    return _map_stream(job, map_fn, piece[:4], compression, read_size)

            outputs = tf.map_fn(map_one, pieces, fn_output_signature=signature, parallel_iterations=PIECES_IN_FLIGHT)
            committed = outputs if directory is not None else job.reducer.merge(outputs)
        with tf.control_dependencies(checks):
            state.commit(ids, committed, ends - starts)
        worker_steps.count_this_step()

    return run_function(
        map_step,
        input_signature=[tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.string)]
        + [tf.TensorSpec([None], tf.int64)] * 3,
    )
