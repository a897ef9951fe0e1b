"""Every built-in job, a user-defined job and the output of per-key tables, against
plain-Python oracles, on an in-process cluster of 2 ps and 2 workers."""

import collections
import importlib.util
import json
import os
import re
import threading
import uuid

import numpy as np
import pytest
import tensorflow as tf
from helpers.corpora import write_corpus, write_zipf_corpus
from helpers.oracles import oracle_counter, oracle_words
from helpers.processes import INPROCESS_PS, REPO, job_run, run_job

import tf2_mapreduce as mr
from tf2_mapreduce import native, spilling
from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import Interrupted
from tf2_mapreduce.inputs.listing import expand
from tf2_mapreduce.inputs.plan import Plan
from tf2_mapreduce.outputs import files as output
from tf2_mapreduce.state import view_chunks
from tf2_mapreduce.state.base import Figures

run = run_job


@pytest.fixture(scope="module")
def zipf(tmp_path_factory):
    paths = write_zipf_corpus(str(tmp_path_factory.mktemp("zipf")), 40, distinct=20_000, samples=40_000, seed=3)
    return expand(paths).files, oracle_counter(paths)


def oracle_lines(data):
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def oracle_grep(data, pattern):
    """RE2 semantics for the patterns used here: lines are UTF-8 text; others never match."""
    matched = 0
    for line in oracle_lines(data):
        try:
            matched += bool(re.fullmatch(pattern, line.decode("utf-8")))
        except UnicodeDecodeError:
            pass
    return matched


def read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("texts"))
    paths = write_corpus(root, 30, seed=12)
    extra = os.path.join(root, "lines.txt")
    with open(extra, "wb") as f:
        f.write(b"the cat\nthe dog\r\nno newline at the end: the" + "\ncafé the\n\n\xff the\n".encode("latin-1"))
    return expand(paths + [extra]).files


def test_wordfreq_matches_counter_on_two_ps(inprocess, zipf):
    files, oracle = zipf
    result = run(inprocess, mr.WordFreq(), files, max_pieces=3)
    assert result.total == sum(oracle.values())
    assert result.distinct == len(oracle) >= 20_000
    assert collections.Counter(dict(result.entries())) == oracle
    # Keys are spread over both ps tables.
    assert all(int(shard.table.size()) > 0 for shard in result._state.shards)
    top = result.top(25)
    assert top == sorted(oracle.items(), key=lambda kv: (-kv[1], kv[0]))[:25]


