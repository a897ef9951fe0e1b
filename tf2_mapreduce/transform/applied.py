"""A saved transform_fn applied in map steps: its graph imported into each step, and each
lookup table it captured rebuilt there from the table's contents, read where it is loaded.

What writes data/ is then the SavedModel itself, bit for bit: the transform pass applies the
transform_fn it saved, and `--transform_output` an earlier one. The tables cannot stay where
the SavedModel is loaded: that is the coordinator, which workers do not reach."""

import hashlib

import numpy as np

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.lazy_tf import tf

__all__ = ["SavedTransform"]

_TYPED = {"LookupTableFindV2": ("Tin", "Tout"), "LookupTableExportV2": ("Tkeys", "Tvalues")}


def _table_dtypes(graph, placeholder, where):
    """The key and value dtypes of the table `placeholder` (a captured handle) stands for,
    read from the ops that use it: its own, else (used within tf.cond's branches, say)
    those of the functions it calls, where all agree. A wrong guess would not do: the
    export kernel aborts the process on dtypes that are not the table's."""
    for op in placeholder.consumers():
        if op.type in _TYPED:
            return tuple(op.get_attr(attr) for attr in _TYPED[op.type])
    found = {
        tuple(tf.as_dtype(node.attr[attr].type) for attr in _TYPED[node.op])
        for function in graph._functions.values()
        for node in function.definition.node_def
        if node.op in _TYPED
    }
    if len(found) != 1:
        raise UsageError(
            "%s: transform_fn captures a resource that no lookup of its own reads (a variable, or a table "
            "used only within nested functions): it cannot be applied in map steps" % where
        )
    return found.pop()


def _table_contents(handle, dtypes):
    """(keys, values, key dtype, value dtype) of the lookup table `handle`."""
    keys, values = tf.raw_ops.LookupTableExportV2(table_handle=handle, Tkeys=dtypes[0], Tvalues=dtypes[1])
    keys, values = keys.numpy(), values.numpy()
    order = np.argsort(keys, kind="stable")  # exported in the order of a hash seeded per process
    return keys[order], values[order], dtypes[0], dtypes[1]


def _bytes(array) -> bytes:
    if array.dtype == object:  # strings: each by its length and bytes
        return b"".join(b"%d:%s" % (len(item), item) for item in array.ravel())
    return array.tobytes()


def _rebuilt(keys, values, key_dtype, value_dtype):
    """A table holding `keys` -> `values`, made where the step runs: its handle, ready."""
    handle = tf.raw_ops.AnonymousHashTable(key_dtype=key_dtype, value_dtype=value_dtype)
    filled = tf.raw_ops.LookupTableImportV2(
        table_handle=handle, keys=tf.constant(keys, key_dtype), values=tf.constant(values, value_dtype)
    )
    with tf.control_dependencies([filled]):
        return tf.identity(handle)


class SavedTransform:
    """The `transform_fn` of the SavedModel at `directory` (a transform_fn/ that
    tf2_mapreduce wrote), loaded here; `apply` computes it in a graph being traced. Every
    value it captured is copied: its tables by their contents, its constants by value."""

    def __init__(self, directory: str):
        try:
            loaded = tf.saved_model.load(directory)
        except (OSError, tf.errors.OpError) as e:
            raise UsageError("%s: not a SavedModel: %s" % (directory, getattr(e, "message", e))) from None
        function = getattr(loaded, "transform_fn", None)
        concrete = getattr(function, "concrete_functions", ())
        if len(concrete) != 1:
            raise UsageError("%s: no transform_fn of one input signature: not a transform's transform_fn/" % directory)
        (concrete,) = concrete
        graph = concrete.graph
        args = len(graph.inputs) - len(graph.internal_captures)
        self.input_signature = concrete.structured_input_signature[0][0]
        self.output_signature = concrete.structured_outputs
        self._graph_def = graph.as_graph_def()
        # The functions it calls (tf.cond's branches) are added to each step's graph as
        # functions of its own, which TensorFlow sends to the workers with the step; the
        # imported library alone stays on the coordinator.
        self._functions = list(graph._functions.values())
        digest = hashlib.sha256(self._graph_def.SerializeToString(deterministic=True))
        self._graph_def.library.Clear()
        self._inputs = [t.name for t in graph.inputs[:args]]
        self._outputs = [t.name for t in graph.outputs]
        self._captured = []
        for external, internal in zip(concrete.captured_inputs, graph.internal_captures):
            if external.dtype == tf.resource:
                value = _table_contents(external, _table_dtypes(graph, internal, directory))
            else:
                value = (external.numpy(),)
            for part in value[:2]:
                digest.update(repr((str(part.dtype), part.shape)).encode() + _bytes(part))
            self._captured.append((internal.name, value))
        self.digest = digest.hexdigest()

    def apply(self, features: dict) -> dict:
        """The transformed features of `features` (raw ones, as `input_signature` says), in
        the graph being traced: the saved graph, imported."""
        missing = sorted(set(self.input_signature) - set(features))
        if missing:
            raise UsageError("transform_fn reads features %s, which the examples' schema lacks" % missing)
        flat = tf.nest.flatten({name: features[name] for name in self.input_signature}, expand_composites=True)
        input_map = dict(zip(self._inputs, flat))
        for name, value in self._captured:
            input_map[name] = _rebuilt(*value) if len(value) == 4 else tf.constant(value[0])
        graph = tf.compat.v1.get_default_graph()
        for function in self._functions:
            graph._add_function_recursive(function)
        outputs = tf.graph_util.import_graph_def(
            self._graph_def, input_map=input_map, return_elements=self._outputs, name="transform_fn"
        )
        # Imported ops may not know the shapes that the saved function's signature states.
        for output, spec in zip(outputs, tf.nest.flatten(self.output_signature, expand_composites=True)):
            output.set_shape(spec.shape)
        return tf.nest.pack_sequence_as(self.output_signature, outputs, expand_composites=True)
