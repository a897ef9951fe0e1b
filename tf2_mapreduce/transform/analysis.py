"""The analyze passes of a preprocessing_fn: a job a phase over the raw examples that counts
every value each analyzer of the phase reads (exactly once, in one per-key table:
`reducers.Vocabularies`), and the analyzers' results computed from those counts, exactly,
streamed from the ps tasks in bounded memory."""

import contextlib
from dataclasses import dataclass

from tf2_mapreduce.errors import Error, UsageError, raised_by_user_code
from tf2_mapreduce.inputs.formats import TFRECORD
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.outputs import sorted_runs
from tf2_mapreduce.reducers import Vocabularies
from tf2_mapreduce.transform import captured, kinds, trace
from tf2_mapreduce.transform import schema as schemas
from tf2_mapreduce.transform.imported import Importable

__all__ = [
    "raw_specs",
    "outputs_checked",
    "Traced",
    "Phase",
    "trace_calls",
    "analyze_job",
    "results",
]


def raw_specs(feature_spec: dict) -> dict:
    """The tensor spec of each raw feature of `feature_spec`, batched, as tft traces a
    preprocessing_fn: FixedLen [d...] a dense [None, d...], VarLen a SparseTensor,
    RaggedFeature a RaggedTensor [None, None]."""
    specs = {}
    for name, feature in sorted(feature_spec.items()):
        if isinstance(feature, tf.io.FixedLenFeature):
            specs[name] = tf.TensorSpec([None, *feature.shape], feature.dtype)
        elif isinstance(feature, tf.io.VarLenFeature):
            specs[name] = tf.SparseTensorSpec([None, None], feature.dtype)
        elif (
            isinstance(feature, tf.io.RaggedFeature) and not feature.partitions and feature.row_splits_dtype == tf.int64
        ):
            specs[name] = tf.RaggedTensorSpec([None, None], feature.dtype, 1, feature.row_splits_dtype)
        else:
            raise trace.NotSupported(
                "tf2_mapreduce.transform: feature %s is a %s; FixedLen, VarLen and RaggedFeature (of no partitions, "
                "int64 row splits: as a schema says it) only" % (name, type(feature).__name__)
            )
    return specs


def outputs_checked(outputs):
    """`outputs`, what a preprocessing_fn returned, if a transform can write them (a
    non-empty dict of tensors); `NotSupported` otherwise."""
    if not isinstance(outputs, dict):
        raise trace.NotSupported("preprocessing_fn must return a dict of features, not %s" % type(outputs).__name__)
    if not outputs:  # examples of no feature: tf.Transform refuses it too
        raise trace.NotSupported("preprocessing_fn returned an empty dict: a transform writes at least one feature")
    for name, output in outputs.items():
        if not isinstance(output, (tf.Tensor, tf.SparseTensor, tf.RaggedTensor)):
            raise trace.NotSupported(
                "preprocessing_fn output %s is a %s: a Tensor, SparseTensor or RaggedTensor each"
                % (name, type(output).__name__)
            )
    return outputs


@dataclass
class Phase:
    """What the analyzers of one phase read: `calls` ({name: a `trace.Call`}), the raw
    features `read` they are computed from, and `values(features)`, in the graph of a map
    step, each call's values (1-D tensors, by name sorted) of `features` (parsed, those
    `read` at least)."""

    calls: dict
    read: tuple
    values: object


@dataclass
class Traced:
    """A preprocessing_fn traced for its analysis: its analyzer `calls` (`trace.Call`s, in
    call order, named, each with its phase, their values left out), `phases` (how many), a
    digest of the whole computation (`computation`: `Analysis.named`), and `function`, what
    each distinct call reads (by name, sorted) as a function of the raw features (an
    `Importable`; those of the first phase only are computed from the raw features alone).
    `resumable`: whether another process names them alike (no opaque resource read:
    `digest.Digests`), so that a checkpoint of its passes can be resumed."""

    calls: list
    computation: str
    function: Importable
    resumable: bool = True

    @property
    def phases(self) -> int:
        return 1 + max((call.phase for call in self.calls), default=-1)

    def outputs(self) -> dict:
        """{call name: the tensor of `function` (its name) that is what the call reads}."""
        return dict(zip(sorted({call.name for call in self.calls}), self.function.outputs))

    def first_phase(self) -> Phase:
        """What the analyzers of phase 0 read: the traced function imported into each step,
        only what they read (no other feature is parsed; no lookup of an output runs)."""
        calls = {call.name: call for call in self.calls if call.phase == 0}
        wanted = [tensor for name, tensor in sorted(self.outputs().items()) if name in calls]
        read = tuple(sorted(self.function.features_among(self.function.needed(wanted))))

        def capture(placeholder, external):
            return tf.compat.v1.get_default_graph().capture(external)

        def values(features):
            imported = self.function.imported(features, wanted, capture, "analyzed")
            for tensor in imported:  # 1-D (`trace.values_of`); a lookup of a captured table's loses it when imported
                tensor.set_shape([None])
            return imported

        return Phase(calls, read, values)


def _features_there(error, feature_spec) -> str:
    """After a KeyError of a name that is no raw feature (the features' dict, or another),
    the raw features there are."""
    name = error.args[0] if isinstance(error, KeyError) and error.args else None
    if not isinstance(name, str) or name in feature_spec:
        return ""
    there = ", ".join(sorted(feature_spec)) or "none (no example holds a feature: give {setting:schema})"
    return "; the raw schema's features are %s" % there


