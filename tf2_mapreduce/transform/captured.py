"""The lookup tables a preprocessing_fn makes as it is traced, for `digest.Digests` to know
them across processes: one made under tf.init_scope by what it holds, one made in the
function by the op that fills it."""

import contextlib

import numpy as np

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.transform.digest import digest_of, value_bytes

__all__ = ["table_contents", "Tables", "noting_tables"]


def table_contents(handle, dtypes):
    """(keys, values, key dtype, value dtype) of the lookup table `handle` (eager), keys
    sorted; read eagerly, if in a graph being traced too."""
    with tf.init_scope():
        keys, values = tf.raw_ops.LookupTableExportV2(table_handle=handle, Tkeys=dtypes[0], Tvalues=dtypes[1])
    keys, values = keys.numpy(), values.numpy()
    order = np.argsort(keys, kind="stable")  # exported in the order of a hash seeded per process
    return keys[order], values[order], dtypes[0], dtypes[1]


class Tables:
    """The lookup tables made in one trace, by their handles, with their classes' key and
    value dtypes: the kernel's table's (an export of other dtypes aborts the process)."""

    def __init__(self):
        self._dtypes = {}  # {id of a handle (a tensor is not hashable): (the handle, its dtypes)}
        self._filled_by = {}  # {id of a handle: the op of the traced graph that fills it}

    def note(self, made) -> None:
        """Notes the tables among `made` (resources) whose export is (keys, values), a key a
        row: not a DenseHashTable's (its buckets), nor a StaticVocabularyTable's (its handle
        is another table's, of other dtypes)."""
        exportable = (tf.lookup.StaticHashTable, tf.lookup.experimental.MutableHashTable)
        for table in made:
            if isinstance(table, exportable):
                self._dtypes[id(table.resource_handle)] = (table.resource_handle, (table.key_dtype, table.value_dtype))
                # A table made in the function (not under tf.init_scope) is filled by an op of
                # the graph, which tf.lookup keeps (private) as the one that fills it.
                filling = getattr(table, "_init_op", None)
                if isinstance(filling, tf.Operation):
                    self._filled_by[id(table.resource_handle)] = filling.name

    def dtypes(self, handle) -> tuple | None:
        """The key and value dtypes of the table `handle`, if made in this trace."""
        entry = self._dtypes.get(id(handle))
        return entry[1] if entry is not None and entry[0] is handle else None

    def filled_by(self, handle) -> str | None:
        """The name of the op of the traced graph that fills the table `handle`, made in this
        trace in the function; None for another."""
        return self._filled_by.get(id(handle)) if self.dtypes(handle) is not None else None

    def known(self, handle) -> bytes | None:
        """What the table `handle` (eager), captured and only read by the function, holds:
        its dtypes, keys and values, read now (about 1.7 s a million). None for a resource
        not made in this trace (a table made at import, or in an earlier trace and kept: it
        may have been written since), or not yet filled (one made in the function)."""
        dtypes = self.dtypes(handle)
        if dtypes is None or self.filled_by(handle) is not None:
            return None
        try:
            keys, values, _, _ = table_contents(handle, dtypes)
        except tf.errors.OpError:
            return None
        return digest_of(b"table", repr(dtypes).encode(), value_bytes(keys), value_bytes(values))


@contextlib.contextmanager
def noting_tables():
    """Gives a `Tables`, filled, once the block is left, with the tables made within: by
    TensorFlow's own tracker of the resources made in a trace (private; Keras and the save
    use it)."""
    from tensorflow.python.trackable import resource as trackable_resource

    made = trackable_resource.ResourceTracker()
    tables = Tables()
    with trackable_resource.resource_tracker_scope(made):
        yield tables
    tables.note(made.resources)
