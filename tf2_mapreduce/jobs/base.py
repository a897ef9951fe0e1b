"""The job API: a job is a pure-TF map step over a batch of texts (or of TFRecord
records) and the reducer its output feeds (or the sink that writes it). The runner gives
every job the same scheduling, exactly-once commits, checkpoints and progress; a job only
says what to compute, and a built-in job what it is called and which parameters it takes.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from tf2_mapreduce.inputs import formats
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs.sinks.base import Sink
from tf2_mapreduce.reducers import Reducer

__all__ = ["Job", "Parameter", "per_text"]


@dataclass(frozen=True)
class Parameter:
    """A parameter of a built-in job: the CLI's `--NAME` and the job's argument of that
    name. `help`: what it is for this job; `check(value)`: raises `UsageError` for a value
    the job cannot take, before TensorFlow is imported (None: any)."""

    name: str
    help: str
    required: bool = False
    check: Callable | None = None


@dataclass(frozen=True)
class Job:
    """A MapReduce job.

    `map_fn` takes the contents of the files of one map step (a 1-D tf.string, one
    element per file) and returns what `reducer` expects: its reducer checks it (shape
    and dtype) and fails the job, naming what map_fn returned, where it cannot take it.
    It runs inside a `tf.function` on a worker, so it must be pure TensorFlow (no
    `tf.py_function`, see docs/runtime.md), and deterministic: a step re-run after a
    worker failure must produce the same output. Each file's contribution is committed
    exactly once. `config` holds the job's parameters (a grep pattern, say); a
    checkpoint records them, so a resume with other parameters is refused. A job that
    writes its map output rather than reducing it takes a sink as its reducer
    (`Records`, `outputs.sinks`), which checks it the same way.

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
    It returns the piece's value as the reducer commits it (a piece's keys each once
    for `KeySum`): what a job whose output per batch is about as large as the batch
    (a float feature's buckets) needs, so that nothing is combined batch by batch.

    `autograph` converts Python control flow over tensors in `map_fn` (as
    tf.function does by default); a `map_fn` without any can turn it off, which
    saves about half a second of tracing per run.

    A built-in job is a subclass that says its `--job` name (`COMMAND`), a line of what
    it computes (`SUMMARY`) and the parameters its constructor takes (`PARAMETERS`):
    `jobs` finds it, and the CLI gives each parameter a flag.
    """

    COMMAND: ClassVar[str | None] = None
    SUMMARY: ClassVar[str] = ""
    PARAMETERS: ClassVar[tuple] = ()

    name: str
    map_fn: Callable
    reducer: Reducer | Sink  # Sum, VectorSum, Min, Max, KeySum... (tf2_mapreduce.reducers), or Records
    description: str = ""
    config: dict = field(default_factory=dict)
    records: object = "lines"  # "lines", "words", "tfrecord", or a `formats.Format`
    autograph: bool = True
    map_input: str = "batch"  # or "dataset": see above

    def __post_init__(self):
        if not isinstance(self.reducer, (Reducer, Sink)):
            raise TypeError("reducer must be a tf2_mapreduce reducer (such as Sum('words')), not %r" % (self.reducer,))
        if self.map_input not in ("batch", "dataset"):
            raise ValueError("map_input must be 'batch' or 'dataset', not %r" % (self.map_input,))
        # Checked here, and kept as its name: a job says which records it reads.
        object.__setattr__(self, "records", formats.of_records(self.records).records)
        if self.map_input == "dataset" and not self.format.streamed(""):
            raise ValueError("map_input='dataset' is for jobs over TFRecord files (records='tfrecord')")

    @property
    def format(self) -> formats.Format:
        """The format of the inputs this job reads."""
        return formats.of_records(self.records)

    def prepared(self, files, compression="auto") -> "Job":
        """The job to run over `files` (`inputs.files.Files`, compressed as `compression`
        says), called once before anything runs: itself, or for a job that must look
        at its inputs first (`Vocab` reads the types its features were not given), a
        new one. Blocking; raises `UsageError` where the inputs do not fit the job."""
        return self

    def finished(self, collected, files, compression="auto") -> None:
        """Called once the run's result is collected (`reducers.base.Collected`) from
        `files` (compressed as `compression` says): raises where it shows the job was
        asked what its inputs cannot answer (a feature in no example, say). Blocking;
        nothing by default."""


def per_text(fn, dtype=None, shape=()):
    """A batch map_fn from `fn`, which maps one text (a scalar tf.string) to a value of
    `dtype` (default int64) and `shape`."""

    def map_texts(texts):
        signature = tf.TensorSpec(shape, tf.int64 if dtype is None else dtype)
        return tf.map_fn(fn, texts, fn_output_signature=signature)

    return map_texts
