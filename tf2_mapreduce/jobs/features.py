"""Jobs over `tf.train.Example` features. `Vocab`: exact counts of the values of named
features, all of them in one pass over TFRecord files, written as vocabulary files.
`Stats`: exact statistics of every feature (or of named ones), in one pass."""

import tensorflow as tf
from google.protobuf.message import DecodeError

from tf2_mapreduce import native
from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.inputs import formats
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.jobs.feature_spec import as_config, parse_features, parse_names
from tf2_mapreduce.reducers import FeatureStats, Vocabularies

__all__ = ["Vocab", "Stats", "detect_types", "SAMPLE_RECORDS"]

DTYPES = {"string": tf.string, "bytes": tf.string, "int64": tf.int64}
SAMPLE_RECORDS = 1000  # records read at most to find an untyped feature's type


def _kind_of(feature):
    kind = feature.WhichOneof("kind")
    return {"bytes_list": "string", "int64_list": "int64", "float_list": "float"}.get(kind)


def _examples(paths, compression, most):
    """Up to `most` `tf.train.Example`s from the first readable files of `paths`. A file
    that cannot be read, or a record that is not an Example, is passed over: the job
    itself reports it, under its --on_error."""
    from tf2_mapreduce.inputs import readers as text_stream

    seen = 0
    for path in paths:
        try:
            for record in text_stream.records(path, formats.compression_of(path, compression)).take(most - seen):
                seen += 1
                try:
                    yield tf.train.Example.FromString(record.numpy())
                except DecodeError:
                    continue
        except tf.errors.OpError:
            continue
        if seen >= most:
            return


def detect_types(features, paths, compression="auto", most=SAMPLE_RECORDS):
    """`features` with every type filled in from the first `most` records of the files
    at `paths` (read here, in the coordinator). Raises `UsageError` for a float feature,
    or one absent from those records (then its type must be given)."""
    untyped = {name for name, kind in features if kind is None}
    found = {}
    seen = 0
    if untyped:
        for example in _examples(paths, compression, most):
            seen += 1
            for name in untyped - found.keys():
                if name in example.features.feature:
                    kind = _kind_of(example.features.feature[name])
                    if kind:
                        found[name] = kind
            if not untyped - found.keys():
                break
    typed = []
    for name, kind in features:
        kind = kind or found.get(name)
        if kind is None:
            raise UsageError(
                "{setting:features}: %s is in none of the first %d examples; give its type (%s:string or %s:int64)"
                % (name, seen, name, name)
            )
        if kind == "float":
            raise UsageError(
                "{setting:features}: %s holds floats; vocabularies are of string and int64 features" % name
            )
        typed.append((name, kind))
    return typed


def _map_fn(features):
    """The map step of a vocabulary of `features` ([(name, type)]) over a batch of records."""
    spec = {name: tf.io.RaggedFeature(DTYPES[kind], row_splits_dtype=tf.int64) for name, kind in features}

    def map_fn(records):
        parsed = tf.io.parse_example(records, spec)
        values, missing = [], []
        for name, kind in features:
            column = parsed[name]
            flat = column.flat_values
            values.append(tf.strings.as_string(flat) if kind == "int64" else flat)
            missing.append(tf.reduce_sum(tf.cast(tf.equal(column.row_lengths(), 0), tf.int64)))
        return {"examples": tf.size(records, out_type=tf.int64), "values": tuple(values), "missing": tf.stack(missing)}

    return map_fn


def _untyped(features):
    def map_fn(records):
        raise UsageError("{setting:features}: the types of %s were never read from the data" % features)

    return map_fn


class Vocab(Job):
    """Exact counts of every value of each of `features` ([(name, "string" | "int64")],
    or "name:type,..."): one vocabulary per feature, plus the examples read and, per
    feature, the examples without any value of it (absent, or an empty list). A
    feature given without a type has it read from the first examples that hold it
    (`detect_types`) before the job runs."""

    def __init__(self, features):
        features = parse_features(features)
        typed = all(kind for _, kind in features)
        super().__init__(
            name="vocab",
            map_fn=_map_fn(features) if typed else _untyped([name for name, kind in features if not kind]),
            reducer=Vocabularies(unit="values", features=tuple(name for name, _ in features)),
            records="tfrecord",
            autograph=False,
            config={"features": as_config(features)},
            description="exact counts of the values of tf.train.Example features, one vocabulary each",
        )

    def prepared(self, files, compression="auto"):
        features = parse_features(self.config["features"])
        if all(kind for _, kind in features):
            return self
        return Vocab(detect_types(features, (f.path for f in files), compression))


def _stat_keys(names):
    """The map step of statistics of the features `names` (all if empty) over a piece's
    batches of records: the native op's keys (`reducers.feature_stats.StatKeys`), each
    once with its count. TFRecord inputs are read by the native ops only
    (`formats.check`), so a run without them never gets here."""

    def map_fn(batches):
        variant = tf.data.experimental.to_variant(batches)
        return tuple(native.load().tf2_mapreduce_example_stat_keys(variant, tf.constant(names, tf.string)))

    return map_fn


class Stats(Job):
    """Exact statistics of the features of tf.train.Example records: of `features`
    (names: "a,b" or a list; each type is read from the data), or of every feature
    found when None. Its result's value is a `statistics.DatasetStats`: `Result.features`
    (name -> `statistics.FeatureStats`), `Result.proto()` (TFDV's statistics)."""

    def __init__(self, features=None):
        names = parse_names(features)
        super().__init__(
            name="stats",
            map_fn=_stat_keys(names),
            reducer=FeatureStats(unit="examples", features=tuple(names)),
            records="tfrecord",
            autograph=False,
            map_input="dataset",
            config={"features": names},
            description="exact statistics of tf.train.Example features, as TFDV's DatasetFeatureStatisticsList",
        )
