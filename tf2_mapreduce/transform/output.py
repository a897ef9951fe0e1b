"""tf.Transform's `TFTransformOutput` without tensorflow-transform: what a trainer reads of a
transform's output directory (ours or tf.Transform's), with only TensorFlow installed.

A TFX module file (its preprocessing_fn and its trainer) then runs with one import line
changed: the feature specs, the vocabularies by name, the transform applied to raw
features, and the Keras layer a serving model applies it with."""

import functools
import json
import os

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.paths import join
from tf2_mapreduce.transform import saved
from tf2_mapreduce.transform import schema as schemas
from tf2_mapreduce.transform.applied import SavedTransform

__all__ = ["TFTransformOutput", "layer_class"]


class TFTransformOutput:
    """The output directory of a transform, read as `tft.TFTransformOutput` reads it. Each
    method says what tf.Transform's does; the SavedModel is loaded on first use."""

    TRANSFORM_FN_DIR = saved.TRANSFORM_FN
    TRANSFORMED_METADATA_DIR = saved.METADATA
    RAW_METADATA_DIR = os.path.dirname(schemas.RAW_SCHEMA)

    def __init__(self, transform_output_dir: str):
        self._dir = transform_output_dir
        self._saved = None
        self._subsets = {}

    @property
    def transform_savedmodel_dir(self) -> str:
        return join(self._dir, self.TRANSFORM_FN_DIR)

    def _schema(self, path):
        path = join(self._dir, path)
        if not tf.io.gfile.exists(path):  # as tft says it (tft_beam's own output has no metadata/)
            raise OSError("Schema file %s does not exist" % path)
        return schemas.read(path)

    def transformed_feature_spec(self) -> dict:
        """{name: tf.io feature} of the transformed examples, from transformed_metadata/."""
        return schemas.feature_spec(self._schema(self.TRANSFORMED_METADATA_DIR + "/schema.pbtxt"))

    def raw_feature_spec(self) -> dict:
        """{name: tf.io feature} of the raw examples, from metadata/ (TFX's serving
        signature parses serialized examples with it)."""
        return schemas.feature_spec(self._schema(schemas.RAW_SCHEMA))

    def transformed_domains(self) -> dict:
        """{name: its schema domain} of the transformed features that have one."""
        schema = self._schema(self.TRANSFORMED_METADATA_DIR + "/schema.pbtxt")
        return {f.name: getattr(f, f.WhichOneof("domain_info")) for f in schema.feature if f.WhichOneof("domain_info")}

    def num_buckets_for_transformed_feature(self, name: str) -> int:
        """The ids' count of an integer feature of a vocabulary or buckets: its domain's max + 1."""
        domain = self.transformed_domains().get(name)
        if getattr(domain, "DESCRIPTOR", None) is None or domain.DESCRIPTOR.name != "IntDomain":
            raise ValueError("Column %s did not have an int domain" % name)
        if domain.min != 0:
            raise ValueError("Column %s has an int domain that does not start at 0: %s" % (name, domain.min))
        return domain.max + 1

    def vocabulary_file_by_name(self, vocab_filename: str) -> str:
        """The path of the vocabulary file known as `vocab_filename` (asset_map)."""
        path = join(self._dir, self.TRANSFORMED_METADATA_DIR + "/asset_map")
        names = json.loads(tf.io.gfile.GFile(path).read()) if tf.io.gfile.exists(path) else {}
        if vocab_filename not in names:
            raise ValueError("Vocabulary %s not found in %s (known: %s)" % (vocab_filename, path, sorted(names)))
        return join(self.transform_savedmodel_dir, "assets/" + names[vocab_filename])

    def vocabulary_by_name(self, vocab_filename: str) -> list:
        """The terms of the vocabulary known as `vocab_filename`, as bytes, most frequent first."""
        with tf.io.gfile.GFile(self.vocabulary_file_by_name(vocab_filename), "rb") as f:
            return [line.rstrip(b"\n") for line in f]

    def vocabulary_size_by_name(self, vocab_filename: str) -> int:
        return len(self.vocabulary_by_name(vocab_filename))

    def _transform(self) -> SavedTransform:
        if self._saved is None:
            self._saved = SavedTransform(self.transform_savedmodel_dir, portable=False)
        return self._saved

    def transform_raw_features(self, raw_features: dict, drop_unused_features: bool = True) -> dict:
        """The transformed features of `raw_features` ({name: Tensor or SparseTensor}, a
        batch). With `drop_unused_features`, those computed from the raw features given
        alone (a serving request without the label, say); else all, which needs them all."""
        transform = self._transform()
        given = frozenset(raw_features)
        outputs = [n for n, reads in sorted(transform.reads.items()) if reads <= given or not drop_unused_features]
        if given >= set(transform.input_signature) and len(outputs) == len(transform.reads):
            return dict(transform.loaded.transform_fn({n: raw_features[n] for n in transform.input_signature}))
        if tf.executing_eagerly():
            key = (given, tuple(outputs))
            if key not in self._subsets:
                self._subsets[key] = tf.function(lambda features: transform.apply(features, outputs))
            return dict(self._subsets[key](dict(raw_features)))
        return dict(transform.apply(dict(raw_features), outputs))

    def transform_features_layer(self):
        """A Keras layer applying the transform, which a Keras model saves with itself."""
        return layer_class()(self)


@functools.cache
def layer_class():
    """`TransformFeaturesLayer`, made on first use: Keras is imported only by a trainer
    that asks for the layer."""
    import keras

    class TransformFeaturesLayer(keras.layers.Layer):
        """`transform_raw_features` as a Keras layer: the loaded SavedModel is tracked, so a
        model holding the layer saves the transform (its tables, its vocabularies) with it."""

        def __init__(self, tft_output):
            super().__init__(trainable=False)
            self._tft_output = tft_output
            self._loaded = tft_output._transform().loaded

        def call(self, features):
            return self._tft_output.transform_raw_features(features)

    return TransformFeaturesLayer
