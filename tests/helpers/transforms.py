"""preprocessing_fns that the tests' coordinators import (--preprocessing_fn=helpers.transforms:NAME),
over the examples of scripts/make_examples.py, their schema inferred: score (one value in
every example) FixedLen [1]; query, tags, user_id and clicks (missing or lists) VarLen."""

import os

import tensorflow as tf

import tf2_mapreduce.transform as tft


def examples_fn(inputs):
    """Every analyzer kind over make_examples.py's features."""
    return {
        "query_id": tft.compute_and_apply_vocabulary(inputs["query"], top_k=500),
        "tags_id": tft.compute_and_apply_vocabulary(inputs["tags"], num_oov_buckets=3),
        "clicks_z": tft.scale_to_z_score(inputs["clicks"]),
        "user_bucket": tft.bucketize(inputs["user_id"], 8),
        "score_01": tft.scale_to_0_1(inputs["score"]),
        "users": tf.zeros_like(inputs["score"], tf.int64) + tft.size(inputs["user_id"]),
    }


# Iterated by set_order_fn: a set of strings is iterated in an order of the process's hash
# seed, so two processes (a coordinator and its rerun) may call its analyzers in two orders.
INSERTED = ("clicks", "clicks_x2")
NAMES = set(INSERTED)
# A module constant a helper reads: a rerun after it changed computes something else.
SCALE = float(os.environ.get("TF2MR_TEST_SCALE", "1"))


def _scaled(x):
    return tf.sparse.map_values(tf.multiply, tf.cast(x, tf.float32), SCALE)


def set_order_fn(inputs):
    """Two means of the same dtype and no parameters, called in the set's order: only what
    each averages tells them apart; then, a phase after, the mean of each one centered."""
    out = {}
    for name in NAMES:
        value = _scaled(inputs["clicks"])
        if name == "clicks_x2":
            value = tf.sparse.map_values(lambda v: v * v * 2.0, value)
        centered = tf.sparse.map_values(tf.subtract, value, tft.mean(value))
        out[name] = tf.sparse.map_values(tf.subtract, centered, tft.mean(centered))
    return out


TRANSFORMED = {
    "query_id": tf.io.VarLenFeature(tf.int64),
    "tags_id": tf.io.VarLenFeature(tf.int64),
    "clicks_z": tf.io.VarLenFeature(tf.float32),
    "user_bucket": tf.io.VarLenFeature(tf.int64),
    "score_01": tf.io.FixedLenFeature([1], tf.float32),
    "users": tf.io.FixedLenFeature([1], tf.int64),
}


def bucket_fn(inputs):
    """Over helpers/bucket.py's records: query in every example (FixedLen [1]), user_id in most (VarLen)."""
    return {
        "query_id": tft.compute_and_apply_vocabulary(inputs["query"]),
        "user_z": tft.scale_to_z_score(inputs["user_id"]),
    }


# A transform's output directory, as tft_beam and TFX lay it out, and the manifest.
LAYOUT = ["_tf2_mapreduce.json", "data", "metadata", "transform_fn", "transformed_metadata"]


# make_examples.py's raw features, as a schema inferred from them reads them.
RAW = {
    "query": tf.io.VarLenFeature(tf.string),
    "tags": tf.io.VarLenFeature(tf.string),
    "user_id": tf.io.VarLenFeature(tf.int64),
    "clicks": tf.io.VarLenFeature(tf.int64),
    "score": tf.io.FixedLenFeature([1], tf.float32),
}


def first_difference(served, written, names):
    """The first of `names` whose values (and, for a SparseTensor, places) differ between
    `served` (what transform_fn made of the raw examples) and `written` (the examples
    parsed from data/), bit for bit, floats too; None if none does."""
    for name in names:
        a, b = served[name], written[name]
        if isinstance(a, tf.SparseTensor):
            if a.indices.numpy().tolist() != b.indices.numpy().tolist():
                return name
            a, b = a.values, b.values
        if a.numpy().tobytes() != b.numpy().tobytes():
            return name
    return None
