"""Real clusters of processes: servers started from make_configs.py files, the coordinator
CLI as a subprocess, results checked against the oracle, every process's exit checked.
"""

import collections
import os
import re
import socket
import subprocess
import sys
import time

import pytest
from helpers.corpora import write_corpus
from helpers.oracles import assert_matches_oracle, oracle_words, read_result
from helpers.processes import REPO, SCRIPTS, SERVER_EXIT_TIMEOUT, ConfiguredCluster, run_cli, servers_of, task_env

from tf2_mapreduce.outputs import files as output


def test_walkthrough_cluster_counts_exactly_and_every_server_exits_zero(tmp_path, processes):
    corpus = str(tmp_path / "corpus")
    subprocess.run(
        [
            sys.executable,
            os.path.join(SCRIPTS, "make_corpus.py"),
            "--out_dir",
            corpus,
            "--num_files",
            "300",
            "--words_per_file",
            "500",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    paths = sorted(os.path.join(corpus, n) for n in os.listdir(corpus))
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start_all()
    output = str(tmp_path / "result.json")
    run = run_cli(["--input", corpus, "--output", output], env=cluster.chief_env())
    assert run.returncode == 0, run.stderr
    assert_matches_oracle(read_result(output), paths)
    assert "wordcount: %d words in 300 files" % oracle_words(paths) in run.stdout
    assert cluster.exit_codes() == {task: 0 for task in cluster.tasks}
    assert "the job is over, exiting" in cluster.log("worker", 1)


def test_two_ps_three_workers_with_list_and_glob_inputs(tmp_path, processes):
    paths = write_corpus(str(tmp_path / "corpus"), 40, seed=11)
    listing = tmp_path / "files.txt"
    listing.write_text("\n".join(paths[:25]) + "\n")
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=2, num_workers=3)
    cluster.start_all()
    output = str(tmp_path / "result.json")
    # The list and the glob overlap on f0020-f0024: those are counted once.
    run = run_cli(
        [
            "--input",
            "@%s" % listing,
            "--input",
            str(tmp_path / "corpus" / "f002*.txt"),
            str(tmp_path / "corpus" / "f003*.txt"),
            "--files_per_step",
            "3",
            "--output",
            output,
        ],
        env=cluster.chief_env(),
    )
    assert run.returncode == 0, run.stderr
    assert_matches_oracle(read_result(output), paths[:40])
    assert "5 path(s) were given more than once" in run.stderr
    assert cluster.exit_codes() == {task: 0 for task in cluster.tasks}


def test_server_keep_serving_flag_survives_the_end_of_a_job(tmp_path, processes):
    paths = write_corpus(str(tmp_path / "corpus"), 3, seed=4)
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=1)
    cluster.start("ps", 0)
    kept = cluster.start("worker", 0, "--keep_serving")
    run = run_cli(["--input", str(tmp_path / "corpus")], env=cluster.chief_env())
    assert run.returncode == 0, run.stderr
    assert cluster.servers["ps", 0].wait(timeout=SERVER_EXIT_TIMEOUT) == 0
    # The worker got the same request as the ps, which has exited; a second job
    # proves the worker still serves (it would otherwise fail to connect).
    cluster.servers.pop(("ps", 0))
    cluster.start("ps", 0)
    again = run_cli(["--input", str(tmp_path / "corpus"), "--connect_timeout", "20"], env=cluster.chief_env())
    assert again.returncode == 0, again.stderr
    assert "wordcount: %d words" % oracle_words(paths) in again.stdout
    assert kept.poll() is None


def test_a_ps_that_never_answers_is_named_and_fails_fast(tmp_path, processes):
    write_corpus(str(tmp_path / "corpus"), 2)
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=1)
    cluster.start("worker", 0)  # the ps is never started
    started = time.monotonic()
    run = run_cli(["--input", str(tmp_path / "corpus"), "--connect_timeout", "5"], env=cluster.chief_env(), timeout=120)
    assert run.returncode == 3
    assert "error: no answer within 5s from ps 0 at %s (connection refused)" % cluster.addresses["ps", 0] in run.stderr
    assert "worker 0" not in run.stderr.split("error:")[1]
    assert time.monotonic() - started < 60


def test_server_on_a_taken_port_says_so(tmp_path, processes):
    cluster = ConfiguredCluster(tmp_path, processes, 1, 1)
    host, port = cluster.addresses["worker", 0].split(":")
    with socket.socket() as squatter:
        squatter.bind(("", int(port)))
        squatter.listen()
        proc = cluster.start("worker", 0)
        assert proc.wait(timeout=120) == 3
    assert "error: worker 0 cannot serve on localhost:%s" % port in cluster.log("worker", 0)


def test_coordinator_on_a_taken_chief_port_says_so(tmp_path, processes):
    write_corpus(str(tmp_path / "corpus"), 2)
    cluster = ConfiguredCluster(tmp_path, processes, 1, 1)
    cluster.start_all()
    port = int(cluster.addresses["chief", 0].split(":")[1])
    with socket.socket() as squatter:
        squatter.bind(("", port))
        squatter.listen()
        run = run_cli(["--input", str(tmp_path / "corpus")], env=cluster.chief_env(), timeout=120)
    assert run.returncode == 3
    assert "error: the coordinator cannot serve as chief on localhost:%d" % port in run.stderr


