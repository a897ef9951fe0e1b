"""`vocab`: exact counts of the values of named features of tf.train.Example records, all
of them in one pass over TFRecord files, written as vocabulary files."""

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.feature_kinds import find
from tf2_mapreduce.inputs.formats import TFRECORD
from tf2_mapreduce.jobs.base import Job, Parameter
from tf2_mapreduce.jobs.features import absent_error, as_config, detect_types, parse_features
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.reducers import Vocabularies

__all__ = ["Vocab"]


def _map_fn(features):
    """The map step of a vocabulary of `features` (typed `Feature`s) over a batch of records."""
    spec = {
        f.name: tf.io.RaggedFeature((find(dtype=f.type) or find(name=f.type)).tf_dtype, row_splits_dtype=tf.int64)
        for f in features
    }

    def map_fn(records):
        parsed = tf.io.parse_example(records, spec)
        values, missing = [], []
        for f in features:
            column = parsed[f.name]
            flat = column.flat_values
            values.append(tf.strings.as_string(flat) if f.type == "int64" else flat)
            missing.append(tf.reduce_sum(tf.cast(tf.equal(column.row_lengths(), 0), tf.int64)))
        return {"examples": tf.size(records, out_type=tf.int64), "values": tuple(values), "missing": tf.stack(missing)}

    return map_fn


def _untyped(names):
    def map_fn(records):
        raise UsageError("{setting:features}: the types of %s were never read from the data" % ", ".join(names))

    return map_fn


class Vocab(Job):
    """Exact counts of every value of each of `features` ("name[?][:string|int64],..." or
    [(name, "string" | "int64")]): one vocabulary per feature, plus the examples read and,
    per feature, the examples without any value of it (absent, or an empty list). A
    feature given without a type has it read from the first examples that hold it before
    the job runs (`prepared`). A feature that no example holds fails the job, naming the
    features there are, unless it is marked optional ("name?")."""

    COMMAND = "vocab"
    SUMMARY = "a vocabulary of each of --features of tf.train.Example records"
    PARAMETERS = (
        Parameter(
            "features",
            "the tf.train.Example features to count, comma-separated, each name[?][:string|int64]; a type left "
            "out is read from the first examples that hold the feature; name? may be in no example",
            required=True,
            check=parse_features,
        ),
    )

    def __init__(self, features):
        features = parse_features(features)
        typed = all(f.type for f in features)
        super().__init__(
            name=self.COMMAND,
            map_fn=_map_fn(features) if typed else _untyped([f.name for f in features if not f.type]),
            reducer=Vocabularies(
                features=tuple(f.name for f in features),
                optional=tuple(f.name for f in features if f.optional),
            ),
            records=TFRECORD,
            autograph=False,
            config={"features": as_config(features)},
            description="exact counts of the values of tf.train.Example features, one vocabulary each",
        )

    def prepared(self, files, compression="auto"):
        features = parse_features(self.config["features"])
        if all(f.type for f in features):
            return self
        return Vocab(detect_types(features, files.paths, compression))

    def finished(self, collected, files, compression="auto"):
        if collected.absent:
            raise absent_error(collected.absent, collected.examples, files.paths, compression)
