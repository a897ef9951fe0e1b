"""Raw examples' schemas: a tensorflow-metadata `Schema` (text format, as TFDV's
`write_schema_text` and tft's `schema_utils` write it) read into FixedLen / VarLen features
(a ragged tensor representation a RaggedFeature, a sparse feature a SparseFeature) as tft's
`schema_as_feature_spec` reads it, or inferred from statistics as TFDV infers one; and the
transformed features' schema, as tft writes it."""

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.feature_kinds import find
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.transform.trace import NotSupported

__all__ = [
    "read",
    "feature_spec",
    "inferred",
    "inferred_of_examples",
    "raw",
    "transformed",
    "text",
    "RAW_SCHEMA",
    "RAGGED_VALUES",
    "SPARSE_INDICES",
    "SPARSE_VALUES",
]

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


def _ragged_features(schema) -> dict:
    """{name: its value feature's name} of `schema`'s ragged tensor representations (of no
    partitions: a list of values an example); `NotSupported` for other representations."""
    group = schema.tensor_representation_group.get("")
    ragged = {}
    for name, representation in sorted(group.tensor_representation.items() if group else ()):
        kind = representation.WhichOneof("kind")
        if kind != "ragged_tensor":
            raise NotSupported("schema: tensor_representation %s is a %s: ragged_tensor only" % (name, kind))
        path, partitions = representation.ragged_tensor.feature_path.step, representation.ragged_tensor.partition
        if len(path) != 1 or partitions:
            raise NotSupported(
                "schema: ragged tensor %s: a feature's values an example only (no partitions, no nested path)" % name
            )
        ragged[name] = path[0]
    return ragged


def feature_spec(schema) -> dict:
    """{name: tf.io feature} of `schema`'s features, as tft reads them: a feature with a
    `shape` is FixedLen of that shape (and must be in every example: presence.min_fraction
    1), one without is VarLen; a ragged tensor representation (of no partitions) a
    RaggedFeature of its value feature; a sparse feature (of one index) a SparseFeature as
    wide as its index's int_domain. INT is int64, FLOAT float32, BYTES strings. Structured
    features are refused (`NotSupported`)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    by_name = {feature.name: feature for feature in schema.feature}

    def dtype(name, what):
        feature = by_name.get(name)
        if feature is None:
            raise UsageError("schema: %s names feature %s, which the schema does not have" % (what, name))
        kind = find(schema_type=schema_pb2.FeatureType.Name(feature.type))
        if kind is None:
            raise NotSupported(
                "schema: feature %s is of type %s; INT, FLOAT and BYTES only"
                % (name, schema_pb2.FeatureType.Name(feature.type))
            )
        return kind.tf_dtype

    spec, taken = {}, set()
    for name, values in _ragged_features(schema).items():
        spec[name] = tf.io.RaggedFeature(
            dtype(values, "ragged tensor " + name), value_key=values, partitions=(), row_splits_dtype=tf.int64
        )
        taken.add(values)
    for sparse in schema.sparse_feature:
        if len(sparse.index_feature) != 1:
            raise NotSupported("schema: sparse_feature %s: one index feature only" % sparse.name)
        index, values = sparse.index_feature[0].name, sparse.value_feature.name
        dtype(index, "sparse_feature " + sparse.name)
        domain = by_name[index].int_domain
        if not by_name[index].HasField("int_domain") or not domain.HasField("max"):
            raise NotSupported("schema: sparse_feature %s: its index %s has no int_domain max" % (sparse.name, index))
        spec[sparse.name] = tf.io.SparseFeature(
            index_key=[index],
            value_key=values,
            dtype=dtype(values, "sparse_feature " + sparse.name),
            size=[domain.max + 1],
            already_sorted=sparse.is_sorted,
        )
        taken.update((index, values))
    for feature in schema.feature:
        stage = schema_pb2.LifecycleStage.Name(feature.lifecycle_stage)
        if feature.deprecated or stage in _LEFT_OUT or feature.name in taken:
            continue
        kind = dtype(feature.name, "")
        if feature.HasField("shape"):
            if feature.presence.min_fraction != 1:
                raise UsageError(
                    "schema: feature %s has a shape but presence.min_fraction %g, not 1: a feature that may be "
                    "missing has no shape (VarLen)" % (feature.name, feature.presence.min_fraction)
                )
            spec[feature.name] = tf.io.FixedLenFeature([d.size for d in feature.shape.dim], kind)
        else:
            spec[feature.name] = tf.io.VarLenFeature(kind)
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


def _add_ragged(schema, name, values_name, dtype, domain=None):
    """Adds ragged tensor `name`, its values in feature `values_name` (a list an example),
    as tft's `schema_from_feature_spec` does."""
    _add(schema, values_name, dtype, None, domain)
    representation = schema.tensor_representation_group[""].tensor_representation[name]
    representation.ragged_tensor.feature_path.step.append(values_name)


