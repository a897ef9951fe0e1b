"""The plain-Python oracle of dataset statistics: every figure of `--job=stats`'s stats.json,
from tf.train.Example records parsed one by one by protobuf, with Fraction, sorted lists
and Counter.

Shared by the tests and the soak (tests/soak.py). Its definitions are docs/jobs.md's, TFDV's: a feature
with no list set is missing; NaN is counted apart and left out of every other figure;
infinities are counted apart and left out of mean, deviation, zeros, min and max, but are
values of the quantiles, the median and the histograms; of the n values but NaN, sorted
(-0.0 before 0.0), quantile k of 10 is the value of rank min(floor(k * n / 10), n - 1)
and the median that of rank floor(n / 2); a QUANTILES bucket holds the values in (low,
high], buckets with one high bound share theirs evenly, and the values equal to the
least go to the first bucket; a STANDARD bucket of 10 equal ones from the least finite
value to the greatest holds the values in (low, high] (the first its low too), with the
infinities in buckets of their own. A float's median, quantiles and histogram bucket are
those of its value with all but the leading one of its mantissa and the 10 bits after
it cleared (toward zero), kept between min and max.
"""

import collections
import math
import struct
from fractions import Fraction

import numpy
from tensorflow.core.example import example_pb2

from helpers.oracles import read_tfrecords
from tf2_mapreduce.outputs import files as output

KINDS = {"bytes_list": "bytes", "int64_list": "int64", "float_list": "float"}
PARTS = 10  # quantiles and equal-width buckets
TOP, RANKS = 20, 1000
FLOAT_BITS = 10


