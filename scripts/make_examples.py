"""Writes a deterministic tf.train.Example dataset, like a search log, in TFRecord shards.

    python scripts/make_examples.py --output_dir /tmp/examples --examples 20000 --tricky

Features: query (bytes, 1 value, Zipf over 4,000 words; absent in ~5%), tags (bytes,
0-5 values, repeats within an example; absent in ~6%, an empty bytes_list in ~6%),
user_id (int64, 1 value, Zipf over 1,000 ids with 0 and negatives; absent in ~10%),
clicks (int64, 0-3 values, an empty int64_list for none), score (float, 1 value), and
with --embedding_dim an embedding (floats, the bulk of an example).
--tricky adds query and tag values a one-term-a-line file cannot hold or that
str.splitlines() would break (b"", newlines, \\x0b \\x0c \\x1c \\x85 U+2028), bytes that
are not UTF-8, tabs, spaces, non-ASCII words, and the int64 extremes as user ids; the
first examples of each shard carry every tricky string once. Same flags, same bytes:
TensorFlow's GZIP header has no timestamp (mtime 0), so its output is byte-identical
run to run. Shards are made in parallel, one process a core.
"""

import bisect
import functools
import itertools
import multiprocessing
import os
import random
import struct

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("output_dir", None, "Directory to write the shards in.", required=True)
flags.DEFINE_integer("shards", 4, "Number of TFRecord files.", lower_bound=1)
flags.DEFINE_integer("examples", 20000, "Examples in all, spread evenly over the shards.", lower_bound=0)
flags.DEFINE_integer("seed", 0, "Random seed.")
flags.DEFINE_enum("compression", "GZIP", ["GZIP", "ZLIB", "NONE"], "Compression of the TFRecord files.")
flags.DEFINE_bool("tricky", False, "Add values that break text vocabularies and naive decoding.")
flags.DEFINE_integer(
    "embedding_dim",
    0,
    "Add a float feature 'embedding' of this many random values to every example: the bulk of "
    "real examples (about 4 bytes a value, compressed or not), left alone by a vocabulary.",
    lower_bound=0,
)

SUFFIXES = {"GZIP": ".tfrecord.gz", "ZLIB": ".tfrecord.zz", "NONE": ".tfrecord"}
CONSONANTS = "bdfgklmnprstvz"
VOWELS = "aeiou"
TOPICS = ["sports", "news", "music", "movies", "tech", "food", "travel", "health", "games", "style", "money", "kids"]
TRICKY = [
    b"",
    b"\n",
    b"new\nline",
    b"carriage\rreturn",
    b"crlf\r\n",
    b"\xff\xfe",
    b"caf\xc3",  # UTF-8 cut short
    b"\x85",  # NEL in Latin-1, a lone continuation byte in UTF-8
    "nel\x85".encode(),
    "line\u2028separator".encode(),
    b"vt\x0bff\x0c",
    b"\x1c\x1d\x1e",
    b"tab\there",
    b"\t",
    b" ",
    b"two words",
    b" padded ",
    b"nul\x00byte",
    "café".encode(),
    "cafe\u0301".encode(),  # the same word decomposed: other bytes, another term
    "東京".encode(),
    b"long" * 100,  # a length prefix of two bytes
]
INT64_EXTREMES = [-(2**63), 2**63 - 1]


ONE_BYTE = [bytes([i]) for i in range(128)]


def varint(n):
    if 0 <= n < 128:
        return ONE_BYTE[n]  # most calls are short lengths: this was a third of the run time
    n &= 0xFFFFFFFFFFFFFFFF  # int64 is two's complement on the wire: a negative takes ten bytes
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def entry(name, kind, values_payload):
    """One name -> Feature pair of Features.feature; kind is the Feature oneof's field
    (1 bytes_list, 2 float_list, 3 int64_list), set even with no values."""
    return field(1, field(1, name.encode()) + field(2, field(kind, values_payload)))


@functools.cache
def header(name, kind, length):
    """The bytes of an entry before a values payload of this length."""
    whole = entry(name, kind, bytes(length))
    return whole[: len(whole) - length]


def bytes_values(values):
    return b"".join(field(1, v) for v in values)


def int64_values(values):
    return field(1, b"".join(varint(v) for v in values)) if values else b""  # packed, as TensorFlow writes


