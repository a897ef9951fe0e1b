"""How a `preprocessing_fn` is traced: once to find what its analyzers read (each analyzer's
input, counted exactly in a pass of its phase), then with their results as constants, which
is the transform itself (or, between phases, what the next phase's analyzers read). Within
a process an analyzer is known by its place in the call order; across processes (a
checkpoint), by its name: what it computes."""

import contextlib
import hashlib
import threading
from dataclasses import dataclass, field

import numpy as np

from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.transform import as_written, kinds
from tf2_mapreduce.transform.digest import Digests

__all__ = [
    "Call",
    "Analysis",
    "Applying",
    "current",
    "tracing",
    "analyzer",
    "values_of",
    "ancestors",
    "reordered",
    "NotSupported",
]


class NotSupported(UsageError):
    """A preprocessing_fn uses what tf2_mapreduce.transform does not do; said at tracing."""


@dataclass
class Call:
    """One analyzer call of a preprocessing_fn: its `kind` ("min", "vocabulary"...), the
    `values` it reads (1-D, flattened; a tensor of the analysis trace), their dtype, its
    parameters (a vocabulary's file name among them, named for its name scope) and its
    `name`: its kind and a digest of all of these, the same in any process (`named`).
    `out`: its result's dtype, as its stand-in promised the function (its counts do not
    depend on it). `phase`: 0 where it reads what the raw features compute alone, else one
    more than the latest phase of the analyzers whose results it reads (counted after them).
    `counts`: the name of what it counts (`kinds.counting`), shared by the calls that count
    the same, counted once."""

    kind: str
    dtype: object
    params: dict = field(default_factory=dict)
    values: object = None
    name: str = ""
    out: object = None
    phase: int = 0
    counts: str = ""


class Analysis:
    """The first trace: every analyzer records its call and returns a stand-in of its
    result's shape and dtype. An analyzer whose input depends on another's result reads it
    in a later phase (`phases`)."""

    def __init__(self):
        self.calls = []
        self.stand_ins = {}  # {stand-in tensor ref: its call}
        self.sizes = {}  # {stand-in tensor ref: the call of the vocabulary whose size it stands for}
        self._stand_ins = {}  # {stand-in op name: the call whose result it stands for}
        self.resumable = True  # whether `named` gave names another process gives too

    def record(self, call, values, result):
        call.values = values
        self.calls.append(call)
        stand_in = _unknown(result)
        self._stand_ins[stand_in.op.name] = call
        self.stand_ins[stand_in.ref()] = call
        return stand_in

    def annotate_sparse(self, tensor, shape):
        """Nothing: an output's shape is known, for the schema, once applied."""

    def vocabulary_size(self, key):
        """A stand-in of the size of the vocabulary known as `key`, made before."""
        stand_in = _unknown(tf.constant(0, tf.int64))
        call = self.calls[_vocabulary_index(self.calls, key)]
        self._stand_ins[stand_in.op.name] = call
        self.sizes[stand_in.ref()] = call
        return stand_in

    def depends_on_a_result(self, output) -> bool:
        """Whether `output` (a Tensor, SparseTensor or RaggedTensor) is computed from an analyzer's result."""
        return any(self._depends_on_a_result(part) for part in tf.nest.flatten(output, expand_composites=True))

    def named(self, inputs, outputs, tables) -> str:
        """Names each call by what it computes from `inputs` (the traced function's
        features: {name: tensor}), and returns a digest of what `outputs` ({name: tensor})
        compute from them and from the analyzers' results: names and digest are the same
        in every process that traces the same computation, whatever the order of calls.
        `tables`: the lookup tables made as it was traced (`captured.Tables`)."""
        roots = {}
        for feature, tensor in inputs.items():
            for i, part in enumerate(tf.nest.flatten(tensor, expand_composites=True)):
                roots[part.ref()] = "feature %s %d" % (feature, i)
        named = Digests(roots, tables=tables)
        results = [(ref, call, "analyzer ") for ref, call in self.stand_ins.items()]
        results += [(ref, call, "vocabulary size ") for ref, call in self.sizes.items()]
        # In call order: a call reads the results of calls before it only, each known by
        # the name given it before (the same in any process).
        for call in self.calls:
            described = repr((call.kind, call.dtype.name, sorted(call.params.items()))).encode()
            computed = named.of([call.values]).encode()
            call.name = "%s:%s" % (call.kind, hashlib.sha256(described + computed).hexdigest()[:20])
            call.counts = kinds.counting(call, computed.decode())
            for ref, of, what in results:
                if of is call:
                    named.add_root(
                        ref, what + call.name, names_a_file=what == "analyzer " and call.kind == kinds.VOCABULARY
                    )
        names = sorted(outputs)
        digest = hashlib.sha256(repr(names).encode() + named.of([outputs[n] for n in names]).encode()).hexdigest()
        self.resumable = not named.opaque
        return digest

    def results_among(self, names) -> list:
        """The calls whose results (their stand-ins, a vocabulary's size too) are among the ops `names`."""
        return [call for op, call in self._stand_ins.items() if op in names]

    def _depends_on_a_result(self, tensor):
        return any(op in self._stand_ins for op in ancestors([tensor]))


