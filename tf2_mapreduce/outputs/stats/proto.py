"""Dataset statistics as TFDV reads them: its `DatasetFeatureStatisticsList` (from
tensorflow-metadata), filled as TFDV fills its own.

The proto follows TFDV's conventions where ours differ: infinities take part in min, max,
mean (NaN then) and deviation (0 then) there.
"""

import math

from tf2_mapreduce.feature_kinds import find

__all__ = ["to_proto", "INVALID_UTF8", "display"]

# What TFDV puts in place of a value that a proto string field cannot hold.
INVALID_UTF8 = "__BYTES_VALUE__"


def display(value: bytes) -> str:
    """A bytes value as a proto's string field holds it: its text if it is UTF-8."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return INVALID_UTF8


def _buckets(histogram, kind, buckets, num_nan=0):
    histogram.type = kind
    histogram.num_nan = num_nan
    for low, high, count in buckets:
        bucket = histogram.buckets.add()
        bucket.low_value, bucket.high_value, bucket.sample_count = float(low), float(high), count


def _common(common, feature):
    from tensorflow_metadata.proto.v0 import statistics_pb2

    common.num_non_missing = feature.num_present
    common.num_missing = feature.num_missing
    common.min_num_values = feature.min_num_values
    common.max_num_values = feature.max_num_values
    common.avg_num_values = feature.avg_num_values
    common.tot_num_values = feature.tot_num_values
    if feature.num_values_histogram:
        _buckets(common.num_values_histogram, statistics_pb2.Histogram.QUANTILES, feature.num_values_histogram)


def _with_infinities(numbers):
    """(mean, std_dev, min, max) as TFDV computes them, infinities included: its mean of
    values with an infinity is NaN, and its deviation then 0 (max(0, NaN))."""
    if numbers.num_neg_inf or numbers.num_pos_inf:
        low = -math.inf if numbers.num_neg_inf else (numbers.min if numbers.min is not None else math.inf)
        high = math.inf if numbers.num_pos_inf else (numbers.max if numbers.max is not None else -math.inf)
        return math.nan, 0.0, low, high
    return numbers.mean, numbers.std_dev, numbers.min, numbers.max


def _numeric(stats, numbers):
    from tensorflow_metadata.proto.v0 import statistics_pb2

    if not numbers.count:
        return  # TFDV: common figures only
    stats.num_zeros = numbers.num_zeros
    if numbers.count - numbers.num_nan:
        mean, std_dev, low, high = _with_infinities(numbers)
        stats.mean, stats.std_dev, stats.min, stats.max = mean, std_dev, float(low), float(high)
        stats.median = float(numbers.median)
    _buckets(stats.histograms.add(), statistics_pb2.Histogram.STANDARD, numbers.histogram, numbers.num_nan)
    _buckets(stats.histograms.add(), statistics_pb2.Histogram.QUANTILES, numbers.quantiles_histogram, numbers.num_nan)


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
        kind = find(name=feature.type)
        proto.type = statistics_pb2.FeatureNameStatistics.Type.Value(kind.statistics_type if kind else "STRING")
        if feature.numeric is not None:
            _common(proto.num_stats.common_stats, feature)
            _numeric(proto.num_stats, feature.numeric)
        else:
            _common(proto.string_stats.common_stats, feature)
            if feature.string is not None:
                _string(proto.string_stats, feature.string)
    return result
