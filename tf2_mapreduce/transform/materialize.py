"""The transform pass: one job over the raw examples that applies a saved transform_fn to
each (`applied.SavedTransform`) and writes it, as a tf.train.Example, exactly once and in
input order (`outputs.sinks.Records`), each output as tft writes it."""

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.inputs.formats import TFRECORD
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs import example_encoding
from tf2_mapreduce.outputs.sinks import Records
from tf2_mapreduce.transform import schema as schemas

__all__ = ["materialize_job", "example_features"]


def _row_order(rows, count, name):
    """The order that puts the values of a SparseTensor (output `name`) in rows, each row's
    in the order given (`rows`: each value's row), checked once to be rows of `count`:
    RaggedTensor's own checks, a tf.cond each, were most of the time a transform step took
    to trace, and their message named none of the user's."""
    inside = tf.reduce_all((rows >= 0) & (rows < count))
    checked = tf.raw_ops.Assert(
        condition=inside, data=[tf.constant("output %s: a SparseTensor with an index outside its dense shape" % name)]
    )
    with tf.control_dependencies([checked]):
        return tf.argsort(rows, stable=True)


def _in_rows(values, rows, order, count):
    """`values` as a RaggedTensor of `count` rows, in `order` (`_row_order`'s, which checked `rows`)."""
    return tf.RaggedTensor.from_value_rowids(tf.gather(values, order), tf.gather(rows, order), count, validate=False)


def example_features(outputs: dict, sparse_features=None) -> dict:
    """The features of the tf.Examples of `outputs` ({name: tensor}), as tft writes them: a
    RaggedTensor's values as NAME$ragged_values; an output of `sparse_features` ({name:
    (its index features' names, its value feature's name)}: its schema's SparseFeatures,
    from `annotate_sparse_output_shape` or an earlier transform's schema) as each index
    and its values, each a feature, in the order the tensor holds them; the others by
    their names."""
    features = {}
    for name, output in outputs.items():
        if isinstance(output, tf.RaggedTensor):
            features[schemas.RAGGED_VALUES.format(name)] = output
        elif name in (sparse_features or {}):
            indexes, values = sparse_features[name]
            if len(indexes) != output.shape.rank - 1:
                raise UsageError(
                    "output %s: a SparseTensor of rank %s for a SparseFeature of %d indices"
                    % (name, output.shape.rank, len(indexes))
                )
            rows, count = output.indices[:, 0], output.dense_shape[0]
            order = _row_order(rows, count, name)
            for i, index in enumerate(indexes):
                features[index] = _in_rows(output.indices[:, i + 1], rows, order, count)
            features[values] = _in_rows(output.values, rows, order, count)
        else:
            features[name] = output
    return features


def materialize_job(saved, feature_spec, num_shards=0, name="transform", config=None, sparse_features=None) -> Job:
    """The job writing every raw example of TFRecord files (parsed as `feature_spec` says)
    transformed by `saved` (a `SavedTransform`); `sparse_features`: the outputs the
    transformed schema has as SparseFeatures (`example_features`)."""
    spec = dict(feature_spec)
    sparse_features = dict(sparse_features or {})

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
