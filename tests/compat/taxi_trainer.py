"""TFX's taxi trainer on TensorFlow and tf2_mapreduce alone, then served by TensorFlow alone.

python taxi_trainer.py train WHEEL TRANSFORM_OUTPUT SAVED
    The module's model (`_build_keras_model`) trained a few steps on TRANSFORM_OUTPUT's
    data/, read with tf2_mapreduce.transform's TFTransformOutput, and saved to SAVED with
    both signatures its run_fn builds (`_get_tf_examples_serving_signature`,
    `_get_transform_features_signature`). What run_fn reads through TFX's DataAccessor
    (tfx_bsl, left out with TFX) is read with tf.data; Keras 3 saves by tf.saved_model.
python taxi_trainer.py serve SAVED RAW_PATTERN REPORT
    SAVED loaded by TensorFlow alone (tf2_mapreduce is not imported), both signatures
    applied to RAW_PATTERN's examples in input order, in one batch: REPORT (JSON) holds
    what transform_features gives, per example (floats by their bits), the outputs'
    shape, and whether anything of tf2_mapreduce was imported.
"""

import json
import os
import sys

import tensorflow as tf

# The repository's scripts (example_pipelines, compare_tft): none imports tf2_mapreduce.
sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts")
)

import compare_tft  # noqa: E402
import example_pipelines  # noqa: E402


def train(wheel, transform_output, saved):
    import tf2_mapreduce.transform as tft  # here, not above: `serve` must run without it

    module = example_pipelines.load_module("taxi", wheel, tft)
    output = tft.TFTransformOutput(transform_output)
    spec = output.transformed_feature_spec()
    label = module._transformed_name(module._LABEL_KEY)

    def parsed(records):
        features = tf.io.parse_example(records, spec)
        return features, features.pop(label)

    files = sorted(tf.io.gfile.glob(os.path.join(transform_output, "data", "*")))
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP").batch(40).map(parsed).repeat()
    model = module._build_keras_model(hidden_units=[8, 4])
    model.fit(dataset, steps_per_epoch=20, epochs=1, verbose=0)
    signatures = {
        "serving_default": module._get_tf_examples_serving_signature(model, output),
        "transform_features": module._get_transform_features_signature(model, output),
    }
    tf.saved_model.save(model, saved, signatures=signatures)


class NoTf2mapreduce:
    """An import hook refusing tf2_mapreduce: what serves the model must not need it."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "tf2_mapreduce":
            raise ImportError("the served model imports %s" % name)
        return None


def serve(saved, pattern, report):
    sys.meta_path.insert(0, NoTf2mapreduce())
    loaded = tf.saved_model.load(saved)
    files = sorted(tf.io.gfile.glob(pattern))
    records = tf.constant([r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")])
    transformed = loaded.signatures["transform_features"](examples=records)
    outputs = loaded.signatures["serving_default"](examples=records)["outputs"]
    with open(report, "w") as f:
        json.dump(
            {
                "transformed": {
                    name: [compare_tft.as_listed(v) for v in compare_tft.per_example(tensor)]
                    for name, tensor in transformed.items()
                },
                "outputs_shape": outputs.shape.as_list(),
            },
            f,
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["train"] and len(sys.argv) == 5:
        train(*sys.argv[2:])
    elif sys.argv[1:2] == ["serve"] and len(sys.argv) == 5:
        serve(*sys.argv[2:])
    else:
        sys.exit(__doc__)
