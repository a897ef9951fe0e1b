"""A transform resumed from its checkpoint is the same computation, or is refused: its
coordinator killed at a random moment of the analyze pass, then the same command run
again by a process that calls the analyzers in another order (a function iterating a
set of strings, whose order follows the process's hash seed), or after a module constant
that a helper of the function reads changed."""

import os
import random
import subprocess
import sys
import time

import pytest
from helpers.oracles import data_digest
from helpers.processes import REPO, LiveCoordinator, run_cli, task_env

TESTS = os.path.join(REPO, "tests")
# A file a step, a checkpoint every 0.2 s: the analyze pass saves several before it ends,
# and the kill falls among them.
ARGS = ["--job=transform", "--preprocessing_fn=helpers.transforms:set_order_fn", "--num_shards=2"]
ARGS += ["--files_per_step", "1", "--checkpoint_every", "0.2"]


def env(seed, scale="1"):
    return task_env(PYTHONPATH=TESTS, PYTHONHASHSEED=str(seed), TF2MR_TEST_SCALE=scale)


def order(seed):
    """The order in which a process of hash seed `seed` iterates set_order_fn's names."""
    run = subprocess.run(
        [sys.executable, "-c", "import helpers.transforms as t; print(','.join(t.NAMES))"],
        env=env(seed),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
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
    """The examples, the raw schema a fault-free run inferred from them, and the digest
    of that run's data/."""
    examples = str(tmp_path_factory.mktemp("examples"))
    subprocess.run(
        [sys.executable, os.path.join(REPO, "scripts", "make_examples.py"), "--output_dir", examples]
        + ["--shards", "60", "--examples", "12000", "--tricky"],
        check=True,
        capture_output=True,
        timeout=300,
    )
    out = str(tmp_path_factory.mktemp("reference") / "out")
    run = run_cli(ARGS + ["--input", examples, "--output_dir", out], env(0))
    assert run.returncode == 0, run.stderr
    return examples, os.path.join(out, "raw_schema.pbtxt"), data_digest(out)


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
    """Runs the job until its analyze pass saved a checkpoint, and kills it at a random
    moment of the next half second; checks the pass had not ended by then."""
    rng = random.Random()
    job = LiveCoordinator(args, job_env, processes, tmp_path / "killed.log")
    job.wait_for(r"transform-analyze: ")
    job.wait_for(r"checkpoint saved: [1-9]\d* of")
    time.sleep(rng.uniform(0.0, 0.5))  # the fault's moment, drawn at random: no condition is awaited
    job.proc.kill()
    job.proc.wait(60)
    with open(tmp_path / "killed.log") as f:
        assert "transform: raw examples transformed" not in f.read(), "the analyze pass ended before the kill"


def test_a_rerun_that_calls_the_analyzers_in_another_order_resumes_to_the_same_bytes(
    reference, seeds, processes, tmp_path
):
    args = args_of(reference, tmp_path)
    kill_mid_analyze(args, env(seeds[0]), processes, tmp_path)
    rerun = run_cli(args, env(seeds[1]))
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming from" in rerun.stderr, rerun.stderr
    assert data_digest(str(tmp_path / "out")) == reference[2]


def test_a_rerun_after_a_helpers_constant_changed_is_refused_its_checkpoint(reference, processes, tmp_path):
    args = args_of(reference, tmp_path)
    kill_mid_analyze(args, env(0), processes, tmp_path)
    rerun = run_cli(args, env(0, scale="3"))
    assert rerun.returncode == 2, rerun.stderr
    assert "holds another job's checkpoint" in rerun.stderr.splitlines()[-1], rerun.stderr
    assert not os.path.exists(tmp_path / "out" / "data")
