"""tf.train.Example records made in a graph, from a batch of features (dense tensors of a
fixed shape per example, 2-D SparseTensors, or RaggedTensors of a list an example): for a
map step that writes them."""

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.feature_kinds import BYTES, FLOAT, INT64, KINDS, find
from tf2_mapreduce.lazy_tf import tf

__all__ = ["encode"]


def _rows(feature, batch):
    """`feature`'s values and row splits (example i holds values [splits[i], splits[i+1]))."""
    if isinstance(feature, tf.RaggedTensor):
        return feature.flat_values, tf.cast(feature.row_splits, tf.int64)
    if isinstance(feature, tf.SparseTensor):
        feature = tf.sparse.reorder(feature)
        lengths = tf.math.bincount(feature.indices[:, 0], minlength=batch, maxlength=batch, dtype=tf.int64)
        return feature.values, tf.concat([[0], tf.cumsum(lengths)], 0)
    per_example = 1
    for size in feature.shape[1:]:
        per_example *= size
    values = tf.reshape(feature, [-1])
    return values, tf.range(batch + 1, dtype=tf.int64) * per_example


def encode(features: dict, batch):
    """The serialized tf.train.Example of each of `batch` examples, a 1-D tf.string: every
    feature of `features` ({name: Tensor [batch, d...], SparseTensor [batch, n] or RaggedTensor [batch, None]}, int64,
    float32 or strings) in it, in name order. Needs the native ops."""
    from tf2_mapreduce import native

    library = native.load()
    if library is None:
        raise UsageError("writing tf.train.Example records needs the native ops: %s" % native.unavailable())
    batch = tf.cast(batch, tf.int64)
    kinds = {kind: [] for kind in KINDS}
    for name in sorted(features):
        feature = features[name]
        dtype = feature.dtype
        kind = find(dtype=dtype.name)
        if kind is None:
            raise UsageError(
                "feature %s is %s: a tf.train.Example holds int64, float32 and strings" % (name, dtype.name)
            )
        kinds[kind].append((name, *_rows(feature, batch)))
    ints, floats, strings = kinds[INT64], kinds[FLOAT], kinds[BYTES]
    return library.tf2_mapreduce_encode_examples(
        batch=batch,
        int_values=[v for _, v, _ in ints],
        int_splits=[s for _, _, s in ints],
        float_values=[v for _, v, _ in floats],
        float_splits=[s for _, _, s in floats],
        bytes_values=[v for _, v, _ in strings],
        bytes_splits=[s for _, _, s in strings],
        int_names=[n for n, _, _ in ints],
        float_names=[n for n, _, _ in floats],
        bytes_names=[n for n, _, _ in strings],
    )
