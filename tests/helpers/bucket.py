"""A Cloud Storage server (gcs_server.py) with a bucket of text, gzip and TFRecord objects,
the CLI run against it, small examples put in it, and what a prefix of it holds."""

import gzip
import os
import random

from helpers.corpora import write_corpus, write_records
from helpers.gcs_server import GcsServer
from helpers.processes import run_cli, task_env

BUCKET = "data"


def example(rng):
    import tensorflow as tf

    features = {"query": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"q%d" % rng.randint(0, 400)]))}
    if rng.random() < 0.7:
        features["user_id"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[rng.randint(-9, 9)]))
    if rng.random() < 0.2:  # a long one now and then: records of many sizes (about 4.5 MB an object)
        features["blob"] = tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[rng.randbytes(rng.randint(0, 30_000))])
        )
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def stocked_server(tmp_path_factory):
    """The server with a bucket of text, gzip and TFRecord objects; yields (server, the
    local copy of every object by its gs:// path), and stops the server after. For a
    fixture: `yield from stocked_server(tmp_path_factory)`."""
    import tensorflow as tf

    local = tmp_path_factory.mktemp("bucket")
    server = GcsServer(str(tmp_path_factory.mktemp("tls")))
    server.create_bucket(BUCKET)
    copies = {}

    def put(name, path):
        with open(path, "rb") as f:
            server.put(BUCKET, name, f.read())
        copies["gs://%s/%s" % (BUCKET, name)] = path

    for path in write_corpus(str(local / "corpus"), 12, seed=31):
        put("corpus/" + os.path.basename(path), path)
    for path in write_corpus(str(local / "deeper"), 5, seed=32):
        put("corpus/deeper/" + os.path.basename(path), path)
    server.put(BUCKET, "corpus/_SUCCESS", b"")
    zipped = local / "zipped.txt.gz"
    zipped.write_bytes(gzip.compress(open(copies["gs://data/corpus/f0001.txt"], "rb").read() * 40))
    put("corpus/zipped.txt.gz", str(zipped))
    big = local / "big.txt"
    big.write_bytes(b"".join(open(p, "rb").read() + b"\n" for p in sorted(copies.values()) * 8))
    put("big/big.txt", str(big))
    for path in write_corpus(str(local / "listed"), 3, seed=33):
        put("listed/" + os.path.basename(path), path)
    server.put(BUCKET, "lists/files.txt", b"gs://data/listed/f0000.txt\n\ngs://data/listed/f000[12].txt\n")
    rng = random.Random(34)
    for name, compression in (("records/one.tfrecord", ""), ("records/two.tfrecord.gz", "GZIP")):
        path = str(local / os.path.basename(name))
        with tf.io.TFRecordWriter(path, compression) as writer:
            for _ in range(1500):
                writer.write(example(rng))
        put(name, path)
    try:
        yield server, copies
    finally:
        server.stop()


def cli(server, args, env=None):
    return run_cli(args, env=server.env(env or task_env()), timeout=240)


def bucket_files(server, prefix):
    """{name under `prefix`: bytes} of the objects there, but directory markers (TensorFlow's makedirs makes them)."""
    names = [name for name in server.names("data") if name.startswith(prefix) and not name.endswith("/")]
    return {name[len(prefix) :]: server.get("data", name) for name in names}


def small_examples(server, tmp_path):
    """Two TFRecord objects of 600 small examples each (the second GZIP'd) under
    gs://data/small-records/; returns their records, in order."""
    import tensorflow as tf

    rng = random.Random(35)
    records = []
    for name, compression in (("one.tfrecord", ""), ("two.tfrecord.gz", "GZIP")):
        batch = []
        for _ in range(600):
            features = {"query": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"q%d" % rng.randint(0, 400)]))}
            if rng.random() < 0.7:
                features["user_id"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[rng.randint(-9, 9)]))
            batch.append(tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString())
        with open(write_records(str(tmp_path / name), batch, compression), "rb") as f:
            server.put("data", "small-records/" + name, f.read())
        records += batch
    return records
