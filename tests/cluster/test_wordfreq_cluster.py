"""wordfreq on a local cluster of processes with 2 ps tasks stopped and resumed: a
vocabulary of over 100k distinct words; the output parsed back must equal
collections.Counter over bytes.split(). A killed worker: test_killed_worker.py."""

import signal

import pytest
from helpers.corpora import write_zipf_corpus
from helpers.oracles import oracle_counter, ordered, read_result
from helpers.processes import LiveCoordinator, live_args, task_env

from tf2_mapreduce.outputs import files as output


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("zipf"))
    paths = write_zipf_corpus(directory, 300, distinct=110_000, samples=200_000, seed=17)
    return directory, paths, oracle_counter(paths)


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
