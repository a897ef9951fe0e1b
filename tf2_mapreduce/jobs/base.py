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
    by hash. `map_fn(texts)` returns (keys, counts) for the whole batch: a 1-D tf.string
    and a 1-D tf.int64 of the same length; keys may repeat (they are combined on the
    worker before anything is sent)."""

    unit: str  # what the keys are, for messages: "words"


@dataclass(frozen=True)
class Job:
    """A MapReduce job.

    `map_fn` takes the contents of the files of one map step (a 1-D tf.string, one
    element per file) and returns what `reducer` expects. It runs inside a
    `tf.function` on a worker, so it must be pure TensorFlow (no `tf.py_function`,
    see design.md), and deterministic: a step re-run after a worker failure must
    produce the same output. Each file's contribution is committed exactly once.
    `config` holds the job's parameters (a grep pattern, say); a checkpoint records
    them, so a resume with other parameters is refused.
    """

    name: str
    map_fn: Callable
    reducer: object  # Sum, VectorSum or KeySum
    description: str = ""
    config: dict = field(default_factory=dict)


def per_text(fn, dtype=tf.int64, shape=()):
    """A batch map_fn from `fn`, which maps one text (a scalar tf.string) to a value."""

    def map_texts(texts):
        return tf.map_fn(fn, texts, fn_output_signature=tf.TensorSpec(shape, dtype))

    return map_texts
