"""`--job=transform` from the command line on real clusters: the schema inferred, the
output laid out as tf.Transform's, every example written once in input order, and the
saved transform_fn mapping each raw example to exactly its materialized one; a worker
killed mid-pass leaves the bytes of a fault-free run on another number of workers; bad
flags are one line each, exit 2."""

import os
import subprocess
import sys

import pytest
import tensorflow as tf
from helpers.oracles import data_digest, read_tfrecords
from helpers.processes import (
    GONE_WORKER_SHUTDOWN,
    REPO,
    ConfiguredCluster,
    LiveCoordinator,
    gave_up_on,
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
    subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts", "make_examples.py"), "--output_dir", directory]
        + ["--shards", "6", "--examples", "6000", "--tricky"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return directory, sorted(os.path.join(directory, name) for name in os.listdir(directory))


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
        "raw_schema.pbtxt",
        "transform_fn",
        "transformed_metadata",
    ]
    for line in ("stats: exact statistics", "transform-analyze: the values", "transform: raw examples transformed"):
        assert line in run.stderr
    assert (
        "wrote 6000 records in 3 files of data/, transform_fn/ (2 vocabularies) and transformed_metadata/" in run.stderr
    )
    with open(os.path.join(out, "raw_schema.pbtxt")) as f:
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


def test_a_worker_killed_mid_pass_leaves_the_bytes_of_a_fault_free_run(tmp_path, processes, examples, reference):
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start_all()
    out = tmp_path / "out"
    args = ARGS + ["--input", examples[0], "--output_dir", str(out), "--files_per_step", "1", "--progress_every", "0.2"]
    chief_env = dict(cluster.chief_env(), PYTHONPATH=TESTS)
    job = LiveCoordinator(args + list(GONE_WORKER_SHUTDOWN), chief_env, processes, tmp_path / "coordinator.log")
    job.wait_for("transform: raw examples transformed and written")
    cluster.servers["worker", 0].kill()
    code, _, stderr = job.finish()
    assert code == 0, stderr
    assert gave_up_on(stderr, "worker", 0)
    assert data_digest(out) == data_digest(reference[0])
    assert os.listdir(out / "transform_fn" / "assets") == os.listdir(
        os.path.join(reference[0], "transform_fn", "assets")
    )
