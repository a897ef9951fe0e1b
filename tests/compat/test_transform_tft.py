"""Our Transform against tf.Transform 1.21 itself (in its venv: peer_tft.py): scripts/compare_tft.py's
preprocessing_fn over the same examples, both outputs read by tft.TFTransformOutput; and our data/
against our transform_fn applied by tf.Transform, bit for bit, with a check that this catches an ulp."""

import json
import os
import shutil

import compare_tft
import numpy as np
import pytest
from helpers.corpora import write_records
from helpers.oracles import read_tfrecords
from peers import HERE, made_once, run_peer

import tf2_mapreduce as mr
import tf2_mapreduce.transform as tft

pytestmark = [pytest.mark.compat, pytest.mark.cluster]

EXAMPLES = 3000
EVAL_EXAMPLES = 1000
# tft.ngrams, bag_of_words and word_count (tf.Transform's sentiment example calls them).
TEXT = ("tags_ngrams", "tags_bag", "tags_count", "s_char_bag")
# Analyzers over analyzers' results (phases): tf-idf over a vocabulary's ids (tf.Transform's
# sentiment example), a mean of a vocabulary's ids, scale_to_0_1 of a z-score.
PHASED = ("tags_tfidf", "tags_tfidf_id", "s_id_mean")
# tf.Transform's census_example_v2: a RaggedFeature in, a ragged output, a SparseFeature out.
RAGGED = ("r_0_1", "r_ragged", "s_sparse_one_hot")
# The one value the self-check moves by an ulp: (example in input order, feature).
NUDGED = (1234, "x_z")
# Beam's run and the comparison took 50 s on a loaded 2-core machine; our two jobs, 15 s.
PEER_TIMEOUT = 300
OURS_TIMEOUT = 120


def division_fn(inputs):
    return {"x_third": inputs["x"] / 3.0}


def nudge_one_value(source, target, example, feature):
    """A copy of the output `source` at `target` where `example`'s first value of the float
    `feature` in data/ is the next float32 up; returns that value's old and new bits."""
    import tensorflow as tf

    shutil.copytree(source, target)
    paths = sorted(os.path.join(target, "data", name) for name in os.listdir(os.path.join(target, "data")))
    for path in paths:
        records = read_tfrecords(path)
        if example >= len(records):
            example -= len(records)
            continue
        parsed = tf.train.Example.FromString(records[example])
        values = parsed.features.feature[feature].float_list.value
        old = np.float32(values[0])
        values[0] = float(np.nextafter(old, np.float32(np.inf)))
        records[example] = parsed.SerializeToString()
        os.unlink(path)
        write_records(path, records)
        return old.view(np.uint32), np.float32(values[0]).view(np.uint32)
    raise AssertionError("data/ holds fewer examples than %d" % example)


@pytest.fixture(scope="module")
def compared(tft_python, inprocess, tmp_path_factory, worker_id):
    """Ours (compare_tft's function; and a division by a constant) on the in-process cluster,
    a copy of ours with one value an ulp off, then tf.Transform's run and every comparison in one
    process of its venv: the report (compare_tft's rows, and the data/ checks by side)."""

    def make():
        work = str(tmp_path_factory.mktemp("compare_tft"))
        compare_tft.write_raw(work, EXAMPLES)
        for side, fn in (("ours", compare_tft.preprocessing_fn(tft)), ("division", division_fn)):
            job = mr.Transform(fn, schema=compare_tft.schema_path(work), num_shards=2)
            inprocess.run(job, [compare_tft.raw_pattern(work)], output_dir=os.path.join(work, side))
        # Another split through our transform of the first, as tf.Transform's TransformDataset.
        compare_tft.write_raw(work, EVAL_EXAMPLES, "eval")
        applied = mr.Transform(transform_output=os.path.join(work, "ours"), num_shards=2)
        inprocess.run(applied, [compare_tft.eval_pattern(work)], output_dir=os.path.join(work, "ours_eval"))
        old, new = nudge_one_value(os.path.join(work, "ours"), os.path.join(work, "ours_1ulp"), *NUDGED)
        assert abs(int(new) - int(old)) == 1  # one ulp: the next float32, its bits one apart
        report = os.path.join(work, "report.json")
        args = [os.path.join(HERE, "peer_tft.py"), "transform", work, report, "ours", "ours_1ulp", "division"]
        args.append("--eval=ours_eval")
        run_peer(tft_python, args, os.path.join(work, "peer_tft.log"), PEER_TIMEOUT)
        with open(report) as f:
            return dict(json.load(f), work=work)

    return made_once(tmp_path_factory, worker_id, "compare_tft", make, PEER_TIMEOUT + OURS_TIMEOUT)


