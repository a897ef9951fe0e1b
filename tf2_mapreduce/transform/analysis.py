"""The analyze pass of a preprocessing_fn: one job over the raw examples that counts every
value each analyzer reads (exactly once, in one per-key table: `reducers.Vocabularies`),
and the analyzers' results computed from those counts, exactly."""

import math
from fractions import Fraction

import numpy as np

from tf2_mapreduce.inputs.formats import TFRECORD
from tf2_mapreduce.jobs.base import Job
from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.reducers import Vocabularies
from tf2_mapreduce.transform import trace

__all__ = ["raw_specs", "trace_calls", "analyze_job", "counts_of", "results", "NUMERIC", "EMPTY_VOCABULARY"]

NUMERIC = ("min", "max", "sum", "size", "mean", "var", "quantiles")
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


def _outputs_checked(outputs):
    if not isinstance(outputs, dict):
        raise trace.NotSupported("preprocessing_fn must return a dict of features, not %s" % type(outputs).__name__)
    return outputs


def trace_calls(preprocessing_fn, feature_spec) -> list:
    """The analyzer calls (`trace.Call`s, in call order, their values left out) that
    `preprocessing_fn` makes over `feature_spec`'s features: traced once, not run. Raises
    `NotSupported` for what the package does not do."""
    analysis = trace.Analysis()

    def traced(inputs):
        with trace.tracing(analysis):
            return _outputs_checked(preprocessing_fn(dict(inputs)))

    tf.function(traced, input_signature=[raw_specs(feature_spec)], autograph=False).get_concrete_function()
    for call in analysis.calls:
        call.values = None
    return analysis.calls


def _encoded(call, values):
    """The values an analyzer reads, as the bytes its counts are kept under: a string as
    it is (a vocabulary's, without those tft leaves out), an integer as decimal text, a
    float as the decimal text of its bits (exact, and NaN kept apart); for `size`, the
    same key for every value."""
    if call.kind == "size":  # only how many: one key, counted once per value
        return tf.fill(tf.shape(values), "")
    if values.dtype == tf.string:
        return tf.boolean_mask(values, tf.logical_not(tf.strings.regex_full_match(values, _UNHOLDABLE)))
    if values.dtype.is_integer:
        return tf.strings.as_string(tf.cast(values, tf.int64))
    if values.dtype == tf.float64:
        return tf.strings.as_string(tf.bitcast(values, tf.int64))
    return tf.strings.as_string(tf.bitcast(tf.cast(values, tf.float32), tf.int32))


def analyze_job(preprocessing_fn, feature_spec, calls, name="analyze") -> Job:
    """The job counting every value each of `calls` reads, over TFRecord files of
    tf.Examples parsed as `feature_spec` says."""
    spec = dict(feature_spec)

    def map_fn(records):
        analysis = trace.Analysis()
        with trace.tracing(analysis):
            preprocessing_fn(tf.io.parse_example(records, spec))
        values = tuple(_encoded(call, call.values) for call in analysis.calls)
        return {
            "examples": tf.size(records, out_type=tf.int64),
            "values": values,
            "missing": tf.zeros([len(values)], tf.int64),
        }

    names = tuple("%d:%s" % (i, call.kind) for i, call in enumerate(calls))
    return Job(
        name=name,
        map_fn=map_fn,
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


def _exact_sum(pairs):
    """The exact sum of value * count over `pairs`, as a Fraction (floats are exact binary fractions)."""
    return sum((Fraction(value) * count for value, count in pairs), Fraction(0))


def _numeric(call, pairs):
    dtype = call.dtype
    is_float = dtype.is_floating
    if call.kind in ("min", "max"):
        if is_float and any(math.isnan(v) for v, _ in pairs):
            return np.array(math.nan, dtype.as_numpy_dtype)
        values = [v for v, _ in pairs]
        if not values:
            if is_float:
                return np.array(math.inf if call.kind == "min" else -math.inf, dtype.as_numpy_dtype)
            most = np.iinfo(dtype.as_numpy_dtype).max
            return np.array(most if call.kind == "min" else -most, dtype.as_numpy_dtype)
        return np.array(min(values) if call.kind == "min" else max(values), dtype.as_numpy_dtype)
    if call.kind == "sum":
        if is_float and any(not math.isfinite(v) for v, _ in pairs):
            return np.array(sum(v * c for v, c in pairs), np.float64).astype(_sum_dtype(dtype))
        total = _exact_sum(pairs)
        return np.array(float(total) if is_float else int(total)).astype(_sum_dtype(dtype))
    finite = [(v, c) for v, c in pairs if math.isfinite(v)] if is_float else pairs
    out = np.float64 if dtype == tf.float64 else np.float32
    n = sum(c for _, c in finite)
    if not n:
        return out(0)
    mean = _exact_sum(finite) / n
    if call.kind == "mean":
        return out(float(mean))
    return out(float(sum((Fraction(v) - mean) ** 2 * c for v, c in finite) / n))


def _sum_dtype(dtype):
    if dtype.is_integer:
        return np.int64
    return np.float64 if dtype == tf.float64 else np.float32


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
    """Each call's result, in call order, from `counts`: {call index: [(term bytes, count)]}
    (every value it read, counted). A vocabulary's is its terms in tft's order, kept as its
    parameters say (`vocabulary` of the results)."""
    from tf2_mapreduce.reducers.keys import tft_key

    out = []
    for index, call in enumerate(calls):
        entries = counts.get(index, [])
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
            continue
        pairs = [(_decoded(call, t), c) for t, c in entries]
        out.append(_quantiles(call, pairs) if call.kind == "quantiles" else _numeric(call, pairs))
    return out


def counts_of(result) -> dict:
    """{call index: [(term bytes, count)]} from the analyze job's `Result`, read from the ps
    tasks (while its cluster is open). Blocking."""
    counts = {}
    with result._reading():
        for (name, term), count in result.reducer.entries(result._state):
            counts.setdefault(int(name.split(":", 1)[0]), []).append((term, count))
    return counts