def raw(spec: dict):
    """The `Schema` of raw features `spec` ({name: FixedLenFeature | VarLenFeature |
    RaggedFeature}), as tft's `schema_from_feature_spec` makes it: what TFX writes as the
    raw metadata."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    for name in sorted(spec):
        feature = spec[name]
        if isinstance(feature, tf.io.RaggedFeature):
            if feature.partitions:
                raise NotSupported("raw feature %s: a RaggedFeature of no partitions only" % name)
            _add_ragged(schema, name, feature.value_key or name, feature.dtype)
            continue
        if not isinstance(feature, (tf.io.FixedLenFeature, tf.io.VarLenFeature)):
            raise NotSupported(
                "raw feature %s: a %s (FixedLenFeature, VarLenFeature and RaggedFeature are)"
                % (name, type(feature).__name__)
            )
        _add(schema, name, feature.dtype, list(feature.shape) if isinstance(feature, tf.io.FixedLenFeature) else None)
    return schema


# Where tft writes a ragged output's values, an annotated sparse one's indices and values.
RAGGED_VALUES = "{}$ragged_values"
SPARSE_INDICES = "{}$sparse_indices_0"
SPARSE_VALUES = "{}$sparse_values"


def _output(schema, name, output, domains, sparse_shapes, shape_later=False):
    from tensorflow_metadata.proto.v0 import schema_pb2

    values = output.flat_values if isinstance(output, tf.RaggedTensor) else getattr(output, "values", output)
    _kind("preprocessing_fn output %s" % name, values.dtype)  # before its shape is looked at
    domain = domains.get(values.ref())
    if isinstance(output, tf.RaggedTensor):
        if output.ragged_rank != 1 or output.flat_values.shape.rank != 1:
            raise NotSupported("preprocessing_fn output %s: a RaggedTensor of a list an example only" % name)
        _add_ragged(schema, name, RAGGED_VALUES.format(name), values.dtype, domain)
        return
    if isinstance(output, tf.SparseTensor):
        if output.shape.rank != 2:
            raise NotSupported("preprocessing_fn output %s: a SparseTensor of rank 2 only" % name)
        size = sparse_shapes.get(values.ref())
        if size is None:
            _add(schema, name, values.dtype, None, domain)
            return
        # tft.experimental.annotate_sparse_output_shape: a SparseFeature, its size the index's domain
        index = schema.feature.add(name=SPARSE_INDICES.format(name), type=schema_pb2.INT)
        index.int_domain.min, index.int_domain.max = 0, size - 1
        _add(schema, SPARSE_VALUES.format(name), values.dtype, None, domain)
        sparse = schema.sparse_feature.add(name=name, is_sorted=True)
        sparse.index_feature.add(name=SPARSE_INDICES.format(name))
        sparse.value_feature.name = SPARSE_VALUES.format(name)
        return
    if shape_later and output.shape.rank is not None and output.shape.rank >= 1:
        return  # a shape known once the analyzers' results are constants: checked then
    if output.shape.rank is None or output.shape.rank < 1 or not output.shape[1:].is_fully_defined():
        raise NotSupported(
            "preprocessing_fn output %s has shape %s: a batch of a fixed shape each" % (name, output.shape)
        )
    _add(schema, name, values.dtype, list(output.shape[1:]), domain)


def transformed(outputs: dict, domains: dict, shapes_later=frozenset(), sparse_shapes=None):
    """The schema of a transform's `outputs` ({name: Tensor, SparseTensor or RaggedTensor},
    batched), as tft writes it (`schema_utils.schema_from_feature_spec`): a dense output
    FixedLen of its shape, a sparse one VarLen (a SparseFeature where `sparse_shapes`
    {values' ref: size} has its size), a ragged one its values' feature and a ragged tensor
    representation; ids of a vocabulary or of buckets with their range. Outputs named in
    `shapes_later` may have dimensions not known yet (the analysis trace, where a one-hot's
    depth is a stand-in of a vocabulary's size)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    for name in sorted(outputs):
        _output(schema, name, outputs[name], domains, sparse_shapes or {}, name in shapes_later)
    return schema
