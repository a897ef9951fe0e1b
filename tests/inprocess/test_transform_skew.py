"""No skew: a generated family of preprocessing_fns (divisions and reciprocals by constants,
pow, log(1 + x), exp(x) - 1, x / sqrt(y), chains of constants, float64 and integer
arithmetic, an analyzer's result, dense and sparse) on the in-process cluster; data/ equals,
bit for bit and every example, transform_fn loaded alone, a Keras serving model built on it
(exported, loaded, fed serialized tf.Examples, all at once and one a request) and the
function run eagerly."""

import glob
import os
import random

import numpy as np
import pytest
import tensorflow as tf
from helpers.oracles import read_tfrecords

import tf2_mapreduce as mr
import tf2_mapreduce.transform as tft

SPEC = {
    "x": tf.io.FixedLenFeature([], tf.float32),
    "n": tf.io.FixedLenFeature([], tf.int64),
    "w": tf.io.VarLenFeature(tf.float32),
}
EXAMPLES = 6000
FUNCTIONS = 2
CONSTANTS = [3.0, 7.0, 0.1, 400.0, 1.0 / 3.0, 2.5, 1e-3, 9.0]


def example(rng):
    feature = {
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[rng.gauss(0, 50)])),
        "n": tf.train.Feature(int64_list=tf.train.Int64List(value=[rng.randint(-1000, 1000)])),
        "w": tf.train.Feature(
            float_list=tf.train.FloatList(value=[rng.uniform(-9, 9) for _ in range(rng.randint(0, 3))])
        ),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _unary(rng):
    c = rng.choice(CONSTANTS)
    return rng.choice(
        [
            ("/%g" % c, lambda v: v / c),
            ("%g/" % c, lambda v: c / (tf.abs(v) + 1.0)),
            ("*1/%g" % c, lambda v: v * (1.0 / c)),
            ("pow2", lambda v: tf.pow(v, 2.0)),
            ("pow.5", lambda v: tf.pow(tf.abs(v), 0.5)),
            ("pow-1", lambda v: tf.pow(tf.abs(v) + 1.0, -1.0)),
            ("log1+", lambda v: tf.math.log(1.0 + tf.abs(v))),
            ("exp-1", lambda v: tf.exp(tf.clip_by_value(v, -20.0, 20.0)) - 1.0),
            ("/sqrt", lambda v: v / tf.sqrt(tf.abs(v) + c)),
            ("chain", lambda v: (v - c) / 2.5 * 3.0 / 7.0),
            ("f64/", lambda v: tf.cast(tf.cast(v, tf.float64) / c, v.dtype)),
        ]
    )


KINDS = ("x", "n", "w", "xn", "cond")
CHAINS = 2  # of each kind, in one function: as many functions' worth in one transform


