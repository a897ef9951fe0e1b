"""The job API: a job is a pure-TF map step over a batch of texts (or of TFRecord
records) and the reducer its output feeds. The runner gives every job the same
scheduling, exactly-once commits, checkpoints and progress; a job only says what to
compute.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

import tensorflow as tf

from tf2_mapreduce.reducers import Reducer

__all__ = ["Job", "per_text"]


@dataclass(frozen=True)
class Job:
    """A MapReduce job.

    `map_fn` takes the contents of the files of one map step (a 1-D tf.string, one
    element per file) and returns what `reducer` expects. It runs inside a
    `tf.function` on a worker, so it must be pure TensorFlow (no `tf.py_function`,
    see docs/runtime.md), and deterministic: a step re-run after a worker failure must
    produce the same output. Each file's contribution is committed exactly once.
    `config` holds the job's parameters (a grep pattern, say); a checkpoint records
    them, so a resume with other parameters is refused.

    Large files are cut into pieces, and a text is a piece, cut so that it holds
    whole `records`: "lines" (the default: no line is ever cut) or "words" (no word
    is cut; lines may be). A job must give the same total for a file as for its
    pieces added up: true of anything counted per line (or per word). A compressed
    file is read as a stream, and `map_fn` gets its text a chunk at a time, cut the
    same way.

    With records="tfrecord" the inputs are TFRecord files (compressed or not), and
    `map_fn` gets a batch of serialized records (1-D tf.string: call
    `tf.io.parse_example` on it, say), returning one value per record for a
    per-piece reducer, or the batch's keys for `KeySum`. A record is never cut.

    `map_input="dataset"` (TFRecord jobs only) gives `map_fn` a whole piece at once: a
    `tf.data.Dataset` of its batches of records, for a native op that iterates it, say.
    It returns the piece's value as the reducer commits it (`Reducer.combine`'s form,
    a piece's keys each once for `KeySum`): what a job whose output per batch is about
    as large as the batch (a float feature's buckets) needs, so that nothing is
    combined batch by batch.

    `autograph` converts Python control flow over tensors in `map_fn` (as
    tf.function does by default); a `map_fn` without any can turn it off, which
    saves about half a second of tracing per run.
    """

    name: str
    map_fn: Callable
    reducer: Reducer  # Sum, VectorSum, Min, Max, KeySum... (tf2_mapreduce.reducers)
    description: str = ""
    config: dict = field(default_factory=dict)
    records: str = "lines"  # "lines", "words", or "tfrecord"
    autograph: bool = True
    map_input: str = "batch"  # or "dataset": see above

    def __post_init__(self):
        if self.map_input not in ("batch", "dataset"):
            raise ValueError("map_input must be 'batch' or 'dataset', not %r" % (self.map_input,))
        if self.map_input == "dataset" and self.records != "tfrecord":
            raise ValueError("map_input='dataset' is for jobs over TFRecord files (records='tfrecord')")

    def prepared(self, files, compression="auto") -> "Job":
        """The job to run over `files` (`inputs.InputFile`s, compressed as `compression`
        says), called before anything runs: itself, or for a job that must look at its
        inputs first (`Vocab` reads the types its features were not given), a new one.
        Blocking; raises `UsageError` where the inputs do not fit the job."""
        return self


def per_text(fn, dtype=tf.int64, shape=()):
    """A batch map_fn from `fn`, which maps one text (a scalar tf.string) to a value."""

    def map_texts(texts):
        return tf.map_fn(fn, texts, fn_output_signature=tf.TensorSpec(shape, dtype))

    return map_texts