def rows_of(compared, label):
    """compare_tft's rows of one table (`label` "transform_raw_features" or "data"), by feature."""
    return {row["feature"]: row for row in compared["rows"] if row["check"].startswith(label + " ")}


def check(compared, name):
    (row,) = [row for row in compared["rows"] if row["check"] == name]
    return row


OUTPUTS = [
    "n_mean",
    "n_scaled",
    "r_0_1",
    "r_ragged",
    "s_char_bag",
    "s_hashed",
    "s_id",
    "s_id_mean",
    "s_own_table_id",
    "s_sparse_one_hot",
    "s_top5_id",
    "s_top5_one_hot",
    "tags_bag",
    "tags_count",
    "tags_hashed",
    "tags_id",
    "tags_ngrams",
    "tags_tfidf",
    "tags_tfidf_id",
    "x_0_1",
    "x_bucket",
    "x_quantiles",
    "x_z",
    "x_z_0_1",
    "xn_0_1",
    "xn_z",
]


def test_the_spec_and_every_vocabulary_are_tfts(compared):
    assert check(compared, "transformed_feature_spec")["features"] == OUTPUTS
    assert check(compared, "transformed_feature_spec")["differing"] == []
    # TFX trainers build their serving signature with it: tft reads it from our metadata/.
    assert check(compared, "raw_feature_spec")["verdict"] == "ok", check(compared, "raw_feature_spec")["result"]
    assert check(compared, "raw_feature_spec")["features"] == ["n", "r", "s", "tags", "x"]
    names = check(compared, "vocabulary names")["names"]
    assert (
        names["ours"]
        == names["tft"]
        == [
            "s_for_a_table",
            "s_top5",
            "tags_for_the_trainer",
            "vocab_compute_and_apply_vocabulary_1_vocabulary",
            "vocab_compute_and_apply_vocabulary_3_vocabulary",
            "vocab_compute_and_apply_vocabulary_vocabulary",
        ]
    )
    terms = {row["vocabulary"]: (row["terms"], row["verdict"]) for row in compared["rows"] if "vocabulary" in row}
    # s: 40 values; tags: 15; top_k=5 cut inside a three-way tie (compare_tft.S_WEIGHTS).
    assert terms == {
        "s_for_a_table": (40, "ok"),
        "s_top5": (5, "ok"),
        "tags_for_the_trainer": (15, "ok"),
        "vocab_compute_and_apply_vocabulary_1_vocabulary": (15, "ok"),
        "vocab_compute_and_apply_vocabulary_3_vocabulary": (10, "ok"),  # tf-idf's: top_k=10 of tags
        "vocab_compute_and_apply_vocabulary_vocabulary": (40, "ok"),
    }


@pytest.mark.parametrize("table, examples", [("transform_raw_features", EXAMPLES + 3), ("data", EXAMPLES)])
def test_every_example_is_transformed_as_tft_transforms_it(compared, table, examples):
    """transform_raw_features over every raw example and compare_tft's probes (values no
    vocabulary holds, an empty string, x and n out of the range analyzed), then the examples
    each side wrote (as multisets: Beam writes in no fixed order)."""
    rows = rows_of(compared, table)
    assert sorted(rows) == OUTPUTS
    assert {row["examples"] for row in rows.values()} == {examples}
    # Ids, OOV buckets and defaults; scalings and a mean bit for bit.
    exact = ("s_id", "s_top5_id", "s_top5_one_hot", "tags_id", "n_mean", "n_scaled", "x_0_1", "s_hashed", "tags_hashed")
    exact += ("s_own_table_id", "xn_0_1") + PHASED + RAGGED
    for name in exact + TEXT:
        assert rows[name]["differing"] == 0, rows[name]["result"]
    # tf.Transform's variance combines float32 batches and may be an ulp off the exact one;
    # the scaling of x_z (a phase after it) follows it: ours is checked against an exact
    # oracle (`test_a_scaling_of_a_z_score_is_that_of_the_z_scores_written`), tft's printed.
    assert rows["x_z"]["max_ulps"] <= 2, rows["x_z"]["result"]
    print("x_z_0_1 against tf.Transform's (%s): %s" % (table, rows["x_z_0_1"]["result"]))
    # Elementwise, tf.Transform's means are further off (its per-column float32 combine);
    # ours equal an exact oracle's, bit for bit; the difference is printed, not bounded.
    assert check(compared, "oracle xn_z")["differing"] == 0, check(compared, "oracle xn_z")["result"]
    print("xn_z against tf.Transform's (%s): %s" % (table, rows["xn_z"]["result"]))
    # tf.Transform's quantiles come from a sketch, which is exact at this size.
    assert rows["x_bucket"]["differing"] == 0, rows["x_bucket"]["result"]
    assert rows["x_quantiles"]["differing"] == 0, rows["x_quantiles"]["result"]


