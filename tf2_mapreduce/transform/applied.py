"""A saved transform_fn applied in map steps: its graph imported into each step, and each
lookup table it captured rebuilt there from the table's contents, read where it is loaded.

What writes data/ is then the SavedModel itself, bit for bit: the transform pass applies the
transform_fn it saved, and `--transform_output` an earlier one. The tables cannot stay where
the SavedModel is loaded: that is the coordinator, which workers do not reach."""

import hashlib

import numpy as np

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.transform import trace
from tf2_mapreduce.transform.digest import Digests

__all__ = ["SavedTransform"]


def _table_dtypes(loaded, handle, where):
    """The key and value dtypes of the lookup table whose handle `handle` is, from the
    SavedModel's own function that makes it (a table's handle says neither, and the export
    kernel aborts the process on dtypes that are not the table's)."""
    for trackable in tf.train.TrackableView(loaded).descendants():
        if getattr(trackable, "resource_handle", None) is not handle:
            continue
        made_by = getattr(trackable, "_create_resource", None)
        for function in getattr(made_by, "concrete_functions", [made_by] if made_by is not None else []):
            for op in function.graph.get_operations():
                if "key_dtype" in op.node_def.attr and "value_dtype" in op.node_def.attr:
                    return op.get_attr("key_dtype"), op.get_attr("value_dtype")
    raise UsageError(
        "%s: transform_fn captures a resource that is no lookup table the SavedModel makes (a variable?): "
        "it cannot be applied in map steps" % where
    )


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


def _names_of(structure) -> list:
    """The name each flat component of `structure` ({name: spec}, flattened as
    tf.nest flattens it, composites expanded) belongs to."""
    return [name for name in sorted(structure) for _ in tf.nest.flatten(structure[name], expand_composites=True)]


def _reads(outputs, inputs, input_names) -> dict:
    """{output name: the raw features its components are computed from (data, not control
    dependencies: see `SavedTransform`)}."""
    placeholders = {tensor.op.name: name for tensor, name in zip(inputs, input_names)}
    reads = {}
    for name, tensor in outputs:
        computed_from = trace.ancestors([tensor], control=False)
        reads.setdefault(name, set()).update(placeholders[op] for op in computed_from if op in placeholders)
    return reads


def _nodes(graph_def) -> set:
    return {node.name for node in graph_def.node}


class SavedTransform:
    """The `transform_fn` of the SavedModel at `directory` (a transform_fn/ that
    tf2_mapreduce or tf.Transform wrote), loaded here; `apply` computes it in a graph
    being traced. `portable`: its captured values copied, to be applied elsewhere (in
    map steps): its tables by their contents (`digest` covers them), its constants by value."""

    def __init__(self, directory: str, portable: bool = True):
        try:
            self.loaded = tf.saved_model.load(directory)
        except (OSError, tf.errors.OpError) as e:
            raise UsageError("%s: not a SavedModel: %s" % (directory, getattr(e, "message", e))) from None
        function = getattr(self.loaded, "transform_fn", None)
        # Ours saves a tf.function of one input signature; tf.Transform its concrete function.
        concrete = getattr(function, "concrete_functions", [function] if hasattr(function, "graph") else [])
        if len(concrete) != 1:
            raise UsageError("%s: no transform_fn of one input signature: not a transform's transform_fn/" % directory)
        (self.function,) = concrete
        graph = self.function.graph
        args = len(graph.inputs) - len(graph.internal_captures)
        self.input_signature = self.function.structured_input_signature[0][0]
        self.output_signature = self.function.structured_outputs
        self._graph_def = graph.as_graph_def()
        # The functions it calls (tf.cond's branches) are added to each step's graph as
        # functions of its own, which TensorFlow sends to the workers with the step; the
        # imported library alone stays on the coordinator.
        self._functions = list(graph._functions.values())
        self._graph_def.library.Clear()
        # TensorFlow makes a function's outputs wait for all its stateful ops (every lookup):
        # each output is to wait for what it is computed from alone.
        returned = {t.op.name for t in graph.outputs}
        for node in self._graph_def.node:
            if node.name in returned:
                node.input[:] = [i for i in node.input if not i.startswith("^")]
        self._inputs = {}  # {raw feature: the names of its components' placeholders}
        for name, tensor in zip(_names_of(self.input_signature), graph.inputs[:args]):
            self._inputs.setdefault(name, []).append(tensor.name)
        self._outputs = list(zip(_names_of(self.output_signature), [t.name for t in graph.outputs]))
        self.reads = _reads(
            zip(_names_of(self.output_signature), graph.outputs),
            graph.inputs[:args],
            _names_of(self.input_signature),
        )
        # What it computes, no op's or function's name in it (a load numbers its functions
        # anew, and orders its library by a per-process hash): what ties a checkpoint to it.
        roots = {t.ref(): "input %d" % i for i, t in enumerate(graph.inputs[:args])}
        described = repr([name for name, _ in self._outputs]).encode()
        digest = hashlib.sha256(described + Digests(roots).of(graph.outputs).encode())
        self._captured = []
        for external, internal in zip(self.function.captured_inputs, graph.internal_captures):
            value = None
            if portable and external.dtype == tf.resource:
                value = _table_contents(external, _table_dtypes(self.loaded, external, directory))
            elif portable:
                value = (external.numpy(),)
            for part in (value or ())[:2]:
                digest.update(repr((str(part.dtype), part.shape)).encode() + _bytes(part))
            self._captured.append((internal.name, external, value))
        self.digest = digest.hexdigest()

    def apply(self, features: dict, outputs=None) -> dict:
        """The transformed features `outputs` (all by default) of `features` (raw ones, as
        `input_signature` says; those the outputs read at least), in the graph being
        traced: the saved graph, imported. Where not portable, the tables are the loaded ones."""
        outputs = sorted(self.output_signature if outputs is None else outputs)
        missing = sorted(set().union(*[self.reads[name] for name in outputs]) - set(features))
        if missing:
            raise UsageError("transform_fn reads raw features %s, which are not given" % missing)
        graph = tf.compat.v1.get_default_graph()
        input_map = {}
        for name in set(features) & set(self._inputs):
            input_map.update(zip(self._inputs[name], tf.nest.flatten(features[name], expand_composites=True)))
        for name, external, value in self._captured:
            if value is None:
                input_map[name] = graph.capture(external)
            else:
                input_map[name] = _rebuilt(*value) if len(value) == 4 else tf.constant(value[0])
        for function in self._functions:
            graph._add_function_recursive(function)
        wanted = [tensor for name, tensor in self._outputs if name in outputs]
        # Only what they are computed from: a lookup of a raw feature not given would run.
        graph_def = tf.compat.v1.graph_util.extract_sub_graph(self._graph_def, [t.split(":")[0] for t in wanted])
        input_map = {name: tensor for name, tensor in input_map.items() if name.split(":")[0] in _nodes(graph_def)}
        imported = tf.graph_util.import_graph_def(
            graph_def, input_map=input_map, return_elements=wanted, name="transform_fn"
        )
        specs = {name: self.output_signature[name] for name in outputs}
        # Imported ops may not know the shapes that the saved function's signature states.
        for tensor, spec in zip(imported, tf.nest.flatten(specs, expand_composites=True)):
            tensor.set_shape(spec.shape)
        return tf.nest.pack_sequence_as(specs, imported, expand_composites=True)
