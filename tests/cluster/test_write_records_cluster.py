"""A job that writes records (`--job=reshard`) on a real cluster whose coordinator is
killed and the command run again (resuming from its checkpoint): data/ must hold every
input record once, in input order (read in plain Python), byte for byte what a fault-free
run on another number of workers wrote, and nothing else may be left in the output
directory. A killed worker: test_killed_worker.py."""

import os

import pytest
from helpers.corpora import write_random_records
from helpers.oracles import data_digest, data_records, read_tfrecords
from helpers.processes import ConfiguredCluster, LiveCoordinator

import tf2_mapreduce as mr
from tf2_mapreduce.outputs.directory import MANIFEST

# Small files, one a map step: enough steps that a test can act while the job runs.
NUM_FILES = 600


@pytest.fixture(scope="module")
def shards(tmp_path_factory, inprocess):
    """TFRecord files of random records (every third one GZIP'd): (directory, paths, the
    records in input order, the sha256 of data/ that a fault-free run wrote on the session's
    in-process cluster, of other numbers of ps and workers than the tests')."""
    directory = tmp_path_factory.mktemp("records")
    paths = write_random_records(directory, NUM_FILES)
    records = [r for p in paths for r in read_tfrecords(p)]
    reference = tmp_path_factory.mktemp("reference") / "out"
    inprocess.run(mr.Reshard(num_shards=5), [str(directory)], output_dir=str(reference)).write_dir(str(reference))
    assert data_records(reference) == records
    return directory, paths, records, data_digest(reference)


def assert_exact(output_dir, shards):
    assert sorted(os.listdir(output_dir)) == [MANIFEST, "data"]  # no piece file, nothing staged
    assert data_records(output_dir) == shards[2]
    assert data_digest(output_dir) == shards[3]


def job_args(shards, output_dir, *extra):
    return ["--job=reshard", "--num_shards=5", "--input", str(shards[0]), "--output_dir", str(output_dir)] + [
        "--files_per_step",
        "1",
        "--progress_every",
        "0.2",
        *extra,
    ]


def test_a_killed_coordinator_run_again_resumes_and_writes_the_same_bytes(tmp_path, processes, shards):
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start_all("--idle_timeout=120")
    out = tmp_path / "out"
    args = job_args(shards, out, "--checkpoint_dir", str(tmp_path / "ckpt"), "--checkpoint_every", "0.5")
    job = LiveCoordinator(args, cluster.chief_env(), processes, tmp_path / "coordinator.log")
    saved = int(job.wait_for(r"checkpoint saved: ([1-9]\d*) of").group(1))
    job.proc.kill()
    job.proc.wait(30)
    assert os.listdir(out / ".tf2_mapreduce-pieces"), "the killed run had written no piece"
    resumed = LiveCoordinator(args, cluster.chief_env(), processes, tmp_path / "resumed.log")
    assert int(resumed.wait_for(r"resuming from .*: (\d+) of %d files already done" % NUM_FILES).group(1)) >= saved
    code, _, stderr = resumed.finish()
    assert code == 0, stderr
    assert_exact(out, shards)
    assert cluster.exit_codes() == {task: 0 for task in cluster.tasks}