def test_wordfreq_output_round_trips_with_escaping(inprocess, zipf, tmp_path, monkeypatch):
    files, oracle = zipf
    # Small chunks and runs: the table is fetched in pieces (of at most 3000 keys, and of
    # about 8 KB of them: a few hundred words) and sorted through disk.
    monkeypatch.setattr(view_chunks, "CHUNK", 3000)
    monkeypatch.setattr(view_chunks, "CHUNK_BYTES", 8000)
    monkeypatch.setattr(spilling, "RUN_BYTES", 4000 * 80)
    result = run(inprocess, mr.WordFreq(), files)
    ordered = sorted(oracle.items(), key=lambda kv: (-kv[1], kv[0]))
    tsv = str(tmp_path / "vocab.tsv")
    result.write(tsv)
    with open(tsv, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    assert all(len(row) == 2 for row in rows)
    assert [(output.unescape(word), int(count)) for word, count in rows] == ordered
    assert any("\\x" in word for word, _ in rows) and any("\\\\" in word for word, _ in rows)
    as_json = str(tmp_path / "vocab.json")
    result.write(as_json, min_count=3)
    with open(as_json, encoding="utf-8") as f:
        document = json.load(f)
    assert [(output.unescape(word), count) for word, count in document["words"]] == [kv for kv in ordered if kv[1] >= 3]
    assert document["total_words"] == sum(oracle.values()) and document["distinct_words"] == len(oracle)


PS_DEVICES = [cluster_spec.device("ps", i) for i in range(INPROCESS_PS)]
WORDS = mr.KeySum(unit="words")


def test_a_retried_per_key_commit_does_not_double_count(inprocess):
    reducer = WORDS.create_state([10, 10, 10], PS_DEVICES, uuid.uuid4().hex)
    commit = tf.function(reducer.commit)
    # Keys that look like the table's own markers and figures are keys like any other.
    # Each once, as the reducer combines them on the worker.
    words = tf.constant([b"a", b"b", b"c", b"d0", b"t", b"", b"k", b"p"])
    counts = tf.constant([2, 1, 1, 1, 1, 1, 1, 1], tf.int64)
    ten = tf.constant([10, 10], tf.int64)
    commit(tf.constant([0, 2], tf.int64), (words, counts), ten)
    assert reducer.figures() == Figures(2, 20, 9, 8)
    commit(tf.constant([0, 2], tf.int64), (words, counts), ten)  # the retry: a no-op
    commit(tf.constant([1], tf.int64), (words[:1], counts[:1] - 1), ten[:1])
    assert dict(reducer.entries()) == {b"a": 3, b"b": 1, b"c": 1, b"d0": 1, b"t": 1, b"": 1, b"k": 1, b"p": 1}
    assert reducer.done().tolist() == [True, True, True]
    assert reducer.figures() == Figures(3, 30, 10, 8)
    assert reducer.top(2) == [(b"a", 3), (b"", 1)]


MUTATIONS = re.compile(r"Assign|Scatter|Insert|Import|Remove|Destroy|Commit")


def test_a_per_key_commit_changes_each_ps_in_one_op(inprocess):
    """A killed worker can stop the ps's part of its step between two ops; with a table,
    flags and a total written by three ops, one run counted a total twice and its table
    once. So each ps's part of a commit must make every change in one op (our table's
    commit, or an insert into TensorFlow's without the native ops), whatever ops read or
    compute around it."""
    from tf2_mapreduce import native

    reducer = WORDS.create_state([10, 10], PS_DEVICES, uuid.uuid4().hex)
    commit = tf.function(reducer.commit).get_concrete_function(
        tf.TensorSpec([None], tf.int64),
        (tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.int64)),
        tf.TensorSpec([None], tf.int64),
    )
    graph = commit.graph.as_graph_def()
    nodes = list(graph.node) + [node for function in graph.library.function for node in function.node_def]
    changes = collections.Counter(node.op for node in nodes if MUTATIONS.search(node.op))
    one_op = "LookupTableInsertV2" if native.load() is None else "Tf2MapreduceKeyCountCommit"
    assert changes == {one_op: len(PS_DEVICES)}


def test_per_key_state_on_a_ps_belongs_to_one_run(inprocess):
    """Tables are named for their run on the ps: a new run's are new and empty, and
    `leftover` finds state a run did not write (as a rerun on servers that outlived a
    coordinator found, while tables had TF's own per-process names)."""
    first_run = uuid.uuid4().hex
    first = WORDS.create_state([10], PS_DEVICES, first_run)
    tf.function(first.commit)(
        tf.constant([0], tf.int64),
        (tf.constant([b"a", b"b"]), tf.constant([2, 3], tf.int64)),
        tf.constant([10], tf.int64),
    )
    assert first.leftover() in {"the table on %s" % device for device in PS_DEVICES}
    second = WORDS.create_state([10], PS_DEVICES, uuid.uuid4().hex)
    assert second.leftover() is None  # another run never sees the first run's state
    assert dict(second.entries()) == {} and dict(first.entries()) == {b"a": 2, b"b": 3}
    assert WORDS.create_state([10], PS_DEVICES, first_run).leftover() is not None
    first.reset()  # as after a restore that failed half-way
    assert first.leftover() is None and dict(first.entries()) == {} and first.done().tolist() == [False]
    tf.function(first.commit)(
        tf.constant([0], tf.int64), (tf.constant([b"a"]), tf.constant([1], tf.int64)), tf.constant([10], tf.int64)
    )
    assert dict(first.entries()) == {b"a": 1}
    first.release()
    assert WORDS.create_state([10], PS_DEVICES, first_run).leftover() is None  # released: nothing was left


