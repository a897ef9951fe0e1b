"""Jobs over TFRecord files: `recordcount`, the sanity total of records, whatever they
hold (a `tf.train.Example` or anything else)."""

import tensorflow as tf

from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.reducers import Sum

__all__ = ["RecordCount"]


def _ones(records):
    return tf.ones_like(records, dtype=tf.int64)


class RecordCount(Job):
    """The records of TFRecord files, per file and overall: a sanity total, whatever they hold."""

    def __init__(self):
        super().__init__(
            name="recordcount",
            map_fn=_ones,
            reducer=Sum(unit="records"),
            records="tfrecord",
            autograph=False,
            description="total records of TFRecord files",
        )
