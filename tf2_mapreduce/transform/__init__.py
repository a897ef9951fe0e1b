"""tf.Transform's analyze-and-transform on tf2_mapreduce: `import tf2_mapreduce.transform as
tft` in place of `tensorflow_transform` for a preprocessing_fn written against this subset.
Analyzers are counted exactly, in one pass a phase (an analyzer over another's result reads
it in the next); anything else fails when the function is traced,
naming what is not supported."""

from tf2_mapreduce import __version__  # tft.__version__, which notebooks print, is tf2_mapreduce's here
from tf2_mapreduce.transform import experimental
from tf2_mapreduce.transform.analyzers import max, mean, min, quantiles, size, sum, var, vocabulary  # noqa: A004
from tf2_mapreduce.transform.mappers import (
    apply_buckets,
    apply_vocabulary,
    bucketize,
    compute_and_apply_vocabulary,
    hash_strings,
    scale_by_min_max,
    scale_to_0_1,
    scale_to_z_score,
    sparse_tensor_to_dense_with_shape,
)
from tf2_mapreduce.transform.metadata import DatasetMetadata
from tf2_mapreduce.transform.output import TFTransformOutput
from tf2_mapreduce.transform.tokens import bag_of_words, ngrams, tfidf, word_count
from tf2_mapreduce.transform.trace import NotSupported

__all__ = [
    "__version__",
    "compute_and_apply_vocabulary",
    "vocabulary",
    "apply_vocabulary",
    "scale_to_z_score",
    "scale_to_0_1",
    "scale_by_min_max",
    "bucketize",
    "apply_buckets",
    "hash_strings",
    "sparse_tensor_to_dense_with_shape",
    "ngrams",
    "bag_of_words",
    "word_count",
    "tfidf",
    "quantiles",
    "min",
    "max",
    "mean",
    "var",
    "size",
    "sum",
    "experimental",
    "TFTransformOutput",
    "DatasetMetadata",
    "NotSupported",
]


def __getattr__(name):
    # What tft has and this subset does not: said by name, with the subset, when traced.
    if name.startswith("_"):
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    raise AttributeError(
        "tf2_mapreduce.transform has no %s: tf.Transform's subset here is %s"
        % (
            name,
            ", ".join(
                n for n in __all__ if n not in ("NotSupported", "experimental", "TFTransformOutput", "DatasetMetadata")
            ),
        )
    )
