"""A transform resumed from its checkpoint is the same computation, or is refused: its
coordinator killed at a random moment of an analyze pass (of its first phase or its second,
drawn at random), then the same command run
again by a process that calls the analyzers in another order (a function iterating a
set of strings, whose order follows the process's hash seed), or after a module constant
that a helper of the function reads changed. A ps lost after the analyze passes (while
the analyzers' results stream from it, transform_fn is saved, or the transform pass
commits) fails the job naming it, and the same command, the ps restarted, writes the
same data/."""

import os
import random
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from helpers.oracles import data_digest
from helpers.processes import REPO, ConfiguredCluster, LiveCoordinator, run_cli, task_env
from helpers.transforms import INSERTED

TESTS = os.path.join(REPO, "tests")
# A file a step, a checkpoint every 0.2 s: the analyze pass saves several before it ends,
# and the kill falls among them.
ARGS = ["--job=transform", "--preprocessing_fn=helpers.transforms:set_order_fn", "--num_shards=2"]
ARGS += ["--files_per_step", "1", "--checkpoint_every", "0.2"]


def env(seed, scale="1"):
    return task_env(PYTHONPATH=TESTS, PYTHONHASHSEED=str(seed), TF2MR_TEST_SCALE=scale)


def order(seed):
    """The order in which a process of hash seed `seed` iterates set_order_fn's names: a set
    of the same strings, inserted in the same order (without TensorFlow's import)."""
    literal = "{%s}" % ", ".join(repr(name) for name in INSERTED)
    run = subprocess.run(
        [sys.executable, "-I", "-c", "print(','.join(%s))" % literal],
        env={"PYTHONHASHSEED": str(seed)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


@pytest.fixture(scope="module")
def seeds():
    """Two hash seeds whose processes iterate the names in two orders."""
    first = order(0)
    return 0, next(seed for seed in range(1, 50) if order(seed) != first)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """Examples of 0 to 3 clicks each in 60 files, their raw schema, and the digest of
    data/ as a fault-free run writes it."""
    examples = tmp_path_factory.mktemp("examples")
    rng = random.Random(42)
    for shard in range(60):
        with tf.io.TFRecordWriter(str(examples / ("part-%02d.tfrecord" % shard))) as writer:
            for _ in range(200):
                clicks = [rng.randint(-50, 5000) for _ in range(rng.choice([0, 1, 1, 2, 3]))]
                feature = {"clicks": tf.train.Feature(int64_list=tf.train.Int64List(value=clicks))}
                writer.write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
    examples = str(examples)
    schema = tmp_path_factory.mktemp("schema") / "raw_schema.pbtxt"
    schema.write_text('feature { name: "clicks" type: INT }\n')
    out = str(tmp_path_factory.mktemp("reference") / "out")
    run = run_cli(ARGS + ["--schema", str(schema), "--input", examples, "--output_dir", out], env(0))
    assert run.returncode == 0, run.stderr
    return examples, str(schema), data_digest(out)


def args_of(reference, tmp_path):
    examples, schema, _ = reference
    return (
        ARGS
        + ["--schema", schema, "--input", examples, "--output_dir", str(tmp_path / "out")]
        + [
            "--checkpoint_dir",
            str(tmp_path / "ckpt"),
        ]
    )


def kill_mid_analyze(args, job_env, processes, tmp_path):
    """Runs the job until an analyze pass (of the first phase or the second, drawn at
    random) saved a checkpoint, and kills it at a random moment of the next half second;
    checks the pass had not ended by then. Returns the killed pass's name."""
    rng = random.Random()
    name = rng.choice(["transform-analyze", "transform-analyze1"])
    print("killed in %s" % name)  # for a failure's post-mortem
    job = LiveCoordinator(args, job_env, processes, tmp_path / "killed.log")
    job.wait_for(r"%s: " % name)
    job.wait_for(r"checkpoint saved: [1-9]\d* of")
    time.sleep(rng.uniform(0.0, 0.5))  # the fault's moment, drawn at random: no condition is awaited
    job.proc.kill()
    job.proc.wait(60)
    with open(tmp_path / "killed.log") as f:
        assert "transform: raw examples transformed" not in f.read(), "the analyze passes ended before the kill"
    return name


def test_a_resume_is_the_same_computation_or_is_refused(reference, seeds, processes, tmp_path):
    """One test, not two: both kill a run of the same reference (a fixture made once)."""
    # Killed, then run again by a process that calls the two means in the other order.
    reordered = tmp_path / "reordered"
    reordered.mkdir()
    args = args_of(reference, reordered)
    killed_in = kill_mid_analyze(args, env(seeds[0]), processes, reordered)
    rerun = run_cli(args, env(seeds[1]))
    assert rerun.returncode == 0, rerun.stderr
    # The killed pass resumed from its own checkpoint (analyze, or analyze1: the second phase's).
    directory = str(reordered / "ckpt" / ("analyze1" if killed_in.endswith("1") else "analyze"))
    assert "resuming from %s/" % directory in rerun.stderr, rerun.stderr
    assert data_digest(str(reordered / "out")) == reference[2]
    # Killed, then run again after a constant that a helper of the function reads changed.
    changed = tmp_path / "changed"
    changed.mkdir()
    args = args_of(reference, changed)
    kill_mid_analyze(args, env(0), processes, changed)
    rerun = run_cli(args, env(0, scale="3"))
    assert rerun.returncode == 2, rerun.stderr
    assert "holds another job's checkpoint" in rerun.stderr.splitlines()[-1], rerun.stderr
    assert not os.path.exists(changed / "out" / "data")


def test_a_ps_lost_after_the_analyze_passes_fails_the_job_and_a_rerun_writes_the_same_data(
    reference, processes, tmp_path
):
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start_all()
    args = args_of(reference, tmp_path)
    job_env = dict(cluster.chief_env(), PYTHONPATH=TESTS)
    job = LiveCoordinator(args, job_env, processes, tmp_path / "killed.log")
    job.wait_for(r"transform-analyze1: ")
    job.wait_for(r"checkpoint saved: (\d+) of \1 files done")  # the last analyze pass ended
    time.sleep(random.uniform(0.0, 0.5))  # the fault's moment, drawn at random: no condition is awaited
    cluster.servers["ps", 0].kill()
    code, _, stderr = job.finish()
    assert code == 3, stderr
    assert "error: ps 0 at %s" % cluster.addresses["ps", 0] in stderr, stderr
    assert "Restart it, then run the same command" in stderr, stderr
    assert not os.path.exists(tmp_path / "out" / "_tf2_mapreduce.json")
    cluster.start("ps", 0)
    rerun = LiveCoordinator(args, job_env, processes, tmp_path / "rerun.log")
    code, _, stderr = rerun.finish()
    assert code == 0, stderr
    assert data_digest(str(tmp_path / "out")) == reference[2]
    assert cluster.exit_codes() == {task: 0 for task in cluster.tasks}