def sample_paths():
    sample = os.path.join(REPO, "tf2_mapreduce", "data", "sample")
    return sorted(os.path.join(sample, n) for n in os.listdir(sample))


def local_ports(stderr):
    line = next(text for text in stderr.splitlines() if "started a local cluster" in text)
    return [int(p) for p in re.findall(r"localhost:(\d+)", line)]


def assert_nothing_left(run):
    assert servers_of(run.pid) == []
    for port in local_ports(run.stderr):
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("localhost", port), timeout=5).close()


def test_default_command_counts_the_sample_corpus_and_leaves_nothing(tmp_path):
    run = run_cli([], env=task_env())
    assert run.returncode == 0, run.stderr
    assert "started a local cluster in this process" in run.stderr
    # TensorFlow's native start-up lines (oneDNN, CUDA drivers) are not shown by default.
    assert [line for line in run.stderr.splitlines() if not line.startswith("tf2_mapreduce: ")] == []
    paths = sample_paths()
    assert len(paths) == 22
    assert "wordcount: %d words in 22 files" % oracle_words(paths) in run.stdout
    assert re.search(r"\] 22/22 files \(100%\), .* of .*, " + str(oracle_words(paths)) + " words so far", run.stderr)
    assert len(local_ports(run.stderr)) == 3  # 1 ps + 2 workers
    assert_nothing_left(run)


def test_local_cluster_sizes_and_output(tmp_path):
    paths = write_corpus(str(tmp_path / "corpus"), 50, seed=9)
    output = str(tmp_path / "out" / "result.json")
    os.mkdir(os.path.dirname(output))
    run = run_cli(
        [
            "--num_ps",
            "2",
            "--num_workers",
            "3",
            "--input",
            str(tmp_path / "corpus"),
            "--output",
            output,
            "--progress_every",
            "0.2",
        ],
        env=task_env(),
    )
    assert run.returncode == 0, run.stderr
    assert_matches_oracle(read_result(output), paths)
    assert len(local_ports(run.stderr)) == 5
    assert_nothing_left(run)


def docs_user_job():
    """docs/jobs.md's own job, in `myjobs.py`, as written there."""
    with open(os.path.join(REPO, "docs", "jobs.md"), encoding="utf-8") as f:
        section = f.read().split("ignoring ASCII case, in `myjobs.py`:", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_a_user_job_named_by_module_path(tmp_path):
    (tmp_path / "myjobs.py").write_text(docs_user_job())
    paths = write_corpus(str(tmp_path / "corpus"), 20, seed=6)
    vocab = str(tmp_path / "vocab.tsv")
    env = task_env(PYTHONPATH=str(tmp_path))
    run = run_cli(["--job=myjobs:CASELESS", "--input", str(tmp_path / "corpus"), "--output", vocab], env=env)
    assert run.returncode == 0, run.stderr
    oracle = collections.Counter()
    for path in paths:
        with open(path, "rb") as f:
            oracle.update(word.lower() for word in f.read().split())
    with open(vocab, encoding="utf-8") as f:
        got = {output.unescape(word): int(count) for word, count in (line.rstrip("\n").split("\t") for line in f)}
    assert got == oracle


def test_local_cluster_of_processes(tmp_path):
    run = run_cli(["--local_cluster=processes", "--num_workers=3"], env=task_env())
    assert run.returncode == 0, run.stderr
    assert "started a local cluster: ps localhost:" in run.stderr
    assert "wordcount: %d words in 22 files" % oracle_words(sample_paths()) in run.stdout
    assert len(local_ports(run.stderr)) == 4
    assert_nothing_left(run)


def test_logdir_has_tensorboard_summaries_of_the_progress(tmp_path):
    import tensorflow as tf

    paths = write_corpus(str(tmp_path / "corpus"), 200, seed=17, max_words=50)
    logdir = tmp_path / "logs"
    run = run_cli(
        [
            "--input",
            str(tmp_path / "corpus"),
            "--files_per_step",
            "1",
            "--progress_every",
            "0.1",
            "--logdir",
            str(logdir),
        ],
        env=task_env(),
    )
    assert run.returncode == 0, run.stderr
    series = collections.defaultdict(list)  # tag -> [(step, value)]
    plugins = collections.defaultdict(set)  # tag -> what TensorBoard is told it is
    for name in os.listdir(logdir):
        for event in tf.compat.v1.train.summary_iterator(str(logdir / name)):
            for value in event.summary.value:
                series[value.tag].append((event.step, float(tf.make_ndarray(value.tensor))))
                plugins[value.tag].add(value.metadata.plugin_data.plugin_name)
    assert all("scalars" in names for names in plugins.values())
    assert {
        "progress/files_done",
        "progress/bytes_done",
        "throughput/bytes_per_second",
        "throughput/words_per_second",
        "totals/words",
        "workers/map_steps/worker_0",
        "workers/map_steps/worker_1",
        "retries/rounds_rerun",
    } <= set(series)
    last = {tag: max(points)[1] for tag, points in series.items()}
    assert last["progress/files_done"] == 200
    assert last["progress/bytes_done"] == sum(os.path.getsize(p) for p in paths)
    assert last["totals/words"] == oracle_words(paths)
    assert last["workers/map_steps/worker_0"] + last["workers/map_steps/worker_1"] >= 200
    assert any(value > 0 for _, value in series["throughput/words_per_second"])
