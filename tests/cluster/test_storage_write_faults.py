"""Cloud Storage that fails while a job writes: uploads cut off mid-body, answers lost after
the request was done, and stalls past the client's idle time-out, on the pieces the map
steps write, the data/ shards, the vocabularies, the SavedModel, the manifest and the
checkpoints. What lands is byte for byte what the same job writes to local disk, and
nothing else; past --storage_timeout the job stops with exit 75, nothing partial in place,
and the same command resumes to the same bytes."""

import gzip
import json
import os
import re
import time

import pytest
from helpers.bucket import bucket_files, cli, small_examples, stocked_server
from helpers.oracles import parse_tfrecords
from helpers.processes import GONE_WORKER_SHUTDOWN, REPO, ConfiguredCluster, LiveCoordinator, gave_up_on, task_env
from helpers.storage_faults import CUT, RESET, STALL, STATUS, Fault
from helpers.transforms import first_difference, tf

OUTAGE_EXIT = 75
ARGS = ["--job=transform", "--preprocessing_fn=helpers.transforms:bucket_fn", "--num_shards=2"]
# Pieces of 4 KB: each object is cut in several, each a piece written by a map step.
ARGS += ["--input", "gs://data/small-records", "--read_size", "4000", "--checkpoint_every", "0.2"]
# A stalled request is given up after 1 s (TensorFlow's setting; 60 s by default) and tried again.
IDLE = {"GCS_REQUEST_IDLE_TIMEOUT_SECS": "1"}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """(server, args, env, what the transform writes to local disk by name, its records)."""
    for server, _ in stocked_server(tmp_path_factory):
        tmp_path = tmp_path_factory.mktemp("local")
        records = small_examples(server, tmp_path)
        # Given its schema: the pass of statistics that infers one writes nothing to fail.
        schema = tmp_path / "raw_schema.pbtxt"
        schema.write_text(
            'feature { name: "query" type: BYTES presence { min_fraction: 1.0 } shape { dim { size: 1 } } }\n'
            'feature { name: "user_id" type: INT }\n'
        )
        args = ARGS + ["--schema", str(schema)]
        env = task_env(PYTHONPATH=os.path.join(REPO, "tests"), **IDLE)
        local = tmp_path / "out"
        run = cli(server, args + ["--output_dir", str(local)], env=env)
        assert run.returncode == 0, run.stderr
        on_disk = {
            os.path.relpath(os.path.join(root, f), local): open(os.path.join(root, f), "rb").read()
            for root, _, files in os.walk(local)
            for f in files
        }
        yield server, args, env, on_disk, records


# What a SavedModel names (its functions, numbered in the process that traced them; its
# tables, for where their vocabularies were then) differs between two runs of a transform,
# faults or none: transform_fn is compared by what it computes, every other file by its bytes.
_NAMING = ("transform_fn/saved_model.pb", "transform_fn/fingerprint.pb")
# What helpers.transforms.bucket_fn reads of small_examples' records.
_RAW = {"query": tf.io.FixedLenFeature([1], tf.string), "user_id": tf.io.VarLenFeature(tf.int64)}


def _applied(files, directory, records):
    """What the transform_fn of `files` (by name) makes of `records`, saved under `directory`."""
    for name, data in files.items():
        if name.startswith("transform_fn/"):
            os.makedirs(os.path.dirname(os.path.join(directory, name)), exist_ok=True)
            with open(os.path.join(directory, name), "wb") as f:
                f.write(data)
    loaded = tf.saved_model.load(os.path.join(directory, "transform_fn"))
    return loaded.transform_fn(tf.io.parse_example(records, _RAW))


def assert_the_bytes_of_local_disk(server, prefix, on_disk, records, tmp_path):
    """The objects under `prefix` are the local result, file for file, byte for byte (but
    the manifest's time, and what the SavedModel names), transform_fn computing the same
    bit for bit; and nothing else is there."""
    written = bucket_files(server, prefix)
    manifest = json.loads(written.pop("_tf2_mapreduce.json"))
    local = dict(on_disk)
    local.pop("_tf2_mapreduce.json")
    assert sorted(manifest["files"]) == sorted(written) == sorted(local)
    assert {n: b for n, b in written.items() if n not in _NAMING} == {
        n: b for n, b in local.items() if n not in _NAMING
    }
    served = _applied(written, str(tmp_path / "written"), records)
    assert first_difference(served, _applied(local, str(tmp_path / "local"), records), sorted(served)) is None
    data = [name for name in written if name.startswith("data/")]
    assert len([r for n in data for r in parse_tfrecords(gzip.decompress(written[n]))]) == len(records)


def run_in_bucket(server, args, env, name, faults):
    for fault in faults:
        server.faults.add(fault)
    try:
        out = ["--output_dir", "gs://data/%s" % name, "--checkpoint_dir", "gs://data/ckpt-%s" % name]
        return cli(server, args + out, env=env)
    finally:
        server.faults.clear()


