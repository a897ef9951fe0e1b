"""gs:// inputs and outputs through TensorFlow's own Cloud Storage client, against a real
GCS server over TLS (helpers/gcs_server.py): directories, globs, @lists held in the
bucket, a large object cut into byte ranges, gzip and TFRecord objects, an object
rewritten after listing, results written so that a reader sees the whole object or none,
and a missing bucket, object, match or @list said in one line before any cluster starts.
Counts against bytes.split() and protobuf on the same bytes."""

import gzip
import json
import os
import time

import pytest
from helpers.bucket import BUCKET, cli, stocked_server
from helpers.oracles import oracle_vocab, oracle_words
from helpers.processes import ConfiguredCluster, LiveCoordinator

from tf2_mapreduce.outputs.directory import LOCK, MANIFEST

READ_SIZE = 16 << 10
FEATURES = [("query", "string"), ("user_id", "int64")]


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    """The server with a bucket of text, gzip and TFRecord objects; yields (server, the
    local copy of every object by its gs:// path)."""
    yield from stocked_server(tmp_path_factory)


@pytest.mark.parametrize(
    "spec, reason",
    [
        ("gs://nobucket/x.txt", "no such file or directory"),
        ("gs://data/corpus/missing.txt", "no such file or directory"),
        ("gs://data/nothing/*.txt", "no path matched"),
        ("@gs://data/lists/missing.txt", "no such file or directory"),
    ],
)
def test_a_missing_bucket_or_object_is_one_line(gcs, spec, reason):
    server, _ = gcs
    run = cli(server, ["--input", spec])
    assert run.returncode != 0
    errors = [line for line in run.stderr.splitlines() if line.startswith("tf2_mapreduce: error:")]
    assert errors == ["tf2_mapreduce: error: %s: %s" % (spec, reason)], run.stderr


def test_text_objects_every_kind_of_spec_and_the_result_written_whole(gcs):
    server, copies = gcs
    args = ["--input", "gs://data/corpus", "--input", "gs://data/big/*.txt", "--input", "@gs://data/lists/files.txt"]
    args += ["--read_size", str(READ_SIZE), "--output", "gs://data/out/result.json"]
    run = cli(server, args)
    assert run.returncode == 0, run.stderr
    result = json.loads(server.get(BUCKET, "out/result.json"))
    expected = sorted(p for p in copies if p.startswith(("gs://data/corpus/", "gs://data/big/", "gs://data/listed/")))
    assert sorted(f["path"] for f in result["per_file"]) == expected
    words = {}
    for path in expected:
        with open(copies[path], "rb") as f:
            data = f.read()
        words[path] = len((gzip.decompress(data) if path.endswith(".gz") else data).split())
    assert {f["path"]: f["words"] for f in result["per_file"]} == words
    assert result["total_words"] == sum(words.values())
    assert oracle_words([copies[p] for p in expected if not p.endswith(".gz")]) < sum(words.values())
    # The large object was read as byte ranges (seeking reads), each counted once.
    size = os.path.getsize(copies["gs://data/big/big.txt"])
    assert size > 8 * READ_SIZE
    ranges = {r for path, r in server.reads if path.startswith("/data/big/big.txt") and r}
    assert len({r.split("=")[1].split("-")[0] for r in ranges}) > size // READ_SIZE // 2, ranges
    # Written aside, then renamed: the result's name only ever held the whole result.
    final = [size for bucket, name, size in server.writes if name == "out/result.json"]
    assert final == [len(server.get(BUCKET, "out/result.json"))]
    assert not [name for name in server.names(BUCKET) if name.startswith("out/") and name != "out/result.json"]


