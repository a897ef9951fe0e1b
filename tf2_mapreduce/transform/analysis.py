"""The analyze pass of a preprocessing_fn: one job over the raw examples that counts every
value each analyzer reads (exactly once, in one per-key table: `reducers.Vocabularies`),
and the analyzers' results computed from those counts, exactly."""

from tf2_mapreduce.errors import Error, UsageError, raised_by_user_code
from tf2_mapreduce.inputs.formats import TFRECORD
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.reducers import Vocabularies
from tf2_mapreduce.transform import kinds, trace
from tf2_mapreduce.transform import schema as schemas

__all__ = ["raw_specs", "outputs_checked", "trace_calls", "analyze_job", "counts_of", "results"]


def raw_specs(feature_spec: dict) -> dict:
    """The tensor spec of each raw feature of `feature_spec`, batched, as tft traces a
    preprocessing_fn: FixedLen [d...] a dense [None, d...], VarLen a SparseTensor."""
    specs = {}
    for name, feature in sorted(feature_spec.items()):
        if isinstance(feature, tf.io.FixedLenFeature):
            specs[name] = tf.TensorSpec([None, *feature.shape], feature.dtype)
        elif isinstance(feature, tf.io.VarLenFeature):
            specs[name] = tf.SparseTensorSpec([None, None], feature.dtype)
        else:
            raise trace.NotSupported(
                "tf2_mapreduce.transform: feature %s is a %s; FixedLen and VarLen only" % (name, type(feature).__name__)
            )
    return specs


def outputs_checked(outputs):
    """`outputs`, what a preprocessing_fn returned, if a transform can write them (a
    non-empty dict, no ragged output); `NotSupported` otherwise."""
    if not isinstance(outputs, dict):
        raise trace.NotSupported("preprocessing_fn must return a dict of features, not %s" % type(outputs).__name__)
    if not outputs:  # examples of no feature: tf.Transform refuses it too
        raise trace.NotSupported("preprocessing_fn returned an empty dict: a transform writes at least one feature")
    for name, output in outputs.items():
        if isinstance(output, tf.RaggedTensor):
            raise trace.NotSupported("preprocessing_fn output %s is a RaggedTensor: dense and sparse ones only" % name)
    return outputs


def trace_calls(preprocessing_fn, feature_spec):
    """The analyzer calls (`trace.Call`s, in call order, named, their values left out) that
    `preprocessing_fn` makes over `feature_spec`'s features, the names of the features
    their inputs are computed from, and a digest of the whole computation (`Analysis.named`):
    traced once, not run. Raises `NotSupported` for what the package does not do."""
    analysis = trace.Analysis()
    read = []
    digest = []

    def traced(inputs):
        with trace.tracing(analysis):
            outputs = outputs_checked(preprocessing_fn(dict(inputs)))
        # What tf.Examples cannot hold is refused here, before any pass.
        schemas.transformed(outputs, {}, {name for name, out in outputs.items() if analysis.depends_on_a_result(out)})
        for param in ("filename", "key"):
            named = [call.params[param] for call in analysis.calls if call.kind == kinds.VOCABULARY]
            for name in named:
                if named.count(name) > 1:
                    raise trace.NotSupported("two vocabularies are named %s: give each its own vocab_filename" % name)
        used = trace.ancestors([call.values for call in analysis.calls])
        for name, tensor in inputs.items():
            parts = (
                [tensor.indices, tensor.values, tensor.dense_shape] if isinstance(tensor, tf.SparseTensor) else [tensor]
            )
            if any(part.op.name in used for part in parts):
                read.append(name)
        digest.append(analysis.named(inputs, outputs))
        return tf.constant(0)

    try:
        tf.function(traced, input_signature=[raw_specs(feature_spec)], autograph=False).get_concrete_function()
    except Error:
        raise
    except Exception as e:  # noqa: BLE001 - the user's function: what it raised, in one line
        raise UsageError("{setting:preprocessing_fn}: failed when traced: %s" % raised_by_user_code(e)) from e
    for call in analysis.calls:
        call.values = None
    return analysis.calls, tuple(sorted(read)), digest[0]


def _stand_ins(feature_spec, batch):
    """Features no analyzer reads, as empty stand-ins of their shape and dtype: parsing
    them (a float embedding, say) would cost the analyze pass most of its time."""
    out = {}
    for name, feature in feature_spec.items():
        if isinstance(feature, tf.io.FixedLenFeature):
            out[name] = tf.zeros(tf.concat([[batch], tf.constant(feature.shape, tf.int32)], 0), feature.dtype)
        else:
            out[name] = tf.SparseTensor(
                tf.zeros([0, 2], tf.int64), tf.zeros([0], feature.dtype), tf.stack([tf.cast(batch, tf.int64), 0])
            )
    return out


def analyze_job(preprocessing_fn, feature_spec, calls, read, name="analyze", config=None) -> Job:
    """The job counting every value each of `calls` reads, over TFRecord files of
    tf.Examples whose features `read` are parsed as `feature_spec` says (the others, which
    no analyzer reads, are not: `_stand_ins`)."""
    parsed = {name: feature_spec[name] for name in read}
    unread = {name: feature for name, feature in feature_spec.items() if name not in parsed}

    def map_fn(records):
        analysis = trace.Analysis()
        inputs = _stand_ins(unread, tf.size(records))
        if parsed:
            inputs.update(tf.io.parse_example(records, parsed))
        with trace.tracing(analysis):
            preprocessing_fn(inputs)
        # This process traced `calls` in the same order: each is counted under its name, once.
        if [call.kind for call in analysis.calls] != [call.kind for call in calls]:
            raise trace.reordered()
        read = {call.name: traced for call, traced in zip(calls, analysis.calls)}
        values = tuple(kinds.of(read[name]).counted(read[name], read[name].values) for name in names)
        return {
            "examples": tf.size(records, out_type=tf.int64),
            "values": values,
            "missing": tf.zeros([len(values)], tf.int64),
        }

    # Known by name, not by place: another process may call them in another order (a
    # function iterating a set), and a checkpoint holds what one process counted.
    names = tuple(sorted({call.name for call in calls}))
    return Job(
        name=name,
        map_fn=map_fn,
        config=dict(config or {}),
        reducer=Vocabularies(features=names, optional=names),
        records=TFRECORD,
        autograph=False,
        description="the values every analyzer of a preprocessing_fn reads, counted",
    )


def results(calls, counts) -> list:
    """Each call's result, in call order, from `counts`: {call name: [(key bytes, count)]}
    (every value it read, counted), as its `kinds.Kind` makes it."""
    return [kinds.of(call).result(call, counts.get(call.name, [])) for call in calls]


def counts_of(result) -> dict:
    """{call name: [(term bytes, count)]} from the analyze job's `Result`, read from the ps
    tasks (while its cluster is open) a chunk at a time. Blocking."""
    counts = {}
    for (name, term), count in result.entries():
        counts.setdefault(name, []).append((term, count))
    return counts
