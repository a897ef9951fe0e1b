"""A worker killed mid-job, once for each kind of state a job keeps, on one cluster of
processes (2 ps, 3 workers) that the jobs share in turn: word counts of 110,000 distinct
words, vocabularies of three features, statistics, records written through a sink, and a
transform's passes; then the word counts again, in the same tables' names. Each result is
checked whole against its oracle, or against the bytes a fault-free run on the session's
in-process cluster (2 workers) wrote; the killed worker is started again for the next
job, which must count from empty tables; after the last job every server exits 0 but the
one it lost."""

import json
import os
import re

import pytest
from helpers.corpora import VOCAB_FEATURES, make_examples, write_many_awkward, write_random_records, write_zipf_corpus
from helpers.oracle_stats import figures_of
from helpers.oracles import (
    assert_vocabularies,
    data_digest,
    data_records,
    oracle_counter,
    ordered,
    read_tfrecords,
    read_tsv,
)
from helpers.processes import (
    GONE_WORKER_SHUTDOWN,
    REPO,
    ConfiguredCluster,
    LiveCoordinator,
    gave_up_on,
)

import tf2_mapreduce as mr
from tf2_mapreduce.outputs import files as output
from tf2_mapreduce.outputs.directory import MANIFEST

TRANSFORM_FN = "helpers.transforms:examples_fn"
# One input piece a map step, progress reported often: a job runs long enough to be cut.
LIVE = ["--files_per_step", "1", "--progress_every", "0.2"]
RECORD_FILES = 300


@pytest.fixture(scope="module")
def data(tmp_path_factory, inprocess, vocab_shards):
    """Each kind's inputs, with its oracle or the fault-free reference it must equal."""
    made = {"vocab": vocab_shards}
    zipf = str(tmp_path_factory.mktemp("zipf"))
    paths = write_zipf_corpus(zipf, 300, distinct=110_000, samples=200_000, seed=17)
    made["wordfreq"] = zipf, paths, oracle_counter(paths)
    many = tmp_path_factory.mktemp("many")
    paths = write_many_awkward(many)
    reference = tmp_path_factory.mktemp("stats-reference")
    inprocess.run(mr.Stats(), [str(many)]).write_dir(str(reference))
    made["stats"] = str(many), paths, reference
    records = tmp_path_factory.mktemp("records")
    paths = write_random_records(records, RECORD_FILES)
    reference = tmp_path_factory.mktemp("reshard-reference")
    inprocess.run(mr.Reshard(num_shards=5), [str(records)], output_dir=str(reference)).write_dir(str(reference))
    made["reshard"] = str(records), [r for p in paths for r in read_tfrecords(p)], data_digest(reference)
    examples = str(tmp_path_factory.mktemp("examples"))
    make_examples(examples)
    reference = str(tmp_path_factory.mktemp("transform-reference") / "out")
    inprocess.run(mr.Transform(TRANSFORM_FN, num_shards=3), [examples], output_dir=reference)
    made["transform"] = examples, reference
    return made


def printed_top(stdout):
    """The (word, count) pairs of the top-K table the coordinator prints."""
    top = []
    for line in stdout.splitlines():
        match = re.match(r"^\s+(\d+)  (\S+)$", line)
        if match:
            top.append((output.unescape(match.group(2)), int(match.group(1))))
    return top


class Wordfreq:
    def args(self, data, out):
        out.mkdir()  # the others' output directory is made by the job
        return ["--job=wordfreq", "--input", data[0], "--output", str(out / "vocab.tsv"), "--top_k", "10"]

    def cut(self, job, data):
        return job.wait_for_files(30) < len(data[1])

    def check(self, data, out, stdout):
        _, paths, oracle = data
        assert read_tsv(str(out / "vocab.tsv")) == ordered(oracle)
        assert "wordfreq: %d words (%d distinct) in 300 files" % (sum(oracle.values()), len(oracle)) in stdout
        assert printed_top(stdout) == ordered(oracle)[:10]


class Vocab:
    def args(self, data, out):
        features = ",".join(name for name, _ in VOCAB_FEATURES)  # types read from the data
        pattern = os.path.join(data[0], "*.tfrecord*")
        return [
            "--job=vocab",
            "--features",
            features,
            "--format=tfrecord",
            "--input",
            pattern,
            "--output_dir",
            str(out),
        ]

    def cut(self, job, data):
        return job.wait_for_files(4) < len(data[1])

    def check(self, data, out, stdout):
        oracle = data[2]
        assert "vocab: %d examples" % oracle["examples"] in stdout
        assert_vocabularies(str(out), oracle)


