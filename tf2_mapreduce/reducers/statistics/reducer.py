"""A reducer of exact dataset statistics: every feature value of tf.train.Example records
counted in one per-key table, and the statistics made from those counts at the end.
What a statistics key means is decoded here only (`native/example_features.cc` makes them)."""

import json
import os
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.outputs import files as output
from tf2_mapreduce.outputs.result import NO_FILES
from tf2_mapreduce.reducers.base import Collected
from tf2_mapreduce.reducers.keys import ExamplesKeySum
from tf2_mapreduce.reducers.statistics import builder as stats_builder
from tf2_mapreduce.reducers.statistics import model as statistics

__all__ = ["FeatureStats"]

FILES = ("stats.pb", "stats.json", "stats.html")


class StatKeys:
    """The keys of a statistics table. b"e": the examples read. Else a record letter,
    the feature's name as a netstring (its length in decimal, ":", the name), a kind
    letter ("b" bytes, "f" float, "i" int64, "x" no list set) and:
    - record "n": the number of values in decimal; counted once per example holding
      the feature with that many values;
    - record "v": a value (bytes as they are; an int64 as 8 bytes big-endian with the
      sign bit flipped); counted once per occurrence. A float32 is counted by its
      bucket (`statistics.FLOAT_BITS`), 4 bytes big-endian, NaN as 0x7fc00000;
    - records of a float feature's exact figures (`stats_builder.FloatSums`), a batch at a
      time: "s" then "+" or "-" and the biased exponent e as one byte, counting the sum
      of the mantissas of the values of that sign and exponent; "q" then the term (0, 1,
      2) and e, counting the sums of the terms of their squares; "<" and ">" then a
      batch's least or greatest value, 4 bytes big-endian."""

    reserved = (b"e",)
    examples_key = b"e"
    PAYLOAD_BYTES = {"f": 4, "i": 8}  # a number value's payload, by kind

    @staticmethod
    def numbers(kind, payloads):
        """The numbers of the payloads (end to end, bytes-like) of an "i" or "f" feature's
        values, as an array."""
        if kind == "f":
            return np.frombuffer(payloads, ">f4").astype(np.float32)
        return (np.frombuffer(payloads, ">u8").astype(np.uint64) ^ np.uint64(1 << 63)).view(np.int64)

    def split(self, key):
        """(record, name, kind, payload) of a key; (b"e", None, None, b"") for the examples."""
        if key == self.examples_key:
            return key, None, None, b""
        colon = key.index(b":")
        start = colon + 1
        end = start + int(key[1:colon])
        return key[:1], key[start:end].decode("utf-8", "surrogateescape"), key[end : end + 1].decode(), key[end + 1 :]


@dataclass(frozen=True)
class FeatureStats(ExamplesKeySum):
    """Exact statistics of the features of tf.train.Example records (`statistics`), from
    one table of counts (`KeySum`'s) that `StatKeys` describes: `map_fn(records)`
    returns (keys, counts). The job's value while it runs is the examples read; its
    result's value is a `statistics.DatasetStats`, written to a directory as stats.pb
    (TFDV's DatasetFeatureStatisticsList), stats.json and stats.html."""

    features: tuple = ()  # names reported even if no example holds them (empty: those found)

    def keys(self) -> StatKeys:
        return StatKeys()

    def describe(self, value, distinct=None):
        if isinstance(value, statistics.DatasetStats):
            return "%d examples, %d features" % (value.num_examples, len(value.features))
        text = "%d examples" % value
        return text if distinct is None else "%s (%d distinct keys)" % (text, distinct)

    def collect(self, state, plan, piece_done):
        """Reads the whole table once, a chunk at a time; raises `JobFailed` for a feature
        of two types with on_error="fail"."""
        space = self.keys()
        builder = stats_builder.Builder(space.numbers, self.features, plan.on_error)
        # Most keys are values of number features (an embedding's buckets): by the part
        # of the key before its payload, their lists, so that no parse is needed (the
        # parse was half the time). No other key's part of that length is the same: the
        # kind letter after the name's netstring differs.
        numbers = {}
        floats, ints = space.PAYLOAD_BYTES["f"], space.PAYLOAD_BYTES["i"]
        for key, count in state.entries():
            values = numbers.get(key[:-floats]) or numbers.get(key[:-ints])
            if values is not None:
                payloads, counts, width = values
                payloads += key[-width:]
                counts.append(count)
                continue
            record, name, kind, payload = space.split(key)
            if record == b"v":
                builder.add_value(name, kind, payload, count)
                if kind in space.PAYLOAD_BYTES:
                    numbers[key[: -len(payload)]] = (*builder.number_values(name, kind), len(payload))
            elif record == b"n":
                builder.add_lengths(name, kind, int(payload), count)
            elif record == b"s":
                builder.float_sums(name).add_sum(payload[:1].decode(), payload[1], count)
            elif record == b"q":
                builder.float_sums(name).add_square(int(payload[:1]), payload[1], count)
            elif record in (b"<", b">"):
                builder.float_sums(name).add_extreme(float(space.numbers(kind, payload)[0]))
            else:
                builder.add_examples(count)
        return Collected(builder.finish(), None, NO_FILES)

    def entries(self, state, min_count=1):
        raise TypeError("a statistics job's result is its statistics: see Result.features")

    def top(self, state, k, min_count=1):
        raise TypeError("a statistics job's result is its statistics: see Result.features")

    def check_output(self, path):
        raise UsageError("{setting:output}: this job writes %s: use {setting:output_dir}" % ", ".join(FILES))

    def check_output_dir(self):
        """stats.pb, stats.json and stats.html."""

    def write_dir(self, state, result, output_dir, top_k, min_count, file_format, document):
        from tf2_mapreduce.outputs.stats import html as stats_html

        stats = result.total
        if output_dir is None:
            return {"files": list(FILES)}
        tf.io.gfile.makedirs(output_dir)
        contents = (
            stats.proto().SerializeToString(),
            json.dumps({**document, **stats.as_json()}, indent=1).encode() + b"\n",
            stats_html.page(stats).encode("utf-8"),
        )
        for name, content in zip(FILES, contents):
            with output.AtomicFile(os.path.join(output_dir, name), "wb") as f:
                f.write(content)
        return {"files": list(FILES)}

    def wrote(self, summary, output_dir) -> str:
        return "wrote %s to %s" % (", ".join(summary["files"]), output_dir)

    def summary_lines(self, state, result, top_k, min_count, written):
        from tf2_mapreduce.outputs.stats import proto as stats_proto

        return stats_proto.table_lines(result.total)
