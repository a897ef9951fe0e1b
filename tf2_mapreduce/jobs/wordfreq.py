"""Word frequencies: the exact count of every distinct word (same word rule as
wordcount), reduced on the ps tasks, one table per ps."""

import tensorflow as tf

from tf2_mapreduce.jobs.base import Job, KeySum

__all__ = ["words_and_counts", "JOB"]


def words_and_counts(texts):
    """Every word of `texts` with a count of 1; the runner combines repeats."""
    # With no separator, tf.strings.split cuts on exactly the six ASCII whitespace
    # bytes, as bytes.split() does (design.md); sep=" " would yield empty words.
    words = tf.strings.split(texts).flat_values
    return words, tf.ones_like(words, dtype=tf.int64)


JOB = Job(
    name="wordfreq",
    map_fn=words_and_counts,
    reducer=KeySum(unit="words"),
    description="count of every distinct word",
)
