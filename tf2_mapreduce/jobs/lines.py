"""Jobs over lines. A line is the bytes up to and including a newline (\\n), or the
bytes after the last newline if there are any: `wc -l` plus an unterminated last line.
"""

from tf2_mapreduce import quiet
from tf2_mapreduce.errors import UsageError, op_error_cause
from tf2_mapreduce.jobs.base import Job, Parameter, per_text
from tf2_mapreduce.jobs.wordcount import count_true, count_words
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.reducers import Max, Sum, VectorSum

__all__ = ["count_lines", "longest_line", "LineCount", "Wc", "LongestLine", "Grep"]


def count_lines(text):
    """Number of lines in `text` (a scalar tf.string), as a scalar tf.int64."""
    data = tf.io.decode_raw(text, tf.uint8)
    newlines = count_true(tf.equal(data, 10))
    last = data[tf.maximum(tf.size(data) - 1, 0) :]  # the last byte, or nothing
    unterminated = tf.reduce_any(tf.not_equal(last, 10))
    return newlines + tf.cast(unterminated, tf.int64)


def _lines(text):
    """The lines of `text` without their newlines, as a 1-D tf.string."""
    pieces = tf.strings.split(text, sep="\n")
    # After a final newline (or in an empty text) split leaves an empty piece that is no line.
    return pieces[: tf.cast(count_lines(text), tf.int32)]


def _wc(text):
    return tf.stack([count_lines(text), count_words(text), tf.cast(tf.strings.length(text), tf.int64)])


class LineCount(Job):
    """Total lines, per file and overall."""

    COMMAND = "linecount"
    SUMMARY = "total lines"

    def __init__(self):
        super().__init__(
            name=self.COMMAND,
            map_fn=per_text(count_lines),
            reducer=Sum(unit="lines"),
            description="total lines",
            autograph=False,
        )


class Wc(Job):
    """Lines, words and bytes, like `wc`, per file and overall."""

    COMMAND = "wc"
    SUMMARY = "lines, words and bytes, like wc"

    def __init__(self):
        super().__init__(
            name=self.COMMAND,
            map_fn=per_text(_wc, shape=(3,)),
            reducer=VectorSum(names=("lines", "words", "bytes")),
            description="lines, words and bytes, like wc",
            autograph=False,
        )


def longest_line(text):
    """Bytes in the longest line of `text` (a scalar tf.string), newline excluded, as a
    scalar tf.int64; 0 for an empty text."""
    # split always yields at least one piece (an empty text: one empty line), so the max is defined.
    return tf.cast(tf.reduce_max(tf.strings.length(tf.strings.split(text, sep="\n"))), tf.int64)


class LongestLine(Job):
    """Bytes in the longest line (newline excluded), per file and overall."""

    COMMAND = "longestline"
    SUMMARY = "bytes in the longest line"

    def __init__(self):
        super().__init__(
            name=self.COMMAND,
            map_fn=per_text(longest_line),
            reducer=Max(name="longest line", unit="bytes"),
            description="bytes in the longest line, per file and overall",
            autograph=False,
        )


class Grep(Job):
    """Lines that `pattern` (RE2 syntax) matches in full, per file and overall.

    Lines are matched as UTF-8 text, as RE2 does: a line that is not valid UTF-8
    matches only a pattern that consumes its invalid bytes (with \\C). A pattern that
    does not compile is refused when the job is prepared for its inputs (`prepared`),
    before anything runs: compiling it takes TensorFlow's RE2, and the CLI makes its
    job before it imports TensorFlow.
    """

    COMMAND = "grep"
    SUMMARY = "lines matching --pattern"
    PARAMETERS = (Parameter("pattern", "an RE2 regular expression that whole lines must match", required=True),)

    def __init__(self, pattern: str):
        def matching_lines(text):
            return tf.reduce_sum(tf.cast(tf.strings.regex_full_match(_lines(text), pattern), tf.int64))

        super().__init__(
            name=self.COMMAND,
            map_fn=per_text(matching_lines),
            reducer=Sum(unit="matching lines"),
            description="lines matching the pattern in full (RE2)",
            config={"pattern": pattern},
            autograph=False,
        )

    def prepared(self, files, compression="auto") -> "Job":
        """Itself, once its pattern compiles; raises `UsageError` saying why it does not."""
        pattern = self.config["pattern"]
        try:
            with quiet.filtered_stderr(quiet.is_log_line):  # RE2 logs its own complaint
                tf.strings.regex_full_match(tf.constant([""]), pattern)
        except tf.errors.InvalidArgumentError as e:
            why = op_error_cause(e).split(", error: ", 1)[-1]
            raise UsageError("{setting:pattern} %r: not a valid RE2 regular expression: %s" % (pattern, why)) from None
        return self
