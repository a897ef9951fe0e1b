"""A saved transform_fn applied in map steps: its graph imported into each step; each lookup
table it fills from a file (a vocabulary) filled from that file where the step runs, its
other tables rebuilt there from their contents, read where the SavedModel is loaded.

What writes data/ is then the SavedModel itself, bit for bit: the transform pass applies the
transform_fn it saved, and `--transform_output` an earlier one. The tables cannot stay where
the SavedModel is loaded: that is the coordinator, which workers do not reach."""

import functools
import hashlib
import uuid

import numpy as np

from tf2_mapreduce import storage
from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs import files as output
from tf2_mapreduce.paths import join
from tf2_mapreduce.transform import trace
from tf2_mapreduce.transform.captured import table_contents
from tf2_mapreduce.transform.digest import Digests, value_bytes
from tf2_mapreduce.transform.file_tables import FileTable
from tf2_mapreduce.transform.imported import Importable, names_of
from tf2_mapreduce.transform.skeleton import Skeleton

__all__ = ["SavedTransform"]


def _by_handle(loaded) -> dict:
    """{id of a resource handle: the object of the SavedModel `loaded` whose handle it is}:
    one walk of the SavedModel for all its tables."""
    return {
        id(trackable.resource_handle): trackable
        for trackable in tf.train.TrackableView(loaded).descendants()
        if getattr(trackable, "resource_handle", None) is not None
    }


def _functions_of(trackable, name):
    made_by = getattr(trackable, name, None)
    return getattr(made_by, "concrete_functions", [made_by] if made_by is not None else [])


def _table_dtypes(trackables, handle, where):
    """The key and value dtypes of the lookup table whose handle `handle` is, from the
    SavedModel's own function that makes it (a table's handle says neither, and the export
    kernel aborts the process on dtypes that are not the table's)."""
    for function in _functions_of(trackables.get(id(handle)), "_create_resource"):
        for op in function.graph.get_operations():
            if "key_dtype" in op.node_def.attr and "value_dtype" in op.node_def.attr:
                return op.get_attr("key_dtype"), op.get_attr("value_dtype")
    raise UsageError(
        "%s: transform_fn captures a resource that is no lookup table the SavedModel makes (a variable?): "
        "it cannot be applied in map steps" % where
    )


def _filled_from_file(trackables, handle):
    """(the file's path, the filling op's attributes) where the SavedModel (`trackables`: its
    objects, `_by_handle`) fills the
    table whose handle `handle` is from a file as it is loaded (our transform_fn's
    vocabularies: tables made outside the function, filled from their asset), else None."""
    for function in _functions_of(trackables.get(id(handle)), "_initialize"):
        captured = {
            internal.name: external
            for external, internal in zip(function.captured_inputs, function.graph.internal_captures)
        }
        for op in function.graph.get_operations():
            if op.type != "InitializeTableFromTextFileV2":
                continue
            path = op.inputs[1]
            while path.op.type == "Identity":
                path = path.op.inputs[0]
            if path.name in captured and captured[path.name].dtype == tf.string:
                return captured[path.name].numpy().decode(), op.node_def.attr
    return None


def _rebuilt(keys, values, key_dtype, value_dtype):
    """A table holding `keys` -> `values`, made where the step runs: its handle, ready."""
    handle = tf.raw_ops.AnonymousHashTable(key_dtype=key_dtype, value_dtype=value_dtype)
    filled = tf.raw_ops.LookupTableImportV2(
        table_handle=handle, keys=tf.constant(keys, key_dtype), values=tf.constant(values, value_dtype)
    )
    with tf.control_dependencies([filled]):
        return tf.identity(handle)


def _producer(nodes, tensor):
    """The node of `nodes` ({name: NodeDef}) that computes `tensor` (a tensor's name in a
    GraphDef), through Identity ops."""
    node = nodes[tensor.split(":")[0]]
    while node.op == "Identity":
        node = nodes[node.input[0].split(":")[0]]
    return node


def _file_digest(path, into=None) -> bytes:
    """The SHA-256 of the file at `path`, read once, in pieces, through an outage of its
    storage; with `into`, the bytes read also written there (a new file)."""

    def read():
        digest = hashlib.sha256()
        out = tf.io.gfile.GFile(into, "wb") if into else None
        try:
            with tf.io.gfile.GFile(path, "rb") as f:
                while piece := f.read(1 << 20):
                    digest.update(piece)
                    if out is not None:
                        out.write(piece)
        finally:
            if out is not None:
                out.close()
        return digest.digest()

    return storage.retrying(read, path)


