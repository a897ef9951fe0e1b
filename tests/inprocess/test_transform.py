"""`Transform`: tf.Transform's analyze-and-transform on the in-process cluster, against
plain Python over the raw examples parsed by protobuf (numpy, fractions): vocabularies in
tft's order, OOV buckets and defaults, z-scores, 0-1 scaling, exact quantiles, sparse and
absent features, one example, an empty shard; the saved transform_fn maps every raw
example to exactly its materialized one."""

import glob
import gzip
import json
import math
import os
import random
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
import tensorflow as tf
from helpers.oracles import read_tfrecords, tft_ordered
from helpers.transforms import LAYOUT, first_difference

import tf2_mapreduce as mr
import tf2_mapreduce.transform as tft
from tf2_mapreduce.errors import JobFailed, UsageError
from tf2_mapreduce.transform import NotSupported

SPEC = {
    "x": tf.io.FixedLenFeature([], tf.float32),
    "n": tf.io.FixedLenFeature([], tf.int64),
    "s": tf.io.FixedLenFeature([], tf.string),
    "tags": tf.io.VarLenFeature(tf.string),
    "codes": tf.io.VarLenFeature(tf.int64),
}
TERMS = [b"a", b"b", b"c", b"dd", b"e e", "caf\u00e9".encode(), b""]