class Applying:
    """The trace with the analyzers' results: each analyzer returns its result as a constant
    (`values`, in the order of `calls`), a vocabulary its file's path (`path_of(call
    index)`, a tensor); `make_table(call index, key dtype, default_value, num_oov_buckets)`
    gives the lookup table `apply_vocabulary` uses (one per distinct use). The outputs of
    `apply_vocabulary` and `apply_buckets` are kept with their range of ids (`domains`),
    for the transformed schema. Between phases, a call of a later phase (its value None)
    returns its stand-in, and what it reads is kept (`read`: {call name: its values})."""

    def __init__(self, calls, values, make_table, path_of):
        self.calls, self.values = calls, values
        self._make_table, self._path_of = make_table, path_of
        self._tables = {}
        self.restart()

    def restart(self):
        """For another trace of the same function (TensorFlow traces it again to save it):
        the calls are counted again; the tables, made outside it, are kept."""
        self._next = 0
        self._vocabulary_of = {}
        self._not_yet = set()  # refs of the stand-ins of vocabularies of a later phase
        self.domains = {}
        self.sparse_shapes = {}  # {a SparseTensor's values' ref: its size (annotate_sparse_output_shape)}
        self.read = {}

    def result(self, kind, values, stand_in, params):
        index = self._next
        self._next += 1
        if index >= len(self.calls) or self.calls[index].kind != kind:
            raise reordered()
        call = self.calls[index]
        if call.dtype != values.dtype or call.params.get("elementwise") != params.get("elementwise"):
            raise NotSupported(
                "tf2_mapreduce.transform: %s reads values of another dtype or shape once the analyzers' results "
                "are known (%s of shape %s, analyzed %s): an analyzer's input may not take its shape from a result"
                % (kind, values.dtype.name, params.get("elementwise"), call.params.get("elementwise"))
            )
        if self.values[index] is None:
            self.read[call.name] = values
            result = tf.identity(stand_in)
            if kind == kinds.VOCABULARY:
                self._not_yet.add(result.ref())
            return result
        if kind == kinds.VOCABULARY:  # its file's path, which apply_vocabulary looks up
            result = kinds.of(call).applied(call, self._path_of(index))
            self._vocabulary_of[result.ref()] = index
            return result
        return kinds.of(call).applied(call, self.values[index])

    def vocabulary_size(self, key):
        """The size of the vocabulary known as `key`, a constant (of a later phase: a stand-in)."""
        value = self.values[_vocabulary_index(self.calls, key)]
        return tf.constant(0 if value is None else value.size, tf.int64)

    def table(self, deferred, key_dtype, default_value, num_oov_buckets):
        """The table of the vocabulary whose file's path `deferred` is, and its ids' range;
        None for a vocabulary of a later phase."""
        if isinstance(deferred, tf.Tensor) and deferred.ref() in self._not_yet:
            return None
        index = self._vocabulary_of.get(deferred.ref()) if isinstance(deferred, tf.Tensor) else None
        if index is None:
            raise NotSupported(
                "tf2_mapreduce.transform: apply_vocabulary needs a vocabulary made by this preprocessing_fn "
                "(tft.vocabulary's result)"
            )
        key = (index, key_dtype.is_integer, default_value, num_oov_buckets)
        if key not in self._tables:
            self._tables[key] = self._make_table(index, tf.int64 if key_dtype.is_integer else tf.string, *key[2:])
        size = self.values[index].size
        domain = (
            (0, size + num_oov_buckets - 1)
            if num_oov_buckets > 0
            else (min(0, default_value), max(size - 1, default_value))
        )
        return self._tables[key], domain

    def annotate_sparse(self, tensor, shape):
        """Notes that SparseTensor `tensor`, an output, is `shape` ([size]) wide: its schema's SparseFeature."""
        size = tf.get_static_value(shape)
        if size is None:  # arithmetic of constants (a vocabulary's size + 1), which shape inference folds
            folded = tf.zeros(tf.reshape(shape, [-1]), tf.int8).shape
            size = np.array(folded.as_list()) if folded.is_fully_defined() else None
        if size is None or tensor.shape.rank != 2 or size.size != 1:
            raise NotSupported(
                "tf2_mapreduce.transform: annotate_sparse_output_shape of a SparseTensor of rank 2 and a size "
                "known once analyzed only"
            )
        self.sparse_shapes[tensor.values.ref()] = int(size.reshape(-1)[0])
        tensor._dense_shape_default = tf.TensorShape([tensor.shape[0], self.sparse_shapes[tensor.values.ref()]])

    def mark(self, output, domain):
        """Notes that `output`'s values are ids within `domain` (min, max)."""
        values = output if isinstance(output, tf.Tensor) else values_of(output)  # a dense one's own, not reshaped
        self.domains[values.ref()] = domain
        return output


