"""How each kind of result is written where users asked: `--output` (one file) and
`--output_dir` (a directory of files), and the checks, before a job runs, that it can be."""

import contextlib
import functools
import json
import os

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.outputs import words
from tf2_mapreduce.outputs.sinks import Sink
from tf2_mapreduce.reducers import Fold, KeySum, Statistics, Vocabularies
from tf2_mapreduce.reducers.keys import TFT, KeyCounts

__all__ = ["check_output", "write_output", "check_output_dir", "write_dir", "STATS_FILES"]

STATS_FILES = ("stats.pb", "stats.json", "stats.html")


@functools.singledispatch
def check_output(reducer, path: str) -> None:
    """Raises `UsageError` unless `write_output` can write a result of `reducer` to `path`."""
    raise UsageError("{setting:output}: a %s result has no single-file form" % type(reducer).__name__)


@check_output.register
def _(reducer: Fold, path):
    if not path.endswith(".json"):
        raise UsageError("{setting:output} %s: this job writes JSON; name the file *.json" % path)


@check_output.register
def _(reducer: KeySum, path):
    """Any name: TSV, or JSON for *.json."""


@check_output.register
def _(reducer: Vocabularies, path):
    raise UsageError("{setting:output}: this job writes a vocabulary per feature: use {setting:output_dir}")


@check_output.register
def _(reducer: Sink, path):
    raise UsageError("{setting:output}: this job writes records into files: use {setting:output_dir}")


@check_output.register
def _(reducer: Statistics, path):
    raise UsageError("{setting:output}: this job writes %s: use {setting:output_dir}" % ", ".join(STATS_FILES))


@functools.singledispatch
def write_output(reducer, result, path, min_count, document) -> None:
    """Writes `result` to `path`, atomically: the run's `document`, the value, and each
    file's value (per-piece jobs) or the whole table, sorted (per-key jobs)."""
    check_output(reducer, path)


@write_output.register
def _(reducer: Fold, result, path, min_count, document):
    from tf2_mapreduce.outputs import files

    rows = (dict(path=f.path, size=f.size, **words.fields(reducer, f.value)) for f in result.per_file)
    files.write_json(path, {**document, **words.total_fields(reducer, result.total)}, "per_file", rows)


@write_output.register
def _(reducer: KeySum, result, path, min_count, document):
    from tf2_mapreduce.outputs import files, sorted_runs

    entries = sorted_runs.sorted_entries(result.entries(min_count))
    if not path.endswith(".json"):
        files.write_table(path, entries)
        return
    document = {**document, **words.total_fields(reducer, result.total, result.distinct), "min_count": min_count}
    unit = reducer.unit.replace(" ", "_")
    files.write_json(path, document, unit, ([files.escape(key), count] for key, count in entries))


@functools.singledispatch
def check_output_dir(reducer) -> None:
    """Raises `UsageError` unless `write_dir` can write a result of `reducer`."""
    raise UsageError(
        "{setting:output_dir} is for jobs that write files (wordfreq, vocab, stats, reshard); this job writes "
        "{setting:output}"
    )


@check_output_dir.register(KeyCounts)
@check_output_dir.register(Sink)
def _(reducer):
    """Vocabularies, statistics, or records."""


def _vocabulary_summary(reducer, summary, reserved):
    """A vocabulary job's summary: the run's fields, the settings, each vocabulary's
    figures, and for `Vocab` the examples read and those missing each feature."""
    vocabularies = summary.pop("vocabularies")
    if isinstance(reducer, Vocabularies):
        counts = reducer.keys().reserved_counts(reserved)
        summary["examples"] = counts["examples"]
        for name, missing in counts["missing"].items():
            vocabularies[name]["missing"] = missing
    summary["vocabularies"] = vocabularies
    return summary


def vocabularies(result, top_k=None, min_count=1, file_format="text", output_dir=None) -> dict:
    """The summary of a per-key result's vocabularies, as `write_dir` writes them to
    `output_dir`, or, with None, without writing (one pass over the table, unsorted)."""
    from tf2_mapreduce.outputs import vocabulary

    reducer, state = result.reducer, result._state
    space = reducer.keys()
    with result._reading():
        if output_dir is None:
            written, reserved = vocabulary.summarize(space, state.entries(), top_k, min_count, file_format)
        else:
            reserved = dict(zip(space.reserved, state.counts_of(space.reserved))) if space.reserved else {}
            terms = _sorted_terms(result, space.names)
            with contextlib.closing(terms):  # its reads let go of, whatever the writing met
                written = vocabulary.write(space, terms, output_dir, top_k, min_count, file_format)
    summary = {"top_k": top_k, "min_count": min_count, "vocabulary_format": file_format, "vocabularies": written}
    return _vocabulary_summary(reducer, summary, reserved)


def _sorted_terms(result, names):
    """(vocabulary index, term, count) of each vocabulary of `names` in turn, in
    tf.Transform's order, as `Result.sorted_entries` sorts them (on the ps tasks, or here)."""
    reads = result.sorted_entries([(name, TFT) for name in names])
    with contextlib.ExitStack() as reading:
        for read in reads:
            reading.callback(read.close)
        for index, read in enumerate(reads):
            for terms, counts in read.chunks:
                for term, count in zip(terms, counts):
                    yield index, term, count


@functools.singledispatch
def write_dir(reducer, result, output_dir, top_k, min_count, file_format, document) -> dict:
    """Writes the result's files into `output_dir` (a directory of their own, empty);
    returns its summary."""
    check_output_dir(reducer)


@write_dir.register(KeyCounts)
def _(reducer, result, output_dir, top_k, min_count, file_format, document):
    from tf2_mapreduce.outputs import vocabulary

    summary = {**document, **vocabularies(result, top_k, min_count, file_format, output_dir)}
    vocabulary.write_summary(output_dir, summary)
    return summary


@write_dir.register
def _(reducer: Statistics, result, output_dir, top_k, min_count, file_format, document):
    from tf2_mapreduce.outputs import files
    from tf2_mapreduce.outputs.stats import html, proto, report

    stats = result.total
    contents = (
        proto.to_proto(stats).SerializeToString(),
        json.dumps({**document, **report.to_json(stats)}, indent=1).encode() + b"\n",
        html.page(stats).encode("utf-8"),
    )
    for name, content in zip(STATS_FILES, contents):
        with files.AtomicFile(os.path.join(output_dir, name), "wb") as f:
            f.write(content)
    return {"files": list(STATS_FILES)}


@write_dir.register
def _(reducer: Sink, result, output_dir, top_k, min_count, file_format, document):
    return reducer.finalize_write(result._run.options.output_dir, result._state, output_dir, result._run.on_workers())
