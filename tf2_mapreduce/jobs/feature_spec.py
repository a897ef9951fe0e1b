"""How `--features` names the features of a job over tf.train.Example records: a vocabulary
job's "a,b:int64,c:string", a statistics job's "a,b,c". Free of TensorFlow, so that the
CLI checks it before anything starts."""

from tf2_mapreduce.errors import UsageError

__all__ = ["TYPES", "parse_features", "parse_names", "as_config"]

# The feature types a vocabulary can be made of; int64 values become their decimal text.
TYPES = ("string", "bytes", "int64")


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


def parse_names(spec):
    """The feature names of "a,b,c" (or a list of names), for a job that reads each
    feature's type from the data; None or "" for every feature. Raises `UsageError`."""
    if not spec:
        return []
    features = parse_features(spec)
    typed = [name for name, kind in features if kind]
    if typed:
        raise UsageError(
            "{setting:features}: %s: statistics read each feature's type from the data; give names only"
            % ", ".join("%s:%s" % (name, dict(features)[name]) for name in typed)
        )
    return [name for name, _ in features]


def as_config(features):
    """[(name, type or None)] as a job's config lists them: "name:type", or "name"
    for a feature whose type is still to be read from the data."""
    return ["%s:%s" % (name, kind) if kind else name for name, kind in features]