def word(i, syllables):
    """Distinct for distinct i: i's base-70 digits, each a two-letter syllable, padded to `syllables`."""
    digits = []
    while i or len(digits) < syllables:
        i, d = divmod(i, len(CONSONANTS) * len(VOWELS))
        digits.append(CONSONANTS[d // len(VOWELS)] + VOWELS[d % len(VOWELS)])
    return "".join(reversed(digits)).encode()


def weighted(items, weights=None):
    """items with their cumulative weights, for pick; Zipf (s = 1) by rank without weights."""
    weights = weights or [1.0 / rank for rank in range(1, len(items) + 1)]
    return items, list(itertools.accumulate(weights))


def pick(rng, table):
    items, cumulative = table  # random.choices' arithmetic, without its per-call cost
    return items[bisect.bisect(cumulative, rng.random() * cumulative[-1], 0, len(items) - 1)]


def tables(seed, tricky):
    """Everything a shard draws from, the same in every process: serialized entries and
    pieces, so that an example is a few draws and joins."""
    rng = random.Random(seed)
    words = [word(i, rng.choice([1, 2, 2, 3])) for i in range(4000)]
    tags = [b"%s/%s" % (rng.choice(TOPICS).encode(), word(i, 2)) for i in range(300)]
    for vocabulary in words, tags:
        rng.shuffle(vocabulary)  # popularity apart from spelling: order by count and bytes are unrelated
    ids = [0] + list(range(-20, 0)) + rng.sample(range(1, 10**9), 979)
    rng.shuffle(ids)
    extra = TRICKY + [words[0] + b"\n", b" " + words[0]] if tricky else []
    return {
        "queries": weighted([entry("query", 1, bytes_values([w])) for w in words]),
        "tags": weighted([field(1, t) for t in tags]),
        "tag_counts": weighted([1, 2, 3, 4, 5], [35, 25, 18, 12, 10]),
        "users": weighted([entry("user_id", 3, int64_values([i])) for i in ids]),
        "tricky_queries": [entry("query", 1, bytes_values([t])) for t in extra],
        "tricky_tags": [field(1, t) for t in extra],
        "tricky_users": [entry("user_id", 3, int64_values([i])) for i in INT64_EXTREMES] if tricky else [],
        # Every list of 0-3 clicked positions (of ten), by length: one draw makes the entry.
        "clicks": weighted(
            [[entry("clicks", 3, int64_values(p)) for p in itertools.product(range(10), repeat=k)] for k in range(4)],
            [50, 30, 15, 5],
        ),
        "score": header("score", 2, 6) + b"\x0a\x04",  # a packed float_list of one: its four bytes end the entry
    }


def examples(t, rng, count, embedding_dim=0):
    tricky_rate = 0.03 if t["tricky_queries"] else 0.0
    # A packed float_list: its bytes end the entry, so the header is all that is fixed.
    embedding = (
        header("embedding", 2, 4 * embedding_dim + len(varint(4 * embedding_dim)) + 1)
        + b"\x0a"
        + varint(4 * embedding_dim)
    )
    for n in range(count):
        parts = []
        if n < len(t["tricky_queries"]):
            parts.append(t["tricky_queries"][n])
        elif rng.random() < tricky_rate:
            parts.append(rng.choice(t["tricky_queries"]))
        elif rng.random() >= 0.05:
            parts.append(pick(rng, t["queries"]))

        u = rng.random()
        if n < len(t["tricky_tags"]):
            pieces = [t["tricky_tags"][n]]
        elif u >= 0.12:
            pieces = [pick(rng, t["tags"]) for _ in range(pick(rng, t["tag_counts"]))]
            if tricky_rate:
                pieces = [rng.choice(t["tricky_tags"]) if rng.random() < tricky_rate else p for p in pieces]
        else:
            pieces = [] if u >= 0.06 else None
        if pieces is not None:
            payload = b"".join(pieces)
            parts.append(header("tags", 1, len(payload)) + payload)

        u = rng.random()
        if u < tricky_rate / 3:
            parts.append(rng.choice(t["tricky_users"]))
        elif u >= 0.10:
            parts.append(pick(rng, t["users"]))

        parts.append(rng.choice(pick(rng, t["clicks"])))
        parts.append(t["score"] + struct.pack("<f", rng.random()))
        if embedding_dim:
            parts.append(embedding + rng.randbytes(4 * embedding_dim))
        yield field(1, b"".join(parts))


def write_shard(task):
    path, shard, count, seed, tricky, compression, embedding_dim = task
    # Imported here: the parent only forks, so TensorFlow is loaded once per worker and never
    # before a fork; without the lines every CPU-only import prints.
    from tf2_mapreduce import quiet

    tf = quiet.import_tensorflow()

    rng = random.Random("%d/%d" % (seed, shard))  # str seeds hash with SHA-512: the same in every run
    options = tf.io.TFRecordOptions(compression_type="" if compression == "NONE" else compression)
    with tf.io.TFRecordWriter(path, options=options) as writer:
        for record in examples(tables(seed, tricky), rng, count, embedding_dim):
            writer.write(record)
    return os.path.getsize(path)


def main(argv):
    del argv
    os.makedirs(FLAGS.output_dir, exist_ok=True)
    per_shard, rest = divmod(FLAGS.examples, FLAGS.shards)
    tasks = []
    for shard in range(FLAGS.shards):
        name = "examples-%05d-of-%05d%s" % (shard, FLAGS.shards, SUFFIXES[FLAGS.compression])
        count = per_shard + (shard < rest)
        tasks.append(
            (
                os.path.join(FLAGS.output_dir, name),
                shard,
                count,
                FLAGS.seed,
                FLAGS.tricky,
                FLAGS.compression,
                FLAGS.embedding_dim,
            )
        )
    with multiprocessing.Pool(min(FLAGS.shards, os.cpu_count())) as pool:
        size = sum(pool.imap(write_shard, tasks))
    print("wrote %d shards, %d examples, %d bytes to %s" % (FLAGS.shards, FLAGS.examples, size, FLAGS.output_dir))


if __name__ == "__main__":
    app.run(main)
