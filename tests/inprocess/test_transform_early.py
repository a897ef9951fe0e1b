"""A transform's errors before its passes (`transform/early.py`): without a schema, the function
traced over its first examples' schema fails the job before the pass of statistics where that
failure is sure (those examples are all; or it fails over every schema the rest may give), and
only warns where the rest may give another schema, over which the job then runs, exactly; a
transform_fn that cannot be saved fails before the analyze pass, where the inputs are worth a
trial save, and with the same error after it where they are not. Their inputs are read by a
pass here, as large ones are: small ones are read here whole (tests/inprocess/test_run_here.py)."""

import logging
import os

import pytest
import tensorflow as tf
from helpers.corpora import write_records
from helpers.oracles import data_digest, read_tfrecords

import tf2_mapreduce as mr
import tf2_mapreduce.transform as tft
from tf2_mapreduce.errors import UsageError
from tf2_mapreduce.jobs.features import SAMPLE_RECORDS
from tf2_mapreduce.run import here
from tf2_mapreduce.transform import early
from tf2_mapreduce.transform import run as transform_run

# A score in each of the first SAMPLE_RECORDS examples, then in every other one.
EXAMPLES = SAMPLE_RECORDS + 200


def example(i):
    feature = {"s": tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"s%d" % (i % 7)]))}
    if i < SAMPLE_RECORDS or i % 2:
        feature["score"] = tf.train.Feature(float_list=tf.train.FloatList(value=[i / 8.0]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    """(the examples' file, of EXAMPLES; a file of the first 10 alone)."""
    directory = tmp_path_factory.mktemp("raw")
    many = write_records(str(directory / "many.tfrecord.gz"), [example(i) for i in range(EXAMPLES)])
    few = write_records(str(directory / "few.tfrecord.gz"), [example(i) for i in range(10)])
    return many, few


@pytest.fixture(autouse=True)
def read_by_a_pass(monkeypatch):
    """The inputs taken for large ones: read by a pass, and worth a trial save."""
    monkeypatch.setattr(here, "HERE_BYTES", 0)
    monkeypatch.setattr(early, "TRIAL_BYTES", 0)


def filled_in(inputs):
    """TFX taxi's _fill_in_missing: a VarLen feature made dense, 0 where missing."""
    x = inputs["score"]
    dense = tf.sparse.to_dense(tf.SparseTensor(x.indices, x.values, [x.dense_shape[0], 1]), default_value=0.0)
    return {"score": tf.squeeze(dense, axis=1), "s_id": tft.compute_and_apply_vocabulary(inputs["s"])}


def broken(inputs):
    return {"score": tft.scale_to_z_score(inputs["score"]) + "x"}


def test_a_failure_over_every_schema_the_data_may_have_fails_before_the_statistics_pass(
    inprocess, raw, tmp_path, no_pass
):
    for path in raw:  # the first examples of more; all of them
        with pytest.raises(UsageError, match=r"failed when traced: TypeError: .*test_transform_early.py line \d+"):
            inprocess.run(mr.Transform(broken), [path], output_dir=str(tmp_path / "out"))
    # Over its few examples' schema, score is FixedLen: a function reading it as sparse fails for sure.
    with pytest.raises(UsageError, match="has no attribute 'indices'"):
        inprocess.run(mr.Transform(filled_in), [raw[1]], output_dir=str(tmp_path / "out"))


def test_a_failure_over_the_first_examples_schema_alone_is_said_and_the_job_runs_over_every_examples(
    inprocess, raw, tmp_path, caplog
):
    out = str(tmp_path / "out")
    with caplog.at_level(logging.WARNING, logger="tf2_mapreduce"):
        inprocess.run(mr.Transform(filled_in), [raw[0]], output_dir=out)
    warned = [r.getMessage() for r in caplog.records if "has no attribute 'indices'" in r.getMessage()]
    assert len(warned) == 1 and "first %d examples" % SAMPLE_RECORDS in warned[0]
    records = [r for path in sorted(tf.io.gfile.glob(out + "/data/*")) for r in read_tfrecords(path)]
    got = [tf.train.Example.FromString(r).features.feature["score"].float_list.value[0] for r in records]
    assert got == [i / 8.0 if i < SAMPLE_RECORDS or i % 2 else 0.0 for i in range(EXAMPLES)]


TABLE = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer([b"s1"], tf.constant([1], tf.int64)), -1)
UNSAVED = "cannot be saved: it uses a lookup table or variable made outside it"
S_SPEC = {"s": tf.io.FixedLenFeature([1], tf.string)}


def savable(inputs):
    return {"s_id": tft.compute_and_apply_vocabulary(inputs["s"])}


def outside(inputs):  # a table made once, outside the function: a SavedModel cannot hold it
    return {"s_label": TABLE.lookup(inputs["s"]), "s_id": tft.compute_and_apply_vocabulary(inputs["s"])}


def outside_in_phases(inputs):  # and an analyzer over an analyzer's result: a phase after the first
    ids = tft.compute_and_apply_vocabulary(inputs["s"])
    return {"s_label": TABLE.lookup(inputs["s"]), "ids_mean": tft.mean(ids) + tf.zeros_like(ids, tf.float32)}


def test_a_transform_fn_that_cannot_be_saved_fails_before_the_analyze_pass(inprocess, raw, tmp_path, no_pass):
    with pytest.raises(UsageError, match=UNSAVED):
        inprocess.run(mr.Transform(outside, S_SPEC), [raw[1]], output_dir=str(tmp_path / "out"))


@pytest.mark.parametrize("fn", [outside, outside_in_phases], ids=["one_phase", "two_phases"])
def test_over_inputs_not_worth_a_trial_save_it_fails_after_the_analyze_pass_with_the_same_error(
    inprocess, raw, tmp_path, monkeypatch, fn
):
    out = str(tmp_path / "out")
    inprocess.run(mr.Transform(savable, S_SPEC), [raw[1]], output_dir=out)  # a result already there
    before = data_digest(out)
    monkeypatch.setattr(early, "TRIAL_BYTES", os.path.getsize(raw[1]))  # no more than: no trial

    def no_trial(*args):
        raise AssertionError("a trial save ran")

    monkeypatch.setattr(early, "check_saves", no_trial)
    passes = set()  # run() calls itself once it claimed the directory: each pass is seen twice
    run = transform_run.run

    def counted(transform, run_pass, *args, **kwargs):
        def counting(job, options):
            passes.add(job.name)
            return run_pass(job, options)

        return run(transform, counting, *args, **kwargs)

    monkeypatch.setattr(transform_run, "run", counted)
    with pytest.raises(UsageError, match=UNSAVED):
        inprocess.run(mr.Transform(fn, S_SPEC), [raw[1]], output_dir=out)
    # The first phase's pass ran; the second phase's reads are saved before its pass, and fail there.
    assert passes == {"transform-analyze"}
    assert data_digest(out) == before  # the result there stays whole
