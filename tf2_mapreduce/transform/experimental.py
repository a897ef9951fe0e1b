"""tft.experimental's calls in this subset: `get_vocabulary_size_by_name` (a vocabulary's
size, for a one-hot depth, as TFX's taxi and census modules use it) and
`annotate_sparse_output_shape` (a sparse output written as a SparseFeature of that size,
as tf.Transform's census_example_v2 does)."""

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.transform import trace

__all__ = ["get_vocabulary_size_by_name", "annotate_sparse_output_shape"]


def get_vocabulary_size_by_name(vocab_filename: str):
    """The number of terms of the vocabulary made before (`vocabulary`,
    `compute_and_apply_vocabulary`) with `vocab_filename`, OOV buckets not counted, an
    int64 scalar, as tft's: a constant once analyzed, so that `tf.one_hot` of it has a
    fixed depth. Raises ValueError for a name no vocabulary has."""
    return trace.current().vocabulary_size(vocab_filename)


def annotate_sparse_output_shape(tensor, shape) -> None:
    """Notes that `tensor` (a 2-D SparseTensor, an output) is `shape` wide ([size], or a
    scalar int tensor known once analyzed, as a vocabulary's size), and makes its dense
    shape [batch, size], as tft does: it is written as tft writes a SparseFeature, its
    indices and values in features of their own (`NAME$sparse_indices_0`,
    `NAME$sparse_values`), its schema's size that."""
    if not isinstance(tensor, tf.SparseTensor):
        raise TypeError("annotate_sparse_output_shape needs a SparseTensor, not %s" % type(tensor).__name__)
    if not isinstance(shape, tf.Tensor):
        if tensor.shape.rank - 1 != len(shape):
            raise ValueError("Annotated shape %s was expected to have rank %d" % (shape, tensor.shape.rank - 1))
        if not all(a is None or a <= b for a, b in zip(tensor.shape[1:], shape)):
            raise ValueError("Shape %s cannot contain annotated tensor %s" % (shape, tensor))
        shape = tf.convert_to_tensor(shape, dtype=tf.int64)
    elif shape.shape.rank > 1 or (shape.shape.rank == 1 and shape.shape[0] != tensor.shape.rank - 1):
        raise ValueError(
            "Annotation shape has rank %d but expected to have rank %d" % (shape.shape.rank, tensor.shape.rank - 1)
        )
    shape = tf.reshape(tf.cast(shape, tf.int64), [-1])
    # In place, as tft's: the output itself is then as wide as annotated, in transform_fn too.
    tensor._dense_shape = tf.concat([tensor.dense_shape[:1], shape], 0)
    trace.current().annotate_sparse(tensor, shape)
