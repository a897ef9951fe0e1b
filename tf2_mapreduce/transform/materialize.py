"""The transform pass: one job over the raw examples that applies a saved transform_fn to
each (`applied.SavedTransform`) and writes it, as a tf.train.Example, exactly once and in
input order (`outputs.sinks.Records`), each output as tft writes it."""

from tf2_mapreduce.inputs.formats import TFRECORD
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs import example_encoding
from tf2_mapreduce.outputs.sinks import Records
from tf2_mapreduce.transform import schema as schemas

__all__ = ["materialize_job", "example_features"]


def example_features(outputs: dict, sparse_features=frozenset()) -> dict:
    """The features of the tf.Examples of `outputs` ({name: tensor}), as tft writes them: a
    RaggedTensor's values as NAME$ragged_values; an output of `sparse_features` (its
    schema's SparseFeatures: `annotate_sparse_output_shape`) as its indices and values,
    each a feature; the others by their names."""
    features = {}
    for name, output in outputs.items():
        if isinstance(output, tf.RaggedTensor):
            features[schemas.RAGGED_VALUES.format(name)] = output
        elif name in sparse_features:
            indices, shape = output.indices, output.dense_shape
            features[schemas.SPARSE_INDICES.format(name)] = tf.SparseTensor(indices, indices[:, 1], shape)
            features[schemas.SPARSE_VALUES.format(name)] = tf.SparseTensor(indices, output.values, shape)
        else:
            features[name] = output
    return features


def materialize_job(saved, feature_spec, num_shards=0, name="transform", config=None, sparse_features=()) -> Job:
    """The job writing every raw example of TFRecord files (parsed as `feature_spec` says)
    transformed by `saved` (a `SavedTransform`); `sparse_features`: the outputs the
    transformed schema has as SparseFeatures."""
    spec = dict(feature_spec)
    sparse_features = frozenset(sparse_features)

    def map_fn(records):
        outputs = saved.apply(tf.io.parse_example(records, spec))
        return example_encoding.encode(example_features(dict(outputs), sparse_features), tf.size(records))

    return Job(
        name=name,
        map_fn=map_fn,
        reducer=Records(num_shards=num_shards, unit="examples"),
        config=dict(config or {}),
        records=TFRECORD,
        autograph=False,
        description="raw examples transformed and written",
    )
