"""Jobs over TFRecord files of tf.train.Example: vocab and recordcount, against records
parsed one by one by protobuf (conftest.oracle_vocab), on in-process and real
multi-process clusters; vocabulary files loaded by TensorFlow's own lookups."""

import collections
import gzip
import json
import os
import random
import re
import signal
import subprocess
import sys

import pytest
import tensorflow as tf
from conftest import (
    GONE_WORKER_SHUTDOWN,
    REPO,
    ConfiguredCluster,
    LiveCoordinator,
    gave_up_on,
    oracle_vocab,
    read_tfrecords,
    run_job,
    task_env,
    tft_ordered,
)

import tf2_mapreduce as mr
from tf2_mapreduce.errors import InputError, JobFailed, UsageError
from tf2_mapreduce.inputs.listing import expand
from tf2_mapreduce.outputs import files as output
from tf2_mapreduce.outputs import vocabulary

FEATURES = [("query", "string"), ("tags", "string"), ("user_id", "int64")]
# Terms a text vocabulary cannot hold, terms that are hard for a line reader, and plain ones.
ODD_TERMS = [b"", b"a\nb", b"c\rd", b"\xff\xfe", "caf\u00e9".encode(), b"x\x0by", "t\u2028u".encode(), b"tab\tx", b" "]
SUFFIX = {"": ".tfrecord", "GZIP": ".tfrecord.gz", "ZLIB": ".tfrecord.zz"}


def run(inprocess, job, specs, **options):
    return inprocess.run(job, specs, **options)


def write(result, directory, **options):
    """The vocabularies of a run's table (`Result.write_dir`); returns the summary."""
    return result.write_dir(directory, **options)


def example(rng, vocabulary):
    features = {}
    if rng.random() < 0.9:
        values = [rng.choice(vocabulary) for _ in range(rng.choice([1, 1, 1, 2]))]
        features["query"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if rng.random() < 0.8:  # present with no value counts as missing too
        values = [rng.choice(vocabulary[:50]) for _ in range(rng.randint(0, 4))]
        features["tags"] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if rng.random() < 0.85:
        ids = [int(rng.paretovariate(1.2)) * rng.choice([1, -1]) for _ in range(rng.choice([1, 1, 2]))]
        features["user_id"] = tf.train.Feature(int64_list=tf.train.Int64List(value=ids))
    features["score"] = tf.train.Feature(float_list=tf.train.FloatList(value=[rng.random()]))
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


def write_examples(directory, shards, per_shard, seed=0, compressions=("GZIP",)):
    """Writes `shards` TFRecord files of random examples (compression cycling through
    `compressions`); returns their paths."""
    rng = random.Random(seed)
    vocabulary = ODD_TERMS + [b"q%d" % i for i in range(3000)]
    os.makedirs(directory, exist_ok=True)
    paths = []
    for shard in range(shards):
        compression = compressions[shard % len(compressions)]
        path = os.path.join(directory, "part-%05d%s" % (shard, SUFFIX[compression]))
        with tf.io.TFRecordWriter(path, compression) as writer:
            for _ in range(per_shard):
                writer.write(example(rng, vocabulary))
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("examples"))
    paths = write_examples(directory, 24, 400, seed=5, compressions=("GZIP", "", "ZLIB"))
    return directory, paths, oracle_vocab(paths, FEATURES)


def read_lines(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]


