"""tf.Transform's analyzers, as tf2_mapreduce counts them: `min`, `max`, `sum`, `size`,
`mean`, `var`, `vocabulary` and the quantiles behind `bucketize`, with tft's names,
defaults, output dtypes and meaning; each computed exactly from every value counted."""

import numpy as np

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.transform import trace
from tf2_mapreduce.transform.trace import NotSupported

__all__ = ["min", "max", "sum", "size", "mean", "var", "vocabulary", "quantiles", "sanitized_vocab_filename"]

# tft's output dtypes: a sum of ints is int64; a mean of ints float32.
_SUM_DTYPES = {"bfloat16": "float32", "float16": "float32", "float32": "float32", "float64": "float64"}
_FLOAT_DTYPES = {"float16": "float16", "float32": "float32", "float64": "float64"}


def _shape_of(x, reduce_instance_dims, what):
    """The shape of an analyzer's result over `x`, and the params that say how it reduces:
    [] where it reduces every value; elementwise (`reduce_instance_dims=False`), an
    example's, each position reduced over the batch (a dense `x` of a fixed shape)."""
    if reduce_instance_dims:
        return [], {}
    if not isinstance(x, tf.Tensor) or not x.shape[1:].is_fully_defined():
        raise NotSupported(
            "tf2_mapreduce.transform: %s(reduce_instance_dims=False) of %s: dense inputs of a fixed shape only"
            % (what, type(x).__name__ if not isinstance(x, tf.Tensor) else "shape %s" % x.shape)
        )
    shape = tuple(x.shape[1:].as_list())
    if not np.prod(shape):
        raise NotSupported(
            "tf2_mapreduce.transform: %s(reduce_instance_dims=False) of shape %s: no values" % (what, x.shape)
        )
    return list(shape), {"elementwise": shape}


def _numeric(x, what):
    dtype = trace.values_of(x).dtype
    if not (dtype.is_integer or dtype.is_floating):
        raise NotSupported("tf2_mapreduce.transform: %s of %s values (numbers only)" % (what, dtype.name))
    if dtype in (tf.uint32, tf.uint64):
        raise TypeError("%s: tft refuses %s values" % (what, dtype.name))
    return dtype


def min(x, reduce_instance_dims=True, name=None):  # noqa: A001 - tft's name
    """The least value of `x` (NaN if any is NaN; +inf, or the dtype's max, of none), of x's dtype."""
    with tf.name_scope(name or "min"):
        dtype = _numeric(x, "min")
        shape, params = _shape_of(x, reduce_instance_dims, "min")
        return trace.analyzer("min", x, tf.zeros(shape, dtype), params)


def max(x, reduce_instance_dims=True, name=None):  # noqa: A001 - tft's name
    """The greatest value of `x` (NaN if any is NaN; -inf, or minus the dtype's max, of none)."""
    with tf.name_scope(name or "max"):
        dtype = _numeric(x, "max")
        shape, params = _shape_of(x, reduce_instance_dims, "max")
        return trace.analyzer("max", x, tf.zeros(shape, dtype), params)


def sum(x, reduce_instance_dims=True, name=None):  # noqa: A001 - tft's name
    """The sum of `x`'s values: int64 for integers, float32 (float64) for floats; exact, rounded once."""
    with tf.name_scope(name or "sum"):
        dtype = _numeric(x, "sum")
        out = tf.as_dtype(_SUM_DTYPES.get(dtype.name, "int64"))
        shape, params = _shape_of(x, reduce_instance_dims, "sum")
        return trace.analyzer("sum", x, tf.zeros(shape, out), params)


def size(x, reduce_instance_dims=True, name=None):
    """How many values `x` has (a SparseTensor's present ones), int64."""
    with tf.name_scope(name or "size"):
        shape, params = _shape_of(x, reduce_instance_dims, "size")
        return trace.analyzer("size", x, tf.zeros(shape, tf.int64), params)


def _mean_dtype(x, output_dtype):
    dtype = trace.values_of(x).dtype
    return output_dtype or tf.as_dtype(_FLOAT_DTYPES.get(dtype.name, "float32"))


def mean(x, reduce_instance_dims=True, name=None, output_dtype=None):
    """The mean of `x`'s finite values (0 of none), float32 for integers."""
    with tf.name_scope(name or "mean"):
        _numeric(x, "mean")
        shape, params = _shape_of(x, reduce_instance_dims, "mean")
        return trace.analyzer("mean", x, tf.zeros(shape, _mean_dtype(x, output_dtype)), params)