def family_member(seed):
    """A preprocessing_fn of chained random steps, `CHAINS` of each of `KINDS` of input
    (their descriptions by output, the fn, and its body given the mean)."""
    rng = random.Random(seed)
    chains = {
        "%s%d" % (kind, i): [_unary(rng) for _ in range(rng.randint(1, 3))] for kind in KINDS for i in range(CHAINS)
    }
    described = {name: " ".join(step for step, _ in chain) for name, chain in chains.items()}

    def apply(name, v):
        for _, step in chains[name]:
            v = step(v)
        return v

    def body(inputs, mean):
        x, n = inputs["x"], tf.cast(inputs["n"], tf.float32)
        outputs = {}
        for i in range(CHAINS):
            outputs["x%d" % i] = apply("x%d" % i, x)
            outputs["n%d" % i] = tf.cast(apply("n%d" % i, inputs["n"] / 3), tf.float32)  # an int64 division: float64
            outputs["w%d" % i] = tf.sparse.map_values(lambda v, i=i: apply("w%d" % i, v), inputs["w"])
            outputs["xn%d" % i] = apply("xn%d" % i, x * n / 400.0 - mean / 3.0)
            # Within a branch of tf.cond: a function of its own, called.
            outputs["cond%d" % i] = tf.cond(tf.size(x) > 0, lambda i=i: apply("cond%d" % i, x + 1.0), lambda: x)
        return outputs

    return described, (lambda inputs: body(inputs, tft.mean(inputs["x"]))), body


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    directory = tmp_path_factory.mktemp("raw")
    rng = random.Random(11)
    path = str(directory / "raw.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for _ in range(EXAMPLES):
            writer.write(example(rng))
    return path


def as_float32(tensor):
    return tf.cast(tensor, tf.float32) if tensor.dtype == tf.float64 else tensor


def bits(tensor):
    values = tensor.values if isinstance(tensor, tf.SparseTensor) else tensor
    return as_float32(values).numpy().view(np.uint32)


def written(out, names):
    """data/'s values of each of `names`, in input order, parsed by protobuf."""
    got = {name: [] for name in names}
    for path in sorted(glob.glob(os.path.join(out, "data", "*"))):
        for record in read_tfrecords(path):
            features = tf.train.Example.FromString(record).features.feature
            for name in names:
                got[name].extend(features[name].float_list.value)
    return {name: np.float32(values).view(np.uint32) for name, values in got.items()}


def keras_served(transform_dir, export_dir):
    """A trainer's serving model as TFX builds one, exported and loaded again: serialized
    raw tf.Examples parsed, then the loaded transform applied in a Keras layer (as tft's
    transform_features_layer is), within the serving signature's own traced function."""
    import keras

    class TransformLayer(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.tft_layer = tf.saved_model.load(transform_dir)

        def call(self, serialized):
            transformed = self.tft_layer.transform_fn(tf.io.parse_example(serialized, SPEC))
            return {k: as_float32(t.values if isinstance(t, tf.SparseTensor) else t) for k, t in transformed.items()}

    layer = TransformLayer()
    module = tf.Module()
    module.layer = layer
    module.serve = tf.function(layer.call, input_signature=[tf.TensorSpec([None], tf.string)])
    tf.saved_model.save(module, export_dir, signatures={"serving_default": module.serve})
    return tf.saved_model.load(export_dir).signatures["serving_default"]


@pytest.mark.parametrize("seed", range(FUNCTIONS))
def test_data_equals_transform_fn_loaded_alone_and_served_bit_for_bit(inprocess, raw, tmp_path, seed):
    described, fn, body = family_member(seed)
    out = str(tmp_path / "out")
    inprocess.run(mr.Transform(fn, SPEC, num_shards=2), [raw], output_dir=out)
    names = sorted(described)
    data = written(out, names)
    records = read_tfrecords(raw)
    loaded = tf.saved_model.load(os.path.join(out, "transform_fn"))
    alone = loaded.transform_fn(tf.io.parse_example(records, SPEC))
    serve = keras_served(os.path.join(out, "transform_fn"), str(tmp_path / "served"))
    served = serve(tf.constant(records))
    # Eagerly, where no optimizer rewrites, x's mean exact and rounded once to float32, the
    # examples 16 times over: every value of the first copy is computed in vector lanes.
    xs = [tf.train.Example.FromString(r).features.feature["x"].float_list.value[0] for r in records]
    mean = tf.constant(float(np.mean(np.float64(xs))), tf.float32)
    eager = {
        name: bits(t)[: len(data[name])] for name, t in body(tf.io.parse_example(records * 16, SPEC), mean).items()
    }
    differing = {}
    for name in names:
        assert len(data[name]) >= (EXAMPLES if not name.startswith("w") else 1)
        sides = (("transform_fn", bits(alone[name])), ("served", bits(served[name])), ("eager", eager[name]))
        for side, got in sides:
            if got.shape != data[name].shape or (got != data[name]).any():
                differing[(name, side)] = (
                    described[name],
                    int(np.sum(got != data[name])) if got.shape == data[name].shape else "shape",
                )
    assert not differing, differing
    # Served one example a request, as a model server is asked: the same bits as in data/.
    offsets = np.cumsum(
        [0] + [len(tf.train.Example.FromString(r).features.feature["w"].float_list.value) for r in records]
    )
    for i in range(0, EXAMPLES, EXAMPLES // 40):
        one = serve(tf.constant(records[i : i + 1]))
        for name in names:
            want = data[name][offsets[i] : offsets[i + 1]] if name.startswith("w") else data[name][i : i + 1]
            assert (bits(one[name]).tolist(), name, i) == (want.tolist(), name, i), described[name]
