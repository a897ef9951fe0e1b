"""`python -m benchmarks.scale_examples --output_dir D --examples N --distinct K`: the
"transform_scale" part's examples (`--term_bytes W`: terms of W bytes), in GZIP'd shards, the same bytes every time, made at
millions a second (each record's bytes built by numpy, written by tf.data); and the
preprocessing_fn over them, written against either tft.

Example i holds "term" (11 bytes, "t" and ten digits; of W, those then "-"s) and "x" (a float32 >= 1), both of one
id j: the first K examples each hold another id (every one of the K once), the others an id
drawn skewed towards the low ones, so that counts run from 1 to thousands. x is the float
whose bits are those of 1.0 plus j: K distinct values, every one a multiple of 2**-23."""

import math
import os

import numpy as np
from absl import app, flags

__all__ = [
    "write",
    "ids",
    "records",
    "preprocessing_fn",
    "TERM",
    "X",
    "TOP_K",
    "BUCKETS",
    "WIDE_TERM_BYTES",
    "WIDE_TERMS_EXAMPLES",
    "WIDE_TERMS_DISTINCT",
]

TERM, X = "term", "x"
TOP_K, BUCKETS = 1_000_000, 100  # the preprocessing_fn's
# Examples whose whole vocabulary is over 2 GiB (2.2 GB), more than a GraphDef holds.
WIDE_TERM_BYTES, WIDE_TERMS_EXAMPLES, WIDE_TERMS_DISTINCT = 1000, 3_000_000, 2_200_000
_CHUNK_BYTES = 1 << 25  # of records built at a time
_SPREAD = 2654435761  # Knuth's multiplier: ids in an order unlike their values


def ids(start: int, stop: int, distinct: int) -> np.ndarray:
    """The ids of examples [start, stop): int64."""
    i = np.arange(start, stop, dtype=np.int64)
    spread = _SPREAD
    while math.gcd(spread, distinct) != 1:
        spread += 2
    first = (i * spread) % distinct
    drawn = ((i * spread) % 1_000_003) / 1_000_003.0
    skewed = np.minimum((distinct * drawn**3).astype(np.int64), distinct - 1)
    return np.where(i < distinct, first, skewed)


def _varint(n: int) -> bytes:
    return bytes([n]) if n < 128 else bytes([(n & 127) | 128, n >> 7])


def _field(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2]) + _varint(len(payload)) + payload


def _layout(term_bytes):
    """A record's bytes as (prefix, the 4 bytes of x, middle, the `term_bytes` of the term):
    a tf.Example of "x" first and "term" last, so no record ends in a NUL (numpy's bytes
    arrays drop those)."""
    x = _field(1, _field(1, b"x") + _field(2, _field(2, _field(1, b"\0" * 4))))
    term = _field(1, _field(1, TERM.encode()) + _field(2, _field(1, _field(1, b"\0" * term_bytes))))
    record = _field(1, x + term)
    at_x = len(record) - len(term) - 4
    return record[:at_x], record[at_x + 4 : len(record) - term_bytes]


def records(start: int, stop: int, distinct: int, term_bytes: int = 11) -> np.ndarray:
    """The serialized tf.Examples of examples [start, stop), as a numpy bytes array."""
    prefix, middle = _layout(term_bytes)
    j = ids(start, stop, distinct)
    out = np.empty((len(j), len(prefix) + 4 + len(middle) + term_bytes), np.uint8)
    out[:, : len(prefix)] = np.frombuffer(prefix, np.uint8)
    at = len(prefix)
    out[:, at : at + 4] = (j.astype(np.uint32) + np.uint32(0x3F800000)).astype("<u4").view(np.uint8).reshape(-1, 4)
    at += 4
    out[:, at : at + len(middle)] = np.frombuffer(middle, np.uint8)
    at += len(middle)
    out[:, at] = ord("t")
    for digit in range(10):
        out[:, at + 1 + digit] = (j // 10 ** (9 - digit)) % 10 + ord("0")
    out[:, at + 11 :] = ord("-")
    return out.view("S%d" % out.shape[1]).ravel()


def write(directory: str, examples: int, distinct: int, shards: int = 8, term_bytes: int = 11) -> list[str]:
    """Writes the examples (terms of `term_bytes`, at least 11) into `shards` GZIP'd files of
    `directory`; returns their paths."""
    import tensorflow as tf

    chunk = max(1, _CHUNK_BYTES // (len(b"".join(_layout(term_bytes))) + 4 + term_bytes))

    os.makedirs(directory, exist_ok=True)
    paths = []
    bounds = np.linspace(0, examples, shards + 1).astype(np.int64)
    for shard in range(shards):
        low, high = int(bounds[shard]), int(bounds[shard + 1])

        def chunks(low=low, high=high):
            for start in range(low, high, chunk):
                yield records(start, min(start + chunk, high), distinct, term_bytes)

        dataset = tf.data.Dataset.from_generator(chunks, output_signature=tf.TensorSpec([None], tf.string)).unbatch()
        path = os.path.join(directory, "part-%d-of-%d.tfrecord.gz" % (shard, shards))
        tf.data.experimental.TFRecordWriter(path, compression_type="GZIP").write(dataset)
        paths.append(path)
    return paths


def preprocessing_fn(tft):
    """The part's preprocessing_fn written against `tft` (tensorflow_transform, or
    tf2_mapreduce.transform)."""

    def fn(inputs):
        term, x = inputs[TERM], inputs[X]
        return {
            "whole": tft.compute_and_apply_vocabulary(term, vocab_filename="whole"),
            "top": tft.compute_and_apply_vocabulary(term, top_k=TOP_K, vocab_filename="top"),
            "z": tft.scale_to_z_score(x),
            "bucket": tft.bucketize(x, BUCKETS),
        }

    return fn


def main(argv):
    del argv
    write(flags.FLAGS.output_dir, flags.FLAGS.examples, flags.FLAGS.distinct, term_bytes=flags.FLAGS.term_bytes)


if __name__ == "__main__":
    # Here, not at import: the coordinator imports this module for its preprocessing_fn.
    flags.DEFINE_string("output_dir", None, "Directory to write the shards in.", required=True)
    flags.DEFINE_integer("examples", 40_000_000, "Examples in all.", lower_bound=1)
    flags.DEFINE_integer("distinct", 20_000_000, "Distinct terms (and values of x).", lower_bound=1)
    flags.DEFINE_integer("term_bytes", 11, "Bytes of a term: a vocabulary's width.", lower_bound=11, upper_bound=16_000)
    app.run(main)