def test_wordfreq_checkpoint_resume_is_exact(inprocess, tmp_path):
    # 400 files, one a step: the run is stopped well before its end.
    paths = write_zipf_corpus(str(tmp_path / "corpus"), 400, distinct=5_000, samples=20_000, seed=4)
    files, oracle = expand(paths).files, oracle_counter(paths)
    directory = str(tmp_path / "ckpt")
    stopping = []
    # Stopped as by SIGTERM once some files are done: a checkpoint is saved mid-job.
    first = job_run(
        inprocess,
        mr.WordFreq(),
        files,
        on_progress=lambda p: p.files_done and stopping[0].request_stop(15),
        checkpoint_dir=directory,
        max_pieces=1,
        progress_every=0.1,
    )
    stopping.append(first)
    with pytest.raises(Interrupted, match="checkpoint saved"):
        first.run()
    # Stopped means stopped: no step of it is left to run, or to fail, in the next run's rounds.
    assert not [t for t in threading.enumerate() if t.name == "tf2_mapreduce-schedule" and t.is_alive()]
    second = run(inprocess, mr.WordFreq(), files, checkpoint_dir=directory)
    assert 0 < second.files_resumed < len(files)
    assert collections.Counter(dict(second.entries())) == oracle


def test_a_resume_from_pieces_committed_on_one_ps_only_is_exact(inprocess, tmp_path):
    # A checkpoint copies each ps's table in a critical section of its own, so it can hold
    # a step's commit on one ps and not the other; so can the tables after a step was
    # cancelled mid-commit. Made here by hand: pieces 0-29 committed, with their true
    # counts, on ps 0 only, and pieces 30-31 on ps 1 only. The resumed run once packed
    # them into steps with pieces done nowhere, which ps 0 refused as committed in part;
    # then it ran each alone, a step a piece (a full suite once ran 261 steps where 80 do).
    from tf2_mapreduce.run import checkpoint

    paths = write_zipf_corpus(str(tmp_path / "corpus"), 40, distinct=300, samples=4_000, seed=9)
    files, oracle = expand(paths).files, oracle_counter(paths)
    job = mr.WordFreq()
    plan = Plan(files, 8 << 20, job.records)
    state = job.reducer.create_state(plan.sizes, PS_DEVICES, uuid.uuid4().hex)
    for shard, ids in ((0, range(30)), (1, [30, 31])):
        partial = oracle_counter([paths[i] for i in ids])
        keys = tf.constant(list(partial))
        here = tf.strings.to_hash_bucket_fast(keys, INPROCESS_PS) == shard
        tf.function(state.shards[shard].commit)(
            tf.constant(list(ids), tf.int64),
            tf.boolean_mask(keys, here),
            tf.boolean_mask(tf.constant(list(partial.values()), tf.int64), here),
            tf.constant([plan.sizes[i] for i in ids], tf.int64),
        )
    assert state.partial().tolist() == [1] * 30 + [2, 2] + [0] * 8  # a bit per ps that holds the piece
    directory = str(tmp_path / "ckpt")
    manifest = checkpoint.manifest(job, INPROCESS_PS, plan)
    checkpoint.JobCheckpoint(directory, manifest, state.checkpoint_state()).save()
    state.release()
    reports = []
    resumed = run(inprocess, job, files, on_progress=reports.append, checkpoint_dir=directory)
    assert resumed.resumed_from is not None and resumed.files_resumed == 0
    assert reports[-1].rounds_rerun == 0  # no step failed
    # Pieces done on the same ps tasks share steps: 8 steps a group at most, not one a piece.
    assert sum(resumed.steps_per_worker) < 30, resumed.steps_per_worker
    assert collections.Counter(dict(resumed.entries())) == oracle


def test_linecount_wc_and_grep_match_their_oracles(inprocess, texts):
    data = [read(f.path) for f in texts]
    lines = run(inprocess, mr.LineCount(), texts)
    assert lines.total == sum(len(oracle_lines(d)) for d in data)
    wc = run(inprocess, mr.Wc(), texts, max_pieces=4)
    assert wc.total == (lines.total, oracle_words(f.path for f in texts), sum(len(d) for d in data))
    assert [f.value for f in wc.per_file] == [(len(oracle_lines(d)), len(d.split()), len(d)) for d in data]
    for pattern in [".*the.*", "the .*", "[a-z]+ [a-z]+", ".*é.*", ""]:
        grep = run(inprocess, mr.Grep(pattern), texts)
        assert grep.total == sum(oracle_grep(d, pattern) for d in data), pattern


def test_a_user_defined_job(inprocess, texts):
    def byte_histogram(text):
        return tf.math.bincount(
            tf.cast(tf.io.decode_raw(text, tf.uint8), tf.int32), minlength=256, maxlength=256, dtype=tf.int64
        )

    job = mr.Job(
        "bytes",
        mr.per_text(byte_histogram, shape=(256,)),
        mr.VectorSum(names=tuple("%02x" % b for b in range(256))),
    )
    result = run(inprocess, job, texts)
    expected = np.zeros(256, np.int64)
    for f in texts:
        expected += np.bincount(np.frombuffer(read(f.path), np.uint8), minlength=256)
    assert list(result.total) == expected.tolist()