def trace_calls(preprocessing_fn, feature_spec, given=dict) -> Traced:
    """`preprocessing_fn` over `feature_spec`'s features (`given(their tensors)`, a dict),
    traced once, not run. Raises `NotSupported` for what the package does not do,
    `UsageError` for what it raised."""
    analysis = trace.Analysis()
    digest = []

    def traced(inputs):
        with trace.tracing(analysis), captured.noting_tables() as tables:
            outputs = outputs_checked(preprocessing_fn(given(inputs)))
        # What tf.Examples cannot hold is refused here, before any pass.
        schemas.transformed(outputs, {}, {name for name, out in outputs.items() if analysis.depends_on_a_result(out)})
        for param in ("filename", "key"):
            named = [call.params[param] for call in analysis.calls if call.kind == kinds.VOCABULARY]
            for name in named:
                if named.count(name) > 1:
                    raise trace.NotSupported("two vocabularies are named %s: give each its own vocab_filename" % name)
        digest.append(analysis.named(inputs, outputs, tables))
        by_name = {}
        for call in analysis.calls:  # the first of a name: it reads only what calls before it give
            by_name.setdefault(call.name, call.values)
        return [tf.identity(by_name[name]) for name in sorted(by_name)]

    try:
        function = tf.function(traced, input_signature=[raw_specs(feature_spec)], autograph=False)
        graph = Importable(function.get_concrete_function())
    except Error:
        raise
    except Exception as e:  # noqa: BLE001 - the user's function: what it raised, in one line
        said = raised_by_user_code(e) + _features_there(e, feature_spec)
        raise UsageError("{setting:preprocessing_fn}: failed when traced: %s" % said) from e
    traced = Traced(analysis.calls, digest[0], graph, analysis.resumable)
    outputs = traced.outputs()
    # What each call reads needs, as the steps run it: TensorFlow orders the stateful ops of
    # a resource (a lookup in a table made of a vocabulary's file) by control edges, added
    # once traced. In call order: a call reads the results of earlier calls only.
    phases = {}  # {call name: its phase}; calls of a name compute the same, in one phase
    for call in analysis.calls:
        if call.name not in phases:
            earlier = analysis.results_among(graph.needed([outputs[call.name]]))
            phases[call.name] = 1 + max(phases[c.name] for c in earlier) if earlier else 0
        call.phase = phases[call.name]
    for call in analysis.calls:
        call.values = None
    return traced


def analyze_job(phase: Phase, feature_spec, name="analyze", config=None) -> Job:
    """The job counting every value each call of `phase` reads, over TFRecord files of
    tf.Examples whose features it reads parsed as `feature_spec` says."""
    parsed = {name: feature_spec[name] for name in phase.read}
    # Calls that count the same (`Call.counts`) are counted once, under that name; known by
    # name, not by place: another process may call them in another order (a function
    # iterating a set), and a checkpoint holds what one process counted.
    counter = {}  # {what is counted: the first call, by name, that counts it}
    for call_name in sorted(phase.calls):
        counter.setdefault(phase.calls[call_name].counts, call_name)
    names = tuple(sorted(counter))

    def map_fn(records):
        inputs = tf.io.parse_example(records, parsed) if parsed else {}
        read = dict(zip(sorted(phase.calls), phase.values(inputs)))
        values = tuple(kinds.counted(phase.calls[counter[name]], read[counter[name]]) for name in names)
        return {
            "examples": tf.size(records, out_type=tf.int64),
            "values": values,
            "missing": tf.zeros([len(values)], tf.int64),
        }

    return Job(
        name=name,
        map_fn=map_fn,
        # What the state's tables hold is named for what is counted: a checkpoint of other
        # names (another version's) is another job's.
        config={**(config or {}), "counted": list(names)},
        reducer=Vocabularies(features=names, optional=names),
        records=TFRECORD,
        autograph=False,
        description="the values every analyzer of a preprocessing_fn reads, counted",
    )


def results(calls, counted, directory) -> list:
    """Each call's result, in call order, from `counted` (the analyze job's `Result`, whose
    features are what calls count: a call's `counts`; or None, of no values), as its
    `kinds.Kind` makes it, in memory bounded whatever the distinct values: each call's
    entries read in the order its sink wants them (sorted on the ps tasks, the table read
    once, merged here), those of calls that count alike and want one order read together,
    once; a vocabulary is written into `directory` as its terms come. Blocking."""
    sinks, streams = {}, {}  # {call name: its sink}; {(what is counted, order): the sinks reading it}
    try:
        for call in calls:  # calls of a name compute the same: one result
            if call.name not in sinks:
                sinks[call.name] = sink = kinds.sink(call, directory)
                streams.setdefault((call.counts, sink.order.native), []).append(sink)
        named = sorted(streams)
        wanted = [(counts, streams[counts, native][0].order) for counts, native in named]
        reads = [sorted_runs.Sorted(0, iter(()))] * len(wanted) if counted is None else counted.sorted_entries(wanted)
        made = {}
        with contextlib.ExitStack() as reading:
            for read in reads:  # a stream left unread lets go of what it holds
                reading.callback(read.close)
            for stream, read in zip(named, reads):
                _feed(streams[stream], read)
                made.update((name, sink.result()) for name, sink in sinks.items() if sink in streams[stream])
    finally:  # a read that failed (a ps task lost) leaves no file of a result not made
        for sink in sinks.values():
            sink.close()
    return [made[call.name] for call in calls]


def _feed(sinks, read) -> None:
    """Hands the chunks of `read` (a `sorted_runs.Sorted`) to each of `sinks` until all are full."""
    for sink in sinks:
        sink.open(read.total)
    for keys, counts in read.chunks:
        if all(sink.full for sink in sinks):
            return
        for sink in sinks:
            sink.take(keys, counts)
