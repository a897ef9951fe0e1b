"""Word frequencies: the exact count of every distinct word (same word rule as
wordcount), reduced on the ps tasks, one table per ps."""

import tensorflow as tf

from tf2_mapreduce.jobs.base import Job, KeySum

__all__ = ["words", "JOB"]


def words(texts):
    """Every word of `texts`, each counting 1; the runner combines repeats."""
    # With no separator, tf.strings.split cuts on exactly the six ASCII whitespace
    # bytes, as bytes.split() does (docs/runtime.md); sep=" " would yield empty words.
    return tf.strings.split(texts).flat_values


JOB = Job(
    name="wordfreq",
    map_fn=words,
    reducer=KeySum(unit="words"),
    records="words",
    autograph=False,
    description="count of every distinct word",
)
