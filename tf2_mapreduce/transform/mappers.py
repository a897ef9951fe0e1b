"""tf.Transform's mappers over the analyzers' results: `scale_to_z_score`, `scale_to_0_1`,
`scale_by_min_max`, `compute_and_apply_vocabulary`, `apply_vocabulary`, `bucketize`,
`apply_buckets`; and those of no analyzer: `hash_strings`, `sparse_tensor_to_dense_with_shape`.
tft's names, defaults, dtypes and edge cases (min == max, var == 0)."""

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.transform import analyzers, trace
from tf2_mapreduce.transform.trace import NotSupported

__all__ = [
    "scale_to_z_score",
    "scale_to_0_1",
    "scale_by_min_max",
    "compute_and_apply_vocabulary",
    "apply_vocabulary",
    "bucketize",
    "apply_buckets",
    "hash_strings",
    "sparse_tensor_to_dense_with_shape",
]

_FLOAT_OUTPUT = {"float16": tf.float16, "float32": tf.float32, "float64": tf.float64}


def _map_values(x, fn):
    """`fn` applied to `x`'s values, its structure (a SparseTensor's indices, a
    RaggedTensor's row splits) kept."""
    if isinstance(x, tf.SparseTensor):
        return tf.SparseTensor(x.indices, fn(x.values), x.dense_shape)
    if isinstance(x, tf.RaggedTensor):
        return x.with_flat_values(fn(x.flat_values))
    return fn(x)


def _elementwise_of(x, elementwise, what):
    """`elementwise` where `x` is dense; `NotSupported` naming `what` for another input."""
    if elementwise and not isinstance(x, tf.Tensor):
        raise NotSupported(
            "tf2_mapreduce.transform: %s(elementwise=True) of a %s: dense inputs of a fixed shape only"
            % (what, type(x).__name__)
        )
    return elementwise


def scale_to_z_score(x, elementwise=False, name=None, output_dtype=None):
    """(x - mean) / sqrt(var), with tft's population variance; x - mean where var is 0.
    Integers become float32. `elementwise`: each position of an example's values by its
    own mean and variance over the batch (a dense x of a fixed shape)."""
    elementwise = _elementwise_of(x, elementwise, "scale_to_z_score")
    with tf.name_scope(name or "scale_to_z_score"):
        dtype = trace.values_of(x).dtype
        output_dtype = output_dtype or _FLOAT_OUTPUT.get(dtype.name, tf.float32)
        x = _map_values(x, lambda v: tf.cast(v, output_dtype))
        mean = analyzers.mean(x, not elementwise, output_dtype=output_dtype)
        variance = analyzers.var(x, not elementwise, output_dtype=output_dtype)

        deviation = tf.sqrt(variance)

        def scaled(values):
            centered = values - mean
            return tf.where(deviation != 0, centered / tf.where(deviation != 0, deviation, 1), centered)

        return _map_values(x, scaled)


def scale_by_min_max(x, output_min=0.0, output_max=1.0, elementwise=False, name=None):
    """x scaled linearly from [min, max] to [output_min, output_max], as float32; where
    min == max (or no values), sigmoid(x) scaled to the range, as tft does. `elementwise`:
    each position of an example's values by its own min and max over the batch."""
    elementwise = _elementwise_of(x, elementwise, "scale_by_min_max")
    if output_min >= output_max:
        raise ValueError("output_min must be less than output_max")
    with tf.name_scope(name or "scale_by_min_max"):
        x = _map_values(x, lambda v: tf.cast(v, tf.float32))
        low, high = analyzers.min(x, not elementwise), analyzers.max(x, not elementwise)

        spread = high - low

        def scaled(values):
            linear = (values - low) / tf.where(spread > 0, spread, 1)
            return tf.where(spread > 0, linear, tf.sigmoid(values)) * (output_max - output_min) + output_min

        return _map_values(x, scaled)


def scale_to_0_1(x, elementwise=False, name=None):
    """`scale_by_min_max` to [0, 1]."""
    with tf.name_scope(name or "scale_to_0_1"):
        return scale_by_min_max(x, 0.0, 1.0, elementwise)


def apply_vocabulary(
    x,
    deferred_vocab_filename_tensor,
    *,
    default_value=-1,
    num_oov_buckets=0,
    lookup_fn=None,
    file_format="text",
    name=None,
):
    """Each value of `x` as its index in the vocabulary, int64 of x's structure: an
    unknown value is `default_value`, or with `num_oov_buckets` > 0, the vocabulary's size
    plus its bucket (Fingerprint64 of its text, modulo the buckets), as tft's table does."""
    if lookup_fn is not None:
        raise NotSupported("tf2_mapreduce.transform: apply_vocabulary(lookup_fn=...) is not supported")
    if file_format != "text":
        raise NotSupported("tf2_mapreduce.transform: apply_vocabulary(file_format=%r): text only" % (file_format,))
    with tf.name_scope(name or "apply_vocab"):
        state = trace.current()
        found = None
        if isinstance(state, trace.Applying):
            found = state.table(
                deferred_vocab_filename_tensor, trace.values_of(x).dtype, default_value, num_oov_buckets
            )
        if found is None:
            # Ids that depend on the vocabulary's stand-in: an analyzer over them reads them
            # in a later phase (`trace.Analysis`), never counted over these zeros.
            unknown = tf.cast(tf.strings.length(deferred_vocab_filename_tensor), tf.int64) * 0
            return _map_values(x, lambda v: tf.zeros_like(v, tf.int64) + unknown)
        table, domain = found
        ids = _map_values(x, lambda v: table.lookup(tf.cast(v, tf.int64) if v.dtype.is_integer else v))
        return state.mark(ids, domain)


