"""A job run here, without a pass (`run/here.py`): the statistics of small inputs read in this
process match the oracle figure by figure, and the cluster's pass exactly; a transform over
small inputs runs no pass of statistics and writes what it writes after one; what the pass
must report (a bad record, a feature of two types) is still the pass's to report."""

import os
import random

import pytest
import tensorflow as tf
from helpers.corpora import awkward_example, make_examples, write_awkward, write_records
from helpers.oracle_stats import figures_of as oracle
from helpers.oracles import read_tfrecords

import tf2_mapreduce as mr
import tf2_mapreduce.transform as tft
from tf2_mapreduce.client import _listed
from tf2_mapreduce.errors import JobFailed
from tf2_mapreduce.inputs.files import Files
from tf2_mapreduce.outputs.stats import report
from tf2_mapreduce.run import here
from tf2_mapreduce.transform import run as transform_run


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """(awkward examples: 6 files, GZIP'd and plain in turn; make_examples' tricky ones)."""
    return write_awkward(tmp_path_factory.mktemp("awkward")), make_examples(str(tmp_path_factory.mktemp("tricky")))


def collected_here(paths):
    collected = here.run_here(mr.Stats(), _listed(paths, "fail").files)
    assert collected is not None
    return collected


@pytest.mark.parametrize("which", [0, 1])
def test_statistics_here_are_the_oracles_and_the_pass_s(inprocess, inputs, which):
    paths = inputs[which]
    stats = collected_here(paths).total
    expected = oracle(paths, ())
    got = report.to_json(stats)
    assert got["num_examples"] == expected["num_examples"] and sorted(got["features"]) == sorted(expected["features"])
    for name, figures in expected["features"].items():
        assert got["features"][name] == figures, name
    assert got == report.to_json(inprocess.run(mr.Stats(), paths).total)


def test_inputs_over_the_bound_or_on_network_storage_are_not_read_here(inputs, monkeypatch):
    files = _listed(inputs[0], "fail").files
    monkeypatch.setattr(here, "HERE_BYTES", int(files.sizes.sum()) - 1)
    assert here.run_here(mr.Stats(), files) is None
    assert here.run_here(mr.WordCount(), files) is None  # not a job of counted keys over a dataset
    monkeypatch.undo()
    remote = Files(list(files.paths[:-1]) + ["gs://bucket/part.tfrecord"], files.sizes, files.mtimes)
    assert here.run_here(mr.Stats(), remote) is None  # the workers' to read, through their outages


def fn(inputs):
    return {
        "query_id": tft.compute_and_apply_vocabulary(inputs["query"], top_k=50, num_oov_buckets=1),
        "clicks_z": tft.scale_to_z_score(inputs["clicks"]),
        "score_01": tft.scale_to_0_1(inputs["score"]),
    }


def written(out):
    """{path under out: bytes} of data/ and the schemas (transform_fn's files are named anew by each save)."""
    found = {}
    for directory in ("data", "transformed_metadata", "metadata"):
        for root, _, names in os.walk(os.path.join(out, directory)):
            for name in names:
                with open(os.path.join(root, name), "rb") as f:
                    found[os.path.relpath(os.path.join(root, name), out)] = f.read()
    return found


def test_a_transform_of_small_inputs_runs_no_pass_of_statistics_and_writes_the_same(
    inprocess, inputs, tmp_path, monkeypatch
):
    paths = inputs[1]
    monkeypatch.setattr(here, "HERE_BYTES", 0)
    inprocess.run(mr.Transform(fn), paths, output_dir=str(tmp_path / "pass"))
    monkeypatch.undo()
    monkeypatch.setattr(transform_run.early, "check_on_first_examples", refused)
    inprocess.run(mr.Transform(fn), paths, output_dir=str(tmp_path / "here"))
    by_pass, by_here = written(str(tmp_path / "pass")), written(str(tmp_path / "here"))
    assert by_here == by_pass and any(name.startswith("data/") for name in by_here)
    examples = [
        r for name in sorted(by_here) if name.startswith("data/") for r in read_tfrecords(str(tmp_path / "here" / name))
    ]
    assert len(examples) == sum(len(read_tfrecords(path)) for path in paths)


def test_what_the_pass_reports_is_still_reported_by_it(inprocess, tmp_path):
    good = write_records(str(tmp_path / "good.tfrecord"), [awkward_example(random.Random(2))], "")
    bad = write_records(str(tmp_path / "bad.tfrecord"), [b"\xff\xff not a protobuf"], "")
    with pytest.raises(tf.errors.OpError):
        collected_here([good, bad])
    with pytest.raises(JobFailed, match=r"bad.tfrecord.*not a tf.train.Example"):
        inprocess.run(
            mr.Transform(lambda inputs: {"c": inputs["constant"]}), [good, bad], output_dir=str(tmp_path / "o")
        )
    x_of = {
        "ints": tf.train.Feature(int64_list=tf.train.Int64List(value=[1])),
        "floats": tf.train.Feature(float_list=tf.train.FloatList(value=[0.5])),
    }
    two_types = [
        write_records(
            str(tmp_path / ("%s.tfrecord" % name)),
            [tf.train.Example(features=tf.train.Features(feature={"x": x})).SerializeToString()],
            "",
        )
        for name, x in x_of.items()
    ]
    assert collected_here(two_types).problems
    with pytest.raises(JobFailed, match=r"feature x holds lists of float in 1 examples and int64 in 1 examples"):
        inprocess.run(mr.Transform(lambda inputs: {"x": inputs["x"]}), two_types, output_dir=str(tmp_path / "o"))


def refused(*args, **kwargs):
    raise AssertionError("the first examples were read for a pass of statistics")


def test_a_broken_function_over_small_inputs_fails_before_any_pass(inprocess, inputs, tmp_path, no_pass, monkeypatch):
    monkeypatch.setattr(
        transform_run.early, "check_on_first_examples", refused
    )  # read here: traced over every example's schema

    def broken(inputs):
        return {"score": tft.scale_to_z_score(inputs["score"]) + "x"}

    with pytest.raises(mr.errors.UsageError, match=r"failed when traced: TypeError: .*test_run_here.py line \d+"):
        inprocess.run(mr.Transform(broken), inputs[1], output_dir=str(tmp_path / "out"))
