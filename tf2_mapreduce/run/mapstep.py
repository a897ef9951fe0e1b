"""The map step every job runs on the workers: reads its pieces (whole files, byte ranges, streams),
maps them with `map_fn`, reduces them (or writes them with a sink's writer), commits each once."""

import tensorflow as tf

from tf2_mapreduce.inputs.readers import PIECES_IN_FLIGHT, file_sizes, no_rewrites, read_files, read_range
from tf2_mapreduce.state.base import run_function

__all__ = ["build", "whole_files_bytes"]


def whole_files_bytes(read_size):
    """Bytes of whole files in one map step at most: a step reads and maps them all at
    once. Four times `read_size`: a step costs a few ms beyond its bytes (measured: 2,000
    files of 252 KB mapped 0.1 s faster in 32 MB steps than in 16 MB ones), and a worker
    holds 32 MB of text at most by default."""
    return 4 * read_size


def _batches(job, piece, compression, read_size):
    path, start, end, size = piece
    batches = job.format.stream(path, compression, read_size, start, tf.where(end < size, end, -1))
    return batches.with_options(no_rewrites())


class _Mapping:
    """How a step's pieces are mapped with the job's `map_fn`, and what is committed for
    each: `_Reduced` or `_Written`, so that the reading of each kind of piece is one."""

    def __init__(self, job, map_fn, compression, read_size):
        self.job, self.map_fn, self.compression, self.read_size = job, map_fn, compression, read_size

    def mapped(self, texts, items):
        """`map_fn(texts)`, checked by the job's reducer (`Reducer.check`); `items`: how many
        texts or records `texts` holds (None: a whole piece's dataset)."""
        return self.job.reducer.check(self.map_fn(texts), items, self.job.name, self.job.format.item)


class _Reduced(_Mapping):
    """A reducing job's pieces, each in the form its reducer commits. A streamed piece (path,
    start, end, the file's size) has each batch mapped and folded into the piece's value
    as it comes (`Reducer.add`), or its batches mapped at once (`Job.map_input`). A piece
    is a whole file but for an uncompressed TFRecord file's ranges, read up to `end`
    unless that is the file's end: there, its end is the stream's, and a record cut
    short by it is a truncated one."""

    def attempts(self, ids):
        return tf.zeros_like(ids)  # a reducing step writes no file to name

    def whole(self, texts, ids, attempts):
        return self.job.reducer.combine_step(self.mapped(texts, tf.size(texts)))

    def piece(self, text, piece_id, attempt):
        return self.job.reducer.combine(self.mapped(text[None], 1))

    def stream(self, piece, piece_id, attempt):
        reducer = self.job.reducer
        batches = _batches(self.job, piece, self.compression, self.read_size)
        if self.job.map_input == "dataset":
            return self.mapped(batches, None)
        folded = batches.reduce(
            reducer.start(), lambda value, batch: reducer.add(value, self.mapped(batch, tf.size(batch)))
        )
        return reducer.finish(folded)

    def merge(self, outputs):
        return self.job.reducer.merge(outputs)


class _Written(_Mapping):
    """A writing job's pieces, each piece's records written with `writer` (what its sink
    opened: `Sink.open_writer`) under the step's attempt, as the row its slot commits; a
    streamed piece a file per batch, in order, so that no more than a batch's records are
    held."""

    def __init__(self, job, map_fn, compression, read_size, writer):
        super().__init__(job, map_fn, compression, read_size)
        self.writer = writer

    def attempts(self, ids):
        return self.writer.attempts(tf.size(ids))

    def whole(self, texts, ids, attempts):
        return tf.map_fn(
            lambda one: self.piece(*one),
            (texts, ids, attempts),
            fn_output_signature=self.job.reducer.spec(),
            parallel_iterations=PIECES_IN_FLIGHT,
        )

    def piece(self, text, piece_id, attempt):
        return self.writer.write(self.mapped(text[None], 1), piece_id, attempt)

    def stream(self, piece, piece_id, attempt):
        def add(row, batch):
            return self.writer.add(row, self.mapped(batch, tf.size(batch)), piece_id, attempt)

        return _batches(self.job, piece, self.compression, self.read_size).reduce(self.writer.start(attempt), add)

    def merge(self, outputs):
        return outputs


def _whole_files(mapping, changed_files, ids, paths, sizes, attempts):
    """A step of whole files: read all at once (a loop over the files cost about 50 us a
    file, measured) and mapped; (what it commits, the check that no file changed size)."""
    texts = read_files(paths)
    committed = mapping.whole(texts, ids, attempts)
    return committed, [changed_files.check(ids, sizes, tf.cast(tf.strings.length(texts), tf.int64))]


def _pieces(mapping, kind, changed_files, pieces):
    """A step of byte ranges or streamed files, `PIECES_IN_FLIGHT` at a time: `pieces` is
    (paths, starts, ends, sizes, ids, attempts); (what it commits, the checks before)."""
    paths, sizes, ids = pieces[0], pieces[3], pieces[4]
    checks = []
    if kind == "range":

        def map_one(piece):
            return mapping.piece(read_range(*piece[:4]), *piece[4:])
    else:
        now = file_sizes(paths)
        if now is not None:  # a stream's length read is not its size: compared before it is read
            checks = [changed_files.check(ids, sizes, now)]

        def map_one(piece):
            return mapping.stream(piece[:4], *piece[4:])

    signature = mapping.job.reducer.spec()
    outputs = tf.map_fn(map_one, pieces, fn_output_signature=signature, parallel_iterations=PIECES_IN_FLIGHT)
    return mapping.merge(outputs), checks


def build(job, run_state, kind: str, compression: str = "", read_size: int = 8 << 20, writer=None):
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

    A job that writes records writes each piece's with `writer` (its sink's:
    `Sink.open_writer`) and commits where it wrote them, as its slot's row.
    """
    # AutoGraph only where the job wants it: converting the runner's own code costs
    # half a second of tracing per run (measured), and it has no control flow to convert.
    map_fn = tf.autograph.to_graph(job.map_fn) if job.autograph else job.map_fn
    if writer is None:
        mapping = _Reduced(job, map_fn, compression, read_size)
    else:
        mapping = _Written(job, map_fn, compression, read_size, writer)

    def map_step(ids, paths, starts, ends, sizes):
        with tf.control_dependencies([run_state.stop_flag.check()]):  # before anything is read
            paths = tf.identity(paths)
        attempts = mapping.attempts(ids)
        if kind == "whole":
            committed, checks = _whole_files(mapping, run_state.changed_files, ids, paths, sizes, attempts)
        else:
            pieces = (paths, starts, ends, sizes, ids, attempts)
            committed, checks = _pieces(mapping, kind, run_state.changed_files, pieces)
        with tf.control_dependencies(checks):
            run_state.values.commit(ids, committed, ends - starts)
        run_state.worker_steps.count_this_step()

    return run_function(
        map_step,
        input_signature=[tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.string)]
        + [tf.TensorSpec([None], tf.int64)] * 3,
    )
