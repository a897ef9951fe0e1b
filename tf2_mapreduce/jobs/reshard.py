"""`reshard`: TFRecord files written again as GZIP'd TFRecord files of a chosen number,
every record once, in input order: the simplest job that writes records."""

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.jobs.base import Job, Parameter
from tf2_mapreduce.outputs.sinks import Records

__all__ = ["Reshard", "parse_num_shards"]


def parse_num_shards(text) -> int:
    """`--num_shards` as an int >= 1; raises `UsageError`."""
    try:
        value = int(text)
    except (TypeError, ValueError):
        value = 0
    if value < 1:
        raise UsageError("{setting:num_shards}=%s: give a whole number of files, 1 or more" % (text,))
    return value


def _same(records):
    return records


class Reshard(Job):
    """Every record of the inputs (TFRecord files, compressed or not) into `num_shards`
    GZIP'd TFRecord files of `--output_dir`'s data/, in input order."""

    COMMAND = "reshard"
    SUMMARY = "TFRecord files written again as N GZIP'd files, in input order"
    PARAMETERS = (
        Parameter(
            "num_shards",
            "files of data/ to write (default: one per 128 MiB written)",
            check=parse_num_shards,
        ),
    )

    def __init__(self, num_shards=None):
        shards = 0 if num_shards is None else parse_num_shards(num_shards)
        super().__init__(
            name=self.COMMAND,
            map_fn=_same,
            reducer=Records(num_shards=shards),
            description="TFRecord files resharded",
            config={"num_shards": shards},
            records="tfrecord",
            autograph=False,
        )
