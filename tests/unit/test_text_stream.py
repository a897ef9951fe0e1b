"""The native text stream (tf2_mapreduce/native/source.cc, text_chunks.cc and
record_dataset.cc), built on this machine, against Python's gzip and zlib: its chunks
concatenate to the file's text byte for byte, each ends at a separator and is about
chunk_bytes long, every gzip member is read, a truncated or corrupt file is an error that
names it, and a file of 300 MB is streamed in far less memory than its size. Without the
native ops there is no stream: it is refused. Its TFRecord reader gives
tf.data.TFRecordDataset's records from a good file, and an error naming the file, with
TFRecordDataset's offsets, where that reader gives a short count or an error."""

import gzip
import itertools
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import textwrap
import zlib

import pytest
import tensorflow as tf
from helpers.processes import REPO, die_with_the_tests

from tf2_mapreduce import native
from tf2_mapreduce.errors import UsageError, op_error_cause
from tf2_mapreduce.inputs import readers as text_stream
from tf2_mapreduce.run import failures

LINES = b"\n"
WORDS = b" \t\n\r\x0b\x0c"


def compress(data, compression):
    if compression == "GZIP":
        return gzip.compress(data)
    if compression == "ZLIB":
        return zlib.compress(data)
    return data


def expected_chunks(data, chunk_bytes, separators):
    """The oracle: each chunk the shortest run left of at least chunk_bytes bytes that
    ends with a separator, else the rest."""
    cut = re.compile(b"[" + re.escape(separators) + b"]")
    chunks, start = [], 0
    while start < len(data):
        found = cut.search(data, start + chunk_bytes - 1)
        end = found.end() if found else len(data)
        chunks.append(data[start:end])
        start = end
    return chunks


def longest_record(data, separators):
    return max((len(r) for r in re.findall(b"[^" + re.escape(separators) + b"]*.", data, re.S)), default=0)


def native_chunks(path, compression, chunk_bytes, separators):
    dataset = text_stream.chunks(str(path), compression, chunk_bytes, separators)
    # In batches: tens of thousands of elements one by one through Python take seconds.
    return list(itertools.chain.from_iterable(dataset.batch(4096).as_numpy_iterator()))


def text(seed=0, lines=3000):
    """Lines of 0 to 300 bytes, some of 5000, with \\r, \\r\\n, empty lines, tabs,
    NUL and invalid UTF-8; no final newline."""
    rng = random.Random(seed)
    alphabet = b"abc xyz\t\r\x00\xff\xc2\xa0.,"
    out = []
    for number in range(lines):
        if number % 500 == 7:  # a long record for lines and for words alike
            out.append(b"\xffword" * 1000)
        length = rng.choice([0, 1, 40, rng.randrange(300)])
        out.append(bytes(rng.choice(alphabet) for _ in range(length)))
        out.append(rng.choice([b"\n", b"\n", b"\r\n", b"\n\n"]))
    return b"".join(out) + b"no final newline\r"


DATA = text()


@pytest.fixture(params=["", "GZIP", "ZLIB"])
def compression(request):
    return request.param


def write(tmp_path, data, compression, name="input"):
    path = tmp_path / name
    path.write_bytes(compress(data, compression))
    return path


def test_the_native_op_is_built_here():
    assert native.load() is not None, native.unavailable()


@pytest.mark.parametrize("separators", [LINES, WORDS])
def test_chunks_are_the_text_cut_at_separators(tmp_path, compression, separators):
    path = write(tmp_path, DATA, compression)
    longest = longest_record(DATA, separators)
    assert longest >= 5000
    for chunk_bytes in [1, 7, 300, 4096, 100_000, 1 << 40]:
        chunks = native_chunks(path, compression, chunk_bytes, separators)
        assert b"".join(chunks) == DATA
        assert chunks == expected_chunks(DATA, chunk_bytes, separators)
        for chunk in chunks[:-1]:
            assert chunk[-1:] in [bytes([s]) for s in separators]
            assert chunk_bytes <= len(chunk) <= chunk_bytes + longest
        assert 0 < len(chunks[-1]) <= chunk_bytes + longest


def test_chunks_larger_than_a_read_step(tmp_path, compression):
    # The op reads at most 16 MiB at a time towards a chunk's size.
    data = (b"a line of some forty bytes or so, ok\r\n" * 1_200_000)[:-3]
    path = write(tmp_path, data, compression)
    chunk_bytes = (16 << 20) + 12345
    chunks = native_chunks(path, compression, chunk_bytes, LINES)
    assert [len(c) for c in chunks] == [len(c) for c in expected_chunks(data, chunk_bytes, LINES)]
    assert b"".join(chunks) == data


