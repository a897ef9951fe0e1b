"""The job on an in-process cluster (2 ps, 2 workers inside this test process)."""

import logging
import os

import numpy as np
import pytest
import tensorflow as tf
from helpers.corpora import write_corpus
from helpers.oracles import oracle_words
from helpers.processes import INPROCESS_PS, run_job

import tf2_mapreduce as mr
from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import JobFailed, UsageError
from tf2_mapreduce.inputs.files import InputFile
from tf2_mapreduce.inputs.listing import expand
from tf2_mapreduce.run import rounds
from tf2_mapreduce.run.options import Options
from tf2_mapreduce.state.base import Figures

WORDCOUNT = mr.WordCount()
PS_DEVICES = [cluster_spec.device("ps", i) for i in range(INPROCESS_PS)]


def run(inprocess, files, on_progress=None, **options):
    return run_job(inprocess, WORDCOUNT, files, on_progress=on_progress, **options)


def logged(caplog):
    """The lines the library logged (`log`), as a Python caller sees them."""
    return [str(record.msg) for record in caplog.records if record.name == "tf2_mapreduce"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("corpus"))
    write_corpus(root, 61, seed=7)
    return expand([root]).files


@pytest.mark.parametrize("max_pieces", [1, 7, 64])
def test_total_and_per_file_counts_match_oracle(inprocess, corpus, max_pieces):
    result = run(inprocess, corpus, max_pieces=max_pieces)
    assert result.total == oracle_words(f.path for f in corpus)
    assert [f.value for f in result.per_file] == [oracle_words([f.path]) for f in corpus]
    assert [f.path for f in result.per_file] == [f.path for f in corpus]
    assert result.bytes_done == sum(os.path.getsize(f.path) for f in corpus)


def test_each_map_step_is_traced_once_and_never_on_the_scheduling_thread(inprocess, corpus, monkeypatch):
    """TensorFlow's tracing on two threads at once crashed the coordinator: a round traces
    its steps before its scheduling thread starts, as schedule() would (a trace made in
    another scope was made again on that thread, each step twice). Whole files and byte
    ranges: two kinds of step."""
    traced = []
    drive = rounds.Round._drive

    def counted(self):
        before = {kind: self.steps[kind].experimental_get_tracing_count() for kind, _ in self._splits}
        drive(self)
        traced.append({kind: self.steps[kind].experimental_get_tracing_count() - n for kind, n in before.items()})

    monkeypatch.setattr(rounds.Round, "_drive", counted)
    result = run(inprocess, corpus, read_size=1024)
    assert result.total == oracle_words(f.path for f in corpus)
    kinds = {kind[0] for counts in traced for kind in counts}
    assert kinds == {"whole", "range"}, kinds
    assert all(n == 0 for counts in traced for n in counts.values()), traced


def test_progress_reports_are_consistent(inprocess, corpus):
    reports = []
    result = run(inprocess, corpus, on_progress=reports.append, max_pieces=1, progress_every=0.1)
    assert reports[-1].files_done == len(corpus) and reports[-1].value == result.total
    for before, after in zip(reports, reports[1:]):
        assert before.files_done <= after.files_done and before.value <= after.value
    for report in reports:
        assert report.files_total == len(corpus) and report.value <= result.total
        assert report.bytes_total == result.bytes_done and report.bytes_done <= report.bytes_total


def test_a_retried_commit_does_not_double_count(inprocess, tmp_path):
    # What schedule() does when a worker dies after its step reached the ps: the
    # same files are committed again. Slots make the second commit a no-op.
    files = expand(write_corpus(str(tmp_path), 9, seed=3)).files
    reducer = mr.Sum("words").create_state([f.size for f in files], PS_DEVICES, "unused: variables are named by TF")
    ids = tf.constant(list(range(len(files))), tf.int64)
    values = tf.constant([oracle_words([f.path]) for f in files], tf.int64)
    commit = tf.function(reducer.commit)
    commit(ids, values)
    once = reducer.figures()
    commit(ids[2:5], values[2:5])
    commit(ids, values)
    assert once == Figures(len(files), sum(f.size for f in files), oracle_words(f.path for f in files))
    assert reducer.figures() == once
    assert np.array_equal(reducer.values(), values.numpy())


def test_file_gone_at_read_time_fails_the_job_naming_it(inprocess, corpus, tmp_path):
    gone = InputFile(str(tmp_path / "deleted after listing.txt"), 10, 0)
    with pytest.raises(JobFailed) as e:
        run(inprocess, corpus[:5] + [gone] + corpus[5:], max_pieces=2)
    assert str(e.value) == (
        "a map step failed: %s: no such file or directory (it was there when the inputs were listed)" % gone.path
    )
    # The coordinator is usable for the next job after a failed one.
    assert run(inprocess, corpus).total == oracle_words(f.path for f in corpus)


