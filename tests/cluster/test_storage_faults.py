"""Cloud Storage that fails (helpers/storage_faults.py) while the inputs are listed and
read, and while results and checkpoints are written and read back: 503, 429, resets
mid-response, stalls and refused connections, in both on_error modes. An outage is
waited out, nothing is skipped, and the result is exact against bytes.split() or a
Counter, written whole and once; past --storage_timeout the job stops with exit 75 and
one line, the previous result left as it was."""

import gzip
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter

import pytest
from helpers.bucket import bucket_files, cli, small_examples, stocked_server
from helpers.oracles import parse_tfrecords
from helpers.processes import REPO, die_with_the_tests, task_env
from helpers.storage_faults import REFUSE, RESET, STALL, STATUS, Fault

OUTAGE_EXIT = 75
# What the job says while it waits: a warning before the run, a progress line's end during it.
WAITED = re.compile(r"storage cannot be reached \(|; waiting for storage: gs://")


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    yield from stocked_server(tmp_path_factory)


@pytest.fixture
def server(gcs):
    server, _ = gcs
    server.faults.clear()
    yield server
    server.faults.clear()


def read_words(copies, prefixes):
    words = {}
    for path, local in copies.items():
        if path.startswith(prefixes) and path.endswith(".txt"):
            with open(local, "rb") as f:
                words[path] = len(f.read().split())
    return words


def text_words(copies):
    """Words per object of the text inputs TEXT reads, gzip included."""
    words = read_words(copies, ("gs://data/corpus/", "gs://data/big/"))
    with open(copies["gs://data/corpus/zipped.txt.gz"], "rb") as f:
        words["gs://data/corpus/zipped.txt.gz"] = len(gzip.decompress(f.read()).split())
    return words


# Whole files, gzip streamed, and a large object read in ranges of 16 KB.
TEXT = ["--input", "gs://data/corpus", "--input", "gs://data/big", "--read_size", "16384"]


# An outage's window: our retries come 1 s, then 2 s, apart (storage.FIRST_WAIT): the third
# try of a call is past it, where a window of 3 s or more left it to a fourth, 4 s later.
OUTAGE = 2.5


def read_faults():
    """Every kind of read fault at once, on objects of their own: a run meets all of them."""
    return [
        Fault(STATUS, kinds=("read",), objects="data/corpus/f000[0-2].txt", status=503, seconds=OUTAGE),
        Fault(STATUS, kinds=("read",), objects="data/corpus/f000[3-5].txt", status=429, share=0.5, seconds=OUTAGE),
        Fault(RESET, kinds=("read",), objects="data/big/*", after_bytes=3000, seconds=OUTAGE),
        Fault(RESET, kinds=("read",), objects="data/corpus/zipped.txt.gz", after_bytes=100, seconds=OUTAGE),
        Fault(STALL, kinds=("read",), objects="data/corpus/f001*", stall=1.5, times=3),
    ]


def errors_of(run):
    return [line for line in run.stderr.splitlines() if line.startswith("tf2_mapreduce: error:")]


def counted(server, args, tmp_path, env=None):
    output = str(tmp_path / "result.json")
    run = cli(server, args + ["--output", output], env=env)
    result = json.load(open(output)) if run.returncode == 0 else None
    return run, result


@pytest.mark.parametrize(
    "faults, on_error",
    [
        ([Fault(STATUS, kinds=("list",), status=503, seconds=OUTAGE)], "fail"),
        # Skipping is where an outage taken for a missing input would drop it: both kinds at once.
        (
            [
                Fault(STATUS, kinds=("list",), status=503, seconds=OUTAGE),
                Fault(STATUS, kinds=("stat",), status=429, seconds=OUTAGE),
            ],
            "skip",
        ),
        ([Fault(REFUSE, kinds=("list",), seconds=OUTAGE)], "skip"),
    ],
    ids=["list-503-fail", "list-503-and-stat-429-skip", "refused-skip"],
)
def test_an_outage_while_listing_is_waited_out_and_nothing_is_skipped(gcs, server, tmp_path, faults, on_error):
    _, copies = gcs
    words = read_words(copies, ("gs://data/corpus/",))
    for fault in faults:
        server.faults.add(fault)
    run, result = counted(server, ["--input", "gs://data/corpus", "--on_error", on_error], tmp_path)
    assert run.returncode == 0, run.stderr
    assert all(fault.hits > 0 for fault in faults), [fault.hits for fault in faults]
    assert {f["path"]: f["words"] for f in result["per_file"] if f["path"] in words} == words
    assert result["skipped"] == []
    assert WAITED.search(run.stderr), run.stderr


