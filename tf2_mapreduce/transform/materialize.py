"""The transform pass of a preprocessing_fn: one job over the raw examples that transforms
each with the analyzers' results and writes it, as a tf.train.Example, exactly once and in
input order (`outputs.sinks.Records`). The same transform as the saved `transform_fn`, with its
vocabularies as constant tables instead of asset files."""

from tf2_mapreduce.inputs.formats import TFRECORD
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs import example_encoding
from tf2_mapreduce.outputs.sinks import Records
from tf2_mapreduce.transform import trace

__all__ = ["materialize_job"]


class _StepTable:
    """A vocabulary's lookup table made in the map step, on the worker that runs it:
    TensorFlow's table classes make theirs where the function is traced (the coordinator,
    which workers cannot reach). It looks up as tft's table does: an unknown value is
    `default_value`, or with `num_oov_buckets`, the vocabulary's size plus the
    Fingerprint64 bucket of its text (TensorFlow's StaticVocabularyTable)."""

    def __init__(self, terms, key_dtype, default_value, num_oov_buckets):
        keys = tf.constant([int(t) for t in terms] if key_dtype == tf.int64 else terms, key_dtype)
        self._handle = tf.raw_ops.AnonymousHashTable(key_dtype=key_dtype, value_dtype=tf.int64)
        self._filled = tf.raw_ops.LookupTableImportV2(
            table_handle=self._handle, keys=keys, values=tf.range(len(terms), dtype=tf.int64)
        )
        self._size = len(terms)
        self._default, self._buckets = default_value, num_oov_buckets

    def lookup(self, values):
        with tf.control_dependencies([self._filled]):
            default = -1 if self._buckets > 0 else self._default
            found = tf.raw_ops.LookupTableFindV2(
                table_handle=self._handle, keys=values, default_value=tf.constant(default, tf.int64)
            )
        found = tf.ensure_shape(found, values.shape)
        if self._buckets <= 0:
            return found
        text = values if values.dtype == tf.string else tf.strings.as_string(values)
        buckets = tf.strings.to_hash_bucket_fast(text, self._buckets) + self._size
        return tf.where(found != -1, found, buckets)


def _step_tables(values):
    def make_table(index, key_dtype, default_value, num_oov_buckets):
        return _StepTable(values[index], key_dtype, default_value, num_oov_buckets)

    return make_table


def materialize_job(preprocessing_fn, feature_spec, calls, values, num_shards=0, name="transform", config=None) -> Job:
    """The job writing every raw example of TFRecord files (parsed as `feature_spec` says)
    transformed by `preprocessing_fn`, its analyzers' `calls` having given `values`."""
    spec = dict(feature_spec)
    make_table = _step_tables(values)

    def map_fn(records):
        applying = trace.Applying(calls, values, make_table)
        with trace.tracing(applying):
            outputs = preprocessing_fn(tf.io.parse_example(records, spec))
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
