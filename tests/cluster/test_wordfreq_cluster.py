"""wordfreq on real clusters of processes with 2 ps tasks: a vocabulary of over 100k
distinct words, a worker killed mid-job, a stop and resume; the output files parsed
back must equal collections.Counter over bytes.split()."""

import re
import signal

import pytest
from helpers.corpora import write_zipf_corpus
from helpers.oracles import oracle_counter, ordered, read_result, read_tsv
from helpers.processes import GONE_WORKER_SHUTDOWN, ConfiguredCluster, LiveCoordinator, gave_up_on, live_args, task_env

from tf2_mapreduce.outputs import files as output


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("zipf"))
    paths = write_zipf_corpus(directory, 300, distinct=110_000, samples=200_000, seed=17)
    return directory, paths, oracle_counter(paths)


def printed_top(stdout):
    """The (word, count) pairs of the top-K table the coordinator prints."""
    top = []
    for line in stdout.splitlines():
        match = re.match(r"^\s+(\d+)  (\S+)$", line)
        if match:
            top.append((output.unescape(match.group(2)), int(match.group(1))))
    return top


def test_wordfreq_on_a_real_cluster_with_two_ps_and_a_killed_worker(tmp_path, processes, corpus):
    directory, paths, oracle = corpus
    assert len(oracle) >= 100_000
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=2, num_workers=2)
    cluster.start_all()
    vocab = str(tmp_path / "vocab.tsv")
    job = LiveCoordinator(
        live_args(directory, vocab, "--job=wordfreq", "--top_k", "10", *GONE_WORKER_SHUTDOWN),
        cluster.chief_env(),
        processes,
        tmp_path / "c.log",
    )
    assert job.wait_for_files(30) < len(paths)
    cluster.servers["worker", 1].kill()
    code, stdout, stderr = job.finish()
    assert code == 0, stderr
    assert gave_up_on(stderr, "worker", 1)
    assert read_tsv(vocab) == ordered(oracle)
    assert "wordfreq: %d words (%d distinct) in 300 files" % (sum(oracle.values()), len(oracle)) in stdout
    assert printed_top(stdout) == ordered(oracle)[:10]
    for task in [("ps", 0), ("ps", 1), ("worker", 0)]:
        assert cluster.servers[task].wait(30) == 0


def test_wordfreq_on_a_local_cluster_stopped_and_resumed(tmp_path, processes, corpus):
    directory, paths, oracle = corpus
    result = str(tmp_path / "vocab.json")
    args = live_args(
        directory,
        result,
        "--job=wordfreq",
        "--num_ps",
        "2",
        "--checkpoint_dir",
        str(tmp_path / "ckpt"),
        "--min_count",
        "2",
    )
    job = LiveCoordinator(args, task_env(), processes, tmp_path / "first.log")
    job.wait_for_files(30)
    job.proc.send_signal(signal.SIGTERM)
    code, _, stderr = job.finish()
    assert code == 143, stderr
    resumed = LiveCoordinator(args, task_env(), processes, tmp_path / "second.log")
    assert int(resumed.wait_for(r"resuming from .*: (\d+) of 300 files already done").group(1)) >= 30
    code, _, stderr = resumed.finish()
    assert code == 0, stderr
    document = read_result(result)
    assert [(output.unescape(w), c) for w, c in document["words"]] == ordered(oracle, min_count=2)
    assert (document["total_words"], document["distinct_words"]) == (sum(oracle.values()), len(oracle))
