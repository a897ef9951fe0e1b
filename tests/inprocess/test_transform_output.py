"""`tf2_mapreduce.transform.TFTransformOutput`, tf.Transform's reader without tf.Transform, on
a transform's output made on the in-process cluster: the specs, the vocabularies by name, the
buckets' counts, the transform applied to raw features (all, or a serving request's without
the label), and a TFX trainer's serving model built on its Keras layer, exported and loaded:
each against the examples of data/ parsed by protobuf, bit for bit."""

import glob
import os
import random

import numpy as np
import pytest
import tensorflow as tf
from helpers.oracles import read_tfrecords

import tf2_mapreduce as mr
import tf2_mapreduce.transform as tft
from tf2_mapreduce.errors import UsageError

SPEC = {
    "age": tf.io.FixedLenFeature([], tf.float32),
    "city": tf.io.FixedLenFeature([], tf.string),
    "tags": tf.io.VarLenFeature(tf.string),
    "label": tf.io.FixedLenFeature([], tf.int64),
}
CITIES = [b"paris", b"lyon", b"nice", b"lille", b"brest"]


def preprocessing_fn(inputs):
    """A TFX module's: a label passed through, the others transformed."""
    return {
        "age_z": tft.scale_to_z_score(inputs["age"]) / 3.0,
        "city_id": tft.compute_and_apply_vocabulary(inputs["city"], num_oov_buckets=2, vocab_filename="city"),
        "tags_id": tft.compute_and_apply_vocabulary(inputs["tags"], vocab_filename="tags"),
        "age_bucket": tft.bucketize(inputs["age"], 4),
        "label": inputs["label"],
    }


def example(rng):
    feature = {
        "age": tf.train.Feature(float_list=tf.train.FloatList(value=[rng.uniform(18, 90)])),
        "city": tf.train.Feature(bytes_list=tf.train.BytesList(value=[rng.choice(CITIES[:4])])),
        "tags": tf.train.Feature(
            bytes_list=tf.train.BytesList(value=rng.sample([b"a", b"b", b"c"], rng.randint(0, 2)))
        ),
        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[rng.randint(0, 1)])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def made(inprocess, tmp_path_factory):
    """(raw records, the output directory, data/'s examples by feature, as protobuf reads them)."""
    work = tmp_path_factory.mktemp("output")
    rng = random.Random(3)
    records = [example(rng) for _ in range(700)] + [example(random.Random(4)).replace(b"lyon", b"brest")]
    path = str(work / "raw.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    out = str(work / "out")
    inprocess.run(mr.Transform(preprocessing_fn, SPEC, num_shards=2), [path], output_dir=out)
    data = {}
    for shard in sorted(glob.glob(os.path.join(out, "data", "*"))):
        for record in read_tfrecords(shard):
            for name, feature in tf.train.Example.FromString(record).features.feature.items():
                kind = feature.WhichOneof("kind")
                data.setdefault(name, []).append(np.array(getattr(feature, kind).value))
    return records, out, data


def values(tensor):
    """Per example, as data/ holds them (float32 by their bits)."""
    if isinstance(tensor, tf.SparseTensor):
        tensor = tf.RaggedTensor.from_sparse(tensor)
    if isinstance(tensor, tf.RaggedTensor):
        return [np.array(row) for row in tensor.to_list()]
    return [np.array([v]) for v in tensor.numpy().tolist()]


def same(got, want, name):
    assert len(got) == len(want), name
    for i, (a, b) in enumerate(zip(got, want)):
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            a, b = np.float32(a).view(np.uint32), np.float32(b).view(np.uint32)
        assert a.tolist() == b.tolist(), (name, i)


def test_specs_vocabularies_and_buckets_are_read_as_tft_reads_them(made):
    _, out, _ = made
    output = tft.TFTransformOutput(out)
    assert output.raw_feature_spec() == SPEC
    assert output.transformed_feature_spec() == {
        "age_z": tf.io.FixedLenFeature([], tf.float32),
        "city_id": tf.io.FixedLenFeature([], tf.int64),
        "tags_id": tf.io.VarLenFeature(tf.int64),
        "age_bucket": tf.io.FixedLenFeature([], tf.int64),
        "label": tf.io.FixedLenFeature([], tf.int64),
    }
    assert sorted(output.vocabulary_by_name("city")) == sorted(CITIES[:4])
    assert output.vocabulary_size_by_name("tags") == 3
    with open(output.vocabulary_file_by_name("city"), "rb") as f:
        assert f.read().split(b"\n")[:-1] == output.vocabulary_by_name("city")
    assert output.num_buckets_for_transformed_feature("city_id") == 4 + 2
    assert output.num_buckets_for_transformed_feature("age_bucket") == 4
    with pytest.raises(ValueError, match="did not have an int domain"):
        output.num_buckets_for_transformed_feature("age_z")
    with pytest.raises(ValueError, match="Vocabulary nope not found"):
        output.vocabulary_by_name("nope")


def test_raw_features_are_transformed_as_data_holds_them_all_or_without_the_label(made):
    records, out, data = made
    output = tft.TFTransformOutput(out)
    raw = tf.io.parse_example(records, SPEC)
    every = output.transform_raw_features(raw)
    assert sorted(every) == sorted(data)
    for name in data:
        same(values(every[name]), data[name], name)
    request = {name: raw[name] for name in ("age", "city", "tags")}  # a serving request: no label
    served = output.transform_raw_features(request)
    assert sorted(served) == ["age_bucket", "age_z", "city_id", "tags_id"]
    for name in served:
        same(values(served[name]), data[name], name)
    only_city = output.transform_raw_features({"city": raw["city"]})
    assert sorted(only_city) == ["city_id"]
    with pytest.raises(UsageError, match=r"reads raw features \['label'\], which are not given"):
        output.transform_raw_features(request, drop_unused_features=False)


def test_a_tfx_trainers_serving_model_on_its_layer_serves_what_data_holds(made, tmp_path):
    import keras

    records, out, data = made
    output = tft.TFTransformOutput(out)

    class Model(keras.Model):
        """As TFX's taxi trainer: the layer kept on the model, a serving signature parsing
        serialized examples without the label, then the transform."""

        def __init__(self):
            super().__init__()
            self.tft_layer = output.transform_features_layer()

        def call(self, features):
            return features

    model = Model()
    raw_spec = output.raw_feature_spec()
    raw_spec.pop("label")

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(serialized):
        transformed = model.tft_layer(tf.io.parse_example(serialized, raw_spec))
        return {name: t.values if isinstance(t, tf.SparseTensor) else t for name, t in transformed.items()}

    tf.saved_model.save(model, str(tmp_path / "serving"), signatures={"serving_default": serve})
    loaded = tf.saved_model.load(str(tmp_path / "serving")).signatures["serving_default"]
    whole = loaded(tf.constant(records))
    for name in ("age_z", "city_id", "age_bucket"):
        same(values(whole[name]), data[name], name)
        alone = [values(loaded(tf.constant(records[i : i + 1]))[name])[0] for i in range(0, len(records), 50)]
        same(alone, data[name][::50], name)
    flat = [v for row in data["tags_id"] for v in row.tolist()]
    assert whole["tags_id"].numpy().tolist() == flat
