"""What jobs over tf.train.Example records share: how `--features` names their features
(a vocabulary job's "a,b:int64,c?", a statistics job's "a,b?"), and the first examples of
the inputs, read on the coordinator for what a job must know before it runs (untyped
features' types) or after (which features exist, to name a misspelled one's peers)."""

import difflib
from typing import NamedTuple

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.feature_kinds import FLOAT, find
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.storage import retrying

__all__ = [
    "Feature",
    "TYPES",
    "SAMPLE_RECORDS",
    "parse_features",
    "parse_names",
    "as_config",
    "detect_types",
    "feature_names",
    "absent_error",
    "sample_examples",
]

# The feature types a vocabulary can be made of; int64 values become their decimal text.
TYPES = ("string", "bytes", "int64")
SAMPLE_RECORDS = 1000  # records read at most to find a feature's type, or the features there are
OPTIONAL = "?"  # after a feature's name: no example need hold it


class Feature(NamedTuple):
    """A feature a job names: its type (None: read from the data), and whether it may be
    in no example at all (`optional`, "name?"): else a feature no example holds fails the
    job, as a misspelled name would."""

    name: str
    type: str | None = None
    optional: bool = False


def _parse_item(item):
    if not isinstance(item, str):
        return Feature(*item)
    item = item.strip()
    # From the right: a feature's name may hold ":" ("a:b:string"), its type cannot.
    name, _, kind = item.rpartition(":") if ":" in item else (item, "", "")
    optional = name.endswith(OPTIONAL)
    return Feature(name[: -len(OPTIONAL)] if optional else name, kind or None, optional)


def parse_features(spec) -> list:
    """[`Feature`] from "a,b:int64,c?:string" (or a list of such items, of (name, type)
    pairs, or of `Feature`s); a name holding ":" needs its type ("a:b:string"). Raises
    `UsageError`."""
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    features = []
    for item in items:
        feature = _parse_item(item)
        if not feature.name:
            raise UsageError("{setting:features}=%s: an empty feature name" % spec)
        if feature.type and feature.type not in TYPES:
            raise UsageError(
                "{setting:features}: %s has type %r (vocabularies are of %s features)"
                % (feature.name, feature.type, ", ".join(TYPES))
            )
        if feature.name in (f.name for f in features):
            raise UsageError("{setting:features}: %s is named twice" % feature.name)
        features.append(feature)
    if not features:
        raise UsageError("{setting:job}=vocab needs {setting:features} (feature names, comma-separated)")
    return features


def parse_names(spec) -> list:
    """The `Feature`s, untyped, of "a,b?,c" (or a list of names), for a job that reads each
    feature's type from the data; [] for None or "" (every feature). Raises `UsageError`."""
    if not spec:
        return []
    features = parse_features(spec)
    typed = [f for f in features if f.type]
    if typed:
        raise UsageError(
            "{setting:features}: %s: statistics read each feature's type from the data; give names only"
            % ", ".join("%s:%s" % (f.name, f.type) for f in typed)
        )
    return features


def as_config(features) -> list:
    """`Feature`s as a job's config lists them: "name[?][:type]"."""
    return [f.name + (OPTIONAL if f.optional else "") + (":%s" % f.type if f.type else "") for f in features]


def sample_examples(paths, compression="auto", most=SAMPLE_RECORDS, passed_over=None):
    """Up to `most` `tf.train.Example`s from the first readable files of `paths`. A file
    that cannot be read, or a record that is not an Example, is passed over (its path put
    in the list `passed_over`): the job itself reports it, under its on_error. An outage of
    their storage is waited out."""
    from google.protobuf.message import DecodeError

    from tf2_mapreduce.inputs import formats, readers

    def first(path, n):
        return [record.numpy() for record in readers.records(path, formats.compression_of(path, compression)).take(n)]

    seen = 0
    for path in paths:
        try:
            records = retrying(
                lambda path=path, n=most - seen: first(path, n), path
            )  # storage out is no unreadable file
        except tf.errors.OpError:
            if passed_over is not None:
                passed_over.append(path)
            continue
        for record in records:
            seen += 1
            try:
                yield tf.train.Example.FromString(record)
            except DecodeError:
                if passed_over is not None:
                    passed_over.append(path)
        if seen >= most:
            return


def detect_types(features, paths, compression="auto", most=SAMPLE_RECORDS) -> list:
    """`features` with every type filled in from the first `most` records of the files
    at `paths` (read here, in the coordinator). Raises `UsageError` for a float feature,
    or one absent from those records (then its type must be given)."""
    features = parse_features(features)
    untyped = {f.name for f in features if f.type is None}
    found = {}
    seen = 0
    if untyped:
        for example in sample_examples(paths, compression, most):
            seen += 1
            for name in untyped - found.keys():
                if name in example.features.feature:
                    kind = find(field=example.features.feature[name].WhichOneof("kind"))
                    if kind is not None:
                        found[name] = kind
            if not untyped - found.keys():
                break
    typed = []
    for f in features:
        if f.type:
            typed.append(f)
            continue
        kind = found.get(f.name)
        if kind is None:
            written = f.name + (OPTIONAL if f.optional else "")
            raise UsageError(
                "{setting:features}: %s is in none of the first %d examples (features there: %s); "
                "if it is further on, give its type (%s:string or %s:int64)"
                % (f.name, seen, _closest_first(f.name, feature_names(paths, compression, most)), written, written)
            )
        if kind is FLOAT:
            raise UsageError(
                "{setting:features}: %s holds floats; vocabularies are of string and int64 features" % f.name
            )
        typed.append(f._replace(type=kind.dtype))
    return typed


def feature_names(paths, compression="auto", most=SAMPLE_RECORDS) -> set:
    """The names of the features of the first `most` examples of the files at `paths`."""
    names = set()
    for example in sample_examples(paths, compression, most):
        names.update(example.features.feature.keys())
    return names


def _closest_first(name, names) -> str:
    """`names` (features there are) as a list to read, the closest to `name` first."""
    if not names:  # get_close_matches refuses to return none (n=0)
        return "none"
    return ", ".join(difflib.get_close_matches(name, sorted(names), n=len(names), cutoff=0.0))


def absent_error(absent, examples, paths, compression="auto") -> UsageError:
    """The error of a job whose features `absent` (names) no example holds, of `examples`
    read: each with the features that the inputs' first examples do hold, closest first."""
    known = feature_names(paths, compression)
    parts = [
        "%s is in none of the %d examples (features there: %s)" % (name, examples, _closest_first(name, known))
        for name in absent
    ]
    return UsageError(
        "{setting:features}: %s; mark a feature that may be absent with ? (%s?)" % ("; ".join(parts), absent[0])
    )
