"""Raw examples' schemas: a tensorflow-metadata `Schema` (text format, as TFDV's
`write_schema_text` and tft's `schema_utils` write it) read into FixedLen / VarLen features
as tft's `schema_as_feature_spec` reads it, or inferred from statistics as TFDV infers one;
and the transformed features' schema, as tft writes it."""

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.feature_kinds import find
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.transform.trace import NotSupported

__all__ = ["read", "feature_spec", "inferred", "inferred_of_examples", "raw", "transformed", "text", "RAW_SCHEMA"]

# The raw examples' schema in a transform's output, where TFX's Transform writes it (tft's
# TFTransformOutput.RAW_METADATA_DIR): its `raw_feature_spec()` reads it.
RAW_SCHEMA = "metadata/schema.pbtxt"

# tft leaves out features in these stages of their life (schema_utils, through tfx_bsl).
_LEFT_OUT = ("DEPRECATED", "DISABLED", "PLANNED", "ALPHA", "DEBUG_ONLY", "VALIDATION_DERIVED")


def read(path):
    """The `Schema` in the text file at `path` (any tf.io.gfile path). Raises `UsageError`
    naming the path and the cause."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    try:
        with tf.io.gfile.GFile(path, "r") as f:
            text = f.read()
    except tf.errors.OpError as e:
        raise UsageError("{setting:schema} %s: cannot be read: %s" % (path, e.message.split("\n")[0])) from None
    try:
        return text_format.Parse(text, schema_pb2.Schema())
    except text_format.ParseError as e:
        raise UsageError(
            "{setting:schema} %s: not a tensorflow-metadata Schema in text format: %s" % (path, e)
        ) from None


def feature_spec(schema) -> dict:
    """{name: tf.io.FixedLenFeature | tf.io.VarLenFeature} of `schema`'s features, as tft
    reads them: a feature with a `shape` is FixedLen of that shape (and must be in every
    example: presence.min_fraction 1), one without is VarLen; INT is int64, FLOAT float32,
    BYTES strings. Sparse and structured features are refused (`NotSupported`)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    if schema.sparse_feature:
        raise NotSupported("schema: sparse_feature %s is not supported" % schema.sparse_feature[0].name)
    spec = {}
    for feature in schema.feature:
        stage = schema_pb2.LifecycleStage.Name(feature.lifecycle_stage)
        if feature.deprecated or stage in _LEFT_OUT:
            continue
        kind = find(schema_type=schema_pb2.FeatureType.Name(feature.type))
        if kind is None:
            raise NotSupported(
                "schema: feature %s is of type %s; INT, FLOAT and BYTES only"
                % (feature.name, schema_pb2.FeatureType.Name(feature.type))
            )
        if feature.HasField("shape"):
            if feature.presence.min_fraction != 1:
                raise UsageError(
                    "schema: feature %s has a shape but presence.min_fraction %g, not 1: a feature that may be "
                    "missing has no shape (VarLen)" % (feature.name, feature.presence.min_fraction)
                )
            spec[feature.name] = tf.io.FixedLenFeature([d.size for d in feature.shape.dim], kind.tf_dtype)
        else:
            spec[feature.name] = tf.io.VarLenFeature(kind.tf_dtype)
    return spec


