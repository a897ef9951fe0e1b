"""Dataset statistics as others read them: TFDV's `DatasetFeatureStatisticsList` (from
tensorflow-metadata), a JSON document of the same figures, and the console's table.

The proto follows TFDV's conventions where ours differ: infinities take part in min, max,
mean and deviation there, and have buckets of their own in the equal-width histogram.
"""

import math

from tf2_mapreduce.outputs import files as output

__all__ = ["to_proto", "to_json", "table_lines", "INVALID_UTF8", "display"]

# What TFDV puts in place of a value that a proto string field cannot hold.
INVALID_UTF8 = "__BYTES_VALUE__"
_TYPES = {"int64": "INT", "float": "FLOAT", "bytes": "STRING"}


def display(value: bytes) -> str:
    """A bytes value as a proto's string field holds it: its text if it is UTF-8."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return INVALID_UTF8


def _quantile_buckets(histogram, quantiles, count):
    """A QUANTILES histogram from the NUM_QUANTILES + 1 exact quantiles: each bucket holds
    a tenth of the `count` values, as TFDV's do."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    histogram.type = statistics_pb2.Histogram.QUANTILES
    parts = len(quantiles) - 1
    for k in range(parts):
        bucket = histogram.buckets.add()
        bucket.low_value, bucket.high_value = float(quantiles[k]), float(quantiles[k + 1])
        bucket.sample_count = count / parts


def _common(common, feature):
    common.num_non_missing = feature.num_present
    common.num_missing = feature.num_missing
    common.min_num_values = feature.min_num_values
    common.max_num_values = feature.max_num_values
    common.avg_num_values = feature.avg_num_values
    common.tot_num_values = feature.tot_num_values
    if feature.num_values_quantiles:
        _quantile_buckets(common.num_values_histogram, feature.num_values_quantiles, feature.num_present)


def _with_infinities(numbers):
    """(mean, std_dev, min, max) as TFDV computes them, infinities included."""
    low = -math.inf if numbers.num_neg_inf else numbers.min
    high = math.inf if numbers.num_pos_inf else numbers.max
    # TFDV's deviation of values with an infinity is NaN, which it writes as 0 (max(0, NaN)).
    if numbers.num_neg_inf and numbers.num_pos_inf:
        return math.nan, 0.0, low, high
    if numbers.num_neg_inf or numbers.num_pos_inf:
        return (high if numbers.num_pos_inf else low), 0.0, low, high
    return numbers.mean, numbers.std_dev, low, high


def _numeric(stats, numbers):
    from tensorflow_metadata.proto.v0 import statistics_pb2

    if not numbers.count:
        return  # TFDV: common figures only
    stats.num_zeros = numbers.num_zeros
    if numbers.count - numbers.num_nan:
        mean, std_dev, low, high = _with_infinities(numbers)
        stats.mean, stats.std_dev, stats.min, stats.max = mean, std_dev, float(low), float(high)
        if numbers.median is not None:
            stats.median = float(numbers.median)
    standard = stats.histograms.add()
    standard.type = statistics_pb2.Histogram.STANDARD
    standard.num_nan = numbers.num_nan
    buckets = list(numbers.histogram)
    if numbers.num_neg_inf:
        buckets.insert(0, (-math.inf, -math.inf, numbers.num_neg_inf))
    if numbers.num_pos_inf:
        buckets.append((math.inf, math.inf, numbers.num_pos_inf))
    for low, high, count in buckets:
        bucket = standard.buckets.add()
        bucket.low_value, bucket.high_value, bucket.sample_count = low, high, count
    quantiles = stats.histograms.add()
    quantiles.num_nan = numbers.num_nan
    finite = numbers.count - numbers.num_nan - numbers.num_pos_inf - numbers.num_neg_inf
    if numbers.quantiles:
        _quantile_buckets(quantiles, numbers.quantiles, finite)
    else:
        quantiles.type = statistics_pb2.Histogram.QUANTILES


def _string(stats, strings):
    stats.unique = strings.unique
    stats.avg_length = strings.avg_length
    stats.invalid_utf8_count = strings.invalid_utf8_count
    for value, count in strings.top_values:
        top = stats.top_values.add()
        top.value, top.frequency = display(value), count
    for rank, value, count in strings.rank_histogram:
        bucket = stats.rank_histogram.buckets.add()
        bucket.low_rank = bucket.high_rank = rank
        bucket.label, bucket.sample_count = display(value), count