class Stats:
    def args(self, data, out):
        return ["--job=stats", "--input", data[0], "--output_dir", str(out), "--read_size", "2048"]

    def cut(self, job, data):
        return job.wait_for_files(2) < len(data[1])

    def check(self, data, out, stdout):
        _, paths, reference = data
        for name in ("stats.pb", "stats.html"):
            assert (out / name).read_bytes() == (reference / name).read_bytes(), name
        with open(out / "stats.json") as f:
            document = json.load(f)
        expected = figures_of(paths)
        assert (document["num_examples"], document["features"]) == (expected["num_examples"], expected["features"])


class Reshard:
    def args(self, data, out):
        return ["--job=reshard", "--num_shards=5", "--input", data[0], "--output_dir", str(out)]

    def cut(self, job, data):
        return job.wait_for_files(60) < RECORD_FILES

    def check(self, data, out, stdout):
        _, records, digest = data
        assert sorted(os.listdir(out)) == [MANIFEST, "data"]  # no piece file, nothing staged
        assert data_records(out) == records
        assert data_digest(out) == digest


class Transform:
    def args(self, data, out):
        # The schema the reference inferred: the job runs its two passes, not a third of
        # statistics to infer it again.
        schema = os.path.join(data[1], "metadata", "schema.pbtxt")
        return ["--job=transform", "--preprocessing_fn", TRANSFORM_FN, "--num_shards=3", "--schema", schema] + [
            "--input",
            data[0],
            "--output_dir",
            str(out),
        ]

    def cut(self, job, data):
        job.wait_for("transform: raw examples transformed and written")
        return True

    def check(self, data, out, stdout):
        reference = data[1]
        assert data_digest(out) == data_digest(reference)
        assets = os.path.join("transform_fn", "assets")
        assert sorted(os.listdir(out / assets)) == sorted(os.listdir(os.path.join(reference, assets)))
        for name in os.listdir(out / assets):
            assert (out / assets / name).read_bytes() == open(os.path.join(reference, assets, name), "rb").read()


# In turn on the same servers, each job's data by its name. The second word count finds
# tables of the names the first one made: had the first one's counts been kept, it would
# count every word twice.
JOBS = [
    ("wordfreq", Wordfreq()),
    ("vocab", Vocab()),
    ("stats", Stats()),
    ("reshard", Reshard()),
    ("transform", Transform()),
    ("wordfreq", Wordfreq()),
]


def test_a_worker_killed_mid_job_leaves_an_exact_result_for_every_kind_of_state(tmp_path, processes, data):
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=2, num_workers=3)
    cluster.start_all()
    env = dict(cluster.chief_env(), PYTHONPATH=os.path.join(REPO, "tests"))
    failed = {}
    for n, (name, kind) in enumerate(JOBS):
        last = n == len(JOBS) - 1
        victim = ("worker", n % 3)
        out = tmp_path / ("%d-%s" % (n, name))
        # Kept serving between jobs; the last one tells the servers the job is over.
        flags = list(GONE_WORKER_SHUTDOWN) if last else ["--keep_serving"]
        job = LiveCoordinator(kind.args(data[name], out) + LIVE + flags, env, processes, out.with_suffix(".log"))
        try:
            assert kind.cut(job, data[name]), "the job ended before the test could kill a worker"
            cluster.servers[victim].kill()
            code, stdout, stderr = job.finish()
            assert code == 0, stderr
            kind.check(data[name], out, stdout)
            if last:
                assert gave_up_on(stderr, *victim)
            else:
                assert all(proc.poll() is None for task, proc in cluster.servers.items() if task != victim)
        except AssertionError as error:  # every job is run and reported, each on its own
            failed[out.name] = error
        if not last:
            # Not waited for: the next coordinator connects once every task answers.
            cluster.start(*victim)
    assert not failed, "\n".join("%s: %s" % (name, error) for name, error in failed.items())
    codes = cluster.exit_codes()
    assert {task: codes[task] for task in cluster.tasks if task != victim} == {
        task: 0 for task in cluster.tasks if task != victim
    }
