"""The Keras side of the transform part: the same analyzers as Keras preprocessing layers'
`adapt` (the Beam-free choice), over the examples parsed once and cached; it writes nothing.
`python -m benchmarks.keras_adapt LISTING` prints {"examples": N} as JSON."""

import json
import sys

__all__ = ["adapt"]

BATCH = 1024  # examples parsed at a time


def adapt(paths: list[str]) -> dict:
    """benchmarks.tf_transform's preprocessing_fn's analyzers, as Keras layers adapted to
    the GZIP'd TFRecord files `paths`: a vocabulary of query (top 10,000, one OOV index)
    and of tags, 10 buckets of user_id (Discretization: approximate), the mean and variance
    of clicks, the min and max of score. Returns the examples read."""
    import keras
    import tensorflow as tf

    spec = {
        "query": tf.io.VarLenFeature(tf.string),
        "tags": tf.io.VarLenFeature(tf.string),
        "user_id": tf.io.VarLenFeature(tf.int64),
        "clicks": tf.io.VarLenFeature(tf.int64),
        "score": tf.io.FixedLenFeature([1], tf.float32),
    }
    parsed = (
        tf.data.TFRecordDataset(paths, compression_type="GZIP", num_parallel_reads=tf.data.AUTOTUNE)
        .batch(BATCH)
        .map(lambda records: tf.io.parse_example(records, spec), num_parallel_calls=tf.data.AUTOTUNE)
        .cache()  # parsed once for every adapt (peers.md: four uncached passes took 3x)
    )

    def column(name, dtype=None):
        """The values of `name`, a batch at a time, as [n, 1] (Normalization re-batches rank-1
        values by 128 and fails on a short last batch)."""

        def values(features):
            found = features[name].values
            return tf.reshape(found if dtype is None else tf.cast(found, dtype), [-1, 1])

        return parsed.map(values)

    keras.layers.StringLookup(max_tokens=10_001, num_oov_indices=1).adapt(column("query"))
    keras.layers.StringLookup().adapt(column("tags"))
    keras.layers.Discretization(num_bins=10).adapt(column("user_id", tf.float32))
    keras.layers.Normalization(axis=None).adapt(column("clicks", tf.float32))
    extremes = parsed.reduce(
        (tf.constant(0, tf.int64), tf.constant(float("inf")), tf.constant(float("-inf"))),
        lambda state, features: (
            state[0] + tf.shape(features["score"], out_type=tf.int64)[0],
            tf.minimum(state[1], tf.reduce_min(features["score"])),
            tf.maximum(state[2], tf.reduce_max(features["score"])),
        ),
    )
    return {"examples": int(extremes[0])}


def main(argv: list[str]) -> None:
    with open(argv[1]) as f:
        print(json.dumps(adapt([line for line in f.read().splitlines() if line])))


if __name__ == "__main__":
    main(sys.argv)
