"""A reducer of exact dataset statistics: every feature value of tf.train.Example records
counted in one per-key table (`keys.StatKeys` says what a key means), and the statistics
made from those counts once the job is done (`builder`)."""

from dataclasses import dataclass

from tf2_mapreduce.reducers.base import NO_FILES, Collected
from tf2_mapreduce.reducers.keys import ExampleCounts
from tf2_mapreduce.reducers.statistics.builder import Builder
from tf2_mapreduce.reducers.statistics.keys import StatKeys
from tf2_mapreduce.reducers.statistics.numbers import VALUE_BYTES

__all__ = ["Statistics"]


@dataclass(frozen=True)
class Statistics(ExampleCounts):
    """Exact statistics of the features of tf.train.Example records, from one table of
    counts that `StatKeys` describes: `map_fn(records)` returns (keys, counts). The job's
    value while it runs is the examples read; its result's value is a
    `model.DatasetStats`. A feature whose lists have two types is a problem of the
    result (`Collected.problems`): with on_error="skip" the examples of all but the type
    of most are left out of its figures, and listed."""

    features: tuple = ()  # names reported even if no example holds them (empty: those found)
    optional: tuple = ()  # of those, the ones no example need hold (else `Collected.absent`)

    def keys(self) -> StatKeys:
        return StatKeys()

    def collect(self, state, plan, piece_done):
        """Reads the whole table once, a chunk at a time."""
        space = self.keys()
        builder = Builder(space.numbers, self.features)
        # Most keys are values of number features (an embedding's buckets): by the part
        # of the key before its payload, their lists, so that no parse is needed (the
        # parse was half the time). No other key's part of that length is the same: the
        # kind letter after the name's netstring differs.
        numbers = {}
        floats, ints = space.PAYLOAD_BYTES["f"], space.PAYLOAD_BYTES["i"]
        held = builder.held
        try:
            for key, count in state.entries():
                found = numbers.get(key[:-floats]) or numbers.get(key[:-ints])
                if found is not None:  # as `Numbers.add` does, a method call less
                    values, width = found
                    values.payloads += key[-width:]
                    values.counts.append(count)
                    if values.spills:
                        held.size += VALUE_BYTES
                        if held.size >= held.limit:
                            held.spill()
                    continue
                record, name, kind, payload = space.split(key)
                if record == b"v":
                    builder.add_value(name, kind, payload, count)
                    if kind in space.PAYLOAD_BYTES:
                        numbers[key[: -len(payload)]] = (builder.number_values(name, kind), len(payload))
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
            stats = builder.finish()
        finally:
            builder.close()  # the values spilled to disk, if the table's reading failed
        absent = tuple(
            name
            for name in self.features
            if stats.num_examples and name not in self.optional and _never_held(stats.features[name])
        )
        return Collected(stats, None, NO_FILES, tuple(builder.problems), absent, stats.num_examples)


def _never_held(feature):
    """Whether no example holds a feature: none has a list of it, nor the feature unset."""
    return feature.type is None and not feature.num_unset