def _file_table(source, dtypes, attr, files_into):
    """A `FileTable` of the file at `source` and the file's digest. With `files_into`, the
    table reads a copy of it there, named for its bytes, put in place whole: what the
    workers read is what was digested, and a worker filling its table again (one that came
    back) never reads a file being written."""
    if not files_into:
        return FileTable(source, dtypes, attr), _file_digest(source)
    storage.retrying(lambda: tf.io.gfile.makedirs(files_into), files_into)
    partial = join(files_into, ".partial-%s" % uuid.uuid4().hex)
    digest = _file_digest(source, into=partial)
    where = join(files_into, "%s-%s" % (digest.hex()[:16], source.rstrip("/").rsplit("/", 1)[-1]))
    output.move(partial, where)
    return FileTable(where, dtypes, attr), digest


def _file_tables(graph, trackables, dtypes_of, files_into, real):
    """The captured lookup tables filled from a file (a vocabulary: an asset), each as a
    `FileTable` of that file, made where each step runs, and the file's digest: those that
    `graph` (an `Importable`) fills from a path it captured (tf.Transform's transform_fn),
    the filling in the graph left out; and those that the SavedModel (`trackables`: its
    objects) fills as it is loaded (ours). `dtypes_of(table)`: a captured table's (key, value) dtypes;
    `real(path)`: where a file the SavedModel knows as `path` is (`Skeleton.real`). With
    `files_into`, a directory every worker reaches, each file is copied there first (the
    SavedModel may be where the coordinator alone reads it). Returns ({table's placeholder:
    (FileTable, digest)}, the placeholders of the paths the graph no longer needs)."""
    captured = dict(graph.captured)
    nodes = {node.name: node for node in graph.graph_def.node}
    tables, paths = {}, set()
    for init in [node for node in graph.graph_def.node if node.op == "InitializeTableFromTextFileV2"]:
        table, path = _producer(nodes, init.input[0]), _producer(nodes, init.input[1])
        table_external = captured.get(table.name + ":0") if table.op == "Placeholder" else None
        path_external = captured.get(path.name + ":0") if path.op == "Placeholder" else None
        if table_external is None or path_external is None or table_external.dtype != tf.resource:
            continue  # a path of the function's own (a file of the user's), or its own table: as written
        source = real(path_external.numpy().decode())
        tables[table.name + ":0"] = _file_table(source, dtypes_of(table_external), init.attr, files_into)
        init.op = "NoOp"  # what waits for it waits for the table, which is filled before
        init.input[:] = [i for i in init.input if i.startswith("^")]
        init.attr.clear()
        paths.add(path.name + ":0")
    for placeholder, external in captured.items():
        if placeholder in tables or external.dtype != tf.resource:
            continue
        filled = _filled_from_file(trackables, external)
        if filled is not None:
            tables[placeholder] = _file_table(real(filled[0]), dtypes_of(external), filled[1], files_into)
    return tables, paths


def _skeleton(directory):
    """A `Skeleton` of the SavedModel at `directory`, where it can stand in for it here: each
    table it fills from an asset as it loads is one that a `FileTable` fills (an asset read
    otherwise as it loads would be read empty). Else None: the SavedModel is loaded itself."""
    try:
        skeleton = Skeleton(directory)
    except (OSError, tf.errors.OpError):
        return None  # a load that fails on empty assets (a table of a fixed size), or no SavedModel: said by the load
    trackables = _by_handle(skeleton.loaded)
    for trackable in trackables.values():
        for function in _functions_of(trackable, "_initialize"):
            reads = [c for c in function.captured_inputs if c.dtype == tf.string and c.shape.rank == 0]
            stub = any(skeleton.is_stub(c.numpy().decode(errors="replace")) for c in reads)
            # A dataset it is filled from may read an asset no capture names.
            dataset = any(c.dtype == tf.variant for c in function.captured_inputs)
            if dataset or (stub and _filled_from_file(trackables, trackable.resource_handle) is None):
                skeleton.close()
                return None
    return skeleton


def _real_path(real, value: bytes) -> bytes:
    """A string the function captured, an asset's path where `real` says the asset is."""
    try:
        return real(value.decode()).encode()
    except UnicodeDecodeError:
        return value  # no path


def _reads(outputs, inputs, input_names) -> dict:
    """{output name: the raw features its components are computed from (data, not control
    dependencies: see `SavedTransform`)}."""
    placeholders = {tensor.op.name: name for tensor, name in zip(inputs, input_names)}
    reads = {}
    for name, tensor in outputs:
        computed_from = trace.ancestors([tensor], control=False)
        reads.setdefault(name, set()).update(placeholders[op] for op in computed_from if op in placeholders)
    return reads


