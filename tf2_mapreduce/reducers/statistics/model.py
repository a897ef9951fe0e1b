"""Exact dataset statistics from exact counts: per feature its presence, values per example,
numbers (mean, deviation, quantiles, histograms) or strings (top values, ranks).

Every figure is computed from counts, which do not depend on the order in which pieces
were counted: sums are exact integers (a float32 is an integer times 2**-149), so two
runs over the same data give the same figures to the last bit. An int64 feature's
quantiles are exact: the value of rank floor(q * (n - 1)) in the sorted values. A float
feature's values are counted by bucket (`builder.FloatSums`): its count, zeros, NaN,
infinities, mean, deviation, min and max stay exact; its median and inner quantiles
are the bucket of the value of that rank (within a relative FLOAT_ERROR of it, toward
zero), and a value falls in the histogram bucket of its own bucket.
"""

from dataclasses import dataclass, field

from tf2_mapreduce.feature_kinds import KINDS

__all__ = ["NumericStats", "StringStats", "FeatureStats", "DatasetStats", "KIND_NAMES", "FLOAT_BITS", "FLOAT_ERROR"]

KIND_NAMES = {kind.letter: kind.name for kind in KINDS} | {"x": None}  # by the statistics keys' letters; "x": no list
NUM_TOP_VALUES = 20  # top values of a bytes feature kept (TFDV's default)
NUM_RANK_BUCKETS = 1000  # ranks of a bytes feature's rank histogram (TFDV's default)
FLOAT_BITS = 10  # bits after a float's leading one that its bucket keeps (native/example_features.cc)
FLOAT_ERROR = 2.0**-FLOAT_BITS  # how far a float's bucket may be from the value, relative to it


@dataclass(frozen=True)
class NumericStats:
    """An int64 or float feature's values. NaN is counted apart and left out of every other
    figure; infinities are counted apart too, and left out of mean, deviation, zeros, min
    and max (then None where no value is left), but are values of the quantiles, median
    and histograms, as in TFDV (`histograms`): n below is the values but NaN."""

    count: int  # values, NaN and infinities included
    quantile_error: float  # relative bound of median and inner quantiles: 0 (int64) or FLOAT_ERROR
    mean: float | None
    std_dev: float | None  # population standard deviation
    num_zeros: int
    min: float | int | None
    max: float | int | None
    median: float | int | None  # the value of rank floor(n / 2), TFDV's
    quantiles: list  # histograms.PARTS + 1 values: ranks min(floor(k * n / PARTS), n - 1)
    histogram: list  # [(low, high, count)]: TFDV's STANDARD histogram, counted exactly
    quantiles_histogram: list  # [(low, high, count)]: TFDV's QUANTILES histogram (ties share)
    num_nan: int
    num_pos_inf: int
    num_neg_inf: int


@dataclass(frozen=True)
class StringStats:
    """A bytes feature's values."""

    count: int
    unique: int
    invalid_utf8_count: int  # values that are not UTF-8 text
    top_values: list  # [(value bytes, count)]: most frequent first, ties as vocabularies order them
    avg_length: float  # bytes per value
    rank_histogram: list  # [(rank, value bytes, count)] of the NUM_RANK_BUCKETS most frequent


@dataclass(frozen=True)
class FeatureStats:
    """One feature: in how many examples it is present (with a list, even an empty one;
    as in TFDV, a feature with no list set is missing), how many values those examples
    hold, and its values' figures."""

    name: str
    type: str | None  # "int64", "float", "bytes"; None if no example holds a list of it
    num_present: int
    num_missing: int
    num_unset: int  # of the missing: examples where it is there with no list set
    min_num_values: int
    max_num_values: int
    avg_num_values: float
    tot_num_values: int
    num_values_quantiles: list  # histograms.PARTS + 1 values, as `NumericStats.quantiles`
    num_values_histogram: list  # [(low, high, count)], as `NumericStats.quantiles_histogram`
    numeric: NumericStats | None
    string: StringStats | None
    left_out: dict = field(default_factory=dict)  # {type: examples} of values of another type, left out


@dataclass(frozen=True)
class DatasetStats:
    """The statistics of a dataset: the examples read and each feature, by name."""

    num_examples: int
    features: dict  # name -> FeatureStats, in name order
