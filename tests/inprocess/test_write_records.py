"""Jobs that write records (`Records`): every record map_fn returns, once, in input order,
in the shards of data/, against plain Python (`bytes.split`, a TFRecord reader of its own);
the same bytes however the pieces are packed into steps. On the in-process cluster."""

import glob
import gzip
import os

import numpy as np
import pytest
import tensorflow as tf
from helpers.corpora import write_corpus, write_examples
from helpers.oracles import data_digest, read_tfrecords
from helpers.processes import run_job

import tf2_mapreduce as mr
from tf2_mapreduce.errors import MapOutputError, OutputError, UsageError
from tf2_mapreduce.outputs.directory import MANIFEST, PIECES
from tf2_mapreduce.outputs.sinks import shards


def _kept(lines):
    """The user's job below: the non-empty lines of even length, each with its length."""
    keep = (tf.strings.length(lines) > 0) & (tf.strings.length(lines) % 2 == 0)
    kept = tf.boolean_mask(lines, keep)
    return tf.strings.join([tf.strings.as_string(tf.strings.length(kept)), kept], separator=":")


def even_lines(texts):
    return _kept(tf.strings.split(texts, "\n").flat_values)


def oracle_even_lines(paths):
    out = []
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
        out += [b"%d:%s" % (len(line), line) for line in data.split(b"\n") if line and len(line) % 2 == 0]
    return out


JOB = mr.Job("even_lines", even_lines, mr.Records(num_shards=3))


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    """Text files of one piece, of several (read_size 4096), and gzip'd (streamed)."""
    directory = str(tmp_path_factory.mktemp("texts"))
    paths = write_corpus(directory, 12, seed=4, max_words=3000)
    for path in paths[:3]:
        with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
            g.write(f.read())
        os.remove(path)
    return sorted(glob.glob(os.path.join(directory, "*")))


def written(output_dir):
    """The records of data/, shard by shard, read in plain Python; and the shards' names."""
    names = sorted(os.listdir(os.path.join(output_dir, shards.DATA)))
    records = [r for name in names for r in read_tfrecords(os.path.join(output_dir, shards.DATA, name))]
    return records, names


def write(cluster, job, paths, output_dir, **options):
    result = run_job(cluster, job, paths, output_dir=str(output_dir), **options)
    return result, result.write_dir(str(output_dir))


def test_a_users_job_writes_every_record_once_in_input_order(inprocess, texts, tmp_path):
    out = tmp_path / "out"
    result, summary = write(inprocess, JOB, texts, out, read_size=4096)
    records, names = written(out)
    want = oracle_even_lines(texts)
    assert records == want
    assert names == [shards.shard_name(k, 3) for k in range(3)]
    assert result.total == summary["records"] == len(want)
    assert [f.value for f in result.per_file] == [len(oracle_even_lines([p])) for p in texts]
    # The pieces' files are gone; the manifest lists the shards, and nothing else is there.
    assert sorted(os.listdir(out)) == [MANIFEST, shards.DATA]
    # TensorFlow reads the shards as one stream of records each, as a trainer would.
    read = [r.numpy() for r in tf.data.TFRecordDataset(sorted(glob.glob(str(out / "data/*"))), "GZIP")]
    assert read == want


def test_the_same_bytes_however_pieces_are_packed_into_steps(inprocess, texts, tmp_path):
    digests = set()
    for n, options in enumerate(({}, {"max_pieces": 1}, {"split_size": 5000})):
        write(inprocess, JOB, texts, tmp_path / str(n), read_size=4096, **options)
        digests.add(data_digest(tmp_path / str(n)))
    assert len(digests) == 1


def test_a_result_written_again_replaces_the_old_shards_whole(inprocess, texts, tmp_path):
    out = tmp_path / "out"
    write(inprocess, JOB, texts, out, read_size=4096)
    job = mr.Job("even_lines", even_lines, mr.Records(num_shards=2))
    write(inprocess, job, texts[:4], out, read_size=4096)
    records, names = written(out)
    assert records == oracle_even_lines(texts[:4])
    assert names == [shards.shard_name(k, 2) for k in range(2)]


def test_records_of_tfrecord_inputs_resharded_in_order(inprocess, tmp_path):
    paths = write_examples(str(tmp_path / "in"), 5, 300, seed=8, compressions=("GZIP", "", "ZLIB"))
    result, summary = write(inprocess, mr.Reshard(num_shards="4"), paths, tmp_path / "out", read_size=20_000)
    records, names = written(tmp_path / "out")
    assert records == [r for p in paths for r in read_tfrecords(p)]
    assert len(names) == 4 and summary == {"records": 1500, "shards": 4, "bytes": summary["bytes"]}


def test_more_shards_than_pieces_leaves_empty_shards_that_read_as_none(inprocess, texts, tmp_path):
    job = mr.Job("even_lines", even_lines, mr.Records(num_shards=20))
    write(inprocess, job, texts[:2], tmp_path / "out")
    records, names = written(tmp_path / "out")
    assert records == oracle_even_lines(texts[:2]) and len(names) == 20
    empty = [n for n in names if not read_tfrecords(str(tmp_path / "out" / "data" / n))]
    assert len(empty) >= 18
    for name in empty:
        assert not list(tf.data.TFRecordDataset(str(tmp_path / "out" / "data" / name), "GZIP"))