@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_an_outage_past_the_storage_timeout_stops_with_its_own_exit_and_one_line(server, tmp_path, on_error):
    server.faults.add(Fault(STATUS, kinds=("list", "stat", "read"), status=503))
    started = time.monotonic()
    run, _ = counted(
        server, ["--input", "gs://data/corpus", "--on_error", on_error, "--storage_timeout", "3"], tmp_path
    )
    assert run.returncode == OUTAGE_EXIT, run.stderr
    assert time.monotonic() - started < 60
    [error] = errors_of(run)
    assert error.startswith("tf2_mapreduce: error: gs://data/corpus")
    assert "storage could not be reached" in error and "HTTP 503" in error and "--storage_timeout" in error
    assert "run the same command" in error
    assert not os.path.exists(tmp_path / "result.json")


def assert_exact(run, result, words):
    assert run.returncode == 0, run.stderr
    assert {f["path"]: f["words"] for f in result["per_file"]} == words
    assert result["skipped"] == []
    assert result["total_words"] == sum(words.values())


@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_reads_answered_503_429_reset_or_stalled_are_waited_out_and_the_result_written_through_an_outage(
    gcs, server, on_error
):
    _, copies = gcs
    output = "written-%s/result.json" % on_error
    server.put("data", output, b"the previous result")
    faults = read_faults()
    faults.append(Fault(STATUS, kinds=("write", "copy", "delete"), objects="data/%s*" % output, seconds=OUTAGE))
    for fault in faults:
        server.faults.add(fault)
    run = cli(server, TEXT + ["--on_error", on_error, "--output", "gs://data/" + output])
    assert_exact(run, json.loads(server.get("data", output)), text_words(copies))
    assert [fault.hits > 0 for fault in faults] == [True] * len(faults)
    assert WAITED.search(run.stderr), run.stderr
    # Written aside and renamed: nothing else is left beside it.
    assert [name for name in server.names("data") if name.startswith(output.split("/")[0])] == [output]


def test_connections_refused_mid_job_are_waited_out_and_the_result_is_exact(gcs, server, tmp_path):
    _, copies = gcs
    # Open from the first read, which its connection, accepted before, still gets: every
    # connection after it is refused for the outage. (Opened 0.3 s after the first read, it
    # once missed a job that made no new connection in that window: no fault, a failed test.)
    fault = Fault(REFUSE, kinds=("read",), seconds=OUTAGE)
    server.faults.add(fault)
    run, result = counted(server, TEXT + ["--on_error", "skip"], tmp_path)
    assert_exact(run, result, text_words(copies))
    assert fault.hits > 0


def corpus_words(copies):
    return read_words(copies, ("gs://data/corpus/",))


def test_a_result_that_cannot_be_written_stops_with_exit_75_and_leaves_the_previous_one(gcs, server):
    server.put("data", "kept/result.json", b"the previous result")
    server.faults.add(Fault(STATUS, kinds=("write", "copy"), objects="data/kept/result.json*"))
    run = cli(
        server, ["--input", "gs://data/corpus", "--output", "gs://data/kept/result.json", "--storage_timeout", "3"]
    )
    assert run.returncode == OUTAGE_EXIT, run.stderr
    [error] = errors_of(run)
    assert error.startswith("tf2_mapreduce: error: gs://data/kept/result.json"), error
    assert "HTTP 503" in error and "run the same command" in error
    server.faults.clear()
    assert server.get("data", "kept/result.json") == b"the previous result"
    assert [name for name in server.names("data") if name.startswith("kept/")] == ["kept/result.json"]


def test_a_vocabulary_directory_is_written_through_an_outage_whole_and_once(gcs, server):
    _, copies = gcs
    # The files written aside, moved into place, then the manifest: each meets 503s.
    staged = Fault(
        STATUS, kinds=("write", "copy", "delete"), objects="data/vocabs/.tf2_mapreduce-staging-*", seconds=OUTAGE
    )
    manifest = Fault(STATUS, kinds=("write", "copy", "delete"), objects="data/vocabs/_tf2_mapreduce.json*", seconds=2.0)
    server.faults.add(staged)
    server.faults.add(manifest)
    run = cli(server, ["--job=wordfreq", "--input", "gs://data/corpus/deeper", "--output_dir", "gs://data/vocabs"])
    assert run.returncode == 0, run.stderr
    assert staged.hits > 0 and manifest.hits > 0
    assert WAITED.search(run.stderr), run.stderr
    names = [
        name[len("vocabs/") :] for name in server.names("data") if name.startswith("vocabs/") and name != "vocabs/"
    ]
    assert sorted(json.loads(server.get("data", "vocabs/_tf2_mapreduce.json"))["files"]) == sorted(
        name for name in names if name != "_tf2_mapreduce.json"
    )
    counts = Counter()
    for path, local in copies.items():
        if path.startswith("gs://data/corpus/deeper/"):
            with open(local, "rb") as f:
                counts.update(f.read().split())
    rows = [line.split(b"\t", 1) for line in server.get("data", "vocabs/counts_words.tsv").splitlines()]
    assert {term: int(count) for count, term in rows} == dict(counts)


