"""Re-measures what a job that writes records relies on in how GZIP'd TFRecord files are read
and written (docs/runtime.md, W1-W3): prints what was seen, PASS or FAIL per fact; exit
status 1 if any differs. A few seconds (the native ops built on a machine's first run)."""

import gzip
import os
import sys
import tempfile
import zlib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import tf2_mapreduce  # noqa: E402, F401  (keeps TensorFlow's start-up lines off stderr)


def frames(records):
    """TFRecord's frames of `records`, written by TensorFlow (no compression)."""
    import tensorflow as tf

    path = tempfile.mktemp(suffix=".tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for record in records:
            writer.write(record)
    with open(path, "rb") as f:
        data = f.read()
    os.remove(path)
    return data


def read_by_tf(path):
    import tensorflow as tf

    return [r.numpy() for r in tf.data.TFRecordDataset(path, "GZIP")]


def write(data):
    path = tempfile.mktemp(suffix=".tfrecord.gz")
    with open(path, "wb") as f:
        f.write(data)
    return path


def raw_deflate(data):
    """`data` as a raw deflate stream ending on a byte boundary (a sync flush, no final
    block), as native/write_records.cc writes a piece."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, -15, 8)
    return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)


def native_piece(records):
    """The bytes of the piece file the package's native op writes of `records`
    (native/write_records.cc, TensorFlow's own zlib)."""
    from tf2_mapreduce import native

    path = tempfile.mktemp(suffix=".piece")
    native.load().tf2_mapreduce_write_records(path, records, 0)
    with open(path, "rb") as f:
        data = f.read()
    os.remove(path)
    return data


def main():
    first, second = [b"a" * 10, b"b" * 20], [b"c" * 30]
    members = [gzip.compress(frames(first), mtime=0), gzip.compress(b"", mtime=0), gzip.compress(frames(second))]
    several = write(b"".join(members))
    pieces = [frames(first), b"", frames(second)]
    body = b"".join(raw_deflate(p) for p in pieces)
    whole = b"".join(pieces)
    trailer = zlib.crc32(whole).to_bytes(4, "little") + len(whole).to_bytes(4, "little")
    joined = write(bytes([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 3]) + body + bytes([3, 0]) + trailer)
    facts = [
        (
            "W1",
            "TensorFlow's GZIP reader stops, without an error, at a member that yields nothing "
            "(records of 3 GZIP members, the middle one empty)",
            read_by_tf(several),
            lambda seen: seen == first,
        ),
        (
            "W1",
            "Python's gzip reads every member of the same file",
            len(gzip.decompress(open(several, "rb").read())),
            lambda seen: seen == len(whole),
        ),
        (
            "W2",
            "raw deflate pieces (sync flush) joined between one GZIP header and trailer: TensorFlow reads every record",
            read_by_tf(joined),
            lambda seen: seen == first + second,
        ),
        (
            "W2",
            "the same file: Python's gzip reads it whole, its CRC-32 and length checked",
            gzip.decompress(open(joined, "rb").read()) == whole,
            lambda seen: seen is True,
        ),
        (
            "W3",
            "the native op (TensorFlow's zlib) writes the same bytes for the same records, time after time",
            len({native_piece(first * 50) for _ in range(5)}),
            lambda seen: seen == 1,
        ),
    ]
    failed = 0
    for fact_id, what, seen, check in facts:
        ok = check(seen)
        failed += not ok
        shown = repr(seen)
        print("%s  %s %s: %s" % ("PASS" if ok else "FAIL", fact_id, what, shown[:200]))
    os.remove(several)
    os.remove(joined)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
