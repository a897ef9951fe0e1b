"""The three kinds of list a tf.train.Example feature holds, and each kind's name wherever the
package meets it: the proto's field, TensorFlow's dtype, the statistics, TFDV's protos."""

from typing import NamedTuple

from tf2_mapreduce.lazy_tf import tf

__all__ = ["Kind", "BYTES", "INT64", "FLOAT", "KINDS", "find"]


class Kind(NamedTuple):
    """One kind of feature list, by each of its names."""

    name: str  # in the statistics, as TFDV names a feature's type
    letter: str  # in a statistics table's keys (native/example_features.cc)
    field: str  # tf.train.Feature's field (its oneof "kind")
    dtype: str  # the name of TensorFlow's dtype of its values
    schema_type: str  # tensorflow-metadata's FeatureType in a schema
    statistics_type: str  # TFDV's FeatureNameStatistics.Type in statistics

    @property
    def tf_dtype(self):
        """TensorFlow's dtype of its values."""
        return tf.as_dtype(self.dtype)


BYTES = Kind("bytes", "b", "bytes_list", "string", "BYTES", "STRING")
INT64 = Kind("int64", "i", "int64_list", "int64", "INT", "INT")
FLOAT = Kind("float", "f", "float_list", "float32", "FLOAT", "FLOAT")
KINDS = (BYTES, INT64, FLOAT)


def find(**name: str) -> Kind | None:
    """The kind of the one name given, by what it names (`find(field="int64_list")`,
    `find(dtype="string")`), or None if no kind has it."""
    ((what, value),) = name.items()
    return next((kind for kind in KINDS if getattr(kind, what) == value), None)