def test_checkpoints_on_storage_that_fails_are_retried_and_a_rerun_resumes_through_an_outage(gcs, server, tmp_path):
    _, copies = gcs
    words = corpus_words(copies)
    checkpoints = ["--checkpoint_dir", "gs://data/ckpt-%s" % tmp_path.name, "--checkpoint_every", "0.2"]
    # The first save fails past TensorFlow's retries, later ones do not: an upload is
    # tried 3 times (2 retries: helpers/gcs_server.py), and the whole of it 3 times. The
    # first is a periodic one, or, where the job ended within --checkpoint_every, the last.
    saves = Fault(STATUS, kinds=("write", "copy"), objects="data/ckpt-*/ckpt-*", times=9)
    server.faults.add(saves)
    run, result = counted(server, ["--input", "gs://data/corpus"] + checkpoints, tmp_path)
    assert run.returncode == 0, run.stderr
    assert saves.hits > 0
    assert "warning: checkpoint not saved: gs://data/ckpt-" in run.stderr, run.stderr
    assert {f["path"]: f["words"] for f in result["per_file"] if f["path"] in words} == words
    # Run again, it resumes from the last checkpoint (or, where none was saved, starts over)
    # and ends with one saved either way.
    run, result = counted(server, ["--input", "gs://data/corpus"] + checkpoints, tmp_path)
    assert run.returncode == 0 and re.search(r"checkpoint saved: (\d+) of \1 files done", run.stderr), run.stderr
    assert {f["path"]: f["words"] for f in result["per_file"] if f["path"] in words} == words
    # The same command again: the finished job's checkpoint is read through an outage,
    # not taken for a damaged one (which would start over).
    restores = Fault(STATUS, kinds=("read", "stat"), objects="data/ckpt-*/checkpoint", seconds=OUTAGE)
    server.faults.add(restores)
    run, result = counted(server, ["--input", "gs://data/corpus"] + checkpoints, tmp_path)
    assert run.returncode == 0, run.stderr
    assert restores.hits > 0
    assert "files already done" in run.stderr and "cannot be read" not in run.stderr, run.stderr
    assert {f["path"]: f["words"] for f in result["per_file"] if f["path"] in words} == words


def _threads_and_sockets(pid):
    with open("/proc/%d/status" % pid) as f:
        threads = next(int(line.split()[1]) for line in f if line.startswith("Threads:"))
    sockets = 0
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            sockets += os.readlink("/proc/%d/fd/%s" % (pid, fd)).startswith("socket:")
        except OSError:  # closed meanwhile
            pass
    return threads, sockets


def test_threads_and_connections_stay_bounded_through_a_long_outage(gcs, server, tmp_path):
    """Every read answered 503 for 12 s: the in-process cluster (the coordinator and every
    server in one process) keeps as many threads and sockets at the end as after its first
    seconds. (ClusterCoordinator re-running a step it took for a dead worker's leaked
    about 4 threads a cycle, and once took a machine's every process id.)"""
    _, copies = gcs
    fault = Fault(STATUS, kinds=("read",), status=503, seconds=12.0)
    server.faults.add(fault)
    output = tmp_path / "result.json"
    with open(tmp_path / "stderr", "wb") as stderr:
        job = subprocess.Popen(
            [sys.executable, "-m", "tf2_mapreduce.coordinator", "--input", "gs://data/corpus", "--output", str(output)],
            env=server.env(task_env()),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=REPO,
            preexec_fn=die_with_the_tests,
        )
        try:
            deadline = time.monotonic() + 120
            while not fault.hits:
                assert job.poll() is None and time.monotonic() < deadline, "no read reached the server"
                time.sleep(0.05)  # polls the server's count of failed reads
            first = time.monotonic()
            samples = []  # (seconds into the outage, threads, sockets)
            while job.poll() is None and time.monotonic() - first < fault.seconds:
                samples.append((time.monotonic() - first, *_threads_and_sockets(job.pid)))
                time.sleep(0.25)  # the sampling interval
            assert job.wait(120) == 0, (tmp_path / "stderr").read_text()
        finally:
            job.kill()
    early = [s for s in samples if s[0] < 3]
    late = [s for s in samples if s[0] >= 8]
    assert early and late, samples
    assert max(s[1] for s in late) <= max(s[1] for s in early) + 8, samples
    assert max(s[2] for s in late) <= max(s[2] for s in early) + 8, samples
    words = corpus_words(copies)
    result = json.load(open(output))
    assert {f["path"]: f["words"] for f in result["per_file"] if f["path"] in words} == words
    assert fault.hits > 10


