"""Word count: a word is a maximal run of bytes other than the six ASCII whitespace
bytes (space, \\t, \\n, \\v, \\f, \\r), exactly as Python's `bytes.split()` cuts them.
"""

import tensorflow as tf

from tf2_mapreduce.jobs.base import Job, Sum, per_text

__all__ = ["count_words", "JOB"]


def count_words(text):
    """Number of words in `text` (a scalar tf.string), as a scalar tf.int64.

    Counts word starts on the raw bytes instead of splitting into string tokens:
    a word starts at each non-whitespace byte that follows whitespace or begins
    the text. No tokens are materialized, and any bytes (invalid UTF-8 included)
    are fine.
    """
    data = tf.io.decode_raw(text, tf.uint8)
    # 9..13 are \t \n \v \f \r; uint8 wrap-around makes "b - 9 < 5" one range test.
    space = tf.logical_or(tf.equal(data, 32), tf.less(data - 9, 5))
    after_space = tf.pad(space, [[1, 0]], constant_values=True)[:-1]
    starts = tf.logical_and(tf.logical_not(space), after_space)
    return tf.reduce_sum(tf.cast(starts, tf.int64))


JOB = Job(
    name="wordcount",
    map_fn=per_text(count_words),
    reducer=Sum(unit="words"),
    description="total words (runs of non-whitespace bytes, as bytes.split())",
)
