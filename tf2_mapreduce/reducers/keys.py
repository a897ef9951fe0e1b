"""Reducers of counts per key: exact int64 totals per key in tables on the ps tasks,
read back a chunk at a time, written sorted (TSV, JSON) or as vocabulary files."""

from dataclasses import dataclass

import tensorflow as tf

from tf2_mapreduce import native
from tf2_mapreduce.outputs import files as output
from tf2_mapreduce.outputs import vocabulary
from tf2_mapreduce.outputs.result import NO_FILES
from tf2_mapreduce.reducers.base import Collected, Reducer
from tf2_mapreduce.state.key_tables import KeyTables

__all__ = ["KeySum", "Distinct"]


def _name(text):
    return text.replace(" ", "_")


def _merge(keys, counts):
    """(keys, counts) with each key once, its counts added: by the native op where map
    steps use the native ops (a third of the time), else by TensorFlow's."""
    library = native.load()
    if library is not None:
        return tuple(library.tf2_mapreduce_merge_counts(keys, counts))
    unique, index = tf.unique(keys)
    return unique, tf.math.unsorted_segment_sum(counts, index, tf.size(unique))


class KeySpace:
    """How a per-key table's keys name its vocabularies (for `vocabulary.write`): here
    one vocabulary, `name`, whose terms are the keys themselves. `reserved`: keys that
    hold a reducer's own counts rather than terms (none here)."""

    reserved = ()

    def __init__(self, name):
        self.names = (name,)

    def split(self, key):
        """(vocabulary index, term) of a table key; (None, key) for a reserved key."""
        return 0, key

    def order(self, entry):
        """The sort key of a (key, count) in tf.Transform's order, vocabulary by vocabulary."""
        key, count = entry
        return vocabulary.tft_key(key, count)


def vocabulary_lines(summary):
    """A vocabulary summary (`KeySum.write_dir`) as lines, one per vocabulary."""
    lines = []
    for name, v in summary["vocabularies"].items():
        missing = ", %d examples missing it" % v["missing"] if "missing" in v else ""
        aside = ", %d unwritable terms aside" % v["unwritable"] if v.get("unwritable") else ""
        lines.append(
            "  %s: %d values, %d distinct%s; %d terms kept%s"
            % (name, v["values"], v["distinct"], missing, v["written"], aside)
        )
    return lines


