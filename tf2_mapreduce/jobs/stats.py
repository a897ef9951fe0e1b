"""`stats`: exact statistics of every feature of tf.train.Example records (or of named
ones) in one pass, as TFDV defines them."""

from tf2_mapreduce import native
from tf2_mapreduce.inputs.formats import TFRECORD
from tf2_mapreduce.jobs.base import Job, Parameter
from tf2_mapreduce.jobs.features import absent_error, as_config, parse_names
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.reducers import Statistics

__all__ = ["Stats"]


def _stat_keys(names):
    """The map step of statistics of the features `names` (all if empty) over a piece's
    batches of records: the native op's keys (`reducers.statistics.keys.StatKeys`), each
    once with its count. TFRecord inputs are read by the native ops only
    (`formats.check`), so a run without them never gets here."""

    def map_fn(batches):
        variant = tf.data.experimental.to_variant(batches)
        return tuple(native.load().tf2_mapreduce_example_stat_keys(variant, tf.constant(names, tf.string)))

    return map_fn


class Stats(Job):
    """Exact statistics of the features of tf.train.Example records: of `features`
    (names: "a,b?" or a list; each type is read from the data), or of every feature
    found when None. Its result's value is a `DatasetStats`: `Result.features` (name ->
    `FeatureStats`), `Result.proto()` (TFDV's statistics). A named feature that no
    example holds fails the job, naming the features there are, unless it is marked
    optional ("name?")."""

    COMMAND = "stats"
    SUMMARY = "exact statistics of every feature of tf.train.Example records, or of --features"
    PARAMETERS = (
        Parameter(
            "features",
            "the features to describe, names only, comma-separated (default: every feature); name? may be in no example",
            check=parse_names,
        ),
    )

    def __init__(self, features=None):
        features = parse_names(features)
        names = [f.name for f in features]
        super().__init__(
            name=self.COMMAND,
            map_fn=_stat_keys(names),
            reducer=Statistics(features=tuple(names), optional=tuple(f.name for f in features if f.optional)),
            records=TFRECORD,
            autograph=False,
            map_input="dataset",
            config={"features": as_config(features)},
            description="exact statistics of tf.train.Example features, as TFDV's DatasetFeatureStatisticsList",
        )

    def finished(self, collected, files, compression="auto"):
        if collected.absent:
            raise absent_error(collected.absent, collected.examples, files.paths, compression)