def test_the_docs_own_reducer_runs_as_written(inprocess, texts, tmp_path):
    """docs/jobs.md's Fold subclass, in a user's own file: the least and the greatest
    word length of each file and overall, words kept whole as files are cut."""
    with open(os.path.join(REPO, "docs", "jobs.md"), encoding="utf-8") as f:
        section = f.read().split("### Your own reducer", 1)[1]
    (tmp_path / "myjobs.py").write_text(re.search(r"```python\n(.*?)```", section, re.S).group(1))
    spec = importlib.util.spec_from_file_location("myjobs", tmp_path / "myjobs.py")
    myjobs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(myjobs)
    result = run(inprocess, myjobs.WORD_RANGE, texts, read_size=64)
    lengths = {f.path: [len(w) for w in read(f.path).split()] for f in texts}
    oracle = {path: (min(n, default=2**63 - 1), max(n, default=-(2**63))) for path, n in lengths.items()}
    assert {f.path: tuple(f.value) for f in result.per_file} == oracle
    everything = [n for per_file in lengths.values() for n in per_file]
    assert tuple(result.total) == (min(everything), max(everything))


def test_max_min_and_signed_sums_per_file_and_overall_with_files_cut_into_pieces(inprocess, texts, tmp_path):
    data = {f.path: read(f.path) for f in texts}
    longest = {path: max(len(line) for line in d.split(b"\n")) for path, d in data.items()}
    result = run(inprocess, mr.LongestLine(), texts, read_size=64, max_pieces=3)
    assert len(Plan(texts, 64, "lines").pieces) > 2 * len(texts)  # files were cut: a file's value folds its pieces
    assert result.total == max(longest.values())
    assert {f.path: f.value for f in result.per_file} == longest
    document_path = str(tmp_path / "longest.json")
    result.write(document_path)
    with open(document_path) as f:
        document = json.load(f)
    assert document["longest_line_bytes"] == max(longest.values())
    assert {r["path"]: r["longest_line_bytes"] for r in document["per_file"]} == longest

    # A user's reducers: the shortest word of each file (Min), and a sum that goes negative.
    def shortest_word(text):
        lengths = tf.strings.length(tf.strings.split(text))
        return tf.cast(tf.reduce_min(tf.concat([lengths, [1 << 30]], 0)), tf.int64)

    def words_minus_lines(text):
        from tf2_mapreduce.jobs.lines import count_lines
        from tf2_mapreduce.jobs.wordcount import count_words

        return count_words(text) - 2 * count_lines(text)

    shortest = run(
        inprocess,
        mr.Job("shortest", mr.per_text(shortest_word), mr.Min("shortest word", "bytes"), records="words"),
        texts,
        read_size=64,
    )
    oracle_shortest = {path: min([len(w) for w in d.split()] + [1 << 30]) for path, d in data.items()}
    assert shortest.total == min(oracle_shortest.values())
    assert {f.path: f.value for f in shortest.per_file} == oracle_shortest
    signed = run(inprocess, mr.Job("signed", mr.per_text(words_minus_lines), mr.Sum("points")), texts)
    per_file = {path: len(d.split()) - 2 * len(oracle_lines(d)) for path, d in data.items()}
    assert any(v < 0 for v in per_file.values())  # negative values are values, not "not done yet"
    assert signed.total == sum(per_file.values()) and signed.files_done == len(texts) and not signed.skipped
    assert {f.path: f.value for f in signed.per_file} == per_file


