"""`DatasetMetadata`: a raw schema made from a feature spec, as tf.Transform's, for the modules
that make theirs with `tft.DatasetMetadata.from_feature_spec(spec).schema` when imported."""

from tf2_mapreduce.transform import schema as schemas
from tf2_mapreduce.transform.trace import NotSupported

__all__ = ["DatasetMetadata"]


class DatasetMetadata:
    """A dataset's `schema` (a tensorflow-metadata `Schema`), as tf.Transform's class of the name holds it."""

    def __init__(self, schema):
        self._schema = schema

    @classmethod
    def from_feature_spec(cls, feature_spec: dict, domains: dict | None = None) -> "DatasetMetadata":
        """The metadata of `feature_spec` ({name: FixedLenFeature | VarLenFeature |
        RaggedFeature}), its schema as tf.Transform's `schema_from_feature_spec` makes it.
        Raises `NotSupported` for what this subset cannot read back (domains, SparseFeature,
        ragged partitions)."""
        if domains:
            raise NotSupported("DatasetMetadata.from_feature_spec: domains")
        return cls(schemas.raw(feature_spec))

    @property
    def schema(self):
        return self._schema

    def __eq__(self, other):
        return isinstance(other, DatasetMetadata) and self._schema == other._schema

    def __repr__(self):
        return "DatasetMetadata(%d features)" % len(self._schema.feature)