def _unknown(value):
    """A stand-in of `value`'s shape and dtype whose value TensorFlow cannot know when it
    builds the graph: a result's value must not become a shape here (a one-hot's depth of 0)
    and another once applied."""
    return tf.compat.v1.placeholder_with_default(value, value.shape)


def _vocabulary_index(calls, key) -> int:
    """The index in `calls` of the vocabulary known as `key` (tft's vocab_filename)."""
    for index, call in enumerate(calls):
        if call.kind == kinds.VOCABULARY and call.params["key"] == key:
            return index
    raise ValueError(
        "Vocabulary size not found for %s. If this vocabulary was created using `tft.vocabulary`, this should be "
        "the same as the `vocab_filename` argument passed to it." % key
    )


def reordered() -> NotSupported:
    """The error of a trace whose analyzer calls are not those of the analysis trace."""
    return NotSupported(
        "tf2_mapreduce.transform: the preprocessing_fn called its analyzers in another order than when it "
        "was analyzed (it must make the same calls every time it is traced)"
    )


def ancestors(tensors, control=True) -> set:
    """The names of the ops `tensors` are computed from, theirs included; through control
    dependencies too, unless `control` is False."""
    seen, todo = set(), [t.op for t in tensors]
    while todo:
        op = todo.pop()
        if op.name not in seen:
            seen.add(op.name)
            todo.extend(t.op for t in op.inputs)
            if control:
                todo.extend(op.control_inputs)
    return seen


_state = threading.local()


@contextlib.contextmanager
def tracing(trace):
    """Within it, analyzers called on this thread record into (or read from) `trace`, and
    float arithmetic is made to compute the same bits in every graph and batch
    (`as_written`): in the analyze pass's map steps and the saved transform_fn, which the
    transform pass's map steps apply."""
    before = getattr(_state, "trace", None)
    _state.trace = trace
    try:
        with as_written.rewriting():
            yield trace
    finally:
        _state.trace = before


def current():
    trace = getattr(_state, "trace", None)
    if trace is None:
        raise UsageError(
            "tf2_mapreduce.transform: an analyzer runs only inside a preprocessing_fn that tf2_mapreduce traces "
            "(mr.Transform)"
        )
    return trace


def values_of(x):
    """The values of `x` (a Tensor, SparseTensor or RaggedTensor), flattened to 1-D."""
    if isinstance(x, tf.SparseTensor):
        return x.values
    if isinstance(x, tf.RaggedTensor):
        return x.flat_values
    return tf.reshape(x, [-1])


def analyzer(kind, x, stand_in, params=None):
    """The result of analyzer `kind` over `x`'s values: recorded by the analysis trace
    (which returns `stand_in`, a tensor of the result's shape and dtype), or the result
    counted, as a constant, while applying."""
    trace = current()
    values = values_of(x)
    if isinstance(trace, Analysis):
        call = Call(kind, values.dtype, dict(params or {}), out=stand_in.dtype)
        return trace.record(call, values, stand_in)
    return trace.result(kind, values, stand_in, dict(params or {}))
