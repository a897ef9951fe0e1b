"""Dataset statistics from counted keys (`reducers.statistics.builder`) and as others read
them (`outputs.stats`: TFDV's proto, JSON, the console's table, the web page), from
counts given by hand and checked against figures worked out by hand."""

import math
import struct

import pytest
from tensorflow_metadata.proto.v0 import statistics_pb2

from tf2_mapreduce.outputs.stats import html, proto, report
from tf2_mapreduce.reducers.statistics.builder import Builder
from tf2_mapreduce.reducers.statistics.keys import StatKeys


def int_payload(value):
    return struct.pack(">Q", (value & (2**64 - 1)) ^ (1 << 63))


def built(features=()):
    """8 examples: `ids` an int64 feature (-5, 0, 0, 3 x4, 10 in 7 of them, one list of
    two), `words` bytes (b"a" x3, b"b" x3, b"\\xff" x1) in 6, `mixed` int64 in 3 examples
    and bytes in 1, and `unset` with no list set in 2."""
    builder = Builder(StatKeys.numbers, features)
    builder.add_examples(8)
    builder.add_lengths("ids", "i", 1, 6)
    builder.add_lengths("ids", "i", 2, 1)
    for value, count in ((-5, 1), (0, 2), (3, 4), (10, 1)):
        builder.add_value("ids", "i", int_payload(value), count)
    builder.add_lengths("words", "b", 1, 5)
    builder.add_lengths("words", "b", 2, 1)
    for value, count in ((b"a", 3), (b"b", 3), (b"\xff", 1)):
        builder.add_value("words", "b", value, count)
    builder.add_lengths("mixed", "i", 1, 3)
    builder.add_value("mixed", "i", int_payload(7), 3)
    builder.add_lengths("mixed", "b", 1, 1)
    builder.add_value("mixed", "b", b"x", 1)
    builder.add_lengths("unset", "x", 0, 2)
    return builder, builder.finish()


def test_an_int_features_figures():
    _, stats = built()
    ids = stats.features["ids"]
    assert (ids.type, ids.num_present, ids.num_missing, ids.tot_num_values) == ("int64", 7, 1, 8)
    n = ids.numeric
    assert n.count == 8 and n.num_zeros == 2 and (n.min, n.max) == (-5, 10)
    assert n.mean == pytest.approx(17 / 8) and n.std_dev == pytest.approx(math.sqrt(161 / 8 - (17 / 8) ** 2))
    ordered = [-5, 0, 0, 3, 3, 3, 3, 10]
    assert n.median == ordered[4] and n.quantiles == [ordered[min(k * 8 // 10, 7)] for k in range(11)]
    assert sum(c for _, _, c in n.quantiles_histogram) == pytest.approx(8)
    assert [c for _, _, c in n.histogram] == [1, 0, 0, 2, 0, 4, 0, 0, 0, 1]  # (low, high], the first [low, high]
    assert ids.num_values_quantiles == [1] * 9 + [2, 2]  # ranks min(floor(k * 7 / 10), 6) of 1 x6, 2


def test_a_bytes_features_figures_in_vocabulary_order():
    _, stats = built()
    words = stats.features["words"].string
    assert words.unique == 3 and words.count == 7 and words.invalid_utf8_count == 1
    assert words.top_values == [(b"b", 3), (b"a", 3), (b"\xff", 1)]  # ties: larger bytes first
    assert words.avg_length == pytest.approx(1.0)


def test_a_feature_of_two_types_keeps_the_type_of_most_and_says_so():
    builder, stats = built()
    mixed = stats.features["mixed"]
    assert mixed.type == "int64" and mixed.left_out == {"bytes": 1} and mixed.num_present == 3
    assert builder.problems == [
        "feature mixed holds lists of bytes in 1 examples and int64 in 3 examples; a feature has one type "
        "(with {setting:on_error}=skip, the examples of all but the type of most are left out of its statistics)"
    ]


def test_a_named_feature_in_no_example_and_one_never_set():
    _, stats = built(features=("absent",))
    assert stats.features["absent"].type is None and stats.features["absent"].num_present == 0
    assert stats.features["unset"].type is None and stats.features["unset"].num_unset == 2


def test_the_proto_is_filled_as_tfdv_fills_its_own():
    _, stats = built(features=("absent",))
    dataset = proto.to_proto(stats).datasets[0]
    assert dataset.num_examples == 8
    by_name = {f.path.step[0]: f for f in dataset.features}
    assert sorted(by_name) == ["ids", "mixed", "unset", "words"]  # TFDV lists the features it met
    ids = by_name["ids"]
    assert statistics_pb2.FeatureNameStatistics.Type.Name(ids.type) == "INT"
    assert ids.num_stats.median == 3 and ids.num_stats.common_stats.num_non_missing == 7
    kinds = [statistics_pb2.Histogram.HistogramType.Name(h.type) for h in ids.num_stats.histograms]
    assert kinds == ["STANDARD", "QUANTILES"]
    assert ids.num_stats.common_stats.num_values_histogram.type == statistics_pb2.Histogram.QUANTILES
    words = by_name["words"].string_stats
    assert [v.value for v in words.top_values] == ["b", "a", proto.INVALID_UTF8]
    assert statistics_pb2.FeatureNameStatistics.Type.Name(by_name["unset"].type) == "STRING"


def test_the_json_and_the_console_say_the_same_figures():
    _, stats = built()
    document = report.to_json(stats)
    assert document["num_examples"] == 8
    assert document["features"]["words"]["string"]["top_values"] == [["b", 3], ["a", 3], ["\\xff", 1]]
    assert document["features"]["ids"]["numeric"]["histogram"][0] == {"low": -5.0, "high": -3.5, "count": 1}
    lines = report.table_lines(stats)
    assert lines[0].split() == ["feature", "type", "present", "missing", "values", "figures"]
    assert any(line.startswith("ids ") and "median 3 max 10" in line for line in lines)
    assert any(line.startswith("mixed ") and "left out: 1 examples of bytes" in line for line in lines)


def test_the_page_flags_what_to_look_at_and_escapes_names():
    builder = Builder(StatKeys.numbers)
    builder.add_examples(2)
    builder.add_lengths("<script>", "b", 1, 1)
    builder.add_value("<script>", "b", b"<b>", 1)
    page = html.page(builder.finish())
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;" in page
    assert "missing in 1 examples" in page and "a single value" in page