class SavedTransform:
    """The `transform_fn` of the SavedModel at `directory` (a transform_fn/ that
    tf2_mapreduce or tf.Transform wrote), loaded here; `apply` computes it in a graph
    being traced. `portable`: its captured values copied, to be applied elsewhere (in
    map steps): a table it fills from a file (a vocabulary) as a `FileTable` of that file,
    copied first into `files_into` if given (a directory every worker reaches); its other
    tables by their contents, its constants by value (`digest` covers them all, a file by
    its bytes). `loaded`: what `tf.saved_model.load` gave of `directory` already, if it was loaded."""

    def __init__(self, directory: str, portable: bool = True, loaded=None, files_into=None):
        skeleton = _skeleton(directory) if portable and loaded is None else None
        try:
            self._load(directory, skeleton, portable, loaded, files_into)
        finally:
            if skeleton is not None:
                skeleton.close()

    def _load(self, directory, skeleton, portable, loaded, files_into):
        try:
            if loaded is None:
                loaded = skeleton.loaded if skeleton is not None else tf.saved_model.load(directory)
            self.loaded = loaded
        except (OSError, tf.errors.OpError) as e:
            raise UsageError("%s: not a SavedModel: %s" % (directory, getattr(e, "message", e))) from None
        real = skeleton.real if skeleton is not None else str
        function = getattr(self.loaded, "transform_fn", None)
        # Ours saves a tf.function of one input signature; tf.Transform its concrete function.
        concrete = getattr(function, "concrete_functions", [function] if hasattr(function, "graph") else [])
        if len(concrete) != 1:
            raise UsageError("%s: no transform_fn of one input signature: not a transform's transform_fn/" % directory)
        (self.function,) = concrete
        graph = self.function.graph
        self.input_signature = self.function.structured_input_signature[0][0]
        self.output_signature = self.function.structured_outputs
        self._graph = Importable(self.function)
        self._outputs = list(zip(names_of(self.output_signature), self._graph.outputs))
        args = graph.inputs[: len(graph.inputs) - len(graph.internal_captures)]
        self.reads = _reads(zip(names_of(self.output_signature), graph.outputs), args, names_of(self.input_signature))
        trackables = _by_handle(self.loaded)
        dtypes_of = functools.partial(_table_dtypes, trackables, where=directory)
        tables, files = _file_tables(self._graph, trackables, dtypes_of, files_into, real) if portable else ({}, set())
        self._captured = {}
        for placeholder, external in self._graph.captured:
            value = None
            if placeholder in tables:
                value = tables[placeholder]
            elif portable and external.dtype == tf.resource:
                value = table_contents(external, dtypes_of(external))
            elif portable and external.dtype == tf.string and external.shape.rank == 0:
                value = (np.asarray(_real_path(real, external.numpy()), dtype=object),)
            elif portable:
                value = (np.asarray(external.numpy(), dtype=object if external.dtype == tf.string else None),)
            self._captured[placeholder] = value
        # What it computes, no op's or function's name in it (a load numbers its functions
        # anew, and orders its library by a per-process hash), nor where its files are (their
        # bytes are, and how a table is filled from them: for a table filled as the
        # SavedModel loads, that is in no graph of the function): what ties a checkpoint to it.
        roots = {t.ref(): "input %d" % i for i, t in enumerate(args)}
        roots.update({t.ref(): "a file's path" for t in graph.internal_captures if t.name in files})
        described = repr([name for name, _ in self._outputs]).encode()
        digest = hashlib.sha256(described + Digests(roots).of(graph.outputs).encode())
        for placeholder, value in self._captured.items():
            if value and isinstance(value[0], FileTable):
                digest.update(repr((value[0].dtypes, sorted(value[0].attr.items()))).encode() + value[1])
                continue
            for part in (value or ())[:2] if placeholder not in files else ():
                digest.update(repr((str(part.dtype), part.shape)).encode() + value_bytes(part))
        self.digest = digest.hexdigest()

    def _capture(self, placeholder, external):
        value = self._captured[placeholder]
        if value is None:
            return tf.compat.v1.get_default_graph().capture(external)
        if isinstance(value[0], FileTable):
            return value[0].handle()
        return _rebuilt(*value) if len(value) == 4 else tf.constant(value[0])

    def release(self) -> None:
        """Lets the tables made for the steps go (`FileTable.release`): once a pass that
        applied this transform is over, its steps are not run again."""
        for value in self._captured.values():
            if value and isinstance(value[0], FileTable):
                value[0].release()

    def apply(self, features: dict, outputs=None) -> dict:
        """The transformed features `outputs` (all by default) of `features` (raw ones, as
        `input_signature` says; those the outputs read at least), in the graph being
        traced: the saved graph, imported, only what `outputs` are computed from (a lookup
        of a raw feature not given would run). Where not portable, the tables are the loaded ones."""
        outputs = sorted(self.output_signature if outputs is None else outputs)
        missing = sorted(set().union(*[self.reads[name] for name in outputs]) - set(features))
        if missing:
            raise UsageError("transform_fn reads raw features %s, which are not given" % missing)
        wanted = [tensor for name, tensor in self._outputs if name in outputs]
        imported = self._graph.imported(features, wanted, self._capture, "transform_fn")
        specs = {name: self.output_signature[name] for name in outputs}
        # Imported ops may not know the shapes that the saved function's signature states.
        for tensor, spec in zip(imported, tf.nest.flatten(specs, expand_composites=True)):
            tensor.set_shape(spec.shape)
        return tf.nest.pack_sequence_as(specs, imported, expand_composites=True)
