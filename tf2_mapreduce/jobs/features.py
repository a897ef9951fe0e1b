"""Jobs over `tf.train.Example` features. `vocab`: exact counts of the values of named `tf.train.Example` features, all of them
in one pass over TFRecord files, written as vocabulary files (`vocabulary`)."""

import tensorflow as tf
from google.protobuf.message import DecodeError

from tf2_mapreduce import inputs as inputs_lib
from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.reducers import Vocabularies

__all__ = ["vocab", "parse_features", "detect_types", "TYPES", "SAMPLE_RECORDS"]

# The feature types a vocabulary can be made of; int64 values become their decimal text.
TYPES = {"string": tf.string, "bytes": tf.string, "int64": tf.int64}
SAMPLE_RECORDS = 1000  # records read at most to find an untyped feature's type


def parse_features(spec):
    """[(name, type or None)] from "a,b:int64,c:string" (a list of such items, or of
    (name, type) pairs, works too); a name holding ":" needs its type ("a:b:string").
    Raises `UsageError`."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    features = []
    for item in items:
        if isinstance(item, str):
            # From the right: a feature's name may hold ":" ("a:b:string"), its type cannot.
            name, _, kind = item.strip().rpartition(":") if ":" in item else (item.strip(), "", "")
        else:
            name, kind = item
        if not name:
            raise UsageError("{setting:features}=%s: an empty feature name" % spec)
        if kind and kind not in TYPES:
            raise UsageError(
                "{setting:features}: %s has type %r (vocabularies are of %s features)" % (name, kind, ", ".join(TYPES))
            )
        if name in (n for n, _ in features):
            raise UsageError("{setting:features}: %s is named twice" % name)
        features.append((name, kind or None))
    if not features:
        raise UsageError("{setting:job}=vocab needs {setting:features} (feature names, comma-separated)")
    return features


def _kind_of(feature):
    kind = feature.WhichOneof("kind")
    return {"bytes_list": "string", "int64_list": "int64", "float_list": "float"}.get(kind)


def _examples(paths, compression, most):
    """Up to `most` `tf.train.Example`s from the first readable files of `paths`. A file
    that cannot be read, or a record that is not an Example, is passed over: the job
    itself reports it, under its --on_error."""
    from tf2_mapreduce import text_stream

    seen = 0
    for path in paths:
        try:
            for record in text_stream.records(path, inputs_lib.compression_of(path, compression)).take(most - seen):
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


def vocab(features):
    """The job counting every value of each of `features` ([(name, "string" | "int64")],
    or "name:type,..."): one vocabulary per feature, plus the examples read and, per
    feature, the examples without any value of it (absent, or an empty list)."""
    features = parse_features(features)
    untyped = [name for name, kind in features if kind is None]
    if untyped:
        raise UsageError("{setting:features}: give the type of %s (or let `detect_types` find it)" % untyped[0])
    spec = {name: tf.io.RaggedFeature(TYPES[kind], row_splits_dtype=tf.int64) for name, kind in features}

    def map_fn(records):
        parsed = tf.io.parse_example(records, spec)
        values, missing = [], []
        for name, kind in features:
            column = parsed[name]
            flat = column.flat_values
            values.append(tf.strings.as_string(flat) if kind == "int64" else flat)
            missing.append(tf.reduce_sum(tf.cast(tf.equal(column.row_lengths(), 0), tf.int64)))
        return {"examples": tf.size(records, out_type=tf.int64), "values": tuple(values), "missing": tf.stack(missing)}

    return Job(
        name="vocab",
        map_fn=map_fn,
        reducer=Vocabularies(unit="values", features=tuple(name for name, _ in features)),
        records="tfrecord",
        autograph=False,
        config={"features": ["%s:%s" % pair for pair in features]},
        description="exact counts of the values of tf.train.Example features, one vocabulary each",
    )