def example(rng):
    tags = [rng.choice([b"t1", b"t2", b"t3", b"t4", b"x\ny"]) for _ in range(rng.randint(0, 3))]
    feature = {
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[rng.gauss(3, 2)])),
        "n": tf.train.Feature(int64_list=tf.train.Int64List(value=[rng.randint(-5, 40)])),
        "s": tf.train.Feature(bytes_list=tf.train.BytesList(value=[rng.choice(TERMS + TERMS[:3])])),
        "tags": tf.train.Feature(bytes_list=tf.train.BytesList(value=tags)),
    }
    if rng.random() < 0.7:  # absent from the others: a VarLen feature with no value there
        feature["codes"] = tf.train.Feature(int64_list=tf.train.Int64List(value=[rng.randint(0, 9)]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """Shards of raw examples (one of them empty, one of one example): (directory, paths)."""
    directory = tmp_path_factory.mktemp("raw")
    rng = random.Random(5)
    paths = []
    for shard, count in enumerate([400, 0, 1, 350, 250]):
        path = str(directory / ("raw-%02d.tfrecord.gz" % shard))
        with tf.io.TFRecordWriter(path, "GZIP") as writer:
            for _ in range(count):
                writer.write(example(rng))
        paths.append(path)
    return str(directory), paths


def parsed(paths):
    """Every raw example, in input order, as protobuf parses it: {feature: list of values}."""
    rows = []
    for path in paths:
        for record in read_tfrecords(path):
            features = tf.train.Example.FromString(record).features.feature
            row = {}
            for name, feature in features.items():
                kind = feature.WhichOneof("kind")
                row[name] = list(getattr(feature, kind).value) if kind else []
            rows.append(row)
    return rows


def preprocessing_fn(inputs):
    outputs = {
        "x_z": tft.scale_to_z_score(inputs["x"]),
        "x_01": tft.scale_to_0_1(inputs["x"]),
        "n_scaled": tft.scale_by_min_max(inputs["n"], output_min=-1.0, output_max=1.0),
        "n_bucket": tft.bucketize(inputs["n"], 4),
        "s_id": tft.compute_and_apply_vocabulary(inputs["s"]),
        "s_top": tft.compute_and_apply_vocabulary(inputs["s"], top_k=3, default_value=-7, vocab_filename="s top"),
        "tags_id": tft.compute_and_apply_vocabulary(inputs["tags"], num_oov_buckets=2, frequency_threshold=2),
        "codes_id": tft.compute_and_apply_vocabulary(inputs["codes"]),
        "n_mean": tf.zeros_like(inputs["x"]) + tft.mean(inputs["n"]),
        "n_sum": tf.zeros_like(inputs["n"]) + tft.sum(inputs["n"]) + tft.size(inputs["tags"]),
    }
    tft.vocabulary(inputs["codes"], vocab_filename="codes_for_the_trainer")  # not applied: a trainer reads it
    return outputs


TRANSFORMED = {
    "x_z": tf.io.FixedLenFeature([], tf.float32),
    "x_01": tf.io.FixedLenFeature([], tf.float32),
    "n_scaled": tf.io.FixedLenFeature([], tf.float32),
    "n_bucket": tf.io.FixedLenFeature([], tf.int64),
    "s_id": tf.io.FixedLenFeature([], tf.int64),
    "s_top": tf.io.FixedLenFeature([], tf.int64),
    "tags_id": tf.io.VarLenFeature(tf.int64),
    "codes_id": tf.io.VarLenFeature(tf.int64),
    "n_mean": tf.io.FixedLenFeature([], tf.float32),
    "n_sum": tf.io.FixedLenFeature([], tf.int64),
}


@pytest.fixture(scope="module")
def transformed(inprocess, raw, tmp_path_factory):
    """(output directory, result) of `preprocessing_fn`'s run, its checkpoints beside the
    directory (`checkpoint_of`)."""
    out = str(tmp_path_factory.mktemp("transformed") / "out")
    job = mr.Transform(preprocessing_fn, SPEC, num_shards=3)
    result = inprocess.run(job, [raw[0]], output_dir=out, read_size=20_000, checkpoint_dir=checkpoint_of(out))
    return out, result


def checkpoint_of(out):
    return os.path.join(os.path.dirname(out), "ckpt")


def data_rows(out):
    """The materialized examples, in order, parsed by protobuf."""
    return parsed(sorted(glob.glob(os.path.join(out, "data", "*"))))


def vocabulary(values, top_k=None, threshold=None):
    """tft's vocabulary of `values`: strings that are empty or hold a newline left out;
    count descending, then bytes descending."""
    counts = Counter(v for v in values if v and b"\n" not in v and b"\r" not in v)
    kept = [(t, c) for t, c in tft_ordered(counts) if not threshold or c >= threshold]
    return [t for t, _ in kept][:top_k]


def read_vocabulary(out, name):
    with open(os.path.join(out, "transform_fn", "assets", name), "rb") as f:
        return f.read().split(b"\n")[:-1]


def test_every_example_is_written_once_in_input_order_with_its_features(transformed, raw):
    out, result = transformed
    rows, got = parsed(raw[1]), data_rows(out)
    assert len(got) == len(rows) == result.total == 1001
    assert sorted(os.listdir(os.path.join(out, "data"))) == ["part-%05d-of-00003.tfrecord.gz" % k for k in range(3)]
    assert all(set(row) == set(TRANSFORMED) for row in got)
    # Each shard is one GZIP stream that Python reads whole, its CRC checked.
    for path in glob.glob(os.path.join(out, "data", "*")):
        with open(path, "rb") as f:
            gzip.decompress(f.read())


def test_vocabularies_are_tfts_and_ids_follow_them(transformed, raw):
    out, _ = transformed
    rows, got = parsed(raw[1]), data_rows(out)
    s_values = [row["s"][0] for row in rows]
    s_vocab = vocabulary(s_values)
    assert read_vocabulary(out, "vocab_compute_and_apply_vocabulary_vocabulary") == s_vocab
    assert [g["s_id"][0] for g in got] == [s_vocab.index(v) if v in s_vocab else -1 for v in s_values]
    top = vocabulary(s_values, top_k=3)
    assert read_vocabulary(out, "s-top") == top
    assert [g["s_top"][0] for g in got] == [top.index(v) if v in top else -7 for v in s_values]
    tags = vocabulary([t for row in rows for t in row["tags"]], threshold=2)
    assert read_vocabulary(out, "vocab_compute_and_apply_vocabulary_2_vocabulary") == tags
    for row, g in zip(rows, got):
        buckets = tf.strings.to_hash_bucket_fast(row["tags"], 2).numpy().tolist() if row["tags"] else []
        want = [tags.index(t) if t in tags else len(tags) + b for t, b in zip(row["tags"], buckets)]
        assert g["tags_id"] == want
    codes = vocabulary([str(c).encode() for row in rows for c in row.get("codes", [])])
    assert [g["codes_id"] for g in got] == [
        [codes.index(str(c).encode()) for c in row.get("codes", [])] for row in rows
    ]
    # A vocabulary no output applies is an asset too, listed by its name.
    assert read_vocabulary(out, "codes_for_the_trainer") == codes
    with open(os.path.join(out, "transformed_metadata", "asset_map")) as f:
        asset_map = json.load(f)
    # Known by the name given, its file named as tft sanitizes it.
    assert asset_map["codes_for_the_trainer"] == "codes_for_the_trainer" and asset_map["s top"] == "s-top"


def _exact_mean_var(values):
    values = [Fraction(v) for v in values]
    mean = sum(values) / len(values)
    return mean, sum((v - mean) ** 2 for v in values) / len(values)


def test_numbers_are_scaled_by_their_exact_statistics(transformed, raw):
    out, _ = transformed
    rows, got = parsed(raw[1]), data_rows(out)
    x = np.float32([row["x"][0] for row in rows])
    mean, var = _exact_mean_var(x.tolist())
    want_z = (x.astype(np.float64) - float(mean)) / math.sqrt(var)
    assert np.abs(np.float32([g["x_z"][0] for g in got]) - want_z).max() < 1e-6
    low, high = float(x.min()), float(x.max())
    assert np.abs(np.float32([g["x_01"][0] for g in got]) - (x - low) / (high - low)).max() < 1e-6
    n = [row["n"][0] for row in rows]
    scaled = [(v - min(n)) / (max(n) - min(n)) * 2 - 1 for v in n]
    assert np.abs(np.float32([g["n_scaled"][0] for g in got]) - scaled).max() < 1e-6
    assert {g["n_mean"][0] for g in got} == {float(np.float32(float(Fraction(sum(n), len(n)))))}
    assert {g["n_sum"][0] for g in got} == {sum(n) + sum(len(row["tags"]) for row in rows)}


def test_buckets_come_from_exact_quantiles(transformed, raw):
    out, _ = transformed
    rows, got = parsed(raw[1]), data_rows(out)
    n = sorted(row["n"][0] for row in rows)
    boundaries = [n[k * len(n) // 4] for k in range(1, 4)]
    want = np.searchsorted(np.float32(boundaries), np.float32([row["n"][0] for row in rows]), side="right")
    assert [g["n_bucket"][0] for g in got] == want.tolist()


def test_the_saved_transform_maps_every_raw_example_to_exactly_its_materialized_one(transformed, raw):
    out, _ = transformed
    loaded = tf.saved_model.load(os.path.join(out, "transform_fn"))
    records = [r for p in raw[1] for r in read_tfrecords(p)]
    served = loaded.transform_fn(tf.io.parse_example(records, SPEC))
    materialized = tf.io.parse_example(
        [r for p in sorted(glob.glob(os.path.join(out, "data", "*"))) for r in read_tfrecords(p)], TRANSFORMED
    )
    assert first_difference(served, materialized, TRANSFORMED) is None  # bit for bit, floats too


def test_the_output_has_tfts_layout_and_schema(transformed):
    out, result = transformed
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    with open(os.path.join(out, "transformed_metadata", "schema.pbtxt")) as f:
        schema = text_format.Parse(f.read(), schema_pb2.Schema())
    features = {f.name: f for f in schema.feature}
    assert sorted(features) == sorted(TRANSFORMED)
    assert features["s_id"].int_domain.min == -1 and features["s_id"].int_domain.is_categorical
    assert (
        features["tags_id"].int_domain.max
        == result.written["vocabularies"]["vocab_compute_and_apply_vocabulary_2_vocabulary"] + 1
    )
    assert not features["tags_id"].HasField("shape") and features["x_z"].HasField("shape")
    assert features["n_bucket"].int_domain.max == 3
    # The raw schema, where TFX writes it: each feature of SPEC, FixedLen ones with their shape.
    with open(os.path.join(out, "metadata", "schema.pbtxt")) as f:
        raw_schema = text_format.Parse(f.read(), schema_pb2.Schema())
    types = {tf.float32: schema_pb2.FLOAT, tf.int64: schema_pb2.INT, tf.string: schema_pb2.BYTES}
    got = {
        f.name: (f.type, [d.size for d in f.shape.dim] if f.HasField("shape") else None, f.presence.min_fraction)
        for f in raw_schema.feature
    }
    fixed = tf.io.FixedLenFeature
    assert got == {
        name: (types[spec.dtype], list(spec.shape), 1.0) if isinstance(spec, fixed) else (types[spec.dtype], None, 0.0)
        for name, spec in SPEC.items()
    }


def test_what_is_not_supported_fails_when_traced_naming_it(inprocess, raw, tmp_path):
    def weighted(inputs):
        return {"s": tft.compute_and_apply_vocabulary(inputs["s"], weights=inputs["x"])}

    with pytest.raises(NotSupported, match=r"vocabulary\(weights=...\) is not supported"):
        inprocess.run(mr.Transform(weighted, SPEC), [raw[0]], output_dir=str(tmp_path / "out"))

    with pytest.raises(UsageError, match="give it an output directory"):
        inprocess.run(mr.Transform(preprocessing_fn, SPEC), [raw[0]])

    def pca(inputs):
        return {"h": tft.pca(inputs["x"], 2)}

    with pytest.raises(UsageError, match="failed when traced: AttributeError: tf2_mapreduce.transform has no pca"):
        inprocess.run(mr.Transform(pca, SPEC), [raw[0]], output_dir=str(tmp_path / "out"))

    def one_hot_means(inputs):  # a shape of a vocabulary's size: 0 when analyzed, its size once known
        ids = tft.compute_and_apply_vocabulary(inputs["s"], vocab_filename="v", num_oov_buckets=1)
        one_hot = tf.one_hot(ids, tf.cast(tft.experimental.get_vocabulary_size_by_name("v") + 1, tf.int32))
        return {"m": tf.zeros_like(one_hot) + tft.mean(one_hot, reduce_instance_dims=False)}

    with pytest.raises(NotSupported, match=r"mean\(reduce_instance_dims=False\) of shape \(None, None\)"):
        inprocess.run(mr.Transform(one_hot_means, SPEC), [raw[0]], output_dir=str(tmp_path / "out"))

    def tfidf_of_a_size(inputs):
        ids = tft.compute_and_apply_vocabulary(inputs["tags"], vocab_filename="t")
        return dict(zip("iw", tft.tfidf(ids, tft.experimental.get_vocabulary_size_by_name("t"))))

    with pytest.raises(NotSupported, match=r"tfidf\(vocab_size=...\) of a value known only when run"):
        inprocess.run(mr.Transform(tfidf_of_a_size, SPEC), [raw[0]], output_dir=str(tmp_path / "out"))

    def paired(inputs):  # tfidf's pair as one output
        return {"h": tft.tfidf(tf.cast(inputs["codes"], tf.int64), 10)}

    with pytest.raises(
        NotSupported, match="preprocessing_fn output h is a tuple: a Tensor, SparseTensor or RaggedTensor each"
    ):
        inprocess.run(mr.Transform(paired, SPEC), [raw[0]], output_dir=str(tmp_path / "out"))
    missing = (
        r"failed when traced: KeyError: 'nope' \(.*test_transform.py line \d+\); "
        r"the raw schema's features are codes, n, s, tags, x$"
    )
    with pytest.raises(UsageError, match=missing):
        inprocess.run(
            mr.Transform(lambda inputs: {"x": inputs["nope"]}, SPEC), [raw[0]], output_dir=str(tmp_path / "out")
        )
    # Examples of no feature, and ragged outputs of lists of lists (tft's partitions: not written here).
    with pytest.raises(NotSupported, match="returned an empty dict"):
        inprocess.run(mr.Transform(lambda inputs: {}, SPEC), [raw[0]], output_dir=str(tmp_path / "out"))

    def ragged(inputs):  # lists of lists an example
        return {"t": tf.RaggedTensor.from_uniform_row_length(tf.RaggedTensor.from_sparse(inputs["tags"]), 1)}

    with pytest.raises(NotSupported, match="output t: a RaggedTensor of a list an example only"):
        inprocess.run(mr.Transform(ragged, SPEC), [raw[0]], output_dir=str(tmp_path / "out"))
    assert not os.path.exists(tmp_path / "out" / "data")


def _f32(value):
    return float(np.float32(float(value)))


def test_analyzers_over_analyzers_results_are_counted_in_phases_exactly(inprocess, raw, tmp_path):
    def phased(inputs):  # tf.Transform runs these in phases: each phase a pass here
        centered = inputs["x"] - tft.mean(inputs["x"])
        twice = centered - tft.mean(centered)
        ids = tft.compute_and_apply_vocabulary(inputs["s"], vocab_filename="s_vocab")
        lines = tf.lookup.TextFileInitializer(  # a table of the user's on the vocabulary's file
            tft.vocabulary(inputs["tags"], vocab_filename="tags_vocab"),
            tf.string,
            tf.lookup.TextFileIndex.WHOLE_LINE,
            tf.int64,
            tf.lookup.TextFileIndex.LINE_NUMBER,
        )
        tag_ids = tf.sparse.map_values(tf.lookup.StaticHashTable(lines, -1).lookup, inputs["tags"])
        zeros = tf.zeros_like(inputs["n"])
        # s's vocabulary applied to tags too: the lookups of one table, ordered by control edges
        tags_in_s = tft.apply_vocabulary(inputs["tags"], tft.vocabulary(inputs["s"], vocab_filename="s_again"))
        return {
            "centered": centered,
            "twice": twice,
            "centered_mean": tf.zeros_like(inputs["x"]) + tft.mean(centered),  # phase 1
            "twice_var": tf.zeros_like(inputs["x"]) + tft.var(twice),  # phase 2
            "ids": ids,
            "ids_sum": zeros + tft.sum(ids),  # phase 1, over a vocabulary's ids
            "ids_z": tft.scale_to_z_score(ids),
            "tag_ids_max": zeros + tft.max(tag_ids),  # phase 1, through the user's table
            "nested_01": tft.scale_to_0_1(tft.scale_to_z_score(inputs["x"])),
            "tags_in_s": tags_in_s,
            "tags_in_s_size": zeros + tft.size(tf.sparse.retain(tags_in_s, tags_in_s.values >= 0)),
        }

    out = str(tmp_path / "phased")
    result = inprocess.run(mr.Transform(phased, SPEC, num_shards=2), [raw[0]], output_dir=out)
    rows, got = parsed(raw[1]), data_rows(out)
    assert result.total == len(got) == len(rows) == 1001
    centered = [g["centered"][0] for g in got]
    assert {g["centered_mean"][0] for g in got} == {_f32(_exact_mean_var(centered)[0])}
    assert {g["twice_var"][0] for g in got} == {_f32(_exact_mean_var([g["twice"][0] for g in got])[1])}
    s_vocab = vocabulary([row["s"][0] for row in rows])
    ids = [s_vocab.index(row["s"][0]) if row["s"][0] in s_vocab else -1 for row in rows]
    assert [g["ids"][0] for g in got] == ids and {g["ids_sum"][0] for g in got} == {sum(ids)}
    mean, var = _exact_mean_var(ids)
    want_z = (np.float64(ids) - float(mean)) / math.sqrt(var)
    assert np.abs(np.float32([g["ids_z"][0] for g in got]) - want_z).max() < 1e-6
    tags = vocabulary([t for row in rows for t in row["tags"]])
    tag_ids = [tags.index(t) if t in tags else -1 for row in rows for t in row["tags"]]
    assert {g["tag_ids_max"][0] for g in got} == {max(tag_ids)}
    s_terms = set(s_vocab)
    assert {g["tags_in_s_size"][0] for g in got} == {sum(t in s_terms for row in rows for t in row["tags"])}
    z = [g["nested_01"][0] for g in got]
    assert min(z) == 0.0 and max(z) == 1.0
    # What data/ holds is what transform_fn computes, every phase's results built in.
    loaded = tf.saved_model.load(os.path.join(out, "transform_fn"))
    records = [r for path in raw[1] for r in read_tfrecords(path)]
    applied = loaded.transform_fn(tf.io.parse_example(records, SPEC))
    for name in ("twice", "ids_z", "nested_01", "twice_var", "tag_ids_max"):
        assert applied[name].numpy().tolist() == [g[name][0] for g in got], name


def test_a_fn_without_analyzers_runs(inprocess, raw, tmp_path):
    def plain(inputs):
        return {"twice": inputs["n"] * 2}

    result = inprocess.run(mr.Transform(plain, SPEC, num_shards=1), [raw[0]], output_dir=str(tmp_path / "plain"))
    got = [row["twice"][0] for row in data_rows(str(tmp_path / "plain"))]
    assert got == [row["n"][0] * 2 for row in parsed(raw[1])] and result.total == 1001


def test_a_table_the_function_makes_under_init_scope_is_saved_with_the_transform(inprocess, raw, tmp_path):
    def census_fn(inputs):  # as TFX's census tutorial maps its label
        with tf.init_scope():
            initializer = tf.lookup.KeyValueTensorInitializer(
                keys=[b"a", b"b", b"c"], values=tf.constant([0, 1, 2], tf.int64), key_dtype=tf.string
            )
            table = tf.lookup.StaticHashTable(initializer, default_value=-1)
        return {"s_label": table.lookup(inputs["s"]), "x_z": tft.scale_to_z_score(inputs["x"])}

    out = str(tmp_path / "out")
    inprocess.run(mr.Transform(census_fn, SPEC, num_shards=1), [raw[0]], output_dir=out)
    rows = parsed(raw[1])
    want = [{b"a": 0, b"b": 1, b"c": 2}.get(row["s"][0], -1) for row in rows]
    assert [row["s_label"][0] for row in data_rows(out)] == want
    # An analyzer over the same table: TensorFlow orders its lookups, the output's first, by
    # a control edge, so the analyze pass needs s parsed too (it read no feature but tags).
    tags_labels = [{b"t1": 0, b"t2": 1}.get(t, -1) for row in rows for t in row["tags"]]

    def counted_fn(inputs):
        with tf.init_scope():
            initializer = tf.lookup.KeyValueTensorInitializer(keys=[b"t1", b"t2"], values=tf.constant([0, 1], tf.int64))
            table = tf.lookup.StaticHashTable(initializer, default_value=-1)
        s_label = table.lookup(inputs["s"])
        return {
            "s_label": s_label,
            "tags_sum": s_label * 0 + tft.sum(tf.sparse.map_values(table.lookup, inputs["tags"])),
        }

    counted = str(tmp_path / "counted")
    inprocess.run(mr.Transform(counted_fn, SPEC, num_shards=1), [raw[0]], output_dir=counted)
    assert {row["tags_sum"][0] for row in data_rows(counted)} == {sum(tags_labels)}
    records = [r for path in raw[1] for r in read_tfrecords(path)]
    served = tf.saved_model.load(os.path.join(out, "transform_fn")).transform_fn(tf.io.parse_example(records, SPEC))
    assert served["s_label"].numpy().tolist() == want


def test_analyzers_over_two_captured_tables_count_each_tables_values(inprocess, raw, tmp_path):
    # Alike but for what the tables hold: one count of both would give b a's sum and vocabulary.
    mapping = {"a": {b"a": 1, b"b": 2, b"c": 3}, "b": {b"a": 10, b"b": 20, b"c": 30}}

    def two_tables_fn(inputs):
        outputs = {}
        for name, table in sorted(mapping.items()):
            with tf.init_scope():
                keys, values = zip(*sorted(table.items()))
                initializer = tf.lookup.KeyValueTensorInitializer(list(keys), tf.constant(values, tf.int64))
                made = tf.lookup.StaticHashTable(initializer, default_value=-1)
            looked_up = made.lookup(inputs["s"])
            outputs[name + "_sum"] = looked_up * 0 + tft.sum(looked_up)
            outputs[name + "_id"] = tft.compute_and_apply_vocabulary(tf.strings.as_string(looked_up))
        return outputs

    out = str(tmp_path / "out")
    inprocess.run(mr.Transform(two_tables_fn, SPEC, num_shards=1), [raw[0]], output_dir=out)
    rows, got = parsed(raw[1]), data_rows(out)
    for name, table in mapping.items():
        looked_up = [table.get(row["s"][0], -1) for row in rows]
        assert {row[name + "_sum"][0] for row in got} == {sum(looked_up)}, name
        terms = vocabulary([str(v).encode() for v in looked_up])
        assert [row[name + "_id"][0] for row in got] == [terms.index(str(v).encode()) for v in looked_up], name


def test_a_table_filled_from_a_file_of_the_users_runs_exactly_and_keeps_no_checkpoint_no_rerun_could_resume(
    inprocess, raw, tmp_path, caplog
):
    # Filled as the function runs from a file its trace knows by name only: the file may
    # change before a rerun, which could then not be told from this run.
    own = tmp_path / "own.txt"
    own.write_bytes(b"a\nb\n")

    def own_file_fn(inputs):
        lines = tf.lookup.TextFileInitializer(
            str(own), tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER
        )
        looked_up = tf.lookup.StaticHashTable(lines, -1).lookup(inputs["s"])
        return {"s_sum": looked_up * 0 + tft.sum(looked_up)}

    checkpoints, out = tmp_path / "checkpoints", str(tmp_path / "out")
    with caplog.at_level("WARNING", logger="tf2_mapreduce"):
        transform = mr.Transform(own_file_fn, SPEC, num_shards=1)
        inprocess.run(transform, [raw[0]], output_dir=out, checkpoint_dir=str(checkpoints))
    total = sum({b"a": 0, b"b": 1}.get(row["s"][0], -1) for row in parsed(raw[1]))
    assert {row["s_sum"][0] for row in data_rows(out)} == {total}
    assert "passes keep no checkpoint" in caplog.text
    assert not [path for path in checkpoints.rglob("*") if "analyze" in str(path) or "transform" in str(path)]


def test_a_table_of_the_users_on_a_vocabulary_reads_that_vocabulary_not_a_file_of_its_name(
    inprocess, raw, tmp_path, monkeypatch
):
    def lines_of(path):
        return tf.lookup.TextFileInitializer(
            path, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER
        )

    def own_table_fn(inputs):  # tables of tf.lookup's own, on tft.vocabulary's files
        s_lines = lines_of(tft.vocabulary(inputs["s"], vocab_filename="s_vocab"))
        tags_lines = lines_of(tft.vocabulary(inputs["tags"], vocab_filename="tags_vocab"))
        return {
            "s_id": tf.lookup.StaticHashTable(s_lines, -1).lookup(inputs["s"]),
            "tags_id": tf.sparse.map_values(tf.lookup.StaticVocabularyTable(tags_lines, 2).lookup, inputs["tags"]),
            "x_z": tft.scale_to_z_score(inputs["x"]),
        }

    monkeypatch.chdir(tmp_path)
    for name in ("s_vocab", "tags_vocab"):  # files of the vocabularies' names where the job runs: not them
        with open(name, "wb") as f:
            f.write(b"t3\nc\nt1\na\n")
    out = str(tmp_path / "out")
    inprocess.run(mr.Transform(own_table_fn, SPEC, num_shards=1), [raw[0]], output_dir=out)
    rows = parsed(raw[1])
    s_terms = vocabulary([row["s"][0] for row in rows])
    tags_terms = vocabulary([t for row in rows for t in row["tags"]])
    assert read_vocabulary(out, "s_vocab") == s_terms and read_vocabulary(out, "tags_vocab") == tags_terms
    written = data_rows(out)
    s_ids = [[s_terms.index(row["s"][0]) if row["s"][0] in s_terms else -1] for row in rows]
    assert [row["s_id"] for row in written] == s_ids and [-1] in s_ids  # b"": no term, the default
    for got, row in zip(written, rows):  # a term's line, or one of the 2 buckets after them
        assert len(got["tags_id"]) == len(row["tags"])
        for term, i in zip(row["tags"], got["tags_id"]):
            assert i == tags_terms.index(term) if term in tags_terms else len(tags_terms) <= i < len(tags_terms) + 2
    records = [r for path in raw[1] for r in read_tfrecords(path)]
    served = tf.saved_model.load(os.path.join(out, "transform_fn")).transform_fn(tf.io.parse_example(records, SPEC))
    assert served["s_id"].numpy().tolist() == [ids[0] for ids in s_ids]
    assert served["tags_id"].values.numpy().tolist() == [i for row in written for i in row["tags_id"]]


def test_elementwise_scalings_are_each_positions_own_bit_for_bit(inprocess, raw, tmp_path):
    def elementwise_fn(inputs):  # each column of [x, n] scaled by its own statistics, as alone
        x, n = inputs["x"], tf.cast(inputs["n"], tf.float32)
        both = tf.stack([x, n], axis=1)
        wide = tf.one_hot(inputs["n"] + 5, 50, dtype=tf.int64)
        return {
            "both_z": tft.scale_to_z_score(both, elementwise=True),
            "both_01": tft.scale_to_0_1(both, elementwise=True),
            "both_sum": tf.zeros_like(both) + tft.sum(both, reduce_instance_dims=False),
            "x_z": tft.scale_to_z_score(x),
            "n_z": tft.scale_to_z_score(n),
            "x_01": tft.scale_to_0_1(x),
            "n_01": tft.scale_to_0_1(n),
            "sums": tf.zeros_like(both) + tf.stack([tft.sum(x), tft.sum(n)]),
            # 50 positions at once: each n's count, and each position's mean and max
            "n_counts": tf.zeros([tf.shape(n)[0], 50], tf.int64) + tft.sum(wide, reduce_instance_dims=False),
            "wide_mean": tf.zeros([tf.shape(n)[0], 50])
            + tft.mean(tf.cast(wide, tf.float32), reduce_instance_dims=False),
            "wide_max": tf.zeros([tf.shape(n)[0], 50], tf.int64) + tft.max(wide, reduce_instance_dims=False),
        }

    out = str(tmp_path / "out")
    inprocess.run(mr.Transform(elementwise_fn, SPEC, num_shards=1), [raw[0]], output_dir=out)
    written = data_rows(out)
    for row in written:
        assert row["both_z"] == row["x_z"] + row["n_z"] and row["both_01"] == row["x_01"] + row["n_01"]
        assert row["both_sum"] == row["sums"]
    assert written[0]["both_sum"][1] == sum(row["n"][0] for row in parsed(raw[1]))  # n's, an integer
    assert len({row["both_z"][1] for row in written}) > 1  # n's own z-scores, not x's
    n_counts = Counter(row["n"][0] + 5 for row in parsed(raw[1]))
    assert written[0]["n_counts"] == [n_counts[k] for k in range(50)]
    assert written[0]["wide_mean"] == [_f32(Fraction(n_counts[k], len(written))) for k in range(50)]
    assert written[0]["wide_max"] == [int(k in n_counts) for k in range(50)]

    def sparse_elementwise(inputs):
        return {"t": tft.scale_to_z_score(tf.cast(inputs["codes"], tf.float32), elementwise=True)}

    with pytest.raises(NotSupported, match=r"scale_to_z_score\(elementwise=True\) of a SparseTensor"):
        inprocess.run(mr.Transform(sparse_elementwise, SPEC), [raw[0]], output_dir=str(tmp_path / "sparse"))


def test_a_one_hot_as_deep_as_a_vocabulary(inprocess, raw, tmp_path):
    def one_hot_fn(inputs):
        ids = tft.compute_and_apply_vocabulary(inputs["s"], vocab_filename="s/names", num_oov_buckets=1)
        depth = tft.experimental.get_vocabulary_size_by_name("s/names") + 1
        return {"s_one_hot": tf.one_hot(ids, tf.cast(depth, tf.int32), dtype=tf.int64)}

    out = str(tmp_path / "out")
    inprocess.run(mr.Transform(one_hot_fn, SPEC, num_shards=1), [raw[0]], output_dir=out)
    s_values = [row["s"][0] for row in parsed(raw[1])]
    terms = vocabulary(s_values)
    assert read_vocabulary(out, "s_names") == terms
    ids = [terms.index(v) if v in terms else len(terms) for v in s_values]  # one OOV bucket: the empty string's
    want = [[int(k == i) for k in range(len(terms) + 1)] for i in ids]
    assert [row["s_one_hot"] for row in data_rows(out)] == want

    def unknown(inputs):
        return {"n": inputs["n"] + tft.experimental.get_vocabulary_size_by_name("nowhere")}

    with pytest.raises(UsageError, match="failed when traced: ValueError: Vocabulary size not found for nowhere"):
        inprocess.run(mr.Transform(unknown, SPEC), [raw[0]], output_dir=str(tmp_path / "unknown"))

    def unnamed(inputs):
        return {"s": tft.compute_and_apply_vocabulary(inputs["s"], vocab_filename="")}

    with pytest.raises(UsageError, match="vocab_filename='' names no file"):
        inprocess.run(mr.Transform(unnamed, SPEC), [raw[0]], output_dir=str(tmp_path / "unnamed"))


def test_a_tfx_preprocessing_fn_gets_its_custom_config(inprocess, raw, tmp_path):
    def tfx_fn(inputs, custom_config):
        return {"n_times": inputs["n"] * custom_config["times"]}

    job = mr.Transform(tfx_fn, SPEC, num_shards=1, custom_config='{"times": 3}')  # as --custom_config gives it
    inprocess.run(job, [raw[0]], output_dir=str(tmp_path / "out"))
    got = [row["n_times"][0] for row in data_rows(str(tmp_path / "out"))]
    assert got == [row["n"][0] * 3 for row in parsed(raw[1])]
    # Without one, TFX passes {}; a function without the argument cannot take one.
    with pytest.raises(UsageError, match="failed when traced: KeyError: 'times'"):
        inprocess.run(mr.Transform(tfx_fn, SPEC), [raw[0]], output_dir=str(tmp_path / "none"))
    with pytest.raises(UsageError, match="takes no custom_config argument"):
        mr.Transform(lambda inputs: inputs, SPEC, custom_config={"times": 3})
    with pytest.raises(UsageError, match="custom_config: give a JSON object"):
        mr.Transform(tfx_fn, SPEC, custom_config="[3]")


def test_a_checkpoint_of_another_preprocessing_fn_is_refused(inprocess, raw, transformed, tmp_path):
    checkpoint = checkpoint_of(transformed[0])
    assert os.listdir(checkpoint)

    def other(inputs):
        return {"x_z": tft.scale_to_z_score(inputs["x"])}

    with pytest.raises(UsageError, match="checkpoint"):
        inprocess.run(mr.Transform(other, SPEC), [raw[0]], output_dir=str(tmp_path / "b"), checkpoint_dir=checkpoint)


def test_an_earlier_transform_applied_alone_writes_the_same_examples(inprocess, transformed, raw, tmp_path):
    # tf.Transform's TransformDataset from Python: the same inputs through the transform_fn
    # that the analyze-and-transform run wrote give the very records it wrote.
    out, _ = transformed
    applied = str(tmp_path / "applied")
    # Prepared as a plain job is (its inputs listed once, for its passes), then run; not submitted.
    prepared = inprocess.prepare(mr.Transform(transform_output=out, num_shards=3), [raw[0]], output_dir=applied)
    with pytest.raises(TypeError, match=r"a job of several passes \(transform\) runs with Cluster.run"):
        inprocess.submit(prepared)
    result = inprocess.run(prepared)
    assert result.written["transform_fn"] == out
    assert sorted(os.listdir(applied)) == ["_tf2_mapreduce.json", "data", "transformed_metadata"]
    for name in sorted(os.listdir(os.path.join(out, "data"))):
        with open(os.path.join(out, "data", name), "rb") as a, open(os.path.join(applied, "data", name), "rb") as b:
            assert a.read() == b.read(), name
    with pytest.raises(UsageError, match="one of the two"):
        mr.Transform(preprocessing_fn, SPEC, transform_output=out)
    with pytest.raises(UsageError, match="give no schema"):
        mr.Transform(schema=SPEC, transform_output=out)
    with pytest.raises(UsageError, match="write it apart from the transform it applies"):
        inprocess.run(mr.Transform(transform_output=out), [raw[0]], output_dir=os.path.join(out, ""))
    assert sorted(os.listdir(out)) == LAYOUT
    with pytest.raises(UsageError, match="not the output of a transform"):
        inprocess.run(mr.Transform(transform_output=raw[0]), [raw[0]], output_dir=str(tmp_path / "none"))


def test_tfidf_over_vocabulary_ids_is_tfts_from_exact_counts(inprocess, raw, tmp_path):
    vocab_size = 3

    def sentiment_fn(inputs):  # tf.Transform's sentiment example, on the tags
        ids = tft.compute_and_apply_vocabulary(inputs["tags"], top_k=vocab_size)
        # One more for the ids of what the vocabulary left out (-1: the last, modulo).
        bow, weights = tft.tfidf(ids, vocab_size + 1)
        return {"bow": bow, "weights": weights}

    out = str(tmp_path / "out")
    inprocess.run(mr.Transform(sentiment_fn, SPEC, num_shards=1), [raw[0]], output_dir=out)
    rows, got = parsed(raw[1]), data_rows(out)
    terms = vocabulary([t for row in rows for t in row["tags"]], top_k=vocab_size)
    docs = [[terms.index(t) if t in terms else vocab_size for t in row["tags"]] for row in rows]
    held = Counter(term for doc in docs for term in set(doc))
    assert len(got) == len(docs) == 1001
    for doc, g in zip(docs, got):
        counts = Counter(doc)
        assert g["bow"] == sorted(counts)
        idf = [1 + math.log((len(docs) + 1) / (1 + held[term])) for term in sorted(counts)]
        want = [counts[term] / len(doc) * w for term, w in zip(sorted(counts), idf)]
        assert np.abs(np.float32(g["weights"]) - np.float64(want)).max(initial=0) < 1e-6
    loaded = tf.saved_model.load(os.path.join(out, "transform_fn"))
    applied = loaded.transform_fn(tf.io.parse_example([r for p in raw[1] for r in read_tfrecords(p)], SPEC))
    assert applied["weights"].values.numpy().tolist() == [w for g in got for w in g["weights"]]


def test_a_sparse_output_with_an_index_outside_its_dense_shape_fails_its_step_naming_it(inprocess, raw, tmp_path):
    def outside_fn(inputs):
        ids = tft.compute_and_apply_vocabulary(inputs["s"])
        count = tf.shape(ids, out_type=tf.int64)[0]
        rows = tf.range(count, dtype=tf.int64) + 1  # the last example's row is one past the batch
        sparse = tf.SparseTensor(tf.stack([rows, tf.zeros_like(rows)], 1), ids, tf.stack([count, 1]))
        tft.experimental.annotate_sparse_output_shape(sparse, [1])
        return {"shifted": sparse}

    with pytest.raises(JobFailed, match="output shifted: a SparseTensor with an index outside its dense shape"):
        inprocess.run(mr.Transform(outside_fn, SPEC), [raw[0]], output_dir=str(tmp_path / "out"))


def test_a_ragged_feature_in_and_ragged_and_sparse_features_out_are_written_as_tft_writes_them(
    inprocess, raw, tmp_path
):
    ragged = tf.io.RaggedFeature(tf.string, value_key="tags", partitions=(), row_splits_dtype=tf.int64)
    spec = dict(SPEC, tags=ragged)

    def census_v2_fn(inputs):  # tf.Transform's census_example_v2's calls, on these features
        s_ids = tft.compute_and_apply_vocabulary(inputs["s"], vocab_filename="s_names", num_oov_buckets=1)
        width = tft.experimental.get_vocabulary_size_by_name("s_names") + 1
        columns = tf.range(1, width + 1)[None, :]
        s_sparse = tf.sparse.from_dense(tf.one_hot(s_ids, tf.cast(width, tf.int32), dtype=tf.int64) * columns)
        tft.experimental.annotate_sparse_output_shape(s_sparse, width)
        tag_ids = tft.compute_and_apply_vocabulary(inputs["tags"], vocab_filename="tag_names")
        return {"s_sparse": s_sparse, "tag_ids": tag_ids, "tags_upper": tf.strings.upper(inputs["tags"])}

    out = str(tmp_path / "out")
    inprocess.run(mr.Transform(census_v2_fn, spec, num_shards=1), [raw[0]], output_dir=out)
    rows = parsed(raw[1])
    tags = vocabulary([t for row in rows for t in row["tags"]])
    s_terms = vocabulary([row["s"][0] for row in rows])
    written = data_rows(out)
    assert len(written) == len(rows) == 1001
    for row, got in zip(rows, written):
        assert set(got) == {"s_sparse$sparse_indices_0", "s_sparse$sparse_values", "tag_ids$ragged_values"} | {
            "tags_upper$ragged_values"
        }
        assert got["tag_ids$ragged_values"] == [tags.index(t) if t in tags else -1 for t in row["tags"]]
        assert got["tags_upper$ragged_values"] == [t.upper() for t in row["tags"]]
        s_id = s_terms.index(row["s"][0]) if row["s"][0] in s_terms else len(s_terms)
        assert (got["s_sparse$sparse_indices_0"], got["s_sparse$sparse_values"]) == ([s_id], [s_id + 1])
    # As tft's schema says them: a RaggedFeature of the values' feature, a SparseFeature as
    # wide as the annotation; the raw schema's RaggedFeature read back as given.
    output = tft.TFTransformOutput(out)
    assert output.transformed_feature_spec() == {
        "s_sparse": tf.io.SparseFeature(
            ["s_sparse$sparse_indices_0"], "s_sparse$sparse_values", tf.int64, [len(s_terms) + 1], True
        ),
        "tag_ids": tf.io.RaggedFeature(tf.int64, "tag_ids$ragged_values", (), tf.int64),
        "tags_upper": tf.io.RaggedFeature(tf.string, "tags_upper$ragged_values", (), tf.int64),
    }
    assert output.raw_feature_spec()["tags"] == ragged
    domain = output.transformed_domains()["tag_ids$ragged_values"]  # ids of a vocabulary: their range, as tft's
    assert (domain.min, domain.max, domain.is_categorical) == (-1, len(tags) - 1, True)
    # data/ parsed by that spec is transform_fn applied alone, every value.
    records = [r for p in raw[1] for r in read_tfrecords(p)]
    applied = tf.saved_model.load(os.path.join(out, "transform_fn")).transform_fn(tf.io.parse_example(records, spec))
    data = [r for p in sorted(glob.glob(os.path.join(out, "data", "*"))) for r in read_tfrecords(p)]
    again = tf.io.parse_example(data, output.transformed_feature_spec())
    for name in ("tag_ids", "tags_upper"):
        assert again[name].to_list() == applied[name].to_list(), name
    assert again["s_sparse"].indices.numpy().tolist() == applied["s_sparse"].indices.numpy().tolist()
    assert again["s_sparse"].values.numpy().tolist() == applied["s_sparse"].values.numpy().tolist()
    # As wide as annotated, in transform_fn itself too (tft changes the tensor's dense shape).
    width = len(s_terms) + 1
    assert applied["s_sparse"].dense_shape.numpy().tolist() == [len(records), width]
    assert again["s_sparse"].dense_shape.numpy().tolist() == [len(records), width]


def test_an_annotated_sparse_output_keeps_its_values_order_and_a_two_index_one_is_written_whole(tmp_path):
    import tf2_mapreduce.transform.materialize as materialize

    # A row's columns out of order, repeated (tft writes them as the tensor holds them), and
    # an earlier transform's SparseFeature of two indices.
    two = tf.SparseTensor([[0, 3], [0, 1], [0, 3], [2, 0]], tf.constant([30, 10, 30, 5], tf.int64), [3, 4])
    three = tf.SparseTensor([[1, 2, 0], [1, 0, 1]], tf.constant([1.5, 2.5]), [2, 3, 2])
    features = materialize.example_features(
        {"two": two, "three": three},
        {"two": (["two$i"], "two$v"), "three": (["three$i0", "three$i1"], "three$v")},
    )
    assert features["two$i"].to_list() == [[3, 1, 3], [], [0]]
    assert features["two$v"].to_list() == [[30, 10, 30], [], [5]]
    assert features["three$i0"].to_list() == [[], [2, 0]] and features["three$i1"].to_list() == [[], [0, 1]]
    assert features["three$v"].to_list() == [[], [1.5, 2.5]]
    with pytest.raises(UsageError, match="output two: a SparseTensor of rank 2 for a SparseFeature of 2 indices"):
        materialize.example_features({"two": two}, {"two": (["a", "b"], "v")})