def test_a_job_that_keeps_nothing_writes_shards_of_no_records(inprocess, texts, tmp_path):
    job = mr.Job("nothing", lambda texts: tf.zeros([0], tf.string), mr.Records(num_shards=2))
    result, summary = write(inprocess, job, texts, tmp_path / "out", read_size=4096)
    assert result.total == 0 and summary["records"] == 0
    assert written(tmp_path / "out") == ([], [shards.shard_name(k, 2) for k in range(2)])


def test_map_fn_returning_numbers_fails_naming_what_it_returned(inprocess, texts, tmp_path):
    job = mr.Job("lengths", lambda texts: tf.strings.length(texts), mr.Records())
    with pytest.raises(MapOutputError, match="map_fn returned int32 values, but Records.* a 1-D tf.string"):
        run_job(inprocess, job, texts, output_dir=str(tmp_path / "out"))


def test_a_writing_job_needs_an_output_dir_and_writes_there_only(inprocess, texts, tmp_path):
    with pytest.raises(UsageError, match="writes records: give it an output directory"):
        run_job(inprocess, JOB, texts)
    result = run_job(inprocess, JOB, texts, output_dir=str(tmp_path / "out"))
    with pytest.raises(UsageError, match="wrote its records for .*out as it ran"):
        result.write_dir(str(tmp_path / "elsewhere"))


def test_a_write_that_fails_fails_the_job_naming_the_output_not_an_input(inprocess, texts, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    # A directory that nobody, root included, can create files in.
    os.symlink("/proc/1", out / PIECES)
    with pytest.raises(OutputError, match=r"%s/\d+-\d+-0.tfrecord.gz: .*" % (out / PIECES)) as failed:
        run_job(inprocess, JOB, texts, output_dir=str(out), on_error="skip")
    assert failed.value.exit_code == 1


def test_shards_are_cut_between_pieces_near_equal_shares():
    assert shards.cuts([10, 10, 10, 10], 2).tolist() == [0, 2, 4]
    assert shards.cuts([10, 10, 10, 10], 3).tolist() == [0, 1, 2, 4]
    # A piece larger than a share: the shards it would have filled are empty.
    assert shards.cuts([1, 100, 1], 4).tolist() == [0, 1, 1, 1, 3]
    assert shards.cuts([], 2).tolist() == [0, 0, 0]
    # By size: one shard per SHARD_BYTES, at least one.
    assert shards.cuts([shards.SHARD_BYTES] * 3, 0).tolist() == [0, 1, 2, 3]
    assert shards.cuts([5], 0).tolist() == [0, 1]
    sizes = np.random.default_rng(1).integers(0, 1000, 500)
    bounds = shards.cuts(sizes, 7)
    assert len(bounds) == 8 and (np.diff(bounds) >= 0).all() and bounds[-1] == 500


def test_a_resumed_run_maps_again_only_the_pieces_whose_files_are_not_in_its_output_dir(
    inprocess, texts, tmp_path, caplog
):
    checkpoint = str(tmp_path / "ckpt")
    first = run_job(
        inprocess, JOB, texts, output_dir=str(tmp_path / "first"), checkpoint_dir=checkpoint, read_size=4096
    )
    assert first.resumed_from is None
    # Resumed into its own directory, whose pieces are all there: nothing mapped again.
    again, _ = write(inprocess, JOB, texts, tmp_path / "first", checkpoint_dir=checkpoint, read_size=4096)
    assert again.files_resumed == len(texts) and sum(again.steps_per_worker) == 0
    assert "have no files" not in caplog.text
    # The same checkpoint, another output directory: none of its pieces' files are there.
    elsewhere, _ = write(inprocess, JOB, texts, tmp_path / "elsewhere", checkpoint_dir=checkpoint, read_size=4096)
    assert elsewhere.resumed_from is not None and sum(elsewhere.steps_per_worker) > 0
    assert "have no files in %s" % (tmp_path / "elsewhere" / PIECES) in caplog.text
    assert written(tmp_path / "elsewhere")[0] == oracle_even_lines(texts)
    assert data_digest(tmp_path / "first") == data_digest(tmp_path / "elsewhere")


def test_the_docs_job_that_writes_records_runs_as_written(inprocess, texts, tmp_path):
    """docs/jobs.md's ERRORS, in a user's own file: the lines holding "error", every one
    once, in input order."""
    import importlib.util
    import re

    from helpers.processes import REPO

    with open(os.path.join(REPO, "docs", "jobs.md"), encoding="utf-8") as f:
        section = f.read().split("This one, in `errors.py`", 1)[1]
    (tmp_path / "errors_job.py").write_text(re.search(r"```python\n(.*?)```", section, re.S).group(1))
    spec = importlib.util.spec_from_file_location("errors_job", tmp_path / "errors_job.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    paths = []
    for n in range(3):
        path = tmp_path / ("log%d.txt" % n)
        path.write_bytes(b"".join(b"line %d %s\n" % (k, b"error" if k % 3 == n else b"fine") for k in range(50)))
        paths.append(str(path))
    write(inprocess, module.ERRORS, paths, tmp_path / "out", read_size=300)
    want = [line for p in paths for line in open(p, "rb").read().split(b"\n") if b"error" in line]
    assert written(tmp_path / "out")[0] == want
