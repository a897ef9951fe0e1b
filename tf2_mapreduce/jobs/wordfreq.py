"""Word frequencies: the exact count of every distinct word (same word rule as
wordcount), reduced on the ps tasks, one table per ps."""

from tf2_mapreduce import native
from tf2_mapreduce.inputs.formats import WORDS
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.reducers import KeySum

__all__ = ["word_counts", "words", "WordFreq"]


def word_counts(texts):
    """The distinct words of `texts` with their counts, as (words, counts): the native op
    (`native/words.cc`: one pass, no string per word) where it is built, else `words`."""
    library = native.load()
    if library is None:
        return words(texts)
    return tuple(library.tf2_mapreduce_word_counts(texts))


def words(texts):
    """Every word of `texts`, each counting 1, in TensorFlow's own ops; the runner
    combines repeats."""
    # With no separator, tf.strings.split cuts on exactly the six ASCII whitespace
    # bytes, as bytes.split() does (docs/runtime.md); sep=" " would yield empty words.
    return tf.strings.split(texts).flat_values


class WordFreq(Job):
    """The exact count of every distinct word (words as `WordCount`'s), in tables on the ps tasks."""

    COMMAND = "wordfreq"
    SUMMARY = "the count of every distinct word"

    def __init__(self):
        super().__init__(
            name=self.COMMAND,
            map_fn=word_counts,
            reducer=KeySum(unit="words"),
            records=WORDS,
            autograph=False,
            description="count of every distinct word",
        )