def bucket(value):
    """A float32's value with all but its mantissa's leading one and FLOAT_BITS bits cleared."""
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    mantissa = bits & 0x7FFFFF
    lead = 23 if bits & 0x7F800000 else mantissa.bit_length() - 1
    drop = lead - FLOAT_BITS
    if drop > 0:
        bits &= ~((1 << drop) - 1)
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _quantiles(placed):
    """Quantile k of 10 of `placed` (sorted values), k = 0..10."""
    n = len(placed)
    return [placed[min(k * n // PARTS, n - 1)] for k in range(PARTS + 1)] if n else []


def _quantiles_histogram(placed):
    if not placed:
        return []
    bounds = _quantiles(placed)
    upto = [sum(1 for v in placed if v <= b) for b in bounds]
    counts = [float(upto[k + 1] - upto[k]) for k in range(PARTS)]
    k = 0
    while k < PARTS:  # buckets with one high bound share their values
        j = k
        while j + 1 < PARTS and bounds[j + 2] == bounds[k + 1]:
            j += 1
        share = sum(counts[k : j + 1]) / (j + 1 - k)
        counts[k : j + 1] = [share] * (j + 1 - k)
        k = j + 1
    first = [k for k in range(PARTS) if (bounds[k], bounds[k + 1]) == (bounds[0], bounds[1])]
    first = first[: next((i for i, k in enumerate(first) if k != i), len(first))]
    for k in first:  # the values equal to the least
        counts[k] += upto[0] / len(first)
    return [{"low": bounds[k], "high": bounds[k + 1], "count": counts[k]} for k in range(PARTS)]


def _histogram(placed):
    if not placed:
        return []
    finite = [v for v in placed if math.isfinite(v)]
    neg, pos = placed.count(-math.inf), placed.count(math.inf)
    if not finite:
        return [{"low": math.inf, "high": -math.inf, "count": neg + pos}]
    low, high = float(finite[0]), float(finite[-1])
    edges = [low, high] if low == high else [float(e) for e in numpy.linspace(low, high, PARTS + 1)]
    buckets = [{"low": -math.inf, "high": -math.inf, "count": neg}] if neg else []
    for k in range(len(edges) - 1):
        count = sum(1 for v in finite if (edges[k] < v or (k == 0 and v == edges[0])) and v <= edges[k + 1])
        buckets.append({"low": edges[k], "high": edges[k + 1], "count": count})
    if pos:
        buckets.append({"low": math.inf, "high": math.inf, "count": pos})
    return buckets


def _numeric(values, is_float):
    nan = sum(1 for v in values if math.isnan(v))
    ordered = sorted((v for v in values if not math.isnan(v)), key=lambda v: (v, math.copysign(1, v) > 0))
    finite = [v for v in ordered if math.isfinite(v)]

    def place(v):
        if not is_float or not math.isfinite(v):
            return v
        return min(max(bucket(v), finite[0]), finite[-1])

    placed = [place(v) for v in ordered]
    figures = {
        "count": len(values),
        "quantile_error": 2.0**-FLOAT_BITS if is_float else 0.0,
        "mean": None,
        "std_dev": None,
        "num_zeros": sum(1 for v in finite if v == 0),
        "min": None,
        "median": placed[len(placed) // 2] if placed else None,
        "max": None,
        "quantiles": _quantiles(placed),
        "histogram": _histogram(placed),
        "quantiles_histogram": _quantiles_histogram(placed),
        "num_nan": nan,
        "num_pos_inf": sum(1 for v in values if v == math.inf),
        "num_neg_inf": sum(1 for v in values if v == -math.inf),
    }
    if finite:
        n = len(finite)
        exact = [Fraction(v) for v in finite]
        mean = sum(exact) / n
        figures.update(
            mean=float(mean),
            std_dev=math.sqrt(float(sum((v - mean) ** 2 for v in exact) / n)),
            min=finite[0],
            max=finite[-1],
        )
    return figures


def _utf8(value):
    try:
        value.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _strings(values):
    counts = collections.Counter(values)
    ranked = sorted(sorted(counts.items(), reverse=True), key=lambda pair: -pair[1])  # tf.Transform's order
    return {
        "count": len(values),
        "unique": len(counts),
        "invalid_utf8_count": sum(1 for v in values if not _utf8(v)),
        "avg_length": sum(len(v) for v in values) / len(values) if values else 0.0,
        "top_values": [[output.escape(v), c] for v, c in ranked[:TOP]],
        "rank_histogram": [[r, output.escape(v), c] for r, (v, c) in enumerate(ranked[:RANKS])],
    }


def figures(records, features=()):
    """stats.json's "num_examples" and "features" for `records` (serialized Examples):
    of `features`, or of every feature met. Raises ValueError for a feature of two types."""
    examples = 0
    seen = collections.defaultdict(lambda: {"kinds": collections.Counter(), "lengths": [], "values": [], "unset": 0})
    for name in features:
        seen[name]
    for record in records:
        examples += 1
        for name, feature in example_pb2.Example.FromString(record).features.feature.items():
            if features and name not in features:
                continue
            kind = feature.WhichOneof("kind")
            entry = seen[name]
            if kind is None:
                entry["unset"] += 1
                continue
            values = list(getattr(feature, kind).value)
            entry["kinds"][KINDS[kind]] += 1
            entry["lengths"].append(len(values))
            entry["values"].extend(values)
    result = {}
    for name in sorted(seen):
        entry = seen[name]
        if len(entry["kinds"]) > 1:
            raise ValueError("feature %s has lists of %s" % (name, sorted(entry["kinds"])))
        kind = next(iter(entry["kinds"]), None)
        lengths = sorted(entry["lengths"])
        values = entry["values"]
        result[name] = {
            "type": kind,
            "num_present": len(lengths),
            "num_missing": examples - len(lengths),
            "num_unset": entry["unset"],
            "min_num_values": lengths[0] if lengths else 0,
            "max_num_values": lengths[-1] if lengths else 0,
            "avg_num_values": sum(lengths) / len(lengths) if lengths else 0.0,
            "tot_num_values": sum(lengths),
            "num_values_quantiles": _quantiles(lengths),
            "num_values_histogram": _quantiles_histogram(lengths),
            "numeric": _numeric(values, kind == "float") if kind in ("int64", "float") else None,
            "string": _strings(values) if kind == "bytes" else None,
            "left_out": {},
        }
    return {"num_examples": examples, "features": result}


def records_of(paths):
    """Every record of the TFRecord files at `paths` (GZIP or ZLIB by their names), read
    in plain Python (`oracles.read_tfrecords`)."""
    for path in paths:
        yield from read_tfrecords(path)


def figures_of(paths, features=()):
    """stats.json's figures for the TFRecord files at `paths`: each record parsed by protobuf."""
    return figures(records_of(paths), features)
