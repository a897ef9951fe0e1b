"""A reducer of the values of several features at once: one vocabulary per feature in one
per-key table, with the examples read and those missing each feature counted in the
same exactly-once commit. How a feature and a term make one table key lives here only."""

import dataclasses
import heapq
import struct
from dataclasses import dataclass

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.reducers.base import MapOutputError, label
from tf2_mapreduce.reducers.keys import ExampleCounts, KeySpace, TftOrder

__all__ = ["Vocabularies"]


class FeatureKeys(KeySpace):
    """The keys of several vocabularies (one per feature of `names`) in one table: 2 bytes
    of the feature's index (big-endian), then the term. The index 0xffff is the
    reducer's own: the count of examples, and each feature's examples without a value."""

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
        return tf.strings.join([self.prefix(index), terms])

    def prefix(self, index) -> bytes:
        """What the table keys of vocabulary `index` begin with."""
        return self._INDEX.pack(index)

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

    order = TftOrder(prefix=_INDEX.size)

    def reserved_counts(self, reserved: dict) -> dict:
        """{"examples": n, "missing": {feature: n}} from the reserved keys' counts."""
        return {
            "examples": reserved.get(self.examples_key, 0),
            "missing": {name: reserved.get(self.missing_key(i), 0) for i, name in enumerate(self.names)},
        }


@dataclass(frozen=True)
class Vocabularies(ExampleCounts):
    """Exact counts of the values of several features, in one table: each value is kept
    under its feature (`FeatureKeys`), and the examples read and the examples missing
    each feature are counted in the same commit, so all of it is exactly-once together.
    `map_fn(records)` returns {"examples": scalar int64, "values": a tuple with one 1-D
    tf.string of values per feature (or a pair of it and the int64 count of each value),
    "missing": 1-D int64 of examples per feature without any value}. The job's value is the examples read; its table is read as
    ((feature, value bytes), count): `entries`, `top`."""

    features: tuple = ()  # feature names, in the order of "values"
    optional: tuple = ()  # of those, the ones no example need hold (else `Collected.absent`)

    def __post_init__(self):
        self.keys()  # checks the number of features

    def keys(self) -> FeatureKeys:
        return FeatureKeys(self.features)

    def check(self, output, items, job, item="record"):
        if not (isinstance(output, dict) and set(output) == {"examples", "values", "missing"}):
            raise MapOutputError(
                "job %s: map_fn returned %s, but %s needs a dict of examples, values and missing"
                % (job, type(output).__name__, label(self))
            )
        if len(output["values"]) != len(self.features):
            raise MapOutputError(
                "job %s: map_fn returned values of %d features, but %s counts %d"
                % (job, len(output["values"]), label(self), len(self.features))
            )
        return output

    def pairs(self, output):
        space = self.keys()
        # A feature's values each count 1; or (values, counts), each value counting its count.
        weighted = [v if isinstance(v, tuple) else (v, tf.ones_like(v, dtype=tf.int64)) for v in output["values"]]
        keys = [space.join(i, values) for i, (values, _) in enumerate(weighted)]
        keys = tf.concat(keys + [tf.constant(space.reserved)], 0)
        counts = tf.concat([counts for _, counts in weighted] + [[output["examples"]], output["missing"]], 0)
        # A zero count would still make an entry: a missing feature is no key at all.
        present = counts > 0
        return tf.boolean_mask(keys, present), tf.boolean_mask(counts, present)

    def combine(self, output):
        return super().combine(self.pairs(output))

    def collect(self, state, plan, piece_done):
        collected = super().collect(state, plan, piece_done)
        space = self.keys()
        counts = state.counts_of([space.examples_key] + [space.missing_key(i) for i in range(len(space.names))])
        examples, missing = counts[0], counts[1:]
        absent = tuple(
            name for name, n in zip(space.names, missing) if examples and n == examples and name not in self.optional
        )
        return dataclasses.replace(collected, absent=absent, examples=examples)

    def entries(self, state, min_count=1):
        """Yields ((feature, value bytes), count) with count >= `min_count`, in no order."""
        space = self.keys()
        for key, count in state.entries(min_count):
            index, term = space.split(key)
            if index is not None:
                yield (space.names[index], term), count

    def top(self, state, k, min_count=1):
        return heapq.nsmallest(k, self.entries(state, min_count), key=lambda entry: (-entry[1], entry[0]))