def var(x, reduce_instance_dims=True, name=None, output_dtype=None):
    """The population variance of `x`'s finite values (0 of none), as tft's."""
    with tf.name_scope(name or "var"):
        _numeric(x, "var")
        shape, params = _shape_of(x, reduce_instance_dims, "var")
        return trace.analyzer("var", x, tf.zeros(shape, _mean_dtype(x, output_dtype)), params)


def quantiles(x, num_buckets, epsilon=None, weights=None, reduce_instance_dims=True, name=None):
    """The `num_buckets` - 1 boundaries between buckets of equal counts of `x`'s values,
    float32 of shape [1, num_buckets - 1]: exact, where tft's sketch is approximate
    (`epsilon` is taken and unused). NaN values are left out; no value gives zeros."""
    if weights is not None or not reduce_instance_dims:
        what = "weights" if weights is not None else "reduce_instance_dims=False"
        raise NotSupported("tf2_mapreduce.transform: quantiles(%s) is not supported" % what)
    if not isinstance(num_buckets, int) or isinstance(num_buckets, bool):
        raise TypeError("num_buckets must be an int, not %r" % (num_buckets,))
    if num_buckets < 2:
        raise ValueError("num_buckets must be at least 2, not %d" % num_buckets)
    with tf.name_scope(name or "quantiles"):
        _numeric(x, "quantiles")
        return trace.analyzer("quantiles", x, tf.zeros([1, num_buckets - 1], tf.float32), {"num_buckets": num_buckets})


def sanitized_vocab_filename(filename=None, prefix=None):
    """tft's vocabulary file name: `filename` with characters other than word characters,
    whitespace and "-" made "_", and runs of whitespace and "-" one "-"; without one,
    `prefix` and the name scope."""
    import re

    if filename is None:
        filename = prefix + tf.compat.v1.get_default_graph().get_name_scope()
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "_", filename).strip())


def vocabulary(
    x,
    *,
    top_k=None,
    frequency_threshold=None,
    vocab_filename=None,
    store_frequency=False,
    weights=None,
    labels=None,
    use_adjusted_mutual_info=False,
    min_diff_from_avg=None,
    coverage_top_k=None,
    coverage_frequency_threshold=None,
    key_fn=None,
    fingerprint_shuffle=False,
    file_format="text",
    name=None,
):
    """tft.vocabulary: the distinct values of `x` (strings, or integers as their decimal
    text) in tft's order (count descending, then bytes descending), kept if counted at
    least `frequency_threshold` times, the `top_k` first; strings that are empty or hold
    a newline are left out, as tft does. Returns the path of the vocabulary's file (an
    asset of transform_fn), for `apply_vocabulary` or a `tf.lookup.TextFileInitializer`."""
    unsupported = {
        "store_frequency": store_frequency,
        "weights": weights is not None,
        "labels": labels is not None,
        "use_adjusted_mutual_info": use_adjusted_mutual_info,
        "min_diff_from_avg": min_diff_from_avg is not None,
        "coverage_top_k": coverage_top_k is not None,
        "coverage_frequency_threshold": coverage_frequency_threshold is not None,
        "key_fn": key_fn is not None,
        "fingerprint_shuffle": fingerprint_shuffle,
    }
    used = [name_ for name_, on in unsupported.items() if on]
    if used:
        raise NotSupported("tf2_mapreduce.transform: vocabulary(%s=...) is not supported" % used[0])
    if file_format != "text":
        raise NotSupported("tf2_mapreduce.transform: vocabulary(file_format=%r): text only" % (file_format,))
    if top_k is not None and top_k <= 0:
        raise ValueError("top_k must be positive, not %r" % (top_k,))
    if frequency_threshold is not None and frequency_threshold < 0:
        raise ValueError("frequency_threshold must be non-negative, not %r" % (frequency_threshold,))
    dtype = trace.values_of(x).dtype
    if not (dtype == tf.string or dtype.is_integer):
        raise ValueError("vocabulary needs strings or integers, not %s" % dtype.name)
    with tf.name_scope(name or "vocabulary"):
        filename = sanitized_vocab_filename(vocab_filename, None if vocab_filename is not None else "vocab_")
        if not filename:
            raise ValueError("vocab_filename=%r names no file: give it a name of letters or digits" % vocab_filename)
        # Known by `key` (in asset_map, to get_vocabulary_size_by_name): the name as given, as tft knows it.
        key = filename if vocab_filename is None else vocab_filename
        params = {"top_k": top_k, "frequency_threshold": frequency_threshold, "filename": filename, "key": key}
        return trace.analyzer("vocabulary", x, tf.constant(filename), params)
