"""tft.experimental's calls in this subset: `get_vocabulary_size_by_name` (a vocabulary's
size, for a one-hot depth, as TFX's taxi and census modules use it)."""

from tf2_mapreduce.transform import trace

__all__ = ["get_vocabulary_size_by_name"]


def get_vocabulary_size_by_name(vocab_filename: str):
    """The number of terms of the vocabulary made before (`vocabulary`,
    `compute_and_apply_vocabulary`) with `vocab_filename`, OOV buckets not counted, an
    int64 scalar, as tft's: a constant once analyzed, so that `tf.one_hot` of it has a
    fixed depth. Raises ValueError for a name no vocabulary has."""
    return trace.current().vocabulary_size(vocab_filename)
