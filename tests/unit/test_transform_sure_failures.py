"""`transform.early._failure`, without a cluster: a function's failure over the schema of some
first examples is sure only where it fails over every schema the rest may give (each FixedLen
feature it reads may be VarLen; a VarLen one stays VarLen; a feature they lack may be there);
a function that asks for a feature they lack, or looks at all of them, is never sure."""

import pytest
import tensorflow as tf

import tf2_mapreduce.transform as tft
from tf2_mapreduce.transform import early

SAMPLE = {
    "score": tf.io.FixedLenFeature([1], tf.float32),
    "n": tf.io.FixedLenFeature([1], tf.int64),
    "tags": tf.io.VarLenFeature(tf.string),
}


def filled_in(x):
    """TFX taxi's _fill_in_missing: works on a SparseTensor alone."""
    dense = tf.sparse.to_dense(tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1]), default_value=0)
    return tf.squeeze(dense, axis=1)


def string_plus_float(inputs):
    return {"a": tft.scale_to_z_score(inputs["score"]) + "x"}


def tags_indexed(inputs):
    return {"a": inputs["tags"][:, 0]}


def one_filled_in(inputs):
    return {"a": filled_in(inputs["score"])}


def one_dense_one_filled_in(inputs):  # fails unless score is FixedLen and n VarLen
    return {"a": inputs["score"][:, 0] + tf.cast(filled_in(inputs["n"]), tf.float32)}


def optional(inputs):
    label = inputs.get("label")
    if label is None:
        raise ValueError("no label")
    return {"a": label}


def every_feature(inputs):
    return {name + "_x": inputs[name] + 1 for name in inputs}


@pytest.mark.parametrize(
    "fn, sure",
    [
        (string_plus_float, True),  # a string added to floats, dense or sparse
        (tags_indexed, True),  # tags read, VarLen here and everywhere
        (one_filled_in, False),  # score VarLen further on: it runs
        (one_dense_one_filled_in, False),  # only one combination of four runs
        (optional, False),  # a label further on
        (every_feature, False),  # it looks at them all
    ],
)
def test_a_failure_is_sure_only_over_every_schema_the_rest_may_give(fn, sure):
    error, is_sure = early._failure(fn, SAMPLE)
    assert error is not None and "failed when traced" in str(error)
    assert is_sure == sure


def test_a_function_that_traces_over_the_sample_has_no_failure():
    assert early._failure(lambda inputs: {"a": inputs["score"] * 2.0}, SAMPLE) == (None, False)


def test_a_keras_model_of_the_raw_features_dict_traces_and_is_never_sure_to_fail():
    inputs = {"score": tf.keras.Input(shape=(1,), name="score")}
    model = tf.keras.Model(inputs, {"doubled": tf.keras.layers.Rescaling(2.0)(inputs["score"])})

    def keras_fn(features):  # the raw features' own dict, as Keras takes a dict
        return {"a": model({"score": features["score"]})["doubled"], "b": model(dict(features))["doubled"]}

    spec = {"score": SAMPLE["score"]}
    assert early._failure(keras_fn, spec) == (None, False)


def test_a_table_of_a_fixed_size_over_a_vocabulary_is_left_to_the_real_save(tmp_path):
    from tf2_mapreduce.transform import analysis
    from tf2_mapreduce.transform import schema as schemas

    def sized_fn(inputs):  # a one-term dummy vocabulary cannot fill a table of three
        path = tft.vocabulary(inputs["tags"], top_k=3)
        lines = tf.lookup.TextFileInitializer(path, tf.string, -2, tf.int64, -1, vocab_size=3)
        return {"tags_id": tf.sparse.map_values(tf.lookup.StaticHashTable(lines, -1).lookup, inputs["tags"])}

    traced = analysis.trace_calls(sized_fn, SAMPLE)
    early.check_saves(sized_fn, schemas.raw(SAMPLE), SAMPLE, traced.calls)
