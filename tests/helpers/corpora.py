"""Inputs the tests write: text corpora with awkward bytes, Zipf-distributed words, and
TFRecord files of tf.train.Example records (with odd values, or with payloads that look
like records)."""

import math
import os
import random
import struct
import subprocess
import sys

import google_crc32c

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The sample corpus the CLI counts when given no --input.
SAMPLE = os.path.join(REPO, "tf2_mapreduce", "data", "sample")


def touch(path, data=b"x"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


# ---------------------------------------------------------------- text

WHITESPACE = [b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c", b"\r\n", b"   "]
WORD_BYTES = b"abcxyz\xa0\xc2\x85\xe2\x80\x83\x1c\x1f\xff\x00.,"


def write_corpus(directory, num_files, seed=0, max_words=400):
    """Writes `num_files` files of random words and whitespace; returns their paths.

    Words mix ASCII with bytes that look like spaces but are not ASCII whitespace
    (NBSP, NEL, EM SPACE in UTF-8, \\x1c-\\x1f) and invalid UTF-8. Every 7th file is empty.
    """
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    paths = []
    for n in range(num_files):
        parts = []
        if n % 7 != 3:
            for _ in range(rng.randint(0, max_words)):
                parts.append(bytes(rng.choice(WORD_BYTES) for _ in range(rng.randint(1, 8))))
                parts.append(rng.choice(WHITESPACE))
            if parts and rng.random() < 0.5:
                parts.pop()  # no trailing whitespace at end of file
        path = os.path.join(directory, "f%04d.txt" % n)
        with open(path, "wb") as f:
            f.write(rng.choice([b"", b" ", b"\t\n"]) + b"".join(parts))
        paths.append(path)
    return paths


ODD_WORD_BYTES = [b"\xff", b"\\", b"\xc2\xa0", b"\x1c", b"\xc3\xa9", b"\x00", b"\\x41", b"\x7f"]


def write_zipf_corpus(directory, num_files, distinct=20_000, samples=60_000, seed=0):
    """Writes a corpus in which each of `distinct` words occurs at least once and
    `samples` more words follow a Zipf law (s=1); returns the paths. Some words hold
    bytes that must be escaped in output (invalid UTF-8, NBSP, control bytes, backslashes)."""
    rng = random.Random(seed)
    vocabulary = []
    for i in range(distinct):
        word = b"w%x" % i
        if i % 97 == 5:
            word += ODD_WORD_BYTES[(i // 97) % len(ODD_WORD_BYTES)]
        vocabulary.append(word)
    weights = [1.0 / (rank + 1) for rank in range(distinct)]
    tokens = vocabulary + rng.choices(vocabulary, weights, k=samples)
    rng.shuffle(tokens)
    os.makedirs(directory, exist_ok=True)
    paths = []
    per_file = -(-len(tokens) // num_files)
    for n in range(num_files):
        chunk = tokens[n * per_file : (n + 1) * per_file]
        path = os.path.join(directory, "z%04d.txt" % n)
        with open(path, "wb") as f:
            for word in chunk:
                f.write(word + rng.choice(WHITESPACE))
        paths.append(path)
    return paths


# ---------------------------------------------------------------- tf.Example records


def write_records(path, records, compression="GZIP"):
    import tensorflow as tf

    with tf.io.TFRecordWriter(path, compression) as writer:
        for record in records:
            writer.write(record)
    return path


# The features of `write_examples`' examples that vocabularies are made of (score, a
# float, is not one of them).
VOCAB_FEATURES = [("query", "string"), ("tags", "string"), ("user_id", "int64")]
# Terms a text vocabulary cannot hold, terms that are hard for a line reader, and plain ones.
ODD_TERMS = [b"", b"a\nb", b"c\rd", b"\xff\xfe", "caf\u00e9".encode(), b"x\x0by", "t\u2028u".encode(), b"tab\tx", b" "]
SUFFIX = {"": ".tfrecord", "GZIP": ".tfrecord.gz", "ZLIB": ".tfrecord.zz"}


def vocab_example(rng, vocabulary):
    import tensorflow as tf

    features = {}
    if rng.random() < 0.9:
        values = [rng.choice(vocabulary) for _ in range(rng.choice([1, 1, 1, 2]))]
        features["query"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if rng.random() < 0.8:  # present with no value counts as missing too
        values = [rng.choice(vocabulary[:50]) for _ in range(rng.randint(0, 4))]
        features["tags"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if rng.random() < 0.85:
        ids = [int(rng.paretovariate(1.2)) * rng.choice([1, -1]) for _ in range(rng.choice([1, 1, 2]))]
        features["user_id"] = tf.train.Feature(int64_list=tf.train.Int64List(value=ids))
    features["score"] = tf.train.Feature(float_list=tf.train.FloatList(value=[rng.random()]))
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write_examples(directory, shards, per_shard, seed=0, compressions=("GZIP",)):
    """Writes `shards` TFRecord files of random examples (compression cycling through
    `compressions`); returns their paths."""
    import tensorflow as tf

    rng = random.Random(seed)
    vocabulary = ODD_TERMS + [b"q%d" % i for i in range(3000)]
    os.makedirs(directory, exist_ok=True)
    paths = []
    for shard in range(shards):
        compression = compressions[shard % len(compressions)]
        path = os.path.join(directory, "part-%05d%s" % (shard, SUFFIX[compression]))
        with tf.io.TFRecordWriter(path, compression) as writer:
            for _ in range(per_shard):
                writer.write(vocab_example(rng, vocabulary))
        paths.append(path)
    return paths


ODD_BYTES = [b"", b"\xff\xfe", "caf\u00e9".encode(), b"a\nb", b"x" * 300]
ODD_INTS = [0, -1, 1, 2**63 - 1, -(2**63), 2**62, -(2**40)]
ODD_FLOATS = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e-45, -3.4028234663852886e38, 3.4028234663852886e38, 0.1]


def awkward_example(rng):
    """An example where every awkward case of the statistics turns up across a few hundred."""
    import tensorflow as tf

    features = {}
    if rng.random() < 0.9:
        features["query"] = tf.train.Feature(
            bytes_list=tf.train.BytesList(
                value=[rng.choice(ODD_BYTES + [b"q%d" % rng.randint(0, 60)]) for _ in range(rng.randint(0, 3))]
            )
        )
    if rng.random() < 0.8:
        values = [rng.choice(ODD_INTS + [rng.randint(-1000, 1000)]) for _ in range(rng.choice([1, 1, 2, 0]))]
        features["user_id"] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    if rng.random() < 0.7:
        values = [rng.choice(ODD_FLOATS + [rng.uniform(-1e6, 1e6)]) for _ in range(rng.randint(0, 5))]
        features["score"] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
    if rng.random() < 0.05:
        features["rare"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[7]))
    if rng.random() < 0.1:
        features["unset"] = tf.train.Feature()  # present, with no list at all
    features["constant"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"same"]))
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write_awkward(directory):
    """6 files of awkward examples (1, 150 or 300 each), GZIP'd and plain in turn, in
    `directory` (a pathlib.Path); returns their paths."""
    rng = random.Random(11)
    paths = []
    for n in range(6):
        suffix, compression = [(".tfrecord.gz", "GZIP"), (".tfrecord", "")][n % 2]
        records = [awkward_example(rng) for _ in range(rng.choice([1, 150, 300]))]
        paths.append(write_records(str(directory / ("part-%d%s" % (n, suffix))), records, compression))
    return paths


def write_many_awkward(directory):
    """24 files of 250 awkward examples, every other one GZIP'd, in `directory` (a
    pathlib.Path), for jobs long enough to be cut; returns their paths."""
    rng = random.Random(29)
    paths = []
    for n in range(24):
        suffix, compression = [(".tfrecord", ""), (".tfrecord.gz", "GZIP")][n % 2]
        records = [awkward_example(rng) for _ in range(250)]
        paths.append(write_records(str(directory / ("part-%02d%s" % (n, suffix))), records, compression))
    return paths


def write_random_records(directory, num_files, seed=12):
    """`num_files` TFRecord files of random records (0 to 60 of 0 to 400 bytes; every third
    file GZIP'd) in `directory` (a pathlib.Path); returns their paths."""
    rng = random.Random(seed)
    paths = []
    for n in range(num_files):
        gzipped = n % 3 == 0
        records = [rng.randbytes(rng.randint(0, 400)) for _ in range(rng.randint(0, 60))]
        name = "part-%05d.tfrecord%s" % (n, ".gz" if gzipped else "")
        paths.append(write_records(str(directory / name), records, "GZIP" if gzipped else ""))
    return paths


def make_examples(directory, seed=None, examples=6000, shards=6):
    """scripts/make_examples.py's tricky examples, 6,000 in 6 shards (or as asked), in
    `directory`; returns their paths."""
    subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts", "make_examples.py"), "--output_dir", directory]
        + ["--shards", str(shards), "--examples", str(examples), "--tricky"]
        + ([] if seed is None else ["--seed", str(seed)]),
        check=True,
        capture_output=True,
        timeout=300,
    )
    return sorted(os.path.join(directory, name) for name in os.listdir(directory))


# ---------------------------------------------------------------- TFRecord framing

# Pieces of `write_planted_tfrecord`'s file: 256 KB.
PLANTED_READ_SIZE = 256 << 10


def masked_crc(data):
    """TFRecord's masked CRC32C of `data`: Google's crc32c, masked as TFRecord masks it."""
    crc = google_crc32c.value(data)
    return struct.pack("<I", (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF)


def header(length):
    """A record's header whose checksum checks."""
    size = struct.pack("<Q", length)
    return size + masked_crc(size)


def framed(payload):
    """A whole record, both checksums right."""
    return header(len(payload)) + payload + masked_crc(payload)


def decoy(rng):
    """Bytes that look like a record's start: a header that checks, for a length that
    may fit the file, followed by data whose checksum does not."""
    length = rng.choice([0, 1, 5, 100, 4000, 300_000])
    return header(length) + bytes(rng.getrandbits(8) for _ in range(min(length, 64))) + b"\x00\x00\x00\x00"


def planted_example(rng, blob_bytes):
    """A tf.train.Example whose `blob` feature (not in the vocabulary) is `blob_bytes`
    random bytes with valid-looking headers planted in them."""
    import tensorflow as tf

    features = {}
    if rng.random() < 0.9:
        features["query"] = tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[b"q%d" % rng.randint(0, 300) for _ in range(rng.randint(1, 2))])
        )
    if rng.random() < 0.8:
        features["user_id"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[rng.randint(-50, 50)]))
    if blob_bytes:
        blob = bytearray(rng.randbytes(blob_bytes))
        for _ in range(1 + blob_bytes // 50_000):
            planted = decoy(rng)
            at = rng.randint(0, max(0, blob_bytes - len(planted)))
            blob[at : at + len(planted)] = planted[: blob_bytes - at]
        features["blob"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[bytes(blob)]))
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write_planted_tfrecord(path):
    """One uncompressed TFRecord file of about 14 MB at `path`: mostly small examples, some
    empty ones (0 bytes), some of up to 3 MB, payloads planted with headers that check."""
    import tensorflow as tf

    rng = random.Random(23)
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(3000):
            kind = rng.random()
            if kind < 0.03:
                writer.write(b"")
            elif kind < 0.036:
                writer.write(planted_example(rng, rng.randint(400_000, 3_000_000)))
            else:
                writer.write(planted_example(rng, rng.choice([0, 0, 20, 700, 9000])))
    return path
