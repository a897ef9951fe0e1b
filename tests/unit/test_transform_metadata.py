"""tft.DatasetMetadata.from_feature_spec(spec).schema, as the modules of tf.Transform's examples
make their raw schema when imported: read back, it is the spec; what it cannot hold is refused."""

import pytest
import tensorflow as tf

import tf2_mapreduce.transform as tft
from tf2_mapreduce.transform import schema as schemas

SPEC = {
    "age": tf.io.FixedLenFeature([], tf.float32),
    "pixels": tf.io.FixedLenFeature([3], tf.float32),
    "education": tf.io.FixedLenFeature([], tf.string),
    "tags": tf.io.VarLenFeature(tf.string),
    "hours": tf.io.RaggedFeature(tf.float32, row_splits_dtype=tf.int64),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def test_the_schema_of_a_feature_spec_reads_back_as_the_spec():
    metadata = tft.DatasetMetadata.from_feature_spec(SPEC)
    assert sorted(f.name for f in metadata.schema.feature) == sorted(SPEC)
    # As tft reads it back: a RaggedFeature names the feature of its values.
    hours = tf.io.RaggedFeature(tf.float32, value_key="hours", row_splits_dtype=tf.int64)
    assert schemas.feature_spec(metadata.schema) == dict(SPEC, hours=hours)
    assert metadata == tft.DatasetMetadata.from_feature_spec(dict(reversed(SPEC.items())))


def test_what_a_schema_here_cannot_hold_is_refused_by_name():
    sparse = dict(SPEC, onehot=tf.io.SparseFeature("i", "v", tf.int64, 10))
    with pytest.raises(tft.NotSupported, match="raw feature onehot: a SparseFeature"):
        tft.DatasetMetadata.from_feature_spec(sparse)
    with pytest.raises(tft.NotSupported, match="domains"):
        tft.DatasetMetadata.from_feature_spec(SPEC, domains={"label": object()})