def assert_vocabularies(directory, oracle, top_k=None, min_count=1):
    """Every file under `directory` against the oracle: vocabulary, counts, unwritable
    terms, summary; each vocabulary loaded by StringLookup and TextFileInitializer."""
    with open(os.path.join(directory, vocabulary.SUMMARY)) as f:
        summary = json.load(f)
    assert summary["examples"] == oracle["examples"]
    for name, _ in FEATURES:
        counts = oracle["counts"][name]
        ranked = [(t, c) for t, c in tft_ordered(counts) if c >= min_count]
        written = [(t, c) for t, c in ranked if vocabulary.holdable(t)][:top_k]
        aside = [(t, c) for t, c in ranked if not vocabulary.holdable(t)]
        path = os.path.join(directory, "vocab_%s.txt" % name)
        assert read_lines(path) == [t for t, _ in written]
        rows = [line.split(b"\t", 1) for line in read_lines(os.path.join(directory, "counts_%s.tsv" % name))]
        assert [(t, int(c)) for c, t in rows] == written
        rows = [line.split(b"\t", 1) for line in read_lines(os.path.join(directory, "unwritable_%s.tsv" % name))]
        assert [(output.unescape(t.decode()), int(c)) for c, t in rows] == aside
        assert summary["vocabularies"][name] == {
            "values": sum(counts.values()),
            "distinct": len(counts),
            "missing": oracle["missing"][name],
            "written": len(written),
            "unwritable": len(aside),
            "unwritable_values": sum(c for _, c in aside),
            "below_min_count": sum(1 for c in counts.values() if c < min_count),
            "beyond_top_k": sum(1 for t, c in ranked if vocabulary.holdable(t)) - len(written),
            "files": vocabulary.file_names(name),
        }
        terms = tf.constant([t for t, _ in written] + [b"never seen"])
        lookup = tf.keras.layers.StringLookup(vocabulary=path)
        assert lookup(terms).numpy().tolist() == list(range(1, len(written) + 1)) + [0]  # index 0: out of vocabulary
        table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                path, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER
            ),
            default_value=-1,
        )
        assert table.lookup(terms).numpy().tolist() == list(range(len(written))) + [-1]
    return summary


def test_vocab_matches_protobuf_record_by_record(inprocess, shards, tmp_path):
    directory, paths, oracle = shards
    assert all(oracle["counts"][name] for name, _ in FEATURES) and oracle["missing"]["tags"] > 0
    result = run(inprocess, mr.Vocab(FEATURES), [directory], max_pieces=5)
    assert (result.total, result.files_done) == (oracle["examples"], len(paths))
    assert result.distinct == sum(len(oracle["counts"][name]) for name, _ in FEATURES)
    write(result, str(tmp_path / "all"))
    assert_vocabularies(str(tmp_path / "all"), oracle)
    write(result, str(tmp_path / "cut"), top_k=40, min_count=3)
    assert_vocabularies(str(tmp_path / "cut"), oracle, top_k=40, min_count=3)
    # As tf.Transform writes them: every term a record, the odd ones in their rank too.
    write(result, str(tmp_path / "records"), min_count=2, file_format="tfrecord_gzip")
    for name, _ in FEATURES:
        ranked = [(t, c) for t, c in tft_ordered(oracle["counts"][name]) if c >= 2]
        assert read_tfrecords(str(tmp_path / "records" / ("vocab_%s.tfrecord.gz" % name))) == [t for t, _ in ranked]
        counts = read_tfrecords(str(tmp_path / "records" / ("counts_%s.tfrecord.gz" % name)))
        assert counts == [b"%d\t%s" % (c, t) for t, c in ranked]


def test_recordcount_over_every_compression_counts_each_file(inprocess, shards):
    directory, paths, oracle = shards
    result = run(inprocess, mr.RecordCount(), [directory])
    assert result.total == oracle["examples"]
    assert {f.path: f.value for f in result.per_file} == {p: len(read_tfrecords(p)) for p in paths}


def test_a_name_that_contradicts_the_job_is_refused(inprocess, shards, tmp_path):
    directory, paths, _ = shards
    with pytest.raises(
        InputError, match=r"part-00000.tfrecord.gz: a tfrecord file by its name, but the job reads text"
    ):
        run(inprocess, mr.WordCount(), [paths[0]])
    with pytest.raises(UsageError, match=r"format=text, but the job reads tfrecord"):
        run(inprocess, mr.RecordCount(), [paths[0]], format="text")
    with pytest.raises(UsageError, match=r"compression=bzip2: not a compression"):
        run(inprocess, mr.RecordCount(), [paths[0]], compression="bzip2")
    # Named otherwise, the same bytes are read as the job says: by its name, or as told.
    plain = tmp_path / "data.bin"
    plain.write_bytes(gzip.decompress(open(paths[0], "rb").read()))
    assert run(inprocess, mr.RecordCount(), [str(plain)]).total == len(read_tfrecords(paths[0]))
    packed = tmp_path / "data.gzipped"
    packed.write_bytes(open(paths[0], "rb").read())
    result = run(inprocess, mr.RecordCount(), [str(packed)], compression="gzip")
    assert result.total == len(read_tfrecords(paths[0]))