@pytest.mark.parametrize("read_size, native_ops", [(7, True), (100, False)])
def test_every_job_is_exact_when_files_are_cut_into_pieces(inprocess, texts, monkeypatch, read_size, native_ops):
    """With the native ops, pieces smaller than most words; without them (no C++
    compiler), every job in TensorFlow's own ops, pieces of a few lines."""
    if not native_ops:
        monkeypatch.setattr(native, "load", lambda: None)
    files = texts[-6:]  # among them lines.txt, with its unterminated and non-UTF-8 lines
    data = [read(f.path) for f in files]
    options = dict(read_size=read_size, split_size=150)
    words = run(inprocess, mr.WordCount(), files, **options)
    assert len(Plan(files, read_size, "words").pieces) > 2 * len(files)
    assert words.total == sum(len(d.split()) for d in data)
    assert [f.value for f in words.per_file] == [len(d.split()) for d in data]
    freq = run(inprocess, mr.WordFreq(), files, **options)
    assert collections.Counter(dict(freq.entries())) == collections.Counter(w for d in data for w in d.split())
    wc = run(inprocess, mr.Wc(), files, **options)
    assert wc.total == (sum(len(oracle_lines(d)) for d in data), words.total, sum(len(d) for d in data))
    grep = run(inprocess, mr.Grep(".*the.*"), files, **options)
    assert grep.total == sum(oracle_grep(d, ".*the.*") for d in data)


def test_a_file_changed_under_a_range_read_is_named_with_its_bytes(inprocess, tmp_path):
    big = tmp_path / "big.txt"
    big.write_bytes(b"alpha beta gamma delta " * 40)
    small = tmp_path / "small.txt"
    small.write_bytes(b"one two")
    files = expand([str(big), str(small)]).files
    job = job_run(inprocess, mr.WordCount(), files, read_size=300, on_error="skip")
    big.write_bytes(b"alpha beta " * 3)  # planned already: its pieces now cover bytes it no longer has
    result = job.run()
    assert result.total == 2
    assert result.skipped == [
        ("%s (bytes %d-%d)" % (big, p.start, p.end), "changed size since it was listed")
        for p in job.plan.pieces
        if p.file == 0
    ]
    assert result.files_done == 1


@pytest.mark.parametrize("job_name", ["wordcount", "wordfreq"])
def test_bad_files_among_many_are_found_in_parts_and_the_rest_counted_once(inprocess, tmp_path, job_name):
    """A step reads all its files at once, so a bad one fails the whole step: its files
    run again cut in parts, round after round, not one step per file."""
    paths = write_corpus(str(tmp_path / "corpus"), 3000, seed=21, max_words=20)
    files = expand([str(tmp_path / "corpus")]).files
    deleted, grown = files[100].path, files[2457].path
    sizes = {f.path: f.size for f in files}
    os.unlink(deleted)
    with open(grown, "ab") as f:
        f.write(b" more")
    job = {"wordcount": mr.WordCount(), "wordfreq": mr.WordFreq()}[job_name]
    reports = []
    result = run(inprocess, job, files, on_error="skip", on_progress=reports.append)
    good = [p for p in paths if p not in (deleted, grown)]
    assert sorted(result.skipped) == sorted(
        [
            (deleted, "no such file or directory (it was there when the inputs were listed)"),
            (grown, "changed since it was listed (%d bytes then, %d now)" % (sizes[grown], sizes[grown] + 5)),
        ]
    )
    if job_name == "wordcount":
        assert result.total == oracle_words(good)
        assert [(f.path, f.value) for f in result.per_file] == [(p, oracle_words([p])) for p in good]
    else:
        assert collections.Counter(dict(result.entries())) == oracle_counter(good)
    # The first round packs about 3000 / 16 files a step (8 steps for each of 2 workers):
    # one step per file of the two failed steps would be twice that many steps.
    assert sum(result.steps_per_worker) < 3000 // 16, (result.steps_per_worker, reports[-1].rounds_rerun)


def test_distinct_counts_each_key_once(inprocess, zipf, tmp_path):
    files, oracle = zipf

    def words(texts):
        return tf.strings.split(texts).flat_values

    job = mr.Job("distinct", words, mr.Distinct(unit="words"), records="words", autograph=False)
    reports = []
    result = run(inprocess, job, files, max_pieces=3, on_progress=reports.append, progress_every=0.05)
    assert result.total == result.distinct == len(oracle) >= 20_000
    assert result.describe() == "%d distinct words" % len(oracle)
    assert collections.Counter(dict(result.entries())) == oracle
    assert reports and all(0 <= r.value <= len(oracle) for r in reports) and reports[-1].value == len(oracle)
    path = str(tmp_path / "distinct.json")
    result.write(path)
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    assert document["distinct_words"] == len(oracle) and "total_words" not in document
    ordered = sorted(oracle.items(), key=lambda kv: (-kv[1], kv[0]))
    assert [(output.unescape(word), count) for word, count in document["words"]] == ordered
    assert "Distinct" in mr.__all__