def to_proto(stats):
    """`stats` (`statistics.DatasetStats`) as a `DatasetFeatureStatisticsList` of one
    dataset, a feature each, by name."""
    from tensorflow_metadata.proto.v0 import statistics_pb2

    result = statistics_pb2.DatasetFeatureStatisticsList()
    dataset = result.datasets.add()
    dataset.num_examples = stats.num_examples
    for feature in stats.features.values():
        if feature.type is None and not feature.num_unset:
            continue  # named, but in no example: TFDV lists the features it met
        proto = dataset.features.add()
        proto.path.step.append(feature.name)
        # A feature that never has a list set is a STRING in TFDV, with common figures only.
        proto.type = statistics_pb2.FeatureNameStatistics.Type.Value(_TYPES.get(feature.type, "STRING"))
        if feature.numeric is not None:
            _common(proto.num_stats.common_stats, feature)
            _numeric(proto.num_stats, feature.numeric)
        else:
            _common(proto.string_stats.common_stats, feature)
            if feature.string is not None:
                _string(proto.string_stats, feature.string)
    return result


def _figures(numbers):
    return {
        name: getattr(numbers, name)
        for name in ("count", "quantile_error", "mean", "std_dev", "num_zeros", "min", "median", "max", "quantiles")
    } | {
        "histogram": [{"low": low, "high": high, "count": count} for low, high, count in numbers.histogram],
        "num_nan": numbers.num_nan,
        "num_pos_inf": numbers.num_pos_inf,
        "num_neg_inf": numbers.num_neg_inf,
    }


def _words(strings):
    return {
        "count": strings.count,
        "unique": strings.unique,
        "invalid_utf8_count": strings.invalid_utf8_count,
        "avg_length": strings.avg_length,
        "top_values": [[output.escape(value), count] for value, count in strings.top_values],
        "rank_histogram": [[rank, output.escape(value), count] for rank, value, count in strings.rank_histogram],
    }


def to_json(stats) -> dict:
    """`stats` as JSON-ready values: bytes %-escaped as `output.escape` does."""
    features = {}
    for name, f in stats.features.items():
        features[name] = {
            "type": f.type,
            "num_present": f.num_present,
            "num_missing": f.num_missing,
            "num_unset": f.num_unset,
            "min_num_values": f.min_num_values,
            "max_num_values": f.max_num_values,
            "avg_num_values": f.avg_num_values,
            "tot_num_values": f.tot_num_values,
            "num_values_quantiles": f.num_values_quantiles,
            "numeric": _figures(f.numeric) if f.numeric else None,
            "string": _words(f.string) if f.string else None,
            "left_out": f.left_out,
        }
    return {"num_examples": stats.num_examples, "features": features}


def _number(value):
    return "-" if value is None else "%.6g" % value


def table_lines(stats) -> list:
    """The console's table: a line per feature."""
    lines = ["%-24s %-6s %9s %9s %8s  %s" % ("feature", "type", "present", "missing", "values", "figures")]
    for name, f in stats.features.items():
        if f.numeric is not None:
            n = f.numeric
            figures = "mean %s sd %s min %s median %s max %s" % tuple(
                _number(v) for v in (n.mean, n.std_dev, n.min, n.median, n.max)
            )
            extra = [("NaN", n.num_nan), ("+inf", n.num_pos_inf), ("-inf", n.num_neg_inf), ("zeros", n.num_zeros)]
            figures += "".join(", %d %s" % (count, what) for what, count in extra if count)
        elif f.string is not None:
            top = f.string.top_values[0] if f.string.top_values else None
            figures = "%d unique, avg length %.1f" % (f.string.unique, f.string.avg_length)
            if top:
                figures += ", top %s (%d)" % (output.escape(top[0]), top[1])
        else:
            figures = "no values"
        if f.left_out:
            figures += "; left out: " + ", ".join("%d examples of %s" % (n, t) for t, n in f.left_out.items())
        lines.append(
            "%-24s %-6s %9d %9d %8.3g  %s"
            % (name, f.type or "-", f.num_present, f.num_missing, f.avg_num_values, figures)
        )
    return lines
