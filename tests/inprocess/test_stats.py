"""The stats job on the in-process cluster: every figure of every feature against an oracle
that parses each record with protobuf and computes with Fraction, sorting and Counter
(helpers/oracle_stats.py); stats.pb read back with tensorflow-metadata's classes."""

import json
import math
import random
import struct

import pytest
import tensorflow as tf
from helpers.corpora import awkward_example, write_awkward, write_records
from helpers.oracle_stats import figures_of as oracle
from tensorflow.core.example import example_pb2
from tensorflow_metadata.proto.v0 import statistics_pb2

import tf2_mapreduce as mr
from tf2_mapreduce.errors import JobFailed
from tf2_mapreduce.outputs import files as output
from tf2_mapreduce.outputs.stats import proto as stats_proto
from tf2_mapreduce.outputs.stats import report


@pytest.fixture(scope="module")
def awkward(tmp_path_factory):
    directory = tmp_path_factory.mktemp("awkward")
    return str(directory), write_awkward(directory)


def assert_matches(stats, paths, features=()):
    """Every figure of every feature, against the oracle, whole."""
    expected = oracle(paths, features)
    got = report.to_json(stats)
    assert sorted(got["features"]) == sorted(expected["features"])
    assert got["num_examples"] == expected["num_examples"]
    for name, figures in expected["features"].items():
        assert got["features"][name] == figures, name


def assert_proto(path, stats):
    """The fields TFDV reads, from stats.pb parsed by tensorflow-metadata's classes."""
    with open(path, "rb") as f:
        parsed = statistics_pb2.DatasetFeatureStatisticsList.FromString(f.read())
    (dataset,) = parsed.datasets
    assert dataset.num_examples == stats.num_examples
    typed = {name: f for name, f in stats.features.items() if f.type or f.num_unset}
    assert [list(f.path.step) for f in dataset.features] == [[name] for name in sorted(typed)]
    for proto in dataset.features:
        feature = typed[proto.path.step[0]]
        kind = {"int64": "INT", "float": "FLOAT", "bytes": "STRING", None: "STRING"}[feature.type]
        assert statistics_pb2.FeatureNameStatistics.Type.Name(proto.type) == kind
        if feature.type is None:
            block = proto.string_stats
            assert not block.top_values and block.common_stats.num_non_missing == 0
        elif feature.type == "bytes":
            block = proto.string_stats
            assert block.unique == feature.string.unique
            assert [(t.value, t.frequency) for t in block.top_values] == [
                (v.decode() if _utf8(v) else "__BYTES_VALUE__", c) for v, c in feature.string.top_values
            ]
        else:
            block = proto.num_stats
            assert block.num_zeros == feature.numeric.num_zeros
            numbers = feature.numeric
            low = -math.inf if numbers.num_neg_inf else numbers.min
            high = math.inf if numbers.num_pos_inf else numbers.max
            assert (block.min, block.max) == (float(low), float(high))
            if not (numbers.num_neg_inf or numbers.num_pos_inf):
                assert block.mean == numbers.mean and block.std_dev == numbers.std_dev
            assert [h.num_nan for h in block.histograms] == [numbers.num_nan] * 2
            standard = [(b.low_value, b.high_value, b.sample_count) for b in block.histograms[0].buckets]
            assert sum(count for _, _, count in standard) == numbers.count - numbers.num_nan
        common = block.common_stats
        assert (common.num_non_missing, common.num_missing) == (feature.num_present, feature.num_missing)
        assert (common.min_num_values, common.max_num_values, common.tot_num_values) == (
            feature.min_num_values,
            feature.max_num_values,
            feature.tot_num_values,
        )
    return parsed


def _utf8(value):
    try:
        value.decode()
        return True
    except UnicodeDecodeError:
        return False


def test_stats_of_awkward_features_match_the_oracle_in_every_figure(inprocess, awkward, tmp_path):
    directory, paths = awkward
    result = inprocess.run(mr.Stats(), [directory])
    assert result.files_done == len(paths)
    assert_matches(result.total, paths)
    assert result.features is result.total.features and result.proto() == stats_proto.to_proto(result.total)
    written = result.write_dir(str(tmp_path / "out"))
    assert written == {"files": ["stats.pb", "stats.json", "stats.html"]}
    assert_proto(str(tmp_path / "out" / "stats.pb"), result.total)
    with open(tmp_path / "out" / "stats.json") as f:
        document = json.load(f)
    assert document["num_examples"] == result.total.num_examples and document["files"] == len(paths)
    query = document["features"]["query"]["string"]
    assert [[output.unescape(v), c] for v, c in query["top_values"]] == [
        [v, c] for v, c in result.features["query"].string.top_values
    ]
    page = (tmp_path / "out" / "stats.html").read_text()
    assert "<svg" in page and "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    flagged = page[page.index("To look at") : page.index('<div class="feature"')]
    assert "constant" in flagged and "a single value" in flagged and "NaN" in flagged
    # A number's chart spans its histogram: from the first bucket's low edge to the last's high.
    for name, feature in result.features.items():
        histogram = feature.numeric.histogram if feature.numeric is not None else []
        if histogram:
            chart = page[page.index('id="f-%s"' % name) :].split("</svg>")[0]
            assert ">%.4g</text>" % histogram[0][0] in chart and ">%.4g</text>" % histogram[-1][1] in chart


