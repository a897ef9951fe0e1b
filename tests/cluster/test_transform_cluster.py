"""`--job=transform` from the command line on real clusters: the schema inferred, nothing but
its own lines on stderr, the
output laid out as tf.Transform's, every example written once in input order, and the
saved transform_fn mapping each raw example to exactly its materialized one; an eval
split transformed by it (--transform_output), the same bytes on any cluster and after a
killed coordinator; a worker restarted in the transform pass. A killed worker:
test_killed_worker.py."""

import os
import random
import re
import time

import pytest
import tensorflow as tf
from helpers.corpora import make_examples
from helpers.oracles import data_digest, data_records, read_tfrecords
from helpers.processes import (
    GONE_WORKER_SHUTDOWN,
    REPO,
    ConfiguredCluster,
    LiveCoordinator,
    run_cli,
    task_env,
    wait_serving,
)
from helpers.transforms import LAYOUT, RAW, TRANSFORMED, first_difference

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
    assert sorted(os.listdir(out)) == LAYOUT
    for line in ("transform-analyze: the values", "transform: raw examples transformed"):
        assert line in run.stderr
    # Its 6,000 examples (about 200 KB) are read here for their schema: no pass of statistics.
    assert "stats: exact statistics" not in run.stderr
    assert [line for line in run.stderr.splitlines() if not line.startswith("tf2_mapreduce: ")] == []
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


@pytest.fixture(scope="module")
def eval_split(tmp_path_factory):
    """Another split of the same kind of examples: 3,000 of another seed in 150 files."""
    directory = str(tmp_path_factory.mktemp("eval"))
    return directory, make_examples(directory, seed=7, examples=3000, shards=150)


def killed_mid_pass(args, processes, log_path):
    """Runs `args` until its pass saved a checkpoint, and kills it at a random moment of the
    next half second; checks the pass had not ended by then."""
    job = LiveCoordinator(args, env(), processes, log_path)
    job.wait_for(r"transform: raw examples transformed")
    job.wait_for(r"checkpoint saved: [1-9]\d* of")
    time.sleep(random.uniform(0.0, 0.5))  # the fault's moment, drawn at random: no condition is awaited
    job.proc.kill()
    job.proc.wait(60)
    with open(log_path) as f:
        assert "wrote 3000 records" not in f.read(), "the pass ended before the kill"


def test_an_eval_split_is_transformed_by_the_train_transform_fn_once_the_same_on_any_cluster_and_fault(
    reference, eval_split, processes, tmp_path
):
    train = reference[0]
    args = ["--job=transform", "--transform_output", train, eval_split[0], "--num_shards=2"]
    run = run_cli(args + ["--output_dir", str(tmp_path / "one"), "--num_workers=1"], env())
    assert run.returncode == 0, run.stderr
    assert "transform-analyze" not in run.stderr and "stats:" not in run.stderr  # no analysis
    assert "wrote 3000 records in 2 files of data/ by %s/transform_fn" % train in run.stderr
    raw = [r for p in eval_split[1] for r in read_tfrecords(p)]
    data = data_records(str(tmp_path / "one"))
    assert len(data) == len(raw) == 3000
    served = tf.saved_model.load(os.path.join(train, "transform_fn")).transform_fn(tf.io.parse_example(raw, RAW))
    assert first_difference(served, tf.io.parse_example(data, TRANSFORMED), TRANSFORMED) is None
    for side in (train, str(tmp_path / "one")):
        with open(os.path.join(side, "transformed_metadata", "schema.pbtxt")) as f:
            assert f.read() == open(os.path.join(train, "transformed_metadata", "schema.pbtxt")).read()
    # On another cluster, its coordinator killed mid-pass, then the same command: the same bytes.
    again = args + ["--output_dir", str(tmp_path / "killed"), "--checkpoint_dir", str(tmp_path / "ckpt")]
    again += ["--num_workers=3", "--num_ps=2", "--files_per_step", "1", "--checkpoint_every", "0.2"]
    killed_mid_pass(again, processes, tmp_path / "killed.log")
    rerun = run_cli(again, env())
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming from" in rerun.stderr, rerun.stderr
    assert data_digest(str(tmp_path / "killed")) == data_digest(str(tmp_path / "one"))


# One file a map step: the transform pass lasts long enough for a worker to be restarted and
# re-admitted (a few seconds after it is up) while steps are left.
RESTART_SHARDS = 300
STEPS = r"steps by worker: (\d+) (\d+)$"


def _steps(lines):
    """(worker 0's steps, worker 1's) of the last progress line of `lines`."""
    (last,) = [re.search(STEPS, line) for line in lines if re.search(STEPS, line)][-1:]
    return int(last.group(1)), int(last.group(2))


def test_a_worker_restarted_in_the_transform_pass_fills_its_vocabularies_again(reference, processes, tmp_path):
    """Each worker fills its vocabularies' tables from their files once (transform/file_tables.py):
    a worker killed in the transform pass (of an eval split, through --transform_output) and
    restarted makes them again before its steps run; the pass, finished by it alone, writes
    what the transform_fn loaded here gives every raw example, bit for bit, in input order."""
    examples = str(tmp_path / "examples")
    paths = make_examples(examples, seed=11, examples=10 * RESTART_SHARDS, shards=RESTART_SHARDS)
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start_all()
    out = str(tmp_path / "restarted")
    args = ["--job=transform", "--transform_output", reference[0], "--num_shards=3", "--output_dir", out]
    args += ["--input", examples, "--files_per_step", "1", "--progress_every", "0.2"]
    args += ["--worker_timeout", "60", *GONE_WORKER_SHUTDOWN]
    job = LiveCoordinator(args, dict(cluster.chief_env(), PYTHONPATH=TESTS), processes, tmp_path / "job.log")
    job.wait_for("transform: raw examples transformed and written")
    cluster.servers["worker", 0].kill()
    cluster.start("worker", 0, "--idle_timeout=5")
    wait_serving(cluster, "worker", 0)
    before = int(job.wait_for(STEPS).group(1))
    while int(job.wait_for(STEPS).group(1)) < before + 5:
        pass  # steps on the restarted worker, with the tables it made
    cluster.servers["worker", 1].kill()  # from now on only the restarted worker can finish the pass
    at_kill = _steps(job.stderr)  # the newest progress line read, which may be older than the kill
    code, _, stderr = job.finish()
    assert code == 0, stderr
    at_end = _steps(stderr.splitlines())
    # Steps were left, and the restarted worker ran them alone (the line read at the kill
    # is at most a progress interval old: a few of worker 1's steps may be after it).
    assert at_end[0] >= at_kill[0] + 20 and at_end[1] <= at_kill[1] + 10, (at_kill, at_end)
    raw = [r for p in paths for r in read_tfrecords(p)]
    data = data_records(out)
    assert len(data) == len(raw) == 10 * RESTART_SHARDS
    served = tf.saved_model.load(os.path.join(reference[0], "transform_fn")).transform_fn(tf.io.parse_example(raw, RAW))
    assert first_difference(served, tf.io.parse_example(data, TRANSFORMED), TRANSFORMED) is None