def test_skip_pins_down_each_bad_file_in_a_batch(inprocess, corpus, tmp_path):
    changed = tmp_path / "changed.txt"
    changed.write_bytes(b"three short words")
    bad = [
        InputFile(str(tmp_path / "gone.txt"), 10, 0),
        InputFile(str(changed), 5, 0),  # listed at 5 bytes, 17 now
        InputFile(str(tmp_path), 4096, 0),
    ]  # a directory where a file was listed
    files = corpus[:10] + bad[:2] + corpus[10:20] + bad[2:] + corpus[20:]
    result = run(inprocess, files, max_pieces=8, on_error="skip")
    assert result.total == oracle_words(f.path for f in corpus)
    assert result.skipped == [
        (bad[0].path, "no such file or directory (it was there when the inputs were listed)"),
        (bad[1].path, "changed since it was listed (5 bytes then, 17 now)"),
        (bad[2].path, "is a directory"),
    ]
    assert result.files_done == len(corpus)


def test_checkpoint_resume_counts_each_file_once(inprocess, corpus, tmp_path):
    directory = str(tmp_path / "ckpt")
    whole = run(inprocess, corpus, checkpoint_dir=directory)
    assert whole.resumed_from is None
    # A new run of the same job finds every file done and schedules nothing.
    again = run(inprocess, corpus, checkpoint_dir=directory)
    assert again.resumed_from and again.files_resumed == len(corpus)
    assert again.total == whole.total == oracle_words(f.path for f in corpus)


def run_logged(inprocess, files, checkpoint_dir, caplog):
    """Runs wordcount with a checkpoint directory; returns the result and the lines logged."""
    caplog.clear()
    caplog.set_level(logging.INFO, logger="tf2_mapreduce")
    return run(inprocess, files, checkpoint_dir=str(checkpoint_dir)), logged(caplog)


def test_torn_or_damaged_checkpoints_fall_back_to_a_good_one(inprocess, corpus, tmp_path, caplog):
    directory = tmp_path / "ckpt"
    run(inprocess, corpus, checkpoint_dir=str(directory))  # ckpt-1, at the end
    run(inprocess, corpus, checkpoint_dir=str(directory))  # ckpt-2: resumed, saved again
    # A save that died midway leaves files the index never names.
    torn = directory / "ckpt-3_temp"
    torn.mkdir()
    (torn / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"\0" * 7)
    (directory / "ckpt-3.index").write_bytes(b"garbage")
    # The newest checkpoint the index names is damaged after the fact.
    data = next(directory.glob("ckpt-2.data-*"))
    data.write_bytes(data.read_bytes()[:5])
    result, warnings = run_logged(inprocess, corpus, directory, caplog)
    assert result.resumed_from == str(directory / "ckpt-1") and result.files_resumed == len(corpus)
    assert result.total == oracle_words(f.path for f in corpus)
    assert any(w.startswith("checkpoint %s cannot be read" % (directory / "ckpt-2")) for w in warnings), warnings


def test_checkpoint_of_other_inputs_is_refused(inprocess, corpus, tmp_path):
    directory = str(tmp_path / "ckpt")
    run(inprocess, corpus[:10], checkpoint_dir=directory)
    with pytest.raises(UsageError) as e:
        run(inprocess, corpus[:11], checkpoint_dir=directory)
    assert "holds another job's checkpoint: input %s is new" % corpus[10].path in str(e.value)
    modified = corpus[:9] + [InputFile(corpus[9].path, corpus[9].size, corpus[9].mtime_ns + 1)]
    with pytest.raises(UsageError, match="input %s was modified" % corpus[9].path):
        run(inprocess, modified, checkpoint_dir=directory)
    # Its state is per piece: other cuts of the same files are another job.
    with pytest.raises(UsageError, match="it was made with read_size=%d" % Options().read_size):
        run(inprocess, corpus[:10], checkpoint_dir=directory, read_size=64)


def test_more_ps_than_files(inprocess, tmp_path):
    files = expand(write_corpus(str(tmp_path), 1, seed=5)).files
    assert run(inprocess, files).total == oracle_words([files[0].path])


@pytest.mark.parametrize("damaged", [0, 1, 2])
def test_a_start_over_after_every_checkpoint_failed_to_restore_keeps_nothing_of_them(
    inprocess, corpus, tmp_path, damaged, caplog
):
    directory = tmp_path / "ckpt"
    run(inprocess, corpus, checkpoint_dir=str(directory))
    # One shard each for the chief and the two ps tasks: the others stay readable.
    shards = sorted(directory.glob("ckpt-1.data-*"))
    assert len(shards) == 1 + INPROCESS_PS
    shards[damaged].write_bytes(shards[damaged].read_bytes()[:5])
    result, warnings = run_logged(inprocess, corpus, directory, caplog)
    assert any(w.startswith("checkpoint %s cannot be read" % (directory / "ckpt-1")) for w in warnings), warnings
    assert result.resumed_from is None and result.files_resumed == 0
    assert result.total == oracle_words(f.path for f in corpus)
    assert [f.value for f in result.per_file] == [oracle_words([f.path]) for f in corpus]
