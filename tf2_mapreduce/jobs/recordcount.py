"""Jobs over TFRecord files: `recordcount`, the sanity total of records, whatever they
hold (a `tf.train.Example` or anything else)."""

from tf2_mapreduce.inputs.formats import TFRECORD
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.reducers import Sum

__all__ = ["RecordCount"]


def _ones(records):
    return tf.ones_like(records, dtype=tf.int64)


class RecordCount(Job):
    """The records of TFRecord files, per file and overall: a sanity total, whatever they hold."""

    COMMAND = "recordcount"
    SUMMARY = "records of TFRecord files"

    def __init__(self):
        super().__init__(
            name=self.COMMAND,
            map_fn=_ones,
            reducer=Sum(unit="records"),
            records=TFRECORD,
            autograph=False,
            description="total records of TFRecord files",
        )
