"""How a resource that a preprocessing_fn captures is known across processes: a lookup
table of tf.lookup's, made as the function was traced, by what it holds; another, not."""

import contextlib
import os
import weakref

import numpy as np

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.transform.digest import digest_of, value_bytes

__all__ = ["table_contents", "noting_tables", "known"]

# What is known of resources by their handles (a tensor is not hashable: by its id, with
# a weak reference to it, so that an id used again is not taken for it): the key and value
# dtypes of a table made while a function was traced in this process (its class's are the
# kernel's table's; an export of other dtypes aborts the process), or another's token.
_NOTED = {}


def _note(handle, what):
    key = id(handle)
    _NOTED[key] = (weakref.ref(handle, lambda _: _NOTED.pop(key, None)), what)
    return what


def _noted(handle):
    entry = _NOTED.get(id(handle))
    return entry[1] if entry is not None and entry[0]() is handle else None


def table_contents(handle, dtypes):
    """(keys, values, key dtype, value dtype) of the lookup table `handle` (eager), keys
    sorted; read eagerly, if in a graph being traced too."""
    with tf.init_scope():
        keys, values = tf.raw_ops.LookupTableExportV2(table_handle=handle, Tkeys=dtypes[0], Tvalues=dtypes[1])
    keys, values = keys.numpy(), values.numpy()
    order = np.argsort(keys, kind="stable")  # exported in the order of a hash seeded per process
    return keys[order], values[order], dtypes[0], dtypes[1]


@contextlib.contextmanager
def noting_tables():
    """Within, the lookup tables made are noted for `known`: by TensorFlow's own tracker of
    the resources made in a trace (private; Keras and the save use it). A table the
    function keeps (made once, then reused) is made, and noted, in its first trace only."""
    from tensorflow.python.trackable import resource as trackable_resource

    made = trackable_resource.ResourceTracker()
    with trackable_resource.resource_tracker_scope(made):
        yield
    exportable = (
        tf.lookup.StaticHashTable,
        tf.lookup.experimental.MutableHashTable,
        tf.lookup.experimental.DenseHashTable,
    )
    for resource in made.resources:
        # A table wrapping another (StaticVocabularyTable) has its handle, not its dtypes.
        if isinstance(resource, exportable) and getattr(resource, "_table", None) is None:
            _note(resource.resource_handle, (resource.key_dtype, resource.value_dtype))


def known(handle, filled_as_run: bool) -> bytes:
    """What a captured resource (its eager `handle`) is known by: a table `noting_tables`
    noted by its dtypes and, unless an op of the function fills it (`filled_as_run`: the
    graph's ops say what it holds), the keys and values it holds now, read (about 1.7 s a
    million). Any other resource (a variable, a table made before the trace) by a random
    token: never the same as another's, and a checkpoint another process named after it
    is refused."""
    noted = _noted(handle)
    if not isinstance(noted, tuple):  # random: no other resource, here or in another process, has it
        return digest_of(b"resource of this process", noted or _note(handle, os.urandom(16)))
    dtypes = noted
    described = repr(dtypes).encode()
    if filled_as_run:
        return digest_of(b"table filled as the function runs", described)
    keys, values, _, _ = table_contents(handle, dtypes)
    return digest_of(b"table", described, value_bytes(keys), value_bytes(values))
