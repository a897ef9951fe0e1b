"""`transform.applied.SavedTransform`, without a cluster: a transform_fn with tables used only
within tf.cond's branches (one of string keys, one of int64 keys and float values, read by its
size alone) is applied as the loaded SavedModel computes it; its digest, which ties a
checkpoint, is the same for two loads and for processes of other hash seeds, and another
for another constant."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tf2_mapreduce.transform.applied import SavedTransform

SIGNATURE = [{"x": tf.TensorSpec([None], tf.float32), "s": tf.TensorSpec([None], tf.string)}]


def save(path, divisor):
    module = tf.Module()
    with tf.init_scope():
        module.names = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer([b"a", b"b"], tf.constant([1, 2], tf.int64)), -1
        )
        module.floats = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(tf.constant([7, 8, 9], tf.int64), [0.5, 1.5, 2.5]), 0.0
        )

    def transform_fn(inputs):
        x, s = inputs["x"], inputs["s"]
        return {
            "y": tf.cond(tf.size(x) > 0, lambda: x / divisor + tf.cast(module.floats.size(), tf.float32), lambda: x),
            "k": tf.cond(tf.size(s) > 0, lambda: module.names.lookup(s), lambda: tf.zeros_like(s, tf.int64)),
        }

    module.transform_fn = tf.function(transform_fn, input_signature=SIGNATURE)
    tf.saved_model.save(module, path)
    return path


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("saved")
    return save(str(root / "three"), 3.0), save(str(root / "four"), 4.0)


def test_tables_used_only_in_branches_are_applied_as_loaded(saved):
    transform = SavedTransform(saved[0])
    features = {"x": tf.constant([1.0, 2.0, 3.5]), "s": tf.constant([b"b", b"zz", b"a"])}
    applied = tf.function(lambda f: transform.apply(f))(features)
    loaded = tf.saved_model.load(saved[0]).transform_fn(features)
    assert sorted(applied) == ["k", "y"]
    for name in applied:
        assert np.array_equal(applied[name].numpy(), loaded[name].numpy()), name
    assert applied["k"].numpy().tolist() == [2, -1, 1]


def digest_in_a_process(path, seed):
    code = "from tf2_mapreduce.transform.applied import SavedTransform as S; print(S(%r).digest)" % path
    run = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ, PYTHONHASHSEED=str(seed), TF_CPP_MIN_LOG_LEVEL="3"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.split()[-1]


def test_the_digest_is_the_computation_not_the_load(saved):
    here = SavedTransform(saved[0]).digest
    assert SavedTransform(saved[0]).digest == here  # a second load numbers its functions anew
    current = os.environ.get("PYTHONHASHSEED", "")
    seed = int(current) + 1 if current.isdigit() else 1  # another than this process's
    assert digest_in_a_process(saved[0], seed) == here
    assert SavedTransform(saved[1]).digest != here
