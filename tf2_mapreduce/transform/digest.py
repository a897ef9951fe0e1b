"""What a traced tensor computes, as a digest that no op's name enters: how an analyzer,
and a whole transform, are known in any process (names follow the order of calls)."""

import hashlib
import os

import numpy as np

from tf2_mapreduce.lazy_tf import tf

__all__ = ["Digests", "value_bytes", "digest_of"]

# Attributes that name other ops or resources of the process, not what is computed:
# colocation ("_class": "loc:@name"), other internal ones, and a table's shared name.
_SKIPPED = ("shared_name",)
# What the ops that read a lookup table do not change: a table only these read holds what
# it held as the function was traced.
_READS = ("LookupTableFindV2", "LookupTableSizeV2", "LookupTableExportV2")
# Initializers whose inputs say all a table made in the function holds: its keys and values,
# or a file's path (one an analyzer gives: a vocabulary, whose contents its name ties).
_FILLED_BY_INPUTS = ("LookupTableImportV2", "InitializeTableV2")
_FILLED_FROM_A_FILE = "InitializeTableFromTextFileV2"
# Stateful ops whose outputs are still what their inputs say: a table's reads and fillings
# (of a table known by what it holds or by what fills it; salted through an opaque one),
# checks, prints, and the calls of functions whose bodies are digested.
_STATEFUL_ALIKE = _READS + _FILLED_BY_INPUTS + (_FILLED_FROM_A_FILE,)
_STATEFUL_ALIKE += ("Assert", "CheckNumerics", "CheckNumericsV2", "Print", "PrintV2", "NoOp")
_STATEFUL_ALIKE += ("If", "While", "Case", "StatefulPartitionedCall")
# Ops whose outputs depend on what no digest sees: a Python function's body (known by a
# token of the process), a file's bytes (known by its path).
_UNSEEN = ("PyFunc", "PyFuncStateless", "EagerPyFunc", "ReadFile", "MatchingFiles")
_UNSEEN_SUFFIXES = ("RecordDataset", "RecordDatasetV2", "LineDataset", "LineDatasetV2")


def _varies(op_type: str) -> bool:
    """Whether an op of `op_type` may give other outputs for the same inputs: one of
    `_UNSEEN`, or one TensorFlow says is stateful (a random op unseeded, a clock...)."""
    from tensorflow.python.framework import op_def_registry  # private: what a FunctionDef's node is

    if op_type in _UNSEEN or op_type.endswith(_UNSEEN_SUFFIXES):
        return True
    op_def = op_def_registry.get(op_type)
    return op_def is not None and op_def.is_stateful and op_type not in _STATEFUL_ALIKE


def _kept(attrs):
    """(name, value) of the attributes that say what is computed, by name."""
    return [(name, attrs[name]) for name in sorted(attrs) if not name.startswith("_") and name not in _SKIPPED]


def value_bytes(value) -> bytes:
    """A value's bytes (a numpy array, or what a tensor's numpy() gives): strings each by
    its length and bytes, where an array of them holds pointers."""
    # bytes kept as objects: a numpy bytes array drops trailing NULs
    array = np.asarray(value, dtype=object if isinstance(value, bytes) else None)
    if array.dtype == object or array.dtype.kind == "S":
        return b"".join(b"%d:%s" % (len(item), item) for item in array.ravel().tolist())
    return array.tobytes()


def digest_of(*parts: bytes) -> bytes:
    """One digest of byte strings, each known by its length too."""
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.digest()


def _writers(placeholder) -> list:
    """The ops of its graph that the captured handle `placeholder` reaches (through Identity
    ops) and do not only read the table: those that write it, pass it into a function, or
    do anything else with it."""
    todo, seen, writers = list(placeholder.outputs[0].consumers()), set(), []
    while todo:
        op = todo.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type == "Identity":
            todo += op.outputs[0].consumers()
        elif op.type not in _READS:
            writers.append(op)
    return writers


def _called_by(node) -> set:
    """The names of the functions a FunctionDef's `node` may call: its op, its attributes'."""
    names = {node.op}
    for value in node.attr.values():
        names.update([value.func.name] if value.WhichOneof("value") == "func" else [f.name for f in value.list.func])
    return names


