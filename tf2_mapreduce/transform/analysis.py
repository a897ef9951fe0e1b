"""The analyze pass of a preprocessing_fn: one job over the raw examples that counts every
value each analyzer reads (exactly once, in one per-key table: `reducers.Vocabularies`),
and the analyzers' results computed from those counts, exactly."""

import math
from fractions import Fraction

import numpy as np

from tf2_mapreduce.errors import Error, UsageError, raised_by_user_code
from tf2_mapreduce.inputs.formats import TFRECORD
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.numerics import Extremes
from tf2_mapreduce.reducers import Vocabularies
from tf2_mapreduce.transform import schema as schemas
from tf2_mapreduce.transform import sums, trace

__all__ = ["raw_specs", "outputs_checked", "trace_calls", "analyze_job", "counts_of", "results", "EMPTY_VOCABULARY"]

# tft's vocabulary of no term (`get_empy_vocabulary_dummy_value`): one dummy term.
EMPTY_VOCABULARY = {"string": b"49d0cd50-04bb-48c0-bc6f-5b575dce351a", "int": b"-1"}
# Strings tft leaves out of a text vocabulary: empty, or holding a newline.
_UNHOLDABLE = r"^$|\C*[\n\r]\C*"


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
            named = [call.params[param] for call in analysis.calls if call.kind == "vocabulary"]
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


def _encoded(call, values):
    """The values an analyzer reads, as the bytes its counts are kept under: a string as
    it is (a vocabulary's, without those tft leaves out), an integer as decimal text, a
    float as the decimal text of its bits (exact, and NaN kept apart); for `size`, the
    same key for every value; for `min` and `max`, the batch's least or greatest value."""
    if call.kind == "size":  # only how many: one key, counted once per value
        return tf.fill(tf.shape(values), "")
    if call.kind in ("sum", "mean", "var"):
        return sums.terms(values, squares=call.kind == "var")
    if call.kind in ("min", "max"):
        # Only the batch's least (greatest) value can be the dataset's: one key a batch, not
        # one a distinct value. TensorFlow's reductions give NaN if any value is NaN, as tft's.
        reduce = tf.reduce_min if call.kind == "min" else tf.reduce_max
        values = tf.boolean_mask(tf.reshape(reduce(values), [1]), tf.reshape(tf.size(values) > 0, [1]))
    if values.dtype == tf.string:
        return tf.boolean_mask(values, tf.logical_not(tf.strings.regex_full_match(values, _UNHOLDABLE)))
    if values.dtype.is_integer:
        return tf.strings.as_string(tf.cast(values, tf.int64))
    if values.dtype == tf.float64:
        return tf.strings.as_string(tf.bitcast(values, tf.int64))
    return tf.strings.as_string(tf.bitcast(tf.cast(values, tf.float32), tf.int32))


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
        values = tuple(_encoded(read[name], read[name].values) for name in names)
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


def _decoded(call, term):
    if call.dtype.is_integer:
        return int(term)
    if call.dtype == tf.float64:
        return float(np.array(int(term), np.int64).view(np.float64))
    return float(np.array(int(term), np.int64).astype(np.int32).view(np.float32))


def _rounded(value, dtype):
    """`value` (a Fraction, or a float for NaN and infinities) as `dtype`, rounded once, to
    the nearest (ties to even): a Fraction goes through float64 first, then the neighbours
    of that float32 are weighed against it exactly."""
    if dtype == np.int64:
        return np.int64((int(value) + 2**63) % 2**64 - 2**63)  # wrapped, as numpy's int64 sum
    wide = np.float64(float(value))
    if dtype == np.float64 or not isinstance(value, Fraction) or not np.isfinite(wide):
        return dtype(wide)
    with np.errstate(over="ignore"):
        near = np.float32(wide)
    if not np.isfinite(near):  # beyond float32's range: its infinity, as a float32 sum gives
        return near
    candidates = [np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf))]
    finite = [c for c in candidates if np.isfinite(c)]
    return min(finite, key=lambda c: (abs(Fraction(float(c)) - value), int(np.array(c).view(np.int32)) & 1))


def _sum_dtype(dtype):
    if dtype.is_integer:
        return np.int64
    return np.float64 if dtype == tf.float64 else np.float32


def _numeric(call, entries):
    """The result of a `min`, `max`, `sum`, `mean` or `var` call from what it counted."""
    dtype = call.dtype
    if call.kind in ("min", "max"):
        values = [_decoded(call, t) for t, _ in entries]
        numpy_type = dtype.as_numpy_dtype
        if dtype.is_floating and any(math.isnan(v) for v in values):
            return np.array(math.nan, numpy_type)
        if not values:
            if dtype.is_floating:
                return np.array(math.inf if call.kind == "min" else -math.inf, numpy_type)
            most = np.iinfo(numpy_type).max
            return np.array(most if call.kind == "min" else -most, numpy_type)
        extremes = Extremes()
        for value in values:  # each batch's least (greatest)
            extremes.add(value)
        return np.array(extremes.low if call.kind == "min" else extremes.high, numpy_type)
    totals = sums.Totals(entries)
    if call.kind == "sum":
        return _rounded(totals.sum(), _sum_dtype(dtype))
    mean, variance = totals.mean_and_var()
    out = np.float64 if dtype == tf.float64 else np.float32
    return _rounded(mean if call.kind == "mean" else variance, out)


def _quantiles(call, pairs):
    """The boundaries between `num_buckets` buckets of equal counts: boundary k is the
    value at rank floor(k n / num_buckets) of the n values sorted (tft's rule, exact)."""
    buckets = call.params["num_buckets"]
    ordered = sorted((v, c) for v, c in pairs if not (isinstance(v, float) and math.isnan(v)))
    n = sum(c for _, c in ordered)
    boundaries = np.zeros([1, buckets - 1], np.float32)
    if not n:
        return boundaries
    ranks = [k * n // buckets for k in range(1, buckets)]
    seen, at = 0, 0
    for value, count in ordered:
        seen += count
        while at < len(ranks) and ranks[at] < seen:
            boundaries[0, at] = value
            at += 1
    return boundaries


def results(calls, counts) -> list:
    """Each call's result, in call order, from `counts`: {call name: [(term bytes, count)]}
    (every value it read, counted). A vocabulary's is its terms in tft's order, kept as its
    parameters say (`vocabulary` of the results)."""
    from tf2_mapreduce.reducers.keys import tft_key

    out = []
    for call in calls:
        entries = counts.get(call.name, [])
        if call.kind == "vocabulary":
            threshold, top_k = call.params["frequency_threshold"], call.params["top_k"]
            kept = [(t, c) for t, c in entries if not threshold or c >= threshold]
            kept.sort(key=lambda entry: tft_key(entry[0], entry[1]))
            terms = [t for t, _ in (kept[:top_k] if top_k else kept)]
            if not terms:
                terms = [EMPTY_VOCABULARY["int" if call.dtype.is_integer else "string"]]
            out.append(terms)
            continue
        if call.kind == "size":
            out.append(np.int64(sum(c for _, c in entries)))
        elif call.kind == "quantiles":
            out.append(_quantiles(call, [(_decoded(call, t), c) for t, c in entries]))
        else:
            out.append(_numeric(call, entries))
    return out


def counts_of(result) -> dict:
    """{call name: [(term bytes, count)]} from the analyze job's `Result`, read from the ps
    tasks (while its cluster is open). Blocking."""
    counts = {}
    with result._reading():
        for (name, term), count in result.reducer.entries(result._state):
            counts.setdefault(name, []).append((term, count))
    return counts
