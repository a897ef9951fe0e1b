"""An analyze job's counts given by a test, read as `transform.analysis.results` reads a
job's `Result`: each feature's entries sorted here (in memory, or in runs spilled to disk),
or by the native op that sorts them on the ps tasks, on two of them merged."""

import tensorflow as tf

from tf2_mapreduce import native
from tf2_mapreduce.outputs import sorted_runs
from tf2_mapreduce.state import view_chunks

_PS = 2  # the ps tasks the entries are spread over, for the native op
_CHUNK = 7  # entries a chunk read from one: what the results make of one carries over


class Counted:
    """((what is counted, key bytes), count) `entries`, sorted by `sorted_here` or, with
    `native=True`, by `native/sorted_entries.cc` as the ps tasks sort them, merged."""

    def __init__(self, entries, native=False):
        self._entries, self._native = list(entries), native

    def sorted_entries(self, wanted) -> list:
        names = sorted({name for name, _ in wanted})
        if not self._native:
            parts = [
                (at, key, count)
                for (name, key), count in self._entries
                for at, (wanted_name, _) in enumerate(wanted)
                if name == wanted_name
            ]
            return sorted_runs.sorted_here(iter(parts), [order for _, order in wanted])
        prefixes = [b"%03d" % names.index(name) for name, _ in wanted]
        # Each (name, order) wanted once per call, as `analysis.results` asks.
        orders = tf.constant([order.native for _, order in wanted], tf.int32, [len(wanted)])
        shards = [[], []]
        for n, ((name, key), count) in enumerate(self._entries):
            shards[n % _PS].append((b"%03d" % names.index(name) + key, count))
        streams = [[] for _ in wanted]
        totals = [0] * len(wanted)
        for shard in shards:
            keys = tf.constant([key for key, _ in shard], tf.string, [len(shard)])
            counts = tf.constant([count for _, count in shard], tf.int64, [len(shard)])
            made = native.load().tf2_mapreduce_sorted_entries(keys, counts, tf.constant(prefixes), orders, 1)
            terms, counts, sums, splits = (part.numpy().tolist() for part in made)
            for p in range(len(wanted)):
                begin, end = splits[p], splits[p + 1]
                chunks = [
                    (terms[at : min(at + _CHUNK, end)], counts[at : min(at + _CHUNK, end)])
                    for at in range(begin, end, _CHUNK)
                ]
                streams[p].append(iter(chunks))
                totals[p] += sums[p]
        return [
            sorted_runs.Sorted(total, view_chunks.merged(parts, order.encode))
            for total, parts, (_, order) in zip(totals, streams, wanted)
        ]
