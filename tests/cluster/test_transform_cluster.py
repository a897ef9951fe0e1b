"""`--job=transform` from the command line on real clusters: the schema inferred, the
output laid out as tf.Transform's, every example written once in input order, and the
saved transform_fn mapping each raw example to exactly its materialized one. A killed
worker: test_killed_worker.py."""

import os

import pytest
import tensorflow as tf
from helpers.corpora import make_examples
from helpers.oracles import read_tfrecords
from helpers.processes import (
    REPO,
    run_cli,
    task_env,
)
from helpers.transforms import RAW, TRANSFORMED, first_difference

TESTS = os.path.join(REPO, "tests")
ARGS = ["--job=transform", "--preprocessing_fn=helpers.transforms:examples_fn", "--num_shards=3"]


def env():
    return task_env(PYTHONPATH=TESTS)


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("examples"))
    return directory, make_examples(directory)


@pytest.fixture(scope="module")
def reference(examples, tmp_path_factory):
    """A fault-free run on 3 in-process workers: (output directory, its run)."""
    out = str(tmp_path_factory.mktemp("reference") / "out")
    run = run_cli(ARGS + [examples[0], "--output_dir", out, "--num_workers=3"], env())
    assert run.returncode == 0, run.stderr
    return out, run


def test_transform_infers_the_schema_and_writes_tfts_layout_every_example_once(examples, reference):
    out, run = reference
    assert sorted(os.listdir(out)) == [
        "_tf2_mapreduce.json",
        "data",
        "metadata",
        "transform_fn",
        "transformed_metadata",
    ]
    for line in ("stats: exact statistics", "transform-analyze: the values", "transform: raw examples transformed"):
        assert line in run.stderr
    assert (
        "wrote 6000 records in 3 files of data/, transform_fn/ (2 vocabularies), transformed_metadata/ and metadata/"
        in run.stderr
    )
    with open(os.path.join(out, "metadata", "schema.pbtxt")) as f:
        schema = f.read()
    assert (
        'name: "score"\n  type: FLOAT\n  presence {\n    min_fraction: 1.0\n    min_count: 1\n  }\n  shape {' in schema
    )
    # Missing from some examples, one value where present: a value_count, no shape (VarLen), as TFDV infers.
    assert (
        'name: "query"\n  value_count {\n    min: 1\n    max: 1\n  }\n  type: BYTES\n  presence {\n    min_count: 1\n  }\n}'
        in schema
    )
    raw = [r for p in examples[1] for r in read_tfrecords(p)]
    data = [
        r
        for name in sorted(os.listdir(os.path.join(out, "data")))
        for r in read_tfrecords(os.path.join(out, "data", name))
    ]
    assert len(data) == len(raw) == 6000
    served = tf.saved_model.load(os.path.join(out, "transform_fn")).transform_fn(tf.io.parse_example(raw, RAW))
    materialized = tf.io.parse_example(data, TRANSFORMED)
    assert first_difference(served, materialized, TRANSFORMED) is None
