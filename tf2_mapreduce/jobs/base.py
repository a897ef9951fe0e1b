"""What a job is: a pure-TF map step over one file's bytes and the reducer it feeds.

Jobs are declarative; the runner (`tf2_mapreduce.runner`) schedules them.
"""

from dataclasses import dataclass
from typing import Callable

__all__ = ["Job"]


@dataclass(frozen=True)
class Job:
    """A MapReduce job whose result is an exact int64 sum over the input files.

    `map_fn` takes one file's contents (a scalar tf.string) and returns a scalar
    tf.int64. It runs inside a `tf.function` on a worker, so it must be pure
    TensorFlow (no `tf.py_function`, see design.md) and deterministic: a map step
    retried after a worker failure must produce the same value again. Each file's
    value is committed exactly once on the ps tasks, and the values are summed.
    """

    name: str
    map_fn: Callable
    unit: str  # what the value counts, for messages ("words")
