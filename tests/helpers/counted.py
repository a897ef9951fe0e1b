"""An analyze job's counts given by a test, read as `transform.analysis.results` reads a
job's `Result`: each feature's entries sorted here (in memory, or in runs spilled to disk),
or by the native op that sorts them on the ps tasks."""

import tensorflow as tf

from tf2_mapreduce import native
from tf2_mapreduce.outputs import sorted_runs


class Counted:
    """((what is counted, key bytes), count) `entries`, sorted by `sorted_here` or, with
    `native=True`, by `native/sorted_entries.cc` as a ps task sorts them."""

    def __init__(self, entries, native=False):
        self._entries, self._native = list(entries), native

    def sorted_entries(self, feature, order) -> sorted_runs.Sorted:
        entries = [(key, count) for (name, key), count in self._entries if name == feature]
        if not self._native:
            return sorted_runs.sorted_here(iter(entries), order)
        keys = tf.constant([key for key, _ in entries], tf.string)
        counts = tf.constant([count for _, count in entries], tf.int64)
        terms, counts, total = native.load().tf2_mapreduce_sorted_entries(keys, counts, b"", order.native, 1)
        # In chunks of 7: what the sinks make of one must carry over to the next.
        terms, counts = terms.numpy().tolist(), counts.numpy().tolist()
        chunks = [(terms[at : at + 7], counts[at : at + 7]) for at in range(0, len(terms), 7)]
        return sorted_runs.Sorted(int(total), iter(chunks))
