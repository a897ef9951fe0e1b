"""Jobs over TFRecord files: `recordcount`, the sanity total of records, whatever they
hold (a `tf.train.Example` or anything else)."""

import tensorflow as tf

from tf2_mapreduce.jobs.base import Job, Sum

__all__ = ["RECORDCOUNT"]


def _ones(records):
    return tf.ones_like(records, dtype=tf.int64)


RECORDCOUNT = Job(
    name="recordcount",
    map_fn=_ones,
    reducer=Sum(unit="records"),
    records="tfrecord",
    autograph=False,
    description="total records of TFRecord files",
)
