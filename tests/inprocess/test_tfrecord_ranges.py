"""Uncompressed TFRecord files cut into byte ranges, on the in-process cluster: vocab and
recordcount over records of random sizes (0 bytes to several MB) whose payloads hold
valid-looking headers equal to records parsed one by one; a payload that holds whole
records and a corrupt byte fail the job naming the file and the offset, never counting a
record twice or never. (Where the cuts fall: unit/test_tfrecord_cuts.py.)"""

import os

import pytest
from helpers.corpora import PLANTED_READ_SIZE as READ_SIZE
from helpers.corpora import framed, write_planted_tfrecord
from helpers.oracles import oracle_vocab, read_tfrecords, record_starts

import tf2_mapreduce as mr
from tf2_mapreduce.errors import JobFailed
from tf2_mapreduce.inputs.listing import expand
from tf2_mapreduce.inputs.plan import Plan

FEATURES = [("query", "string"), ("user_id", "int64")]


@pytest.fixture(scope="module")
def big_file(tmp_path_factory):
    """One uncompressed TFRecord file of about 14 MB: mostly small examples, some empty
    ones (0 bytes), some of up to 3 MB, payloads planted with headers that check."""
    return write_planted_tfrecord(str(tmp_path_factory.mktemp("ranges") / "one.tfrecord"))


def test_recordcount_and_vocab_over_a_split_file_equal_the_oracle(inprocess, big_file):
    records = read_tfrecords(big_file)
    counted = inprocess.run(mr.RecordCount(), [big_file], read_size=READ_SIZE, split_size=READ_SIZE)
    assert counted.total == len(records)
    assert [(f.path, f.value) for f in counted.per_file] == [(big_file, len(records))]
    assert counted.bytes_done == os.path.getsize(big_file)
    oracle = oracle_vocab([big_file], FEATURES)
    vocab = inprocess.run(mr.Vocab(features=FEATURES), [big_file], read_size=READ_SIZE, split_size=READ_SIZE)
    assert vocab.total == oracle["examples"] == len(records)
    table = vocab.table()
    for name, _ in FEATURES:
        assert oracle["counts"][name]
        assert {term: count for (feature, term), count in table.items() if feature == name} == oracle["counts"][name]


def nested_file(path, small_before):
    """`small_before` small records, then one whose payload is a TFRecord stream of its
    own after 500 bytes, then 50 small ones; returns (the big record's offset, its payload)."""
    inner = framed(b"inner one") + framed(b"inner two")
    big = b"x" * 500 + inner
    before = b"".join(framed(b"s%03d" % i) for i in range(small_before))
    path.write_bytes(before + framed(big) + b"".join(framed(b"r%d" % i * 40) for i in range(50)))
    return len(before), big


def test_a_cut_follows_records_lengths_past_a_payload_that_holds_records(inprocess, tmp_path):
    # Cuts after 100 bytes fall in the big record's payload, on a record of its own; a few
    # hops from the last cut, following lengths, find the record after it instead.
    path = tmp_path / "nested.tfrecord"
    nested_file(path, small_before=2)
    plan = Plan(expand([str(path)]).files, 100, "tfrecord")
    starts = set(record_starts(str(path)))
    assert len(plan.pieces) > 5 and {p.start for p in plan.pieces} <= starts
    assert inprocess.run(mr.RecordCount(), [str(path)], read_size=100).total == 53


@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_a_payload_holding_whole_records_fails_the_job_at_the_offset(inprocess, tmp_path, on_error):
    # After 80 small records, too many to follow, a cut is found by scanning: in the big
    # record's payload, at the first of its own records, which checks in every way. The
    # reader of the range before it finds its record running past the cut, and the job
    # fails saying where, skipping nothing: the ranges inside the payload read records
    # that are not the file's. The range from the false cut fails too, at the big
    # record's checksum after the payload's records: with on_error=fail, whichever of
    # the two is pinned first fails the job (TF cancels a round at its first error).
    path = tmp_path / "nested.tfrecord"
    offset, big = nested_file(path, small_before=80)
    read_size = offset + 100
    cut = offset + 12 + 500
    with pytest.raises(JobFailed) as failed:
        inprocess.run(mr.RecordCount(), [str(path)], read_size=read_size, on_error=on_error)
    message = str(failed.value)
    assert str(path) in message
    misaligned = "records do not line up at %d: the record at %d is %d bytes long" % (cut, offset, len(big))
    inner_end = cut + len(framed(b"inner one") + framed(b"inner two"))
    after_the_cut = "%s (bytes %d-" % (path, cut)
    if on_error == "skip" or misaligned in message:
        assert misaligned in message and "read it whole" in message, message
    else:
        assert after_the_cut in message and "corrupted record at %d" % inner_end in message, message
    # Read whole, it is a good file.
    assert inprocess.run(mr.RecordCount(), [str(path)]).total == 131


def test_a_corrupt_byte_mid_file_fails_the_job_at_its_record(inprocess, big_file, tmp_path):
    data = bytearray(open(big_file, "rb").read())
    starts = record_starts(big_file)
    # A record in the middle with data to damage: its data's checksum no longer checks.
    number = next(n for n in range(len(starts) // 2, len(starts)) if starts[n + 1] - starts[n] > 40)
    victim = starts[number]
    data[victim + 12 + 20] ^= 0x40
    path = tmp_path / "corrupt.tfrecord"
    path.write_bytes(bytes(data))
    with pytest.raises(JobFailed) as failed:
        inprocess.run(mr.RecordCount(), [str(path)], read_size=READ_SIZE)
    message = str(failed.value)
    assert str(path) in message and "corrupted record at %d" % (victim + 12) in message
    skipped = inprocess.run(mr.RecordCount(), [str(path)], read_size=READ_SIZE, on_error="skip")
    assert len(skipped.skipped) == 1 and str(path) in skipped.skipped[0][0]