@dataclass(frozen=True)
class KeySum(Reducer):
    """Exact int64 totals per key, in tables on the ps tasks, keys sharded over all of them
    by hash. `map_fn(texts)` returns the keys of the whole batch, a 1-D tf.string, each
    counting 1; or (keys, counts), with a 1-D tf.int64 of counts of the same length.
    Keys may repeat: they are combined on the worker before anything is sent (what
    the state commits holds each key once). The job's value is the total of the counts."""

    unit: str  # what the keys are, for messages: "words"

    def piece_spec(self):
        return (
            tf.RaggedTensorSpec([None], tf.string, ragged_rank=0),
            tf.RaggedTensorSpec([None], tf.int64, ragged_rank=0),
        )

    def combine(self, output):
        # Combined on the worker, so that only distinct keys travel to the ps.
        if isinstance(output, tf.Tensor):  # keys alone, each counting 1
            unique, _, counts = tf.unique_with_counts(output, out_idx=tf.int32)
            return unique, tf.cast(counts, tf.int64)
        return _merge(*output)

    def batch(self, outputs):
        # Each piece's keys are distinct already: only those of several pieces are combined.
        keys, counts = outputs[0].flat_values, outputs[1].flat_values
        return tf.cond(outputs[0].nrows() > 1, lambda: _merge(keys, counts), lambda: (keys, counts))

    def combine_step(self, output):
        return self.combine(output)

    def pairs(self, output):
        """(keys, counts) of a map_fn's output, keys not combined."""
        if isinstance(output, tf.Tensor):
            return output, tf.ones_like(output, dtype=tf.int64)
        return output

    def stream_start(self):
        # The keys combined so far, and those of the batches since (not yet combined).
        return tuple([tf.zeros([0], tf.string), tf.zeros([0], tf.int64)] * 2)

    def stream_fold(self, value, output):
        # Combined once the batches since hold more keys than the combined ones: the work
        # is then about twice the keys mapped, where combining at every batch cost the
        # file's distinct keys once a batch (a float feature's thousands of buckets, say).
        keys, counts, pending_keys, pending_counts = value
        new_keys, new_counts = self.pairs(output)
        pending_keys = tf.concat([pending_keys, new_keys], 0)
        pending_counts = tf.concat([pending_counts, new_counts], 0)

        value = (keys, counts, pending_keys, pending_counts)
        return tf.cond(
            tf.size(pending_keys) > tf.size(keys),
            lambda: (*self.stream_finish(value), pending_keys[:0], pending_counts[:0]),
            lambda: value,
        )

    def stream_finish(self, value):
        keys, counts, pending_keys, pending_counts = value
        return _merge(tf.concat([keys, pending_keys], 0), tf.concat([counts, pending_counts], 0))

    def keys(self) -> KeySpace:
        """How the table's keys name its vocabularies."""
        return KeySpace(_name(self.unit))

    def counted(self, keys, counts):
        """What a commit of (`keys`, `counts`) adds to the job's value (TF ops, on the ps,
        per shard): every count, here."""
        return tf.reduce_sum(counts)

    def new_state(self, sizes, ps_devices, run_id):
        return KeyTables(sizes, ps_devices, run_id, self.counted, self.keys().reserved)

    def value(self, stats):
        return int(stats.value)

    def describe(self, value, distinct=None):
        text = "%d %s" % (value, self.unit)
        return text if distinct is None else "%s (%d distinct)" % (text, distinct)

    def fields(self, value, distinct=None):
        named = {_name(self.unit): value}
        if distinct is not None:
            named["distinct_keys"] = distinct
        return named

    def rates(self, before, after, seconds):
        return {_name(self.unit): (after - before) / seconds}

    def total_fields(self, value, distinct) -> dict:
        """The value as the top-level fields of a written result."""
        return {"total_" + _name(self.unit): value, "distinct_" + _name(self.unit): distinct}

    def collect(self, state, plan, piece_done):
        stats = state.figures()
        return Collected(self.value(stats), stats.distinct, NO_FILES)

    def entries(self, state, min_count=1):
        return state.entries(min_count)

    def top(self, state, k, min_count=1):
        return state.top(k, min_count)

    def check_output(self, path):
        """Any name: TSV, or JSON for *.json."""

    def write_output(self, state, path, result, min_count, document):
        entries = output.sorted_entries(self.entries(state, min_count))
        if not path.endswith(".json"):
            output.write_table(path, entries)
            return
        unit = _name(self.unit)
        document = {**document, **self.total_fields(result.total, result.distinct), "min_count": min_count}
        output.write_json(path, document, unit, ([output.escape(key), count] for key, count in entries))

    def check_output_dir(self):
        """A vocabulary of the keys."""

    def own_counts(self, reserved, vocabularies) -> dict:
        """The summary's fields from the reserved keys' counts (none here)."""
        return {}

    def write_dir(self, state, result, output_dir, top_k, min_count, file_format, document):
        """A vocabulary of the table's keys, as `vocabulary.write` describes."""
        vocabularies, reserved = vocabulary.write(
            self.keys(), state.entries(), output_dir, top_k, min_count, file_format
        )
        summary = {**document, "top_k": top_k, "min_count": min_count, "vocabulary_format": file_format}
        summary.update(self.own_counts(reserved, vocabularies))
        summary["vocabularies"] = vocabularies
        if output_dir is not None:
            vocabulary.write_summary(output_dir, summary)
        return summary

    def wrote(self, summary, output_dir):
        return "wrote %d vocabularies to %s" % (len(summary["vocabularies"]), output_dir)

    def summary_lines(self, state, result, top_k, min_count, written):
        if written is not None:
            return vocabulary_lines(written)
        if top_k == 0:
            return []
        top = self.top(state, 20 if top_k is None else top_k, min_count)
        unit = self.unit
        heading = "top %d %s (count, %s; non-printable bytes as \\xHH):" % (len(top), unit, unit)
        return [heading] + ["%12d  %s" % (count, output.escape(key)) for key, count in top]


@dataclass(frozen=True)
class ExamplesKeySum(KeySum):
    """A `KeySum` over tf.train.Example records whose job's value is the examples read,
    counted under its key space's `examples_key` in the same commit as the rest."""

    def counted(self, keys, counts):
        return tf.reduce_sum(tf.where(tf.equal(keys, self.keys().examples_key), counts, 0))

    def fields(self, value, distinct=None):
        named = {"examples": value}
        if distinct is not None:
            named["distinct_keys"] = distinct
        return named

    def rates(self, before, after, seconds):
        return {"examples": (after - before) / seconds}


@dataclass(frozen=True)
class Distinct(KeySum):
    """The exact number of distinct keys. `map_fn(texts)` returns keys, as for `KeySum`,
    whose table it keeps: `top`, `entries`, `--output` and `--output_dir` give each key
    with its count. The job's value is how many keys the table holds, which no rate
    describes: a key seen again adds nothing."""

    def value(self, stats):
        return int(stats.distinct)

    def describe(self, value, distinct=None):
        return "%d distinct %s" % (value, self.unit)

    def fields(self, value, distinct=None):
        return {"distinct_" + _name(self.unit): value}

    def rates(self, before, after, seconds):
        return {}

    def total_fields(self, value, distinct):
        return self.fields(value)
