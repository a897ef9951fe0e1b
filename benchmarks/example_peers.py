"""The plain peers of the tf.Example parts, each in a process of its own (`--peer=NAME`): one
tf.data + parse_example pass per core or in one process, and Pool(2) parsing with protobuf."""

import collections
import multiprocessing
import time
from collections.abc import Callable

from benchmarks.names import FEATURES
from benchmarks.peers import digest

__all__ = ["PEERS", "vocab_result"]

Counts = dict[str, collections.Counter]  # a Counter of terms per feature


def _tfdata_pass(paths: list[str], compression: str = "GZIP") -> tuple[int, int, float]:
    """One plain pass over `paths`: tf.data's reader, batches parsed by parse_example, the
    values counted (so that nothing is optimized away); returns (examples, values, loop seconds)."""
    import tensorflow as tf

    spec = {name: tf.io.RaggedFeature(tf.int64 if name == "user_id" else tf.string) for name in FEATURES}

    @tf.function
    def run(paths):
        def sizes(records):
            parsed = tf.io.parse_example(records, spec)
            values = tf.add_n([tf.size(parsed[name].flat_values, out_type=tf.int64) for name in FEATURES])
            return tf.stack([tf.size(records, out_type=tf.int64), values])

        batches = tf.data.TFRecordDataset(paths, compression).batch(1024).map(sizes)
        return batches.reduce(tf.zeros([2], tf.int64), lambda total, batch: total + batch)

    started = time.monotonic()
    examples, values = run(tf.constant(paths)).numpy().tolist()
    return examples, values, time.monotonic() - started


def peer_tfdata(paths: list[str]) -> dict:
    with multiprocessing.Pool(2) as pool:
        halves = pool.map(_tfdata_pass, [paths[0::2], paths[1::2]])
    return {
        "examples": sum(h[0] for h in halves),
        "values": sum(h[1] for h in halves),
        "map_seconds": max(h[2] for h in halves),
    }


def peer_tfdata_one(paths: list[str]) -> dict:
    examples, values, seconds = _tfdata_pass(paths, "")
    return {"examples": examples, "values": values, "map_seconds": seconds}


def _example_counts(path: str) -> tuple[int, Counts]:
    import tensorflow as tf

    counts = {name: collections.Counter() for name in FEATURES}
    examples = 0
    # Batches: TF's eager iterator costs tens of microseconds an element, more than parsing one.
    for batch in tf.data.TFRecordDataset(path, "GZIP").batch(4096).as_numpy_iterator():
        examples += len(batch)
        for record in batch:
            feature = tf.train.Example.FromString(record).features.feature
            for name in FEATURES:
                if name in feature:
                    kind = feature[name]
                    counts[name].update(
                        [b"%d" % v for v in kind.int64_list.value] if name == "user_id" else kind.bytes_list.value
                    )
    return examples, counts


def vocab_result(examples: int, counts: Counts) -> dict:
    """What a vocabulary's run must agree on: examples, values, distinct terms, and a digest of the counts."""
    return {
        "examples": examples,
        "values": sum(sum(c.values()) for c in counts.values()),
        "distinct": sum(len(c) for c in counts.values()),
        "digest": digest((name.encode() + b"/" + term, n) for name, c in counts.items() for term, n in c.items()),
    }


def peer_pool_examples(paths: list[str]) -> dict:
    counts = {name: collections.Counter() for name in FEATURES}
    examples = 0
    with multiprocessing.Pool(2) as pool:
        for n, part in pool.imap_unordered(_example_counts, paths):
            examples += n
            for name in FEATURES:
                counts[name].update(part[name])
    return vocab_result(examples, counts)


PEERS: dict[str, Callable[[list[str]], dict]] = {
    "tfdata": peer_tfdata,
    "tfdata_one": peer_tfdata_one,
    "pool_examples": peer_pool_examples,
}