@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_a_stream_cut_short_after_its_size_left_the_clients_cache_is_an_outage(gcs, server, tmp_path, on_error):
    """TensorFlow's client tells a response cut short only while the object's size is in
    its 5 s stat cache (docs/runtime.md, G7): after a longer stall, a cut read looked like
    the end of the file, and the gzip stream a truncated one, a bad input."""
    _, copies = gcs
    fault = Fault(RESET, kinds=("read",), objects="data/corpus/zipped.txt.gz", stall=5.5, after_bytes=100, times=1)
    server.faults.add(fault)
    run, result = counted(server, ["--input", "gs://data/corpus", "--on_error", on_error], tmp_path)
    assert run.returncode == 0, run.stderr
    assert fault.hits == 1
    words = text_words(copies)
    assert {f["path"]: f["words"] for f in result["per_file"]} == {
        path: count for path, count in words.items() if path.startswith("gs://data/corpus/")
    }
    assert result["skipped"] == []


def test_a_transform_written_to_a_bucket_through_an_outage_is_the_bytes_of_local_disk(server, tmp_path):
    """Pieces uploaded by the map steps, read back and joined into shards, the shards and the
    transform's SavedModel staged and moved into place: each meets 503s; what lands in the
    bucket is byte for byte what the same job wrote to local disk, and nothing else."""
    records = small_examples(server, tmp_path)
    # Given its schema: the pass of statistics that infers one writes nothing to fail.
    schema = tmp_path / "raw_schema.pbtxt"
    schema.write_text(
        'feature { name: "query" type: BYTES presence { min_fraction: 1.0 } shape { dim { size: 1 } } }\n'
        'feature { name: "user_id" type: INT }\n'
    )
    args = ["--job=transform", "--preprocessing_fn=helpers.transforms:bucket_fn", "--num_shards=2"]
    # Pieces of 4 KB: the uncompressed object is cut in several, each a piece written.
    args += ["--schema", str(schema), "--input", "gs://data/small-records", "--read_size", "4000"]
    env = task_env(PYTHONPATH=os.path.join(REPO, "tests"))
    local = tmp_path / "local"
    run = cli(server, args + ["--output_dir", str(local)], env=env)
    assert run.returncode == 0, run.stderr
    faults = [
        Fault(STATUS, kinds=("write",), objects="data/out/.tf2_mapreduce-pieces/*", status=503, seconds=2.0),
        Fault(STATUS, kinds=("read",), objects="data/out/.tf2_mapreduce-pieces/*", status=503, seconds=1.5),
        Fault(STATUS, kinds=("write", "copy"), objects="data/out/.tf2_mapreduce-staging-*", seconds=1.5),
    ]
    for fault in faults:
        server.faults.add(fault)
    run = cli(server, args + ["--output_dir", "gs://data/out"], env=env)
    server.faults.clear()
    assert run.returncode == 0, run.stderr
    assert all(fault.hits > 0 for fault in faults), [fault.hits for fault in faults]
    written = bucket_files(server, "out/")
    on_disk = {
        os.path.relpath(os.path.join(root, f), local): open(os.path.join(root, f), "rb").read()
        for root, _, files in os.walk(local)
        for f in files
    }
    manifest = json.loads(written.pop("_tf2_mapreduce.json"))
    on_disk.pop("_tf2_mapreduce.json")
    assert sorted(manifest["files"]) == sorted(written) == sorted(on_disk)
    data = sorted(n for n in written if n.startswith("data/"))
    assert {n: written[n] for n in data} == {n: on_disk[n] for n in data}
    vocabulary = "transform_fn/assets/vocab_compute_and_apply_vocabulary_vocabulary"
    assert written[vocabulary] == on_disk[vocabulary]
    assert len([r for n in data for r in parse_tfrecords(gzip.decompress(written[n]))]) == len(records)