def test_stats_of_named_features_only(inprocess, awkward):
    directory, paths = awkward
    result = inprocess.run(mr.Stats("user_id,absent?"), [directory])
    assert sorted(result.features) == ["absent", "user_id"]
    absent = result.features["absent"]
    assert absent.type is None and absent.num_present == 0 and absent.num_missing == result.total.num_examples
    assert_matches(result.total, paths, ("user_id", "absent"))
    assert [list(f.path.step) for f in result.proto().datasets[0].features] == [["user_id"]]


def test_one_example_and_no_example(inprocess, tmp_path):
    one = write_records(str(tmp_path / "one.tfrecord"), [awkward_example(random.Random(3))], "")
    result = inprocess.run(mr.Stats(), [one])
    assert result.total.num_examples == 1
    assert_matches(result.total, [one])
    empty = write_records(str(tmp_path / "empty.tfrecord.gz"), [])
    result = inprocess.run(mr.Stats(), [empty])
    assert result.total.num_examples == 0 and result.features == {}
    assert result.proto().datasets[0].num_examples == 0


def test_a_float_repeated_hundreds_of_times_in_one_file_is_counted_exactly(inprocess, tmp_path):
    # A piece counts a float's bucket in one byte, its wraps apart: each of these values
    # comes back some 700 times in the file, a subnormal one and zeros among them.
    rng = random.Random(5)
    values = [1.5, 0.0, -0.0, -2.0, 1e-40, math.nan]

    def example():
        level = [rng.choice(values) for _ in range(rng.randint(1, 6))]
        return tf.train.Example(
            features=tf.train.Features(feature={"level": tf.train.Feature(float_list=tf.train.FloatList(value=level))})
        ).SerializeToString()

    path = write_records(str(tmp_path / "levels.tfrecord.gz"), [example() for _ in range(1200)])
    result = inprocess.run(mr.Stats(), [path])
    assert_matches(result.total, [path])
    numbers = result.features["level"].numeric
    assert numbers.count > 2000 and numbers.num_nan > 256 and numbers.num_zeros > 512


def conflicting(tmp_path):
    records = [
        tf.train.Example(
            features=tf.train.Features(feature={"x": tf.train.Feature(int64_list=tf.train.Int64List(value=[n]))})
        ).SerializeToString()
        for n in range(5)
    ]
    other = tf.train.Example(
        features=tf.train.Features(feature={"x": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5]))})
    ).SerializeToString()
    return [
        write_records(str(tmp_path / "a.tfrecord"), records[:3], ""),
        write_records(str(tmp_path / "b.tfrecord"), records[3:] + [other], ""),
    ]


def test_a_feature_of_two_types_fails_or_is_reported_per_on_error(inprocess, tmp_path):
    paths = conflicting(tmp_path)
    with pytest.raises(JobFailed, match=r"feature x holds lists of float in 1 examples and int64 in 5 examples"):
        inprocess.run(mr.Stats(), paths)
    result = inprocess.run(mr.Stats(), paths, on_error="skip")
    x = result.features["x"]
    assert x.type == "int64" and x.left_out == {"float": 1}
    assert (x.num_present, x.num_missing, x.numeric.count, x.numeric.max) == (5, 1, 5, 4)


def test_a_record_that_is_no_example_is_its_files_error(inprocess, awkward, tmp_path):
    _, paths = awkward
    bad = write_records(str(tmp_path / "bad.tfrecord"), [b"\xff\xff not a protobuf"], "")
    with pytest.raises(JobFailed, match=r"bad.tfrecord.*not a tf.train.Example"):
        inprocess.run(mr.Stats(), [paths[1], bad])
    result = inprocess.run(mr.Stats(), [paths[1], bad], on_error="skip")
    assert [path for path, _ in result.skipped] == [bad]
    assert_matches(result.total, [paths[1]])


def _field(number, payload):
    """A length-delimited protobuf field."""
    return bytes([number << 3 | 2]) + _varint(len(payload)) + payload


def _varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _entry(name, *feature_fields):
    return _field(1, _field(1, name) + _field(2, b"".join(feature_fields)))


def test_wire_forms_protobuf_accepts_are_read_as_protobuf_reads_them(inprocess, tmp_path):
    ints = _field(3, bytes([1 << 3 | 0]) + _varint(5) + bytes([1 << 3 | 0]) + _varint(2**64 - 3))  # unpacked int64s
    floats = _field(2, bytes([1 << 3 | 5]) + struct.pack("<f", 1.5))  # an unpacked float
    records = [
        # A name given twice: the last entry wins.
        _field(1, _entry(b"a", _field(3, _field(1, _varint(1)))) + _entry(b"a", _field(1, _field(1, b"x")))),
        # Two Features fields merge: the same list appends, another kind replaces.
        _field(1, _entry(b"b", ints, ints) + _entry(b"c", ints, floats)),
        # Two `features` fields merge, unknown fields are passed over.
        _field(1, _entry(b"d", floats)) + bytes([7 << 3 | 0, 1]) + _field(1, _entry(b"e", _field(1, b""))),
        # Packed lists, and a Feature with none.
        _field(1, _entry(b"b", _field(3, _field(1, _varint(7) + _varint(8)))) + _entry(b"f")),
    ]
    for record in records:  # each one protobuf itself parses
        example_pb2.Example.FromString(record)
    path = write_records(str(tmp_path / "wire.tfrecord"), records, "")
    result = inprocess.run(mr.Stats(), [path])
    assert_matches(result.total, [path])
    assert result.features["b"].numeric.count == 6 and result.features["c"].type == "float"
