"""The job on an in-process cluster (2 ps, 2 workers inside this test process)."""

import os

import numpy as np
import portpicker
import pytest
import tensorflow as tf

from conftest import oracle_words, write_corpus
from tf2_mapreduce import inputs, runner, server
from tf2_mapreduce.errors import JobFailed
from tf2_mapreduce.jobs import JOBS
from tf2_mapreduce.reduce import PerFileSum

WORDCOUNT = JOBS["wordcount"]
NUM_PS, NUM_WORKERS = 2, 2
PS_DEVICES = ["/job:ps/replica:0/task:%d/device:CPU:0" % i for i in range(NUM_PS)]


@pytest.fixture(scope="module")
def coordinator():
    jobs = {
        role: ["localhost:%d" % portpicker.pick_unused_port() for _ in range(count)]
        for role, count in (("chief", 1), ("ps", NUM_PS), ("worker", NUM_WORKERS))
    }
    spec = tf.train.ClusterSpec(jobs)
    # Servers of a process live as long as it does: TF cannot stop them.
    servers = [
        tf.distribute.Server(spec, job_name=role, task_index=i, protocol="grpc",
                             config=server.server_config(NUM_WORKERS), start=True)
        for role in ("ps", "worker") for i in range(len(jobs[role]))
    ]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(spec, task_type="chief", task_id=0, rpc_layer="grpc")
    devices = ["/job:%s/replica:0/task:%d/device:CPU:0" % (r, i) for r in ("ps", "worker") for i in range(len(jobs[r]))]
    yield runner.connect(resolver, devices)
    del servers


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("corpus"))
    write_corpus(root, 61, seed=7)
    return inputs.expand([root]).files


@pytest.mark.parametrize("step_files", [1, 7, 64])
def test_total_and_per_file_counts_match_oracle(coordinator, corpus, step_files):
    result = runner.run(WORDCOUNT, corpus, coordinator, NUM_WORKERS, PS_DEVICES, step_files=step_files)
    assert result.total == oracle_words(f.path for f in corpus)
    assert result.values.tolist() == [oracle_words([f.path]) for f in corpus]
    assert result.total_bytes == sum(os.path.getsize(f.path) for f in corpus)


def test_progress_reports_are_consistent(coordinator, corpus):
    reports = []
    result = runner.run(WORDCOUNT, corpus, coordinator, NUM_WORKERS, PS_DEVICES, step_files=1,
                        on_progress=reports.append, progress_every=0.1)
    for before, after in zip(reports, reports[1:]):
        assert before.files_done <= after.files_done and before.value <= after.value
    for report in reports:
        assert report.files_total == len(corpus) and report.value <= result.total
        assert report.bytes_total == result.total_bytes and report.bytes_done <= report.bytes_total


def test_a_retried_commit_does_not_double_count(coordinator, tmp_path):
    # What schedule() does when a worker dies after its step reached the ps: the
    # same files are committed again. Slots make the second commit a no-op.
    files = inputs.expand(write_corpus(str(tmp_path), 9, seed=3)).files
    reducer = PerFileSum([f.size for f in files], PS_DEVICES)
    ids = tf.constant(list(range(len(files))), tf.int64)
    values = tf.constant([oracle_words([f.path]) for f in files], tf.int64)
    commit = tf.function(reducer.commit)
    commit(ids, values)
    once = reducer.stats()
    commit(ids[2:5], values[2:5])
    commit(ids, values)
    assert reducer.stats() == once == (len(files), sum(f.size for f in files), oracle_words(f.path for f in files))
    assert np.array_equal(reducer.values(), values.numpy())


def test_file_gone_at_read_time_fails_the_job_naming_it(coordinator, corpus, tmp_path):
    gone = inputs.InputFile(str(tmp_path / "deleted after listing.txt"), 10)
    with pytest.raises(JobFailed) as e:
        runner.run(WORDCOUNT, corpus[:5] + [gone] + corpus[5:], coordinator, NUM_WORKERS, PS_DEVICES, step_files=2)
    message = str(e.value)
    assert gone.path in message and "No such file or directory" in message and "\n" not in message
    # The coordinator is usable for the next job after a failed one.
    assert runner.run(WORDCOUNT, corpus, coordinator, NUM_WORKERS, PS_DEVICES).total == oracle_words(f.path for f in corpus)


def test_more_ps_than_files(coordinator, tmp_path):
    files = inputs.expand(write_corpus(str(tmp_path), 1, seed=5)).files
    assert runner.run(WORDCOUNT, files, coordinator, NUM_WORKERS, PS_DEVICES).total == oracle_words([files[0].path])
