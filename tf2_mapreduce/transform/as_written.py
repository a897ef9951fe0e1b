"""Floating-point arithmetic that gives each value the same bits in every graph and every
batch: the map steps writing data/, the saved transform_fn, a trainer's serving model.

Two things make TensorFlow compute an ulp apart. Its graph optimizer rewrites in some graphs
only: `x / 3.0` becomes `x * (1 / 3.0)`, `pow(x, 0.5)` `sqrt(x)`, `log(1 + x)` `log1p(x)`,
`x / sqrt(y)` `x * rsqrt(y)`, chains of constants one (in a `tf.function` and a loaded
SavedModel; some in a tf.data function; none eagerly nor in a remote worker's step). And
its CPU kernels for log, exp, pow, sigmoid, reciprocal and others compute a tensor's values
in vector lanes but its last few in scalar code, which rounds otherwise: a value's bits
depend on its place in the batch (a sparse feature's values fall anywhere).

While a preprocessing_fn is traced (`rewriting`), each arithmetic op it makes is made again
with its float inputs through a `PlaceholderWithDefault`, which the optimizer neither sees
through nor folds; and each lane-dependent op is made over its inputs padded to whole
vectors, so that every value is computed in the lanes."""

import contextlib

from tf2_mapreduce.lazy_tf import tf

__all__ = ["rewriting"]

# Ops whose result a rewrite of their inputs by the graph optimizer can change.
ARITHMETIC = frozenset(
    """Add AddV2 AddN Sub Mul MulNoNan RealDiv Div DivNoNan FloorDiv FloorMod Mod TruncateDiv Pow
    Sqrt Rsqrt Reciprocal Inv Square SquaredDifference Neg Log Log1p Exp Expm1 Xlogy Xlog1py Xdivy
    Sum Mean Prod Cumsum Cumprod Maximum Minimum Tanh Sigmoid Softmax LogSoftmax Erf Erfc Sin Cos
    Tan Asin Acos Atan Atan2 Sinh Cosh Asinh Acosh Atanh Softplus Softsign Elu Selu Lgamma Digamma
    Ndtri Erfinv MatMul BatchMatMulV2 BatchMatMulV3 BiasAdd""".split()
)
# Element-wise ops whose CPU kernel rounds a value by its place in the tensor (measured:
# each value alone, then in a batch of 4,099, float32 and float64); Sqrt, Tanh (float32)
# and the basic arithmetic do not, and are not padded.
IN_LANES = frozenset(
    """Log Log1p Exp Expm1 Pow Sigmoid Tanh Sin Cos Tan Asin Acos Atan Atan2 Sinh Cosh Asinh Acosh
    Atanh Erf Erfc Erfinv Rsqrt Reciprocal Inv Softplus Elu Selu Xlogy Xlog1py Ndtri Lgamma Digamma""".split()
)
# Ops over a tensor's rows that vectorize across rows: made of ops in lanes (`_softmax`).
_ROWS = ("Softmax", "LogSoftmax")
# Values a vector holds, at most: 16 float32 in AVX-512; a multiple of every narrower one.
LANES = 16
_BARRIER = "PlaceholderWithDefault"


def opaque(tensor):
    """`tensor` itself, which TensorFlow's graph optimizer does not see through (nor fold,
    were it a constant)."""
    return tf.raw_ops.PlaceholderWithDefault(input=tensor, shape=tensor.shape)


def _made(graph, op_type, inputs, attrs):
    """The outputs of a new op of `op_type` over `inputs`, with `attrs` (AttrValues)."""
    return graph._create_op_internal(op_type, inputs, attrs=dict(attrs)).outputs


def _in_lanes(graph, op_type, inputs, attrs, static_shape):
    """The one output of an op of `op_type` made over `inputs` broadcast to one shape,
    flattened and padded with ones to a multiple of `LANES`, then cut and shaped back."""
    shape = tf.shape(inputs[0])
    for other in inputs[1:]:
        shape = tf.broadcast_dynamic_shape(shape, tf.shape(other))
    count = tf.reduce_prod(shape)
    padding = (LANES - count % LANES) % LANES
    padded = [tf.concat([tf.reshape(tf.broadcast_to(x, shape), [-1]), tf.ones([padding], x.dtype)], 0) for x in inputs]
    (output,) = _made(graph, op_type, padded, attrs)
    result = tf.reshape(output[:count], shape)
    result.set_shape(static_shape)
    return result


def _softmax(graph, op_type, logits, attrs):
    """Softmax or LogSoftmax over the last axis, its exp and log in lanes: the kernels'
    own vectorize across rows, so a row's bits depended on its place in the batch."""
    dtype = {"T": attrs["T"]}
    # Each step opaque too: the ops made here are not seen by the callback.
    shifted = opaque(logits - tf.reduce_max(logits, axis=-1, keepdims=True))
    exp = opaque(_in_lanes(graph, "Exp", [shifted], dtype, logits.shape))
    total = opaque(tf.reduce_sum(exp, axis=-1, keepdims=True))
    if op_type == "Softmax":
        return exp / total
    return shifted - _in_lanes(graph, "Log", [total], dtype, total.shape)


def _as_written(op_type, inputs, attrs, outputs, op_name=None, graph=None):
    """The op callback: None (the op as made) or the outputs that replace the op's."""
    del attrs, op_name  # read from the op itself
    if graph is None or op_type not in ARITHMETIC or not outputs:
        return None
    floats = [x.dtype.is_floating for x in inputs]
    lanes = op_type in IN_LANES and len(outputs) == 1 and outputs[0].dtype.is_floating
    if not lanes and all(x.op.type == _BARRIER for x, f in zip(inputs, floats) if f):
        return None
    op = outputs[0].op
    attrs = op.node_def.attr
    with graph.as_default():
        inputs = [opaque(x) if f and x.op.type != _BARRIER else x for x, f in zip(inputs, floats)]
        if op_type in _ROWS:
            return [_softmax(graph, op_type, inputs[0], attrs)]
        if lanes:
            return [_in_lanes(graph, op_type, inputs, attrs, outputs[0].shape)]
        return _made(graph, op_type, inputs, attrs)


@contextlib.contextmanager
def rewriting():
    """Within it, on this thread, the arithmetic ops that graphs are given are made so
    (a no-op where executing eagerly, which neither rewrites nor depends on places)."""
    from tensorflow.python.framework import op_callbacks  # tfdbg's own hook (tf.debugging.enable_check_numerics)

    if tf.executing_eagerly():
        yield
        return
    op_callbacks.add_op_callback(_as_written)
    try:
        yield
    finally:
        op_callbacks.remove_op_callback(_as_written)