class Digests:
    """Digests of the tensors of one graph. `roots`: {tensor ref: name} of the tensors it
    is computed from (the features, each analyzer's result), known by their names alone;
    a captured constant is known by its value. With `tables` (a `captured.Tables`), a
    captured table the function only reads is known by what it holds, one made in the
    function by the op that fills it; any other resource, and one the graph makes, is
    opaque, and so is an op whose outputs may vary for the same inputs (`_varies`): each
    op that reads an opaque resource or varies is unlike any other, here and in any other
    process, so that no two are taken for one and nothing named after them is resumed
    (`opaque`). Without `tables`, a resource is known by its dtype (its caller digests
    what the tables hold: a loaded transform_fn's). Digests of ops are kept: many tensors
    of one graph share their ancestors."""

    def __init__(self, roots: dict, tables=None):
        self._tensors = {ref: digest_of(b"root", name.encode()) for ref, name in roots.items()}
        self._tables = tables
        self._opaque = set()  # names of the ops whose resource outputs are opaque, or that vary
        self._varying = set()  # names of the functions whose bodies vary (`_varies`)
        self._files = set()  # refs of the roots that are paths of files their names tie
        self._ops = {}
        self._functions = {}

    @property
    def opaque(self) -> bool:
        """Whether what was digested reads an opaque resource or varies: named anew each trace."""
        return bool(self._opaque)

    def add_root(self, ref, name: str, names_a_file: bool = False) -> None:
        """`ref` (a tensor's) known by `name` alone from now on: nothing computed from it
        may have been digested before. `names_a_file`: it is the path of a file its name
        ties (a vocabulary's), which a table may be filled from."""
        self._tensors[ref] = digest_of(b"root", name.encode())
        if names_a_file:
            self._files.add(ref)

    def of(self, tensors) -> str:
        """One digest of `tensors` (Tensors, SparseTensors or RaggedTensors), in order."""
        parts = []
        for tensor in tensors:
            for component in tf.nest.flatten(tensor, expand_composites=True):
                parts.append(self._tensor(component))
        return digest_of(*parts).hex()

    def _tensor(self, tensor) -> bytes:
        digest = self._tensors.get(tensor.ref())
        if digest is None:
            digest = digest_of(self._op(tensor.op), str(tensor.value_index).encode())
        return digest

    def _op(self, op) -> bytes:
        """The digest of `op`, its inputs' first: iterative, as a graph can be deeper than
        Python's recursion."""
        todo = [op]
        while todo:
            current = todo[-1]
            if current.name in self._ops:
                todo.pop()
                continue
            waiting = [t.op for t in current.inputs if t.ref() not in self._tensors and t.op.name not in self._ops] + [
                c for c in current.control_inputs if c.name not in self._ops
            ]
            if waiting:
                todo.extend(waiting)
                continue
            todo.pop()
            self._ops[current.name] = self._own(current)
        return self._ops[op.name]

    def _own(self, op) -> bytes:
        parts = [op.type.encode()]
        if self._tables is not None and (self._is_opaque(op) or _varies(op.type)):
            self._opaque.add(op.name)
            parts.append(os.urandom(16))
        for name, value in _kept(op.node_def.attr):
            parts += [name.encode(), self._attr(op.graph, value)]
        if op.type == "Placeholder":
            parts.append(self._captured(op))
        parts += [self._tensor(t) for t in op.inputs]
        parts += sorted(self._ops[c.name] for c in op.control_inputs)
        return digest_of(*parts)

    def _captured(self, placeholder) -> bytes:
        """A placeholder that is no root: a value the function captured (a constant made
        outside it, by its value; a resource, as `tables` says), else the placeholder's name."""
        for external, internal in getattr(placeholder.graph, "captures", ()):
            if internal.op is placeholder:
                if hasattr(external, "numpy") and external.dtype != tf.resource:
                    return digest_of(b"captured", value_bytes(external.numpy()), str(external.dtype).encode())
                if external.dtype == tf.resource and self._tables is not None:
                    return self._table(placeholder, external)
                return digest_of(b"captured", str(external.dtype).encode())
        return digest_of(b"placeholder", placeholder.name.encode())

    def _table(self, placeholder, handle) -> bytes:
        """A captured resource: a table only read, by what it held as traced; a table made
        in the function, by the op that fills it; any other, opaque."""
        writers, tables = _writers(placeholder), self._tables
        held = None
        if not writers:
            held = tables.known(handle)
        elif [op.name for op in writers] == [tables.filled_by(handle)] and self._fills_alike(writers[0]):
            # Its filling reads its handle: digested with the table's dtypes as the handle's digest.
            self._ops[placeholder.name] = digest_of(b"table filled as it runs", repr(tables.dtypes(handle)).encode())
            held = self._op(writers[0])
        if held is None:
            self._opaque.add(placeholder.name)
            return digest_of(b"opaque resource")
        return digest_of(b"captured table", held)

    def _fills_alike(self, op) -> bool:
        """Whether what the initializer `op` fills a table with is what its digest says: its
        inputs, or a file an analyzer wrote (not one of the user's, which may change)."""
        if op.type in _FILLED_BY_INPUTS:
            return True
        if op.type != _FILLED_FROM_A_FILE:
            return False
        todo, seen = [op.inputs[1]], set()
        while todo:
            tensor = todo.pop()
            if tensor.ref() in self._files:
                return True
            if tensor.ref() not in self._tensors and tensor.op.name not in seen:
                seen.add(tensor.op.name)
                todo += list(tensor.op.inputs)
        return False

    def _is_opaque(self, op) -> bool:
        """Whether `op` reads an opaque resource (and passes it on, if it gives a resource:
        an Identity, a function's call), or makes one (a table made in the graph)."""
        reads = any(t.dtype == tf.resource and t.op.name in self._opaque for t in op.inputs)
        makes = any(t.dtype == tf.resource for t in op.outputs) and op.type not in ("Placeholder", "Identity")
        return reads or makes

    def _attr(self, graph, value) -> bytes:
        """An attribute's value; one naming a function (a loop's body), its function's digest."""
        kind = value.WhichOneof("value")
        if kind == "func":
            attrs = [name.encode() + self._attr(graph, v) for name, v in sorted(value.func.attr.items())]
            return digest_of(b"func", self._called(graph, value.func.name), *attrs)
        if kind == "list" and value.list.func:
            return digest_of(b"funcs", *[self._called(graph, f.name) for f in value.list.func])
        return value.SerializeToString(deterministic=True)

    def _called(self, graph, name) -> bytes:
        """A function called, by `_function`; one whose body varies, salted at each call:
        no two calls of it alike (the function's own digest is one for all its calls)."""
        digest = self._function(graph, name)
        if self._tables is not None and name in self._varying:
            self._opaque.add("function " + name)
            return digest_of(digest, os.urandom(16))
        return digest

    def _function(self, graph, name) -> bytes:
        """A function of `graph`'s library, by its body (its name holds a number of the
        process); by its name where the library does not have it."""
        if name not in self._functions:
            found = graph._get_function(name) if hasattr(graph, "_get_function") else None
            definition = getattr(found, "definition", None)
            if definition is None:
                self._varying.add(name)  # by a name of the process alone: its body is not known
                self._functions[name] = digest_of(b"function", name.encode())
            else:
                self._functions[name] = self._function_definition(graph, definition)
                if any(_varies(node.op) or self._varying & _called_by(node) for node in definition.node_def):
                    self._varying.add(name)
        return self._functions[name]

    def _function_definition(self, graph, definition) -> bytes:
        signature = type(definition.signature)()
        signature.CopyFrom(definition.signature)
        signature.name = ""  # a number of the process in it
        parts = [signature.SerializeToString(deterministic=True)]
        for node in sorted(definition.node_def, key=lambda n: n.name):
            # A node calling a function of the library: its body, not its name of the process.
            called = self._function(graph, node.op) if graph._get_function(node.op) is not None else b""
            parts += [node.name.encode(), node.op.encode(), called, *[i.encode() for i in node.input]]
            for name, value in _kept(node.attr):
                parts += [name.encode(), self._attr(graph, value)]
        parts += [("%s=%s" % item).encode() for item in sorted(definition.ret.items())]
        return digest_of(*parts)
