"""What the CLI prints: its own lines and the library's log (`log`) on stderr, each
prefixed "tf2_mapreduce: ", progress lines, and the result's summary on stdout: its value,
a per-key job's top keys and vocabularies, a statistics job's table, what was skipped."""

import logging
import sys

from tf2_mapreduce import log

__all__ = ["say", "show_log", "human_bytes", "input_notes", "progress_line", "print_result", "wrote"]


def say(line: str, prefix: str = "tf2_mapreduce: ") -> None:
    print(prefix + line, file=sys.stderr, flush=True)


class _LogLines(logging.Handler):
    """The library's log records as a program's own lines, settings named as its flags."""

    def __init__(self, prefix):
        super().__init__()
        self.prefix = prefix

    def emit(self, record):
        message = record.msg.cli() if isinstance(record.msg, log.Message) else record.getMessage()
        say(("warning: " if record.levelno >= logging.WARNING else "") + message, self.prefix)


def show_log(prefix: str = "tf2_mapreduce: ") -> None:
    """Shows the library's log records (INFO and up) on stderr, as the program's own
    lines (the CLI's, or with another `prefix` a server's)."""
    log.LOGGER.addHandler(_LogLines(prefix))
    log.LOGGER.setLevel(logging.INFO)
    log.LOGGER.propagate = False


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return ("%d %s" if unit == "B" else "%.1f %s") % (n, unit)
        n /= 1000.0


def input_notes(found) -> list:
    """What the listing `found` (`inputs.Inputs`) left out, as lines to say before the job."""
    lines = []
    if found.hidden:
        lines.append(
            "note: skipped %d hidden name(s) such as %s (names starting with '.' or '_'; "
            "name them explicitly to include them)" % (len(found.hidden), found.hidden[0])
        )
    if found.duplicates:
        lines.append(
            "note: %d path(s) were given more than once and are counted once (a file, or a directory "
            "reached again through a link), such as %s" % (len(found.duplicates), found.duplicates[0])
        )
    return lines + ["skipping %s: %s" % (path, reason) for path, reason in found.skipped]


def _steps_summary(steps):
    if len(steps) <= 8:
        return " ".join(str(n) for n in steps)
    ordered = sorted(steps)
    return "min %d, median %d, max %d" % (ordered[0], ordered[len(ordered) // 2], ordered[-1])


def progress_line(reducer, p) -> str:
    """A `Progress` report as one line; the value in words as `reducer`'s (`outputs.words`)."""
    from tf2_mapreduce.outputs import words

    rate = p.bytes_done / p.seconds if p.seconds > 0 else 0.0
    eta = "%.0fs" % ((p.bytes_total - p.bytes_done) / rate) if rate > 0 else "--"
    percent = 100.0 * p.files_done / p.files_total if p.files_total else 100.0
    skipped = ", %d skipped" % p.files_skipped if p.files_skipped else ""
    line = "[%6.1fs] %d/%d files (%.0f%%)%s, %s of %s, %s so far, %s/s, ETA %s, steps by worker: %s" % (
        p.seconds,
        p.files_done,
        p.files_total,
        percent,
        skipped,
        human_bytes(p.bytes_done),
        human_bytes(p.bytes_total),
        words.describe(reducer, p.value, p.distinct),
        human_bytes(rate),
        eta,
        _steps_summary(p.steps_per_worker),
    )
    return line + ("; " + p.storage if p.storage else "")


def vocabulary_lines(summary) -> list:
    """A vocabulary summary (`outputs.writers.vocabularies`) as lines, one per vocabulary."""
    lines = []
    for name, v in summary["vocabularies"].items():
        missing = ", %d examples without a value" % v["missing"] if "missing" in v else ""
        aside = ", %d unwritable terms aside" % v["unwritable"] if v.get("unwritable") else ""
        lines.append(
            "  %s: %d values, %d distinct%s; %d terms kept%s"
            % (name, v["values"], v["distinct"], missing, v["written"], aside)
        )
    return lines


def _top_lines(result, top_k, min_count):
    from tf2_mapreduce.outputs.files import escape

    if top_k == 0:
        return []
    top = result.top(20 if top_k is None else top_k, min_count)
    unit = result.reducer.unit
    heading = "top %d %s (count, %s; non-printable bytes as \\xHH):" % (len(top), unit, unit)
    return [heading] + ["%12d  %s" % (count, escape(key)) for key, count in top]


def summary_lines(result, top_k, min_count, file_format, written) -> list:
    """What the CLI prints under the result's headline: a per-key job's vocabularies
    (`written`: what `Result.write_dir` returned, else summed up without writing) and,
    for a table of one vocabulary, its top keys; a statistics job's table."""
    from tf2_mapreduce.outputs import writers
    from tf2_mapreduce.outputs.stats import report
    from tf2_mapreduce.reducers import KeySum, Statistics
    from tf2_mapreduce.reducers.keys import KeyCounts

    reducer = result.reducer
    if isinstance(reducer, Statistics):
        return report.table_lines(result.total)
    if not isinstance(reducer, KeyCounts):
        return []
    lines = []
    if isinstance(reducer, KeySum):
        lines = _top_lines(result, top_k, min_count)
        if written is None:
            return lines
    summary = written if written is not None else writers.vocabularies(result, top_k, min_count, file_format)
    return vocabulary_lines(summary) + lines


def wrote(summary, output_dir) -> str:
    """What the CLI says once `Result.write_dir(output_dir)` returned `summary`."""
    if "shards" in summary:
        written = "wrote %d records in %d files of data/" % (summary["records"], summary["shards"])
        if "vocabularies" in summary:  # a transform's
            written += ", transform_fn/ (%d vocabularies), transformed_metadata/ and metadata/" % len(
                summary["vocabularies"]
            )
        if "transform_fn" in summary:  # an earlier transform's, applied
            written += " by %s/transform_fn, and transformed_metadata/" % summary["transform_fn"].rstrip("/")
        return "%s to %s" % (written, output_dir)
    if "vocabularies" in summary:
        count = len(summary["vocabularies"])
        return "wrote %d %s to %s" % (count, "vocabulary" if count == 1 else "vocabularies", output_dir)
    return "wrote %s to %s" % (", ".join(summary["files"]), output_dir)


def print_result(result, top_k, min_count, file_format, written) -> None:
    """The summary on stdout: the job's value, what `summary_lines` shows under it, and
    what was skipped."""
    print(
        "%s: %s in %d files (%d bytes), %.2f s"
        % (result.job, result.describe(), result.files_done, result.bytes_done, result.seconds)
    )
    for line in summary_lines(result, top_k, min_count, file_format, written):
        print(line)
    if result.skipped:
        print("%d input(s) skipped (--on_error=skip):" % len(result.skipped))
        for path, reason in result.skipped:
            print("  %s: %s" % (path, reason))
    sys.stdout.flush()
