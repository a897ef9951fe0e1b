"""The job API: a job is a pure-TF map step over a batch of texts and the reducer its
output feeds. The runner gives every job the same scheduling, exactly-once commits,
checkpoints and progress; a job only says what to compute.
"""

from dataclasses import dataclass, field
from typing import Callable

import tensorflow as tf

__all__ = ["Job", "Sum", "VectorSum", "KeySum", "per_text"]


@dataclass(frozen=True)
class Sum:
    """An exact int64 total. `map_fn(texts)` returns one int64 per text, shape [n]."""

    unit: str  # what is counted, for messages: "words"


@dataclass(frozen=True)
class VectorSum:
    """Exact int64 totals of a fixed-size vector. `map_fn(texts)` returns shape [n, len(names)]."""

    names: tuple  # one label per component: ("lines", "words", "bytes")


@dataclass(frozen=True)
class KeySum:
    """Exact int64 totals per key, in tables on the ps tasks, keys sharded over all of them
    by hash. `map_fn(texts)` returns the keys of the whole batch, a 1-D tf.string, each
    counting 1; or (keys, counts), with a 1-D tf.int64 of counts of the same length.
    Keys may repeat: they are combined on the worker before anything is sent."""

    unit: str  # what the keys are, for messages: "words"


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
    pieces added up: true of anything counted per line (or per word).

    `autograph` converts Python control flow over tensors in `map_fn` (as
    tf.function does by default); a `map_fn` without any can turn it off, which
    saves about half a second of tracing per run.
    """

    name: str
    map_fn: Callable
    reducer: object  # Sum, VectorSum or KeySum
    description: str = ""
    config: dict = field(default_factory=dict)
    records: str = "lines"
    autograph: bool = True


def per_text(fn, dtype=tf.int64, shape=()):
    """A batch map_fn from `fn`, which maps one text (a scalar tf.string) to a value."""

    def map_texts(texts):
        return tf.map_fn(fn, texts, fn_output_signature=tf.TensorSpec(shape, dtype))

    return map_texts
