"""The plain-Python oracle of dataset statistics: every figure of `--job=stats`'s stats.json,
from tf.train.Example records parsed one by one by protobuf, with Fraction, sorted lists
and Counter.

    python scripts/oracle_stats.py /tmp/examples > oracle.json

Shared by the tests and the soak. Its definitions are the README's: a feature with no list
set is missing; NaN and infinities are counted apart and left out of the other figures;
a quantile is the value of rank floor(q * (n - 1)), the first and last are min and max;
-0.0 sorts before 0.0. A float's median, inner quantiles and histogram bucket are those
of its value with all but the leading one of its mantissa and the 10 bits after it
cleared (toward zero), kept between min and max.
"""

import collections
import json
import math
import os
import struct
import sys
from fractions import Fraction

from absl import app
from tensorflow.core.example import example_pb2

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


def _quantiles(ordered, place=lambda v: v):
    n = len(ordered)
    if not n:
        return []
    return [ordered[0]] + [place(ordered[k * (n - 1) // PARTS]) for k in range(1, PARTS)] + [ordered[-1]]


def _histogram(finite, place):
    low, high = float(finite[0]), float(finite[-1])
    values = [float(place(v)) for v in finite]
    if low == high:
        return [{"low": low, "high": high, "count": len(values)}]
    width = (high - low) / PARTS
    edges = [low + k * width for k in range(PARTS)] + [high]
    buckets = []
    for k in range(PARTS):
        last = k == PARTS - 1
        count = sum(1 for v in values if edges[k] <= v and (last or v < edges[k + 1]))
        buckets.append({"low": edges[k], "high": edges[k + 1], "count": count})
    return buckets


def _numeric(values, is_float):
    nan = sum(1 for v in values if math.isnan(v))
    finite = sorted((v for v in values if math.isfinite(v)), key=lambda v: (v, math.copysign(1, v) > 0))
    place = (lambda v: min(max(bucket(v), finite[0]), finite[-1])) if is_float else (lambda v: v)
    figures = {
        "count": len(values),
        "quantile_error": 2.0**-FLOAT_BITS if is_float else 0.0,
        "mean": None,
        "std_dev": None,
        "num_zeros": sum(1 for v in finite if v == 0),
        "min": None,
        "median": None,
        "max": None,
        "quantiles": _quantiles(finite, place),
        "histogram": [],
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
            median=place(finite[(n - 1) // 2]),
            max=finite[-1],
            histogram=_histogram(finite, place),
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
            "numeric": _numeric(values, kind == "float") if kind in ("int64", "float") else None,
            "string": _strings(values) if kind == "bytes" else None,
            "left_out": {},
        }
    return {"num_examples": examples, "features": result}


def records_of(paths):
    """Every record of the TFRecord files at `paths`, read by oracle_vocab's own reader
    (imported here: it defines absl flags, which a test process must not get)."""
    import oracle_vocab

    for path in paths:
        yield from oracle_vocab.records(path)


def main(argv):
    paths = []
    for spec in argv[1:]:
        paths += sorted(os.path.join(spec, n) for n in os.listdir(spec)) if os.path.isdir(spec) else [spec]
    json.dump(figures(records_of(paths)), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    app.run(main)