def inferred(stats):
    """The schema TFDV's `infer_schema` makes of `stats` (a `DatasetStats`): each feature's
    type; presence (min_count 1 if any example holds it, min_fraction 1 if every one
    does); a shape of k where every example holds exactly k > 0 values (so FixedLen
    [k]), else a value_count. Domains are not inferred."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    for name, figures in stats.features.items():
        if figures.type is None:
            continue
        feature = schema.feature.add(name=name, type=schema_pb2.FeatureType.Value(find(name=figures.type).schema_type))
        feature.presence.min_count = 1 if figures.num_present else 0
        if not figures.num_present:
            continue
        if not figures.num_missing:
            feature.presence.min_fraction = 1.0
        if not figures.num_missing and figures.min_num_values == figures.max_num_values > 0:
            feature.shape.dim.add(size=figures.min_num_values)
        elif figures.min_num_values > 0:
            feature.value_count.min = 1 if figures.min_num_values != figures.max_num_values else figures.min_num_values
            if figures.min_num_values == figures.max_num_values:
                feature.value_count.max = figures.max_num_values
    return schema


def inferred_of_examples(examples):
    """The schema `inferred` makes of the statistics of `examples` (tf.train.Examples)
    alone, a feature typed as the first example holding it has it; and the names of the
    features they hold lists of two types of (the pass of statistics keeps the type most
    examples have)."""
    from types import SimpleNamespace

    features, mixed, count = {}, set(), 0
    for example in examples:
        count += 1
        for name, feature in example.features.feature.items():
            field = feature.WhichOneof("kind")
            if field is None:  # there with no list: missing, as TFDV counts it
                continue
            values = len(getattr(feature, field).value)
            seen = features.setdefault(name, SimpleNamespace(type=find(field=field).name, num_present=0))
            if seen.type != find(field=field).name:
                mixed.add(name)
            seen.min_num_values = min(getattr(seen, "min_num_values", values), values)
            seen.max_num_values = max(getattr(seen, "max_num_values", values), values)
            seen.num_present += 1
    for seen in features.values():
        seen.num_missing = count - seen.num_present
    return inferred(SimpleNamespace(features=dict(sorted(features.items())))), sorted(mixed)


def text(schema) -> str:
    """`schema` in text format, as TFDV's write_schema_text and tft write it."""
    from google.protobuf import text_format

    return text_format.MessageToString(schema)


def _kind(what, dtype):
    """The feature kind of `dtype`; `NotSupported` naming `what` ("feature x") otherwise."""
    kind = find(dtype=dtype.name)
    if kind is None:
        raise NotSupported("%s is %s: tf.Examples hold int64, float32 and strings only" % (what, dtype.name))
    return kind


def _add(schema, name, dtype, dims, domain=None):
    """Adds feature `name` to `schema` as tft's `schema_from_feature_spec` does: FixedLen of
    `dims` (present in every example), or VarLen where `dims` is None."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    kind = _kind("feature %s" % name, dtype)
    feature = schema.feature.add(name=name, type=schema_pb2.FeatureType.Value(kind.schema_type))
    if domain is not None:
        feature.int_domain.min, feature.int_domain.max = domain
        feature.int_domain.is_categorical = True
    if dims is None:
        return
    feature.presence.min_fraction = 1.0
    feature.shape.SetInParent()
    for size in dims:
        feature.shape.dim.add(size=size)


def raw(spec: dict):
    """The `Schema` of raw features `spec` ({name: FixedLenFeature | VarLenFeature}), as tft's
    `schema_from_feature_spec` makes it: what TFX writes as the raw metadata."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    for name in sorted(spec):
        feature = spec[name]
        _add(schema, name, feature.dtype, list(feature.shape) if isinstance(feature, tf.io.FixedLenFeature) else None)
    return schema


def _output(schema, name, output, domains, shape_later=False):
    values = output.values if isinstance(output, tf.SparseTensor) else output
    _kind("preprocessing_fn output %s" % name, values.dtype)  # before its shape is looked at
    if isinstance(output, tf.SparseTensor):
        if output.shape.rank != 2:
            raise NotSupported("preprocessing_fn output %s: a SparseTensor of rank 2 only" % name)
        _add(schema, name, values.dtype, None, domains.get(values.ref()))
        return
    if shape_later and output.shape.rank is not None and output.shape.rank >= 1:
        return  # a shape known once the analyzers' results are constants: checked then
    if output.shape.rank is None or output.shape.rank < 1 or not output.shape[1:].is_fully_defined():
        raise NotSupported(
            "preprocessing_fn output %s has shape %s: a batch of a fixed shape each" % (name, output.shape)
        )
    _add(schema, name, values.dtype, list(output.shape[1:]), domains.get(values.ref()))


def transformed(outputs: dict, domains: dict, shapes_later=frozenset()):
    """The schema of a transform's `outputs` ({name: Tensor or SparseTensor}, batched), as
    tft writes it (`schema_utils.schema_from_feature_spec`): a dense output FixedLen of
    its shape, a sparse one VarLen, ids of a vocabulary or of buckets with their range.
    Outputs named in `shapes_later` may have dimensions not known yet (the analysis trace,
    where a one-hot's depth is a stand-in of a vocabulary's size)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    for name in sorted(outputs):
        _output(schema, name, outputs[name], domains, name in shapes_later)
    return schema