def compute_and_apply_vocabulary(
    x,
    *,
    default_value=-1,
    top_k=None,
    frequency_threshold=None,
    num_oov_buckets=0,
    vocab_filename=None,
    weights=None,
    labels=None,
    use_adjusted_mutual_info=False,
    min_diff_from_avg=0.0,
    coverage_top_k=None,
    coverage_frequency_threshold=None,
    key_fn=None,
    fingerprint_shuffle=False,
    file_format="text",
    store_frequency=False,
    reserved_tokens=None,
    name=None,
):
    """`vocabulary` then `apply_vocabulary`, as tft's."""
    if reserved_tokens is not None:
        raise NotSupported(
            "tf2_mapreduce.transform: compute_and_apply_vocabulary(reserved_tokens=...) is not supported"
        )
    with tf.name_scope(name or "compute_and_apply_vocabulary"):
        filename = analyzers.vocabulary(
            x,
            top_k=top_k,
            frequency_threshold=frequency_threshold,
            vocab_filename=vocab_filename,
            store_frequency=store_frequency,
            weights=weights,
            labels=labels,
            use_adjusted_mutual_info=use_adjusted_mutual_info,
            min_diff_from_avg=min_diff_from_avg or None,
            coverage_top_k=coverage_top_k,
            coverage_frequency_threshold=coverage_frequency_threshold,
            key_fn=key_fn,
            fingerprint_shuffle=fingerprint_shuffle,
            file_format=file_format,
        )
        return apply_vocabulary(
            x, filename, default_value=default_value, num_oov_buckets=num_oov_buckets, file_format=file_format
        )


def apply_buckets(x, bucket_boundaries, name=None):
    """The bucket of each value, int64: the number of boundaries <= it (a value below the
    first is 0, one equal to boundary i is i + 1, NaN the last), as tft's."""
    with tf.name_scope(name or "apply_buckets"):
        boundaries = tf.convert_to_tensor(bucket_boundaries)
        if boundaries.shape.rank != 2:
            raise ValueError("bucket_boundaries must be of rank 2, not %s" % (boundaries.shape,))
        flat = tf.reshape(boundaries, [-1])

        def bucket(values):
            if values.dtype.max > flat.dtype.max:
                edges, values_ = tf.cast(flat, values.dtype), values
            else:
                edges, values_ = flat, tf.cast(values, flat.dtype)
            found = tf.searchsorted(edges, tf.reshape(values_, [-1]), side="right", out_type=tf.int64)
            return tf.ensure_shape(tf.reshape(found, tf.shape(values_)), values_.shape)

        buckets = _map_values(x, bucket)
        state = trace.current()
        if isinstance(state, trace.Applying):
            state.mark(buckets, (0, int(flat.shape[0])))
        return buckets


def bucketize(x, num_buckets, epsilon=None, weights=None, elementwise=False, name=None):
    """The bucket of each value of `x` among `num_buckets` of equal counts, int64, its
    boundaries `analyzers.quantiles`: exact, where tft's are approximate."""
    if elementwise:
        raise NotSupported("tf2_mapreduce.transform: bucketize(elementwise=True) is not supported")
    if weights is not None:
        raise NotSupported("tf2_mapreduce.transform: bucketize(weights=...) is not supported")
    with tf.name_scope(name or "bucketize"):
        boundaries = analyzers.quantiles(x, num_buckets, epsilon)
        return apply_buckets(x, boundaries)


def hash_strings(strings, hash_buckets, key=None, name=None):
    """Each string's bucket among `hash_buckets`, int64, as tft hashes it: TensorFlow's
    Fingerprint64 bucket (`to_hash_bucket_fast`), or with `key` ([2] ints) its keyed
    SipHash one (`to_hash_bucket_strong`); a SparseTensor's or RaggedTensor's structure kept."""
    if not isinstance(strings, (tf.Tensor, tf.SparseTensor, tf.RaggedTensor)) or strings.dtype != tf.string:
        raise TypeError(
            "Input to hash_strings must be a `Tensor`, `SparseTensor`, or `RaggedTensor` of dtype string; got %s"
            % getattr(strings, "dtype", type(strings).__name__)
        )

    def hashed(values):
        if key is None:
            return tf.strings.to_hash_bucket_fast(values, hash_buckets, name=name or "hash_strings")
        return tf.strings.to_hash_bucket_strong(values, hash_buckets, key, name=name or "hash_strings")

    return _map_values(strings, hashed)


def sparse_tensor_to_dense_with_shape(x, shape, default_value=0):
    """SparseTensor `x` as a dense tensor of `shape` (a dimension None: `x`'s own), the rest
    `default_value`, as tft makes it (a value outside `shape` fails when run)."""
    if not isinstance(x, tf.SparseTensor):
        raise ValueError("input must be a SparseTensor")
    dense_shape = [x.dense_shape[i] if size is None else size for i, size in enumerate(shape)]
    dense = tf.raw_ops.SparseToDense(
        sparse_indices=x.indices, output_shape=dense_shape, sparse_values=x.values, default_value=default_value
    )
    dense.set_shape(shape)
    return dense