def test_cut_uploads_lost_answers_and_stalls_leave_the_bytes_of_local_disk(written, tmp_path):
    server, args, env, on_disk, records = written
    staging = "data/cut/.tf2_mapreduce-staging-*"
    joined = "data/cut/.tf2_mapreduce-pieces/join-*"  # a data/ shard, written by a worker, then renamed
    # The manifest moved into place: its copy done, then its delete done with the answer
    # lost, and answered 503 past the client's retries; tried again, no source is left.
    unanswered_then_503 = [
        Fault(RESET, kinds=("delete",), objects="data/cut/_tf2_mapreduce.json.tmp-*", times=1),
        Fault(STATUS, kinds=("delete",), objects="data/cut/_tf2_mapreduce.json.tmp-*", status=503, times=2),
    ]
    faults = [
        # Cut for 2 s: past the client's retries, a map step meets an outage and is run again.
        Fault(CUT, kinds=("upload",), objects="data/cut/.tf2_mapreduce-pieces/*", after_bytes=300, seconds=2.0),
        Fault(CUT, kinds=("upload",), objects=joined, after_bytes=200, times=2),
        Fault(RESET, kinds=("copy", "delete"), objects=joined, share=0.5, times=4, seed=7),
        Fault(CUT, kinds=("upload",), objects=staging, after_bytes=200, share=0.5, times=8, seed=1),
        Fault(STALL, kinds=("write", "upload"), objects=staging, stall=1.5, share=0.3, times=3, seed=2),
        # Done, then its answer lost: the client asks again what is already done.
        Fault(RESET, kinds=("upload", "copy", "delete"), objects=staging, share=0.5, times=8, seed=3),
        *unanswered_then_503,
        Fault(RESET, kinds=("upload", "copy"), objects="data/cut/_tf2_mapreduce.json*", times=3),
        Fault(CUT, kinds=("upload",), objects="data/ckpt-cut/*", after_bytes=100, share=0.5, times=6, seed=4),
        Fault(RESET, kinds=("upload", "copy", "delete"), objects="data/ckpt-cut/*", share=0.5, times=6, seed=5),
    ]
    run = run_in_bucket(server, args, env, "cut", faults)
    assert run.returncode == 0, run.stderr
    assert all(fault.hits > 0 for fault in faults), [fault.hits for fault in faults]
    assert [fault.hits for fault in unanswered_then_503] == [1, 2]
    assert_the_bytes_of_local_disk(server, "cut/", on_disk, records, tmp_path)


# What the coordinator writes (the vocabularies, the SavedModel), and what the workers do (the
# data/ shards, each written aside, then renamed).
@pytest.mark.parametrize(
    "name, stalled_objects", [("stalled", ".tf2_mapreduce-staging-*"), ("joins", ".tf2_mapreduce-pieces/join-*")]
)
def test_writes_stalled_past_the_storage_timeout_stop_with_exit_75_then_resume_to_the_same_bytes(
    written, tmp_path, name, stalled_objects
):
    server, args, env, on_disk, records = written
    stalled = Fault(STALL, kinds=("write", "upload"), objects="data/%s/%s" % (name, stalled_objects), stall=30.0)
    started = time.monotonic()
    run = run_in_bucket(server, args + ["--storage_timeout", "3"], env, name, [stalled])
    assert run.returncode == OUTAGE_EXIT, run.stderr
    assert time.monotonic() - started < 90
    assert stalled.hits > 0
    error = run.stderr.strip().splitlines()[-1]
    assert re.match(r"tf2_mapreduce: error: gs://data/%s/\S+: storage could not be reached" % name, error), error
    assert "run the same command" in error
    placed = [f for f in bucket_files(server, name + "/") if not f.startswith(".tf2_mapreduce-")]
    assert placed == [], placed
    rerun = run_in_bucket(server, args, env, name, [])
    assert rerun.returncode == 0, rerun.stderr
    assert "resuming from gs://data/ckpt-%s/" % name in rerun.stderr, rerun.stderr
    assert_the_bytes_of_local_disk(server, name + "/", on_disk, records, tmp_path)


def test_a_worker_killed_while_it_writes_a_shard_leaves_the_bytes_of_local_disk(written, tmp_path, processes):
    """On a cluster of processes, each of the two data/ shards held mid-write on its worker
    (the start of its upload stalled), then one of those workers killed: its shard is joined
    again by the other, and the result is the local one, byte for byte, nothing left over."""
    server, args, env, on_disk, records = written
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    # Without the coordinator's 1 s idle time-out: a stalled upload is waited for, not tried again.
    cluster.start_all(env=server.env({}))
    joins = "data/killed/.tf2_mapreduce-pieces/join-*"
    held = Fault(STALL, kinds=("write",), objects=joins, stall=5.0, times=2)
    again = Fault(STALL, kinds=("write",), objects=joins, stall=0.0)  # counts the uploads after those two
    server.faults.add(held)
    server.faults.add(again)
    try:
        out = ["--output_dir", "gs://data/killed", "--checkpoint_dir", "gs://data/ckpt-killed"]
        chief = server.env(dict(cluster.chief_env(), PYTHONPATH=os.path.join(REPO, "tests"), **IDLE))
        job = LiveCoordinator(args + out + list(GONE_WORKER_SHUTDOWN), chief, processes, tmp_path / "chief.log")
        # A worker joins one shard at a time: two uploads held at once are one on each worker.
        deadline = time.monotonic() + 120
        while held.hits < 2 and job.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert held.hits == 2, "the shards' uploads were not both held (%d)" % held.hits
        cluster.servers["worker", 0].kill()
        code, _, stderr = job.finish()
    finally:
        server.faults.clear()
    assert code == 0, stderr
    assert gave_up_on(stderr, "worker", 0)
    # Joined on the workers, and the killed one's shard joined again (the other's upload
    # held for 5 s, no more: at least one more upload).
    assert "written by this process" not in stderr and again.hits >= 1, (again.hits, stderr)
    assert_the_bytes_of_local_disk(server, "killed/", on_disk, records, tmp_path)
