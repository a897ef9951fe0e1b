"""The transform pass: one job over the raw examples that applies a saved transform_fn to
each (`applied.SavedTransform`) and writes it, as a tf.train.Example, exactly once and in
input order (`outputs.sinks.Records`)."""

from tf2_mapreduce.inputs.formats import TFRECORD
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs import example_encoding
from tf2_mapreduce.outputs.sinks import Records

__all__ = ["materialize_job"]


def materialize_job(saved, feature_spec, num_shards=0, name="transform", config=None) -> Job:
    """The job writing every raw example of TFRecord files (parsed as `feature_spec` says)
    transformed by `saved` (a `SavedTransform`)."""
    spec = dict(feature_spec)

    def map_fn(records):
        outputs = saved.apply(tf.io.parse_example(records, spec))
        return example_encoding.encode(dict(outputs), tf.size(records))

    return Job(
        name=name,
        map_fn=map_fn,
        reducer=Records(num_shards=num_shards, unit="examples"),
        config=dict(config or {}),
        records=TFRECORD,
        autograph=False,
        description="raw examples transformed and written",
    )