def test_tfrecord_objects_split_and_vocab_written_to_a_bucket_directory_of_one_result_and_one_writer(gcs):
    server, copies = gcs
    paths = [copies["gs://data/records/one.tfrecord"], copies["gs://data/records/two.tfrecord.gz"]]
    oracle = oracle_vocab(paths, FEATURES)
    args = ["--job=vocab", "--features=query,user_id", "--input", "gs://data/records", "--read_size", "1000000"]
    run = cli(server, args + ["--output_dir", "gs://data/vocab"])
    assert run.returncode == 0, run.stderr
    summary = json.loads(server.get(BUCKET, "vocab/summary.json"))
    assert summary["examples"] == oracle["examples"] == 3000
    for name, _ in FEATURES:
        rows = [line.split(b"\t", 1) for line in server.get(BUCKET, "vocab/counts_%s.tsv" % name).splitlines()]
        assert {term: int(count) for count, term in rows} == dict(oracle["counts"][name])
        written = [name_ for _, name_, size in server.writes if name_ == "vocab/counts_%s.tsv" % name]
        assert len(written) == 1
    counted = cli(server, ["--job=recordcount", "--input", "gs://data/records/one.tfrecord", "--read_size", "20000"])
    assert counted.returncode == 0, counted.stderr
    assert "1500 records" in counted.stdout + counted.stderr
    # The uncompressed object was read as byte ranges from record starts.
    size = os.path.getsize(copies["gs://data/records/one.tfrecord"])
    starts = {r.split("=")[1].split("-")[0] for p, r in server.reads if p.startswith("/data/records/one.") and r}
    assert len(starts) > size // 1_000_000, starts

    def result_names():  # without "vocab/", the directory's own marker object
        return sorted(n[len("vocab/") :] for n in server.names(BUCKET) if n.startswith("vocab/") and n != "vocab/")

    names = result_names()
    assert set(json.loads(server.get(BUCKET, "vocab/" + MANIFEST))["files"]) == set(names) - {MANIFEST}
    stats = ["--job=stats", "--input", "gs://data/records/one.tfrecord", "--output_dir", "gs://data/vocab"]
    # Another job's lease, renewed a moment ago: refused, the result left as it was.
    lease = {"id": "other", "holder": "elsewhere pid 1", "renewed": time.time()}
    server.put(BUCKET, "vocab/" + LOCK, json.dumps(lease).encode())
    run = cli(server, stats)
    assert run.returncode == 2, run.stderr
    assert "another job is writing it: elsewhere pid 1" in run.stderr.splitlines()[-1]
    assert result_names() == sorted(names + [LOCK])
    # A lease its holder stopped renewing (the job died) lapses: the next job takes over,
    # and no file of the result it replaces remains.
    server.put(BUCKET, "vocab/" + LOCK, json.dumps(dict(lease, renewed=time.time() - 60)).encode())
    run = cli(server, stats)
    assert run.returncode == 0, run.stderr
    assert result_names() == sorted(["stats.pb", "stats.json", "stats.html", MANIFEST])


def test_an_object_rewritten_after_listing_fails_the_job_naming_it(gcs, tmp_path, processes):
    server, copies = gcs
    for n in range(4):
        server.put(BUCKET, "changing/part%d.txt" % n, b"one two three %d\n" % n)
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    job = LiveCoordinator(
        ["--input", "gs://data/changing", "--output", str(tmp_path / "result.json")],
        server.env(cluster.chief_env()),
        processes,
        tmp_path / "coordinator.log",
    )
    job.wait_for(r"wordcount over 4 files")  # listed; no server is up yet, so nothing was read
    server.put(BUCKET, "changing/part2.txt", b"rewritten, and longer than it was\n")
    extra = {k: v for k, v in server.env({}).items()}
    for role, index in cluster.tasks:
        cluster.start(role, index, env=extra)
    code, _, stderr = job.finish()
    assert code == 1, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("tf2_mapreduce: error:")]
    assert len(errors) == 1 and errors[0].endswith(
        "gs://data/changing/part2.txt: changed since it was listed (16 bytes then, 34 now)"
    ), stderr
    assert not os.path.exists(tmp_path / "result.json")