def test_an_empty_file_has_no_chunks(tmp_path, compression):
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert native_chunks(empty, compression, 10, LINES) == []
    if compression:
        compressed_empty = write(tmp_path, b"", compression, "compressed-empty")
        assert native_chunks(compressed_empty, compression, 10, LINES) == []


def test_a_file_without_a_separator_is_one_chunk(tmp_path, compression):
    data = b"x\r" * 50_000
    path = write(tmp_path, data, compression)
    assert native_chunks(path, compression, 10, LINES) == [data]
    assert native_chunks(path, compression, 1 << 20, LINES) == [data]


def test_every_member_of_a_multi_member_gzip_is_read(tmp_path):
    members = [DATA[:1000], b"", DATA[1000:], b"last line\n"]
    data = b"".join(gzip.compress(m) for m in members) + b"\0" * 7  # zero padding, as gzip allows
    assert gzip.decompress(data) == b"".join(members)
    path = tmp_path / "cat.gz"
    path.write_bytes(data)
    assert b"".join(native_chunks(path, "GZIP", 333, LINES)) == gzip.decompress(data)


def broken_files(data):
    """(name, compression, bytes, the start of the error's cause)."""
    gz, zl = gzip.compress(data), zlib.compress(data)
    corrupt_gz = bytearray(gz)
    corrupt_gz[len(gz) // 2] ^= 0x55
    return [
        ("in-header.gz", "GZIP", gz[:5], "truncated GZIP file"),
        ("half.gz", "GZIP", gz[: len(gz) // 2], "truncated GZIP file"),
        ("no-trailer.gz", "GZIP", gz[:-8], "truncated GZIP file"),
        ("short-trailer.gz", "GZIP", gz[:-1], "truncated GZIP file"),
        ("second-member-cut.gz", "GZIP", gz + gz[:100], "truncated GZIP file"),
        ("corrupt.gz", "GZIP", bytes(corrupt_gz), "corrupt GZIP file: inflate() failed with error -3"),
        ("wrong-crc.gz", "GZIP", gz[:-8] + b"\0\0\0\0" + gz[-4:], "corrupt GZIP file: inflate() failed with error -3"),
        ("junk-after.gz", "GZIP", gz + b"junk", "corrupt GZIP file: inflate() failed with error -3"),
        ("not-gzip.gz", "GZIP", data[:100], "corrupt GZIP file: inflate() failed with error -3"),
        ("half.z", "ZLIB", zl[: len(zl) // 2], "truncated ZLIB file"),
        ("no-checksum.z", "ZLIB", zl[:-4], "truncated ZLIB file"),
        (
            "wrong-checksum.z",
            "ZLIB",
            zl[:-1] + bytes([zl[-1] ^ 1]),
            "corrupt ZLIB file: inflate() failed with error -3",
        ),
    ]


@pytest.mark.parametrize("case", broken_files(DATA), ids=lambda case: case[0])
def test_a_truncated_or_corrupt_file_is_an_error_naming_it(tmp_path, case):
    name, compression, data, cause = case
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(tf.errors.DataLossError) as e:
        native_chunks(path, compression, 1000, LINES)
    failure = failures.file_failure(op_error_cause(e.value))
    assert failure.path == str(path)
    assert failure.why.startswith(cause), failure.why


def test_a_missing_file_is_not_found_by_name(tmp_path):
    path = tmp_path / "missing.gz"
    with pytest.raises(tf.errors.NotFoundError) as e:
        native_chunks(path, "GZIP", 1000, LINES)
    assert failures.file_failure(op_error_cause(e.value)).path == str(path)


@pytest.mark.parametrize("bad", [dict(compression="BZIP2"), dict(chunk_bytes=0), dict(separators=b"")])
def test_bad_arguments_are_refused(tmp_path, bad):
    path = write(tmp_path, DATA, "")
    arguments = dict(compression="", chunk_bytes=10, separators=LINES) | bad
    with pytest.raises(tf.errors.InvalidArgumentError):
        native_chunks(path, **arguments)


def count(path, compression, chunk_bytes, separators):
    """Chunks, bytes, and chunks that end with "\\n", as a map step would count them."""
    zero = tf.constant(0, tf.int64)

    def add(state, chunk):
        ends = tf.cast(tf.strings.substr(chunk, tf.strings.length(chunk) - 1, 1) == "\n", tf.int64)
        return state[0] + 1, state[1] + tf.cast(tf.strings.length(chunk), tf.int64), state[2] + ends

    return text_stream.chunks(path, compression, chunk_bytes, separators).reduce((zero, zero, zero), add)


@pytest.fixture
def without_native(monkeypatch):
    # As native.disable leaves it: whether or not this process loaded the library before.
    monkeypatch.setattr(native, "_loaded", {"ops": None, "why": "left out by the test"})


def test_inside_a_tf_function_with_reduce(tmp_path, compression):
    path = write(tmp_path, DATA, compression)
    expected = expected_chunks(DATA, 4096, LINES)
    ends = sum(c.endswith(b"\n") for c in expected)
    # Every argument a tensor, as in a map step; traced here, so after load() is replaced.
    counted = tf.function(count, autograph=False)(
        tf.constant(str(path)), tf.constant(compression), tf.constant(4096, tf.int64), tf.constant(LINES)
    )
    assert [int(t.numpy()) for t in counted] == [len(expected), len(DATA), ends]


def test_without_the_native_library_there_is_no_stream_to_read_short(tmp_path, compression, without_native):
    """TensorFlow's own readers read a truncated file short without an error
    (docs/runtime.md, D1-D2): without the native ops a stream is refused, not made of them."""
    path = write(tmp_path, DATA, compression)
    with pytest.raises(UsageError, match="reading a compressed or TFRecord file needs the native ops"):
        text_stream.chunks(str(path), compression, 10, LINES)
    with pytest.raises(UsageError, match="reading a compressed or TFRecord file needs the native ops"):
        text_stream.records(str(path), compression)


MEMORY_PROBE = textwrap.dedent(
    """
    import json, resource, sys
    import tensorflow as tf
    from tf2_mapreduce import native
    from tf2_mapreduce.inputs import readers as text_stream
    assert native.load() is not None, native.unavailable()

    @tf.function(autograph=False)
    def count(path):
        zero = tf.constant(0, tf.int64)
        return text_stream.chunks(path, "GZIP", 1 << 20, "\\n").reduce(
            (zero, zero), lambda s, c: (s[0] + 1, s[1] + tf.cast(tf.strings.length(c), tf.int64))
        )

    count(tf.constant(sys.argv[2]))  # traced and run once on a small file first
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    chunks, size = count(tf.constant(sys.argv[1]))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(dict(chunks=int(chunks), size=int(size), grew=(after - before) * 1024)))
    """
)


def test_a_large_gzip_file_is_streamed_in_bounded_memory(tmp_path):
    line = b"".join(b"the quick brown fox %d jumps over the lazy dog\r\n" % i for i in range(100))
    block = (line * (1 + (1 << 20) // len(line)))[: 1 << 20]
    size = 200 << 20  # twice what it may grow by: a file held whole fails
    big, small = tmp_path / "big.gz", tmp_path / "small.gz"
    small.write_bytes(gzip.compress(block))
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)  # wbits 31: a gzip member
    with open(big, "wb") as f:
        for _ in range(size // len(block)):
            f.write(compressor.compress(block))
        f.write(compressor.flush())
    try:
        probe = subprocess.run(
            [sys.executable, "-c", MEMORY_PROBE, str(big), str(small)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
            preexec_fn=die_with_the_tests,
        )
    finally:
        os.unlink(big)
    assert probe.returncode == 0, probe.stderr[-3000:]
    result = json.loads(probe.stdout.strip().splitlines()[-1])
    assert result["size"] == size
    assert result["chunks"] >= 200
    assert result["grew"] < 100 << 20, "peak RSS grew by %d MB streaming %d MB" % (result["grew"] >> 20, size >> 20)


# TFRecord files: the records of a good file, and errors for every cut or damage.


def frame(records):
    """The records framed as a TFRecord file's bytes, as tf.io.TFRecordWriter writes them."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "framed.tfrecord")
        with tf.io.TFRecordWriter(path) as writer:
            for record in records:
                writer.write(record)
        with open(path, "rb") as f:
            return f.read()


def record_starts(framed):
    """The offset of each record, and of the end: 12 bytes of the length and its checksum,
    the data, 4 bytes of the data's checksum."""
    starts = [0]
    while starts[-1] < len(framed):
        (length,) = struct.unpack_from("<Q", framed, starts[-1])
        starts.append(starts[-1] + 12 + length + 4)
    assert starts[-1] == len(framed)
    return starts


def some_records(seed=0, count=2000):
    """Records of 0 to 600 bytes, empty ones among them, some of 100 kB and one of 1 MB,
    larger than the reader's buffer of 256 kB, so read straight into its element."""
    rng = random.Random(seed)
    records = [rng.randbytes(rng.choice([0, 1, 12, 13, rng.randrange(600)])) for _ in range(count)]
    records[500] = records[1500] = rng.randbytes(100_000)
    records[700] = rng.randbytes(1 << 20)
    records[701] = b""
    return records + [b"the last"]


RECORDS = some_records()
FRAMED = frame(RECORDS)


def native_records(path, compression):
    dataset = text_stream.records(str(path), compression)
    return list(itertools.chain.from_iterable(dataset.batch(4096).as_numpy_iterator()))


def tf_records(path, compression):
    return list(tf.data.TFRecordDataset(str(path), compression).as_numpy_iterator())


def test_records_are_those_of_tfrecord_dataset(tmp_path, compression):
    path = write(tmp_path, FRAMED, compression)
    records = native_records(path, compression)
    assert records == RECORDS
    assert records == tf_records(path, compression)


def test_an_empty_file_has_no_records(tmp_path, compression):
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert native_records(empty, compression) == []
    if compression:
        compressed_empty = write(tmp_path, b"", compression, "compressed-empty")
        assert native_records(compressed_empty, compression) == []


def test_a_record_larger_than_a_growth_step(tmp_path):
    # A record's element grows as its bytes are read, by 16 MiB at first.
    records = [b"a", bytes(range(256)) * 150_000, b"b"]
    path = tmp_path / "big.tfrecord.gz"
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    path.write_bytes(compressor.compress(frame(records)) + compressor.flush())
    assert native_records(path, "GZIP") == records


def test_a_length_the_file_does_not_hold_is_a_truncated_record(tmp_path):
    # A length of 1 TiB whose checksum matches is not allocated: the record is read as far
    # as the file goes.
    length = struct.pack("<Q", 1 << 40)
    checksum = frame([length])[-4:]  # a length's checksum is that of its 8 bytes as data
    at = record_starts(FRAMED)[2]
    path = tmp_path / "forged"
    path.write_bytes(FRAMED[:at] + length + checksum + b"some bytes")
    with pytest.raises(tf.errors.DataLossError) as e:
        native_records(path, "")
    failure = failures.file_failure(op_error_cause(e.value))
    assert failure.path == str(path)
    assert re.match("truncated record at %d(?![0-9])" % at, failure.why), failure.why


def test_every_member_of_a_multi_member_gzip_has_its_records(tmp_path):
    starts = record_starts(FRAMED)
    # Members at record boundaries, as `cat a.tfrecord.gz b.tfrecord.gz` makes them, one of
    # them empty; and members cut inside a record's header and inside its data.
    cuts = [0, starts[3], starts[3], starts[1000], starts[1200] + 7, starts[1500] + 20, len(FRAMED)]
    data = b"".join(gzip.compress(FRAMED[a:b]) for a, b in itertools.pairwise(cuts))
    assert gzip.decompress(data) == FRAMED
    path = tmp_path / "cat.tfrecord.gz"
    path.write_bytes(data)
    # TFRecordDataset stops at the empty member: 3 records and no error (TF 2.21).
    assert native_records(path, "GZIP") == RECORDS


def flushed(data, cut, wbits):
    """The compressed bytes of `data` (with a full flush at `cut`) up to `cut`: a file that
    inflates to exactly data[:cut], then ends inside its stream."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, wbits)
    head = compressor.compress(data[:cut]) + compressor.flush(zlib.Z_FULL_FLUSH)
    assert zlib.decompress(head + compressor.compress(data[cut:]) + compressor.flush(), wbits) == data
    assert zlib.decompressobj(wbits).decompress(head) == data[:cut]
    return head


def deflate(data):
    """`data` as a raw deflate stream, without a header or trailer."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush()


def broken_tfrecords(framed):
    """(name, compression, bytes, the error's cause, whether TFRecordDataset raises an error
    with that cause). Where it does not, what it does (measured with TF 2.21) is said above."""
    starts = record_starts(framed)
    at = starts[1000]  # a record of some bytes, so its data can be cut or changed
    assert starts[1001] - at > 20
    gz = gzip.compress(framed)
    flipped_data, flipped_length, flipped_checksum = bytearray(framed), bytearray(framed), bytearray(framed)
    flipped_data[at + 12 + 3] ^= 0x10
    flipped_length[at + 1] ^= 0x01
    flipped_checksum[starts[1001] - 2] ^= 0x80
    changed = framed[: starts[10]] + b"\xff" + framed[starts[10] + 1 :]
    assert changed != framed
    return [
        # TFRecordDataset: the first 1000 records, and no error.
        ("at-a-record.gz", "GZIP", flushed(framed, at, 31), "truncated GZIP file", False),
        ("at-a-record.z", "ZLIB", flushed(framed, at, 15), "truncated ZLIB file", False),
        # TFRecordDataset: every record, and no error.
        ("no-trailer.gz", "GZIP", gz[:-8], "truncated GZIP file", False),
        ("short-trailer.gz", "GZIP", gz[:-1], "truncated GZIP file", False),
        # TFRecordDataset: "truncated record at ...", as these cuts fall inside a record's data
        # (where one falls inside a record's header, it ends quietly: in-header.gz).
        ("half.gz", "GZIP", gz[: len(gz) // 2], "truncated GZIP file", False),
        ("second-member-cut.gz", "GZIP", gz + gz[:100], "truncated GZIP file", False),
        # TFRecordDataset: zlib's error, without the path.
        ("wrong-crc.gz", "GZIP", gz[:-8] + bytes(4) + gz[-4:], "corrupt GZIP file: inflate() failed", False),
        # Other bytes inflated than the gzip trailer checks: the changed record's checksum
        # fails first (the trailer is a megabyte on, past the reader's buffer).
        ("changed.gz", "GZIP", gz[:10] + deflate(changed) + gz[-8:], "corrupted record at %d" % starts[10], True),
        # TFRecordDataset: the first 1000 records, and no error: a file that ends inside the 12
        # bytes of a record's length and their checksum ends quietly, even uncompressed.
        ("in-header", "", framed[: at + 5], "truncated record at %d" % at, False),
        ("in-header.gz", "GZIP", gzip.compress(framed[: at + 11]), "truncated record at %d" % at, False),
        ("after-header", "", framed[: at + 12], "truncated record at %d" % at, True),
        ("in-data", "", framed[: at + 15], "truncated record at %d" % at, True),
        ("in-data.gz", "GZIP", gzip.compress(framed[: at + 15]), "truncated record at %d" % at, True),
        ("in-data.z", "ZLIB", zlib.compress(framed[: at + 15]), "truncated record at %d" % at, True),
        ("in-checksum", "", framed[:-1], "truncated record at %d" % starts[-2], True),
        # A data's checksum fails at the data's offset, a length's at the record's.
        ("flipped-data", "", bytes(flipped_data), "corrupted record at %d" % (at + 12), True),
        ("flipped-length", "", bytes(flipped_length), "corrupted record at %d" % at, True),
        ("flipped-checksum", "", bytes(flipped_checksum), "corrupted record at %d" % (at + 12), True),
    ]


@pytest.mark.parametrize("case", broken_tfrecords(FRAMED), ids=lambda case: case[0])
def test_a_truncated_or_corrupt_tfrecord_file_is_an_error_naming_it(tmp_path, case):
    name, compression, data, cause, tf_raises = case
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(tf.errors.DataLossError) as e:
        native_records(path, compression)
    failure = failures.file_failure(op_error_cause(e.value))
    assert failure.path == str(path)
    assert re.match(re.escape(cause) + "(?![0-9])", failure.why), failure.why
    if tf_raises:  # with the same offset, without the path
        with pytest.raises(tf.errors.DataLossError, match=cause + "(?![0-9])"):
            tf_records(path, compression)


def test_a_missing_tfrecord_file_is_not_found_by_name(tmp_path):
    path = tmp_path / "missing.tfrecord.gz"
    with pytest.raises(tf.errors.NotFoundError) as e:
        native_records(path, "GZIP")
    assert failures.file_failure(op_error_cause(e.value)).path == str(path)


def test_an_unknown_compression_is_refused_for_records(tmp_path):
    path = write(tmp_path, FRAMED, "")
    with pytest.raises(tf.errors.InvalidArgumentError, match="compression_type"):
        native_records(path, "SNAPPY")


def test_records_inside_a_tf_function_with_reduce(tmp_path, compression):
    path = write(tmp_path, FRAMED, compression)

    def count(path, compression):
        zero = tf.constant(0, tf.int64)
        return (
            text_stream.records(path, compression)
            .batch(1024)
            .reduce(
                (zero, zero),
                lambda s, b: (
                    s[0] + tf.size(b, tf.int64),
                    s[1] + tf.reduce_sum(tf.cast(tf.strings.length(b), tf.int64)),
                ),
            )
        )

    counted = tf.function(count, autograph=False)(tf.constant(str(path)), tf.constant(compression))
    assert [int(t.numpy()) for t in counted] == [len(RECORDS), sum(map(len, RECORDS))]
