"""Jobs over TFRecord files of tf.train.Example on the in-process cluster: vocab and
recordcount, against records parsed one by one by protobuf (helpers.oracles.oracle_vocab);
vocabulary files loaded by TensorFlow's own lookups."""

import collections
import contextlib
import gzip
import os
import re

import pytest
import tensorflow as tf
from helpers.corpora import VOCAB_FEATURES as FEATURES
from helpers.oracles import assert_vocabularies, oracle_vocab, read_lines, read_tfrecords, tft_ordered
from helpers.processes import run_job

import tf2_mapreduce as mr
from tf2_mapreduce.errors import InputError, JobFailed, UsageError
from tf2_mapreduce.inputs.listing import expand
from tf2_mapreduce.reducers.keys import TFT
from tf2_mapreduce.state.key_tables import KeyTables


def run(inprocess, job, specs, **options):
    return inprocess.run(job, specs, **options)


def write(result, directory, **options):
    """The vocabularies of a run's table (`Result.write_dir`); returns the summary."""
    return result.write_dir(directory, **options)


def test_vocab_matches_protobuf_record_by_record(inprocess, vocab_shards, tmp_path):
    directory, paths, oracle = vocab_shards
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


def test_recordcount_over_every_compression_counts_each_file(inprocess, vocab_shards):
    directory, paths, oracle = vocab_shards
    result = run(inprocess, mr.RecordCount(), [directory])
    assert result.total == oracle["examples"]
    assert {f.path: f.value for f in result.per_file} == {p: len(read_tfrecords(p)) for p in paths}


def test_a_name_that_contradicts_the_job_is_refused(inprocess, vocab_shards, tmp_path):
    directory, paths, _ = vocab_shards
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


def test_a_corrupt_record_and_a_truncated_gzip_file_fail_or_are_skipped(inprocess, vocab_shards, tmp_path):
    _, paths, _ = vocab_shards
    copies, bad = corrupt(paths[:12], tmp_path)  # every compression, with fewer good files to count
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


def test_vocab_needs_features_of_a_type_it_can_count(inprocess, vocab_shards, tmp_path):
    from tf2_mapreduce.jobs import features

    _, paths, _ = vocab_shards
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
    with pytest.raises(
        UsageError,
        match=r"qeury is in none of the first \d+ examples \(features there: query, \w+.*\); "
        r"if it is further on, give its type \(qeury:string or qeury:int64\)$",
    ):
        features.detect_types(features.parse_features("qeury"), paths)
    with pytest.raises(UsageError, match=r"give its type \(qeury\?:string or qeury\?:int64\)$"):
        features.detect_types(features.parse_features("query,qeury?"), paths)
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
    # Examples without a feature at all: none to name.
    with tf.io.TFRecordWriter(str(tmp_path / "empty.tfrecord")) as writer:
        writer.write(tf.train.Example().SerializeToString())
    with pytest.raises(UsageError, match=r"query is in none of the first 1 examples \(features there: none\)"):
        features.detect_types(features.parse_features("query"), [str(tmp_path / "empty.tfrecord")])
    with pytest.raises(UsageError, match=r"query is in none of the 1 examples \(features there: none\)"):
        raise features.absent_error(["query"], 1, [str(tmp_path / "empty.tfrecord")])
    # A value of another type than declared is the file's error, named with it.
    with pytest.raises(JobFailed, match=r"part-00000.tfrecord.gz: .*user_id"):
        run(inprocess, mr.Vocab([("user_id", "string")]), [paths[0]])


def test_a_stream_file_that_changed_since_it_was_listed_is_not_counted(inprocess, vocab_shards, tmp_path):
    _, paths, _ = vocab_shards
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


def _sorted(result, names):
    """{name: (the sum of its counts, its (term, count) in tf.Transform's order)}, read at once."""
    reads = result.sorted_entries([(name, TFT) for name in names])
    with contextlib.ExitStack() as reading:
        for read in reads:
            reading.callback(read.close)
        return {
            name: (read.total, [entry for terms, counts in read.chunks for entry in zip(terms, counts)])
            for name, read in zip(names, reads)
        }


def test_vocabularies_sorted_here_are_those_the_ps_tasks_sort(inprocess, vocab_shards, tmp_path, monkeypatch):
    """Each vocabulary is sorted on the ps tasks (2 here: merged on the coordinator), or,
    where they cannot (no native ops there), on the coordinator: the same bytes either way."""
    directory, _, oracle = vocab_shards
    result = run(inprocess, mr.Vocab(FEATURES), [directory])
    names = [name for name, _ in FEATURES]
    summaries, by_ps = write(result, str(tmp_path / "ps")), _sorted(result, names)
    monkeypatch.setattr(KeyTables, "sorts", property(lambda self: False))
    assert write(result, str(tmp_path / "here"))["vocabularies"] == summaries["vocabularies"]
    assert _sorted(result, names) == by_ps
    for name in names:
        counts = oracle["counts"][name]
        assert by_ps[name] == (sum(counts.values()), tft_ordered(counts))
    files = sorted(os.listdir(tmp_path / "ps"))
    assert files == sorted(os.listdir(tmp_path / "here"))
    written = [file for file in files if file.startswith(("vocab_", "counts_", "unwritable_"))]
    assert len(written) == 3 * len(names)
    for file in written:  # beside the summary and the run's record, of its timings
        assert (tmp_path / "ps" / file).read_bytes() == (tmp_path / "here" / file).read_bytes(), file
    assert_vocabularies(str(tmp_path / "here"), oracle)