def test_an_eval_split_through_transform_output_is_tfts_transform_dataset(compared):
    """Our --transform_output of another split: our transform_fn's, bit for bit and in input
    order; and as tf.Transform's TransformDataset of it with its own transform, as the first
    split's data/ are (multisets)."""
    (exact_row,) = [row for row in compared["rows"] if row["check"].startswith("data: ours_eval/data")]
    assert (exact_row["examples"], exact_row["written"]) == (EVAL_EXAMPLES, EVAL_EXAMPLES)
    assert exact_row["differing"] == [], exact_row["result"]
    rows = rows_of(compared, "eval data")
    assert sorted(rows) == OUTPUTS
    assert {row["examples"] for row in rows.values()} == {EVAL_EXAMPLES}
    exact = ("s_id", "s_top5_id", "s_top5_one_hot", "tags_id", "n_mean", "n_scaled", "x_0_1", "s_hashed", "tags_hashed")
    exact += ("s_own_table_id", "xn_0_1") + PHASED + RAGGED
    for name in exact + TEXT + ("x_bucket", "x_quantiles"):
        assert rows[name]["differing"] == 0, rows[name]["result"]
    assert rows["x_z"]["max_ulps"] <= 2, rows["x_z"]["result"]


@pytest.mark.parametrize("side", compare_tft.SIDES)
def test_our_tftransformoutput_reads_as_tfts_reads_ours_and_tfts(compared, side):
    """tf2_mapreduce.transform.TFTransformOutput, without tf.Transform, on our output and on
    tf.Transform's: specs, buckets' counts, vocabularies, transform_raw_features of every raw
    example and probe (bit for bit), and the outputs given without a raw feature."""
    work = compared["work"]
    theirs = compared["readings"][side]
    raw_spec = tft.TFTransformOutput(os.path.join(work, "ours")).raw_feature_spec()
    ours = json.loads(json.dumps(compare_tft.reading(tft.TFTransformOutput(os.path.join(work, side)), work, raw_spec)))
    for key in ("transformed_feature_spec", "raw_feature_spec", "num_buckets", "vocabularies", "without_n"):
        assert ours[key] == theirs[key], key
    assert sorted(ours["values"]) == sorted(theirs["values"]) == OUTPUTS
    for name in OUTPUTS:
        assert ours["values"][name] == theirs["values"][name], name


def test_our_data_is_our_transform_fn_bit_for_bit(compared):
    ours = compared["data"]["ours"]
    assert (ours["examples"], ours["written"]) == (EXAMPLES, EXAMPLES)
    assert ours["differing"] == [], ours["result"]


def test_the_data_check_catches_one_ulp(compared):
    nudged = compared["data"]["ours_1ulp"]
    assert (nudged["examples"], nudged["written"]) == (EXAMPLES, EXAMPLES)
    assert nudged["differing"] == [list(NUDGED)]
    assert nudged["verdict"] == "FAIL"


def test_a_division_by_a_constant_is_the_same_in_data_and_transform_fn(compared):
    division = compared["data"]["division"]
    assert (division["examples"], division["written"]) == (EXAMPLES, EXAMPLES)
    assert division["differing"] == [], division["result"]


def test_a_scaling_of_a_z_score_is_that_of_the_z_scores_written(compared):
    """x_z_0_1, scale_to_0_1 of x_z (an analyzer of the second phase): in our data/, every
    value is what float32 arithmetic gives of the x_z written beside it and their exact
    least and greatest, bit for bit."""
    import tensorflow as tf

    data = os.path.join(compared["work"], "ours", "data")
    z, scaled = [], []
    for name in sorted(os.listdir(data)):
        for record in read_tfrecords(os.path.join(data, name)):
            features = tf.train.Example.FromString(record).features.feature
            z += features["x_z"].float_list.value
            scaled += features["x_z_0_1"].float_list.value
    z = np.float32(z)
    assert len(z) == EXAMPLES
    low, high = z.min(), z.max()
    want = (z - low) / (high - low) * np.float32(1.0) + np.float32(0.0)
    assert np.float32(scaled).view(np.uint32).tolist() == want.view(np.uint32).tolist()