def corrupt(paths, tmp_path):
    """Copies of `paths` with a flipped byte in a record of one uncompressed file and
    one GZIP file cut short; returns (the copies, the two bad ones)."""
    directory = tmp_path / "damaged"
    directory.mkdir()
    copies = []
    for path in paths:
        copy = directory / os.path.basename(path)
        copy.write_bytes(open(path, "rb").read())
        copies.append(str(copy))
    flipped = next(p for p in copies if p.endswith(".tfrecord"))
    data = bytearray(open(flipped, "rb").read())
    data[len(data) // 2] ^= 0x55
    open(flipped, "wb").write(bytes(data))
    truncated = next(p for p in copies if p.endswith(".gz"))
    data = open(truncated, "rb").read()
    open(truncated, "wb").write(data[: len(data) * 2 // 3])
    return copies, [flipped, truncated]


def test_a_corrupt_record_and_a_truncated_gzip_file_fail_or_are_skipped(inprocess, shards, tmp_path):
    _, paths, _ = shards
    copies, bad = corrupt(paths, tmp_path)
    job = mr.Vocab(FEATURES)
    with pytest.raises(
        JobFailed,
        match=r"a map step failed: .*/part-\d+\.tfrecord(\.gz)?: "
        r"(corrupted record at \d+|truncated record at \d+|truncated GZIP file: it ends inside a compressed stream)",
    ):
        run(inprocess, job, copies, max_pieces=1)
    result = run(inprocess, job, copies, on_error="skip", max_pieces=4)
    skipped = dict(result.skipped)
    assert sorted(skipped) == sorted(bad)
    assert re.match(r"(corrupted|truncated) record at \d+$", skipped[bad[0]])  # the flipped byte: a record's CRC
    assert re.match(r"truncated GZIP file|truncated record at \d+$", skipped[bad[1]])
    good = [p for p in copies if p not in bad]
    oracle = oracle_vocab(good, FEATURES)
    assert result.total == oracle["examples"] and result.files_done == len(good)
    write(result, str(tmp_path / "vocab"))
    assert_vocabularies(str(tmp_path / "vocab"), oracle)


def test_wordfreq_writes_a_vocabulary_that_lookups_load(inprocess, tmp_path):
    words = [b"w%d" % (i % 37) for i in range(5000)] + [b"caf\xc3\xa9", b"\xff", b"x\x0cy"]
    (tmp_path / "in.txt").write_bytes(b" ".join(words) + b"\n")
    result = run(inprocess, mr.WordFreq(), [str(tmp_path / "in.txt")])
    summary = write(result, str(tmp_path / "out"), min_count=2)
    oracle = collections.Counter((b" ".join(words)).split())
    expected = [(t, c) for t, c in tft_ordered(oracle) if c >= 2]
    path = str(tmp_path / "out" / "vocab_words.txt")
    assert read_lines(path) == [t for t, _ in expected]
    assert summary["vocabularies"]["words"]["distinct"] == len(oracle) and "examples" not in summary
    lookup = tf.keras.layers.StringLookup(vocabulary=path)
    assert lookup(tf.constant([t for t, _ in expected])).numpy().tolist() == list(range(1, len(expected) + 1))


@pytest.mark.cluster
def test_vocab_on_a_real_cluster_with_two_ps_and_a_killed_worker(tmp_path, processes, shards):
    directory, paths, oracle = shards
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=2, num_workers=2)
    cluster.start_all()
    out = tmp_path / "vocab"
    args = [
        "--job=vocab",
        "--features=query,tags,user_id",  # types read from the data
        "--format=tfrecord",
        "--input",
        os.path.join(directory, "*.tfrecord*"),
        "--output_dir",
        str(out),
        "--files_per_step",
        "1",
        "--progress_every",
        "0.2",
        *GONE_WORKER_SHUTDOWN,
    ]
    job = LiveCoordinator(args, cluster.chief_env(), processes, tmp_path / "c.log")
    assert job.wait_for_files(4) < len(paths)
    cluster.servers["worker", 1].kill()
    code, stdout, stderr = job.finish()
    assert code == 0, stderr
    assert gave_up_on(stderr, "worker", 1)
    assert "vocab: %d examples" % oracle["examples"] in stdout
    assert_vocabularies(str(out), oracle)
    for task in [("ps", 0), ("ps", 1), ("worker", 0)]:
        assert cluster.servers[task].wait(30) == 0


@pytest.mark.cluster
def test_vocab_stopped_and_resumed_from_its_checkpoint(tmp_path, processes, shards):
    directory, paths, oracle = shards
    out = tmp_path / "vocab"
    args = [
        "--job=vocab",
        "--features=query:string,tags:string,user_id:int64",
        "--input",
        directory,
        "--output_dir",
        str(out),
        "--num_ps",
        "2",
        "--checkpoint_dir",
        str(tmp_path / "ckpt"),
        "--files_per_step",
        "1",
        "--progress_every",
        "0.2",
    ]
    job = LiveCoordinator(args, task_env(), processes, tmp_path / "first.log")
    job.wait_for_files(3)
    job.signal_another_thread(signal.SIGTERM)
    code, _, stderr = job.finish()
    assert code == 143, stderr
    resumed = LiveCoordinator(args, task_env(), processes, tmp_path / "second.log")
    done = int(resumed.wait_for(r"resuming from .*: (\d+) of %d files already done" % len(paths)).group(1))
    assert done >= 3
    code, _, stderr = resumed.finish()
    assert code == 0, stderr
    summary = assert_vocabularies(str(out), oracle)
    assert summary["files_resumed"] == done and summary["files"] == len(paths)


def test_vocab_needs_features_of_a_type_it_can_count(inprocess, shards, tmp_path):
    from tf2_mapreduce.jobs import examples as features

    _, paths, _ = shards
    assert features.parse_features("a, b?:int64,c:d:string") == [
        ("a", None, False),
        ("b", "int64", True),
        ("c:d", "string", False),
    ]
    with pytest.raises(UsageError, match=r"features: c has type 'd'"):
        features.parse_features("c:d")
    with pytest.raises(UsageError, match=r"features: a is named twice"):
        features.parse_features("a,a:string")
    with pytest.raises(UsageError, match=r"score holds floats"):
        features.detect_types(features.parse_features("query,score"), paths)
    with pytest.raises(UsageError, match=r"nope is in none of the first \d+ examples; give its type"):
        features.detect_types(features.parse_features("nope"), paths)
    assert features.detect_types(features.parse_features("user_id,query"), paths) == [
        ("user_id", "int64", False),
        ("query", "string", False),
    ]
    # Files it cannot read, or records that are no Example, are passed over: the job reports them.
    garbage = tmp_path / "garbage.tfrecord"
    garbage.write_bytes(b"not a TFRecord file at all" * 100)
    with tf.io.TFRecordWriter(str(tmp_path / "other.tfrecord")) as writer:
        writer.write(b"\xff\xff not a protobuf")
    found = features.detect_types([("query", None)], [str(garbage), str(tmp_path / "other.tfrecord"), paths[0]])
    assert found == [("query", "string", False)]
    # A value of another type than declared is the file's error, named with it.
    with pytest.raises(JobFailed, match=r"part-00000.tfrecord.gz: .*user_id"):
        run(inprocess, mr.Vocab([("user_id", "string")]), [paths[0]])


def test_a_stream_file_that_changed_since_it_was_listed_is_not_counted(inprocess, shards, tmp_path):
    _, paths, _ = shards
    copies = []
    for path in paths[:3]:
        copy = tmp_path / os.path.basename(path)
        copy.write_bytes(open(path, "rb").read())
        copies.append(str(copy))
    files = expand(copies).files
    with tf.io.TFRecordWriter(str(tmp_path / "more.tfrecord")) as writer:
        writer.write(b"one more record")
    with open(copies[1], "ab") as f:  # a whole record more, valid but never listed
        f.write(open(str(tmp_path / "more.tfrecord"), "rb").read())
    job = mr.RecordCount()
    with pytest.raises(JobFailed, match=r"%s: changed since it was listed \(\d+ bytes then, \d+ now\)" % copies[1]):
        run_job(inprocess, job, files)
    result = run_job(inprocess, job, files, on_error="skip")
    assert [path for path, _ in result.skipped] == [copies[1]]
    assert result.total == sum(len(read_tfrecords(p)) for p in (copies[0], copies[2]))


def vocab_walkthrough():
    """The commands and the Python of docs/jobs.md's vocab section, as written there."""
    with open(os.path.join(REPO, "docs", "jobs.md"), encoding="utf-8") as f:
        readme = f.read()
    section = readme[readme.index("### vocab:") : readme.index("### Vocabulary files")]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    return blocks[0][1], next(code for kind, code in blocks if kind == "python")


@pytest.mark.cluster
def test_the_vocab_walkthrough_of_the_docs_runs_as_written(tmp_path):
    commands, python = vocab_walkthrough()
    env = task_env(PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    shell = "cd %s && ln -s %s/scripts scripts && set -e\n%s" % (tmp_path, REPO, commands)
    run = subprocess.run(["bash", "-c", shell], env=env, capture_output=True, timeout=300)
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    paths = sorted(str(p) for p in (tmp_path / "shards").iterdir())
    oracle = oracle_vocab(paths, FEATURES)
    printed = run.stdout.decode()
    assert "vocab: %d examples" % oracle["examples"] in printed
    for name, _ in FEATURES:
        counts = oracle["counts"][name]
        assert (
            "%s: %d values, %d distinct, %d examples missing it"
            % (
                name,
                sum(counts.values()),
                len(counts),
                oracle["missing"][name],
            )
            in printed
        )
        assert read_lines(str(tmp_path / "vocab" / ("vocab_%s.txt" % name))) == [t for t, _ in tft_ordered(counts)]
    lookup = subprocess.run([sys.executable, "-c", python], cwd=tmp_path, env=env, capture_output=True, timeout=120)
    assert lookup.returncode == 0, lookup.stderr.decode(errors="replace")[-3000:]
    first = tft_ordered(oracle["counts"]["query"])[0][0].decode()
    assert '"%s", "never seen"' % first in python  # the docs look up the most frequent query
    assert lookup.stdout.decode().split() == ["[1", "0]"]


API_SCRIPT = """
import json, sys
import tf2_mapreduce as mr
from tf2_mapreduce.jobs import examples

shards, out = sys.argv[1:3]
wanted = examples.detect_types("query,tags,user_id", [shards + "/part-00000.tfrecord.gz"])
with mr.Cluster.local(num_ps=2) as cluster:
    handle = cluster.submit(mr.Vocab(wanted), [shards], max_pieces=3)
    result = handle.wait(240)
    summary = result.write_dir(out, min_count=2)
    again = cluster.run(mr.RecordCount(), [shards])
print(json.dumps({"types": wanted, "total": result.total, "distinct": result.distinct,
                  "examples": summary["examples"], "records": again.total}))
"""


@pytest.mark.cluster
def test_vocab_from_the_python_api_on_a_local_cluster(tmp_path, shards):
    directory, paths, oracle = shards
    run = subprocess.run(
        [sys.executable, "-c", API_SCRIPT, directory, str(tmp_path / "vocab")],
        env=task_env(),
        capture_output=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr.decode(errors="replace")[-3000:]
    got = json.loads(run.stdout.decode().splitlines()[-1])
    assert got == {
        "types": [[*feature, False] for feature in FEATURES],
        "total": oracle["examples"],
        "distinct": sum(len(oracle["counts"][name]) for name, _ in FEATURES),
        "examples": oracle["examples"],
        "records": oracle["examples"],
    }
    assert_vocabularies(str(tmp_path / "vocab"), oracle, min_count=2)
