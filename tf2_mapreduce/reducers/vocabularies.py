"""A reducer of the values of several features at once: one vocabulary per feature in one
per-key table, with the examples read and those missing each feature counted in the
same exactly-once commit. How a feature and a term make one table key lives here only."""

import heapq
import struct
from dataclasses import dataclass

import tensorflow as tf

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.outputs import vocabulary
from tf2_mapreduce.reducers.keys import ExamplesKeySum, KeySpace, vocabulary_lines

__all__ = ["Vocabularies"]


class FeatureKeys(KeySpace):
    """The keys of several vocabularies (one per feature of `names`) in one table: 2 bytes
    of the feature's index (big-endian), then the term. The index 0xffff is the
    reducer's own: the count of examples, and each feature's examples missing it."""

    _INDEX = struct.Struct(">H")
    _OWN = b"\xff\xff"
    _EXAMPLES = _OWN + b"e"
    _MISSING = _OWN + b"m"

    def __init__(self, names):
        if not 0 < len(names) < 0xFFFF:
            raise ValueError("a table holds 1 to %d vocabularies" % (0xFFFF - 1))
        self.names = tuple(names)
        self.reserved = [self._EXAMPLES] + [self.missing_key(i) for i in range(len(self.names))]

    def join(self, index, terms):
        """The table keys of `terms` (a 1-D tf.string) in vocabulary `index`: TF ops."""
        return tf.strings.join([self._INDEX.pack(index), terms])

    def missing_key(self, index):
        """The reserved key counting the examples without a value of feature `index`."""
        return self._MISSING + self._INDEX.pack(index)

    @property
    def examples_key(self):
        """The reserved key counting the examples read."""
        return self._EXAMPLES

    def split(self, key):
        if key.startswith(self._OWN):
            return None, key
        return self._INDEX.unpack_from(key)[0], key[self._INDEX.size :]

    def order(self, entry):
        key, count = entry
        return (key[: self._INDEX.size], *vocabulary.tft_key(key[self._INDEX.size :], count))


@dataclass(frozen=True)
class Vocabularies(ExamplesKeySum):
    """Exact counts of the values of several features, in one table (`KeySum`'s): each
    value is kept under its feature (`FeatureKeys`), and the examples read and the
    examples missing each feature are counted in the same commit, so all of it is
    exactly-once together. `map_fn(records)` returns {"examples": scalar int64,
    "values": a tuple with one 1-D tf.string of values per feature, "missing": 1-D int64
    of examples per feature without any value}. The job's value is the examples read;
    its result is read as ((feature, value bytes), count) and written as one
    vocabulary per feature (`--output_dir`), not as one table (`--output`)."""

    features: tuple = ()  # feature names, in the order of "values"

    def __post_init__(self):
        self.keys()  # checks the number of features

    def keys(self) -> FeatureKeys:
        return FeatureKeys(self.features)

    def _table_keys(self, output):
        space = self.keys()
        keys = [space.join(i, values) for i, values in enumerate(output["values"])]
        keys = tf.concat(keys + [tf.constant(space.reserved)], 0)
        ones = [tf.ones_like(values, dtype=tf.int64) for values in output["values"]]
        counts = tf.concat(ones + [[output["examples"]], output["missing"]], 0)
        # A zero count would still make an entry: a missing feature is no key at all.
        present = counts > 0
        return tf.boolean_mask(keys, present), tf.boolean_mask(counts, present)

    def combine(self, output):
        return super().combine(self._table_keys(output))

    def pairs(self, output):
        return self._table_keys(output)

    def describe(self, value, distinct=None):
        text = "%d examples" % value
        return text if distinct is None else "%s (%d distinct values)" % (text, distinct)

    def entries(self, state, min_count=1):
        space = self.keys()
        for key, count in state.entries(min_count):
            index, term = space.split(key)
            if index is not None:
                yield (space.names[index], term), count

    def top(self, state, k, min_count=1):
        return heapq.nsmallest(k, self.entries(state, min_count), key=lambda entry: (-entry[1], entry[0]))

    def check_output(self, path):
        raise UsageError("{setting:output}: this job writes a vocabulary per feature: use {setting:output_dir}")

    def own_counts(self, reserved, vocabularies):
        space = self.keys()
        for index, name in enumerate(space.names):
            vocabularies[name]["missing"] = reserved.get(space.missing_key(index), 0)
        return {"examples": reserved.get(space.examples_key, 0)}

    def summary_lines(self, state, result, top_k, min_count, written):
        if written is None:
            written = self.write_dir(state, result, None, top_k, min_count, "text", {})
        return vocabulary_lines(written)
