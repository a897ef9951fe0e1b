"""Re-measures what TensorFlow's own readers do with the files tf2_mapreduce reads and writes
(docs/runtime.md, D1-D6): prints what was seen, PASS or FAIL per check; exit status 1 if any differs."""

import argparse
import gzip
import os
import random
import re
import sys
import tempfile
import time
import zlib

from tf2_mapreduce import quiet

tf = None  # imported in main, without its start-up lines

# Eager errors carry the op's function name before the message and "[Op:...]" after it.
_WRAPPING = re.compile(r"^\{\{function_node [^}]*\}\}\s*|\s*\[Op:[^\]]*\].*$", re.S)


class Files:
    """Files written in one temporary directory; errors are shown with it as "<tmp>"."""

    def __init__(self, root):
        self.root = root
        self.count = 0

    def put(self, data):
        # A new name each time: a lookup table's shared name comes from its file's name,
        # and a second table over the same name would be the first, already filled.
        self.count += 1
        path = os.path.join(self.root, "f%d" % self.count)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def error(self, e):
        message = e.message if isinstance(e, tf.errors.OpError) else str(e)
        return "%s: %s" % (type(e).__name__, _WRAPPING.sub("", message).replace(self.root, "<tmp>"))


def _elements(files, dataset):
    """The elements of `dataset` as bytes, and the error that ended it (None if none)."""
    out = []
    try:
        for element in dataset:
            out.append(element.numpy())
    except tf.errors.OpError as e:
        return out, files.error(e)
    return out, None


def _records(files):
    """Five TFRecord records of different lengths, each framed as TFRecordWriter writes it
    (length, its masked crc32c, data, the data's masked crc32c)."""
    framed = []
    path = os.path.join(files.root, "records")
    for i in range(5):
        with tf.io.TFRecordWriter(path) as writer:
            writer.write(b"record %d " % i * (10 + i))
        with open(path, "rb") as f:
            framed.append(f.read())
    return framed


def _gzip_cut_at(data, n):
    """A gzip file of `data` cut so that what it inflates to is exactly data[:n]: a full
    flush there ends the deflate blocks on a byte, and the file is cut after it."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    head = compressor.compress(data[:n]) + compressor.flush(zlib.Z_FULL_FLUSH)
    tail = compressor.compress(data[n:]) + compressor.flush()
    assert gzip.decompress(head + tail) == data and zlib.decompressobj(31).decompress(head) == data[:n]
    return head


def _decompressed(files, data):
    try:
        return tf.io.decode_compressed(data, compression_type="GZIP").numpy(), None
    except tf.errors.OpError as e:
        return None, files.error(e)


def _show(records, framed):
    """Records read, as "k of n records" when they are the first k, else their lengths."""
    if records == [r[12:-4] for r in framed[: len(records)]]:
        return "%d of %d records" % (len(records), len(framed))
    return "records of lengths %s" % [len(r) for r in records]


def _outcome(shown, error):
    return "%s, %s" % (shown, error or "no error")


def d1(files):
    """Truncated gzip files: TFRecordDataset("GZIP") and decode_compressed."""
    framed = _records(files)
    raw = b"".join(framed)
    two = len(framed[0]) + len(framed[1])
    whole = gzip.compress(raw)
    checks = []

    def tfrecords(data):
        records, error = _elements(files, tf.data.TFRecordDataset(files.put(data), "GZIP"))
        return _outcome(_show(records, framed), error)

    checks.append(
        (
            'TFRecordDataset("GZIP"), .gz cut where the inflated stream ends after record 2',
            tfrecords(_gzip_cut_at(raw, two)),
            "2 of 5 records, no error",
        )
    )
    checks.append(
        (
            'TFRecordDataset("GZIP"), .gz cut inside record 3\'s 12-byte header',
            tfrecords(_gzip_cut_at(raw, two + 5)),
            "2 of 5 records, no error",
        )
    )
    checks.append(
        (
            'TFRecordDataset("GZIP"), .gz without its trailer (last 8 bytes)',
            tfrecords(whole[:-8]),
            "5 of 5 records, no error",
        )
    )
    # The one cut it does report: the stream ends inside a record's data.
    checks.append(
        (
            'TFRecordDataset("GZIP"), .gz cut inside record 3\'s data',
            tfrecords(_gzip_cut_at(raw, two + 20)),
            "2 of 5 records, DataLossError: truncated record at %d' failed with EOF reached" % two,
        )
    )

    def inflated(data):
        text, error = _decompressed(files, data)
        if error:
            return error
        return "%d of %d bytes%s, no error" % (
            len(text),
            len(raw),
            "" if text == raw[: len(text)] else " (not a prefix)",
        )

    checks.append(
        (
            "decode_compressed, .gz without its trailer",
            inflated(whole[:-8]),
            "%d of %d bytes, no error" % (len(raw), len(raw)),
        )
    )
    checks.append(
        (
            "decode_compressed, .gz cut after record 2",
            inflated(_gzip_cut_at(raw, two)),
            "%d of %d bytes, no error" % (two, len(raw)),
        )
    )
    # Text that does not compress, so that half the file is about half the text.
    noise = random.Random(0).randbytes(64 << 10)
    half = gzip.compress(noise)[: len(noise) // 2]
    text, error = _decompressed(files, half)
    seen = error or (
        "a prefix, no error"
        if text == noise[: len(text)] and 0 < len(text) < len(noise)
        else "%d bytes, not a proper prefix" % len(text)
    )
    shown = seen if error else "%s (%d of %d bytes)" % (seen, len(text), len(noise))
    checks.append(("decode_compressed, the first half of a .gz", (seen, shown), "a prefix, no error"))
    return checks


def d2(files):
    """Gzip files of several members."""
    framed = _records(files)
    first, rest = b"".join(framed[:2]), b"".join(framed[2:])
    checks = []
    for name, data, records, text in [
        ("two members", gzip.compress(first) + gzip.compress(rest), "5 of 5 records", "all"),
        (
            "an empty member between two",
            gzip.compress(first) + gzip.compress(b"") + gzip.compress(rest),
            "2 of 5 records",
            "the first member's",
        ),
        ("an empty first member", gzip.compress(b"") + gzip.compress(first + rest), "0 of 5 records", "no"),
    ]:
        read, error = _elements(files, tf.data.TFRecordDataset(files.put(data), "GZIP"))
        checks.append(
            ('TFRecordDataset("GZIP"), %s' % name, _outcome(_show(read, framed), error), records + ", no error")
        )
        inflated, error = _decompressed(files, data)
        if error:
            seen = error
        else:
            seen = {first + rest: "all", first: "the first member's", b"": "no"}.get(
                inflated, "%d other bytes" % len(inflated)
            )
            seen += " bytes, no error"
        checks.append(("decode_compressed, %s" % name, seen, text + " bytes, no error"))
    return checks


def d3(files):
    """TextLineDataset: which bytes of a text its lines give."""
    text = b"a\rb\nc\r\nd\r\r\n\r\n\rx\n\n\r\rq\r"
    lines = [b"ab", b"c", b"d", b"", b"x", b"", b"q"]
    checks = []
    for compression, data in (("", text), ("GZIP", gzip.compress(text))):
        read, error = _elements(files, tf.data.TextLineDataset(files.put(data), compression))
        checks.append(
            (
                "TextLineDataset(%r) of %r: every \\r dropped" % (compression, text),
                _outcome(read, error),
                _outcome(lines, None),
            )
        )
    # Texts that differ only in their last bytes read alike: the lines do not tell them apart.
    endings = [b"a\nb", b"a\nb\n", b"a\nb\r", b"a\nb\r\n", b"a\r\nb", b"a\nb\n\r"]
    seen = {}
    for ending in endings:
        read, error = _elements(files, tf.data.TextLineDataset(files.put(ending)))
        seen.setdefault(_outcome(read, error), []).append(ending)
    checks.append(
        (
            "TextLineDataset of %s: the same lines" % b" ".join(repr(e).encode() for e in endings).decode(),
            "; ".join("%s from %s" % (lines, texts) for lines, texts in seen.items()),
            "%s from %s" % (_outcome([b"a", b"b"], None), endings),
        )
    )
    return checks


def d4(files):
    """FixedLengthRecordDataset over a stream that is not whole records."""
    message = (
        'Excluding the header (0 bytes) and footer (0 bytes), input file "<tmp>/f%d" has body length %d '
        "bytes, which is not an exact multiple of the record length (4 bytes)."
    )
    checks = []
    # GZIP finds the bytes left over at the end of the stream, after every whole record;
    # uncompressed, from the file's size, before any.
    for compression, length, records, error in (
        ("GZIP", 4 * 1000 + 2, 1000, "DataLossError"),
        ("GZIP", 4 * 1000, 1000, None),
        ("", 4 * 1000 + 2, 0, "InvalidArgumentError"),
    ):
        data = b"x" * length
        path = files.put(gzip.compress(data) if compression else data)
        read, seen_error = _elements(files, tf.data.FixedLengthRecordDataset(path, 4, compression_type=compression))
        checks.append(
            (
                "FixedLengthRecordDataset(record_bytes=4, %r), %d bytes" % (compression, length),
                "%d records, %s" % (len(read), seen_error or "no error"),
                "%d records, %s"
                % (records, "%s: %s" % (error, message % (files.count, length)) if error else "no error"),
            )
        )
    return checks


def d5(files):
    """Vocabulary files read by TextFileInitializer and Keras 3's StringLookup."""
    whole_line, line_number = tf.lookup.TextFileIndex.WHOLE_LINE, tf.lookup.TextFileIndex.LINE_NUMBER

    def table(path):
        initializer = tf.lookup.TextFileInitializer(path, tf.string, whole_line, tf.int64, line_number)
        return tf.lookup.StaticHashTable(initializer, -1)

    def contents(data):
        try:
            keys, values = table(files.put(data)).export()
        except tf.errors.OpError as e:
            return files.error(e)
        return str(sorted(zip(values.numpy().tolist(), keys.numpy().tolist())))

    terms = [
        b"plain",
        b"tab\there",
        b"sp ace",
        b" lead",
        b"trail ",
        b"vt\x0b",
        b"ff\x0c",
        b"fs\x1c",
        b"nel\xc2\x85",
        b"ls\xe2\x80\xa8",
        b"bad\xff\xfe",
    ]
    vocabulary = files.put(b"\n".join(terms) + b"\n")
    checks = [
        (
            "TextFileInitializer: %d terms with blanks, separators and invalid UTF-8" % len(terms),
            str(table(vocabulary).lookup(tf.constant(terms)).numpy().tolist()),
            str(list(range(len(terms)))),
        )
    ]
    lookup = tf.keras.layers.StringLookup(vocabulary=vocabulary)
    checks.append(
        (
            "Keras StringLookup(vocabulary=path): the same terms (0 is out of vocabulary)",
            "%s, vocabulary_size %d" % (lookup(tf.constant(terms)).numpy().tolist(), lookup.vocabulary_size()),
            "%s, vocabulary_size %d" % (list(range(1, len(terms) + 1)), len(terms) + 1),
        )
    )
    try:
        seen = "%d terms" % len(lookup.get_vocabulary())
    except UnicodeDecodeError as e:
        seen = "UnicodeDecodeError: %s" % e
    checks.append(
        (
            "Keras StringLookup.get_vocabulary() with a term of invalid UTF-8",
            seen,
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 3: invalid start byte",
        )
    )
    carriage = b"a\nx\r\ny\r\r\n\rz\nw\ry\nv\r"
    checks.append(
        (
            "TextFileInitializer of %r: one \\r at a line's end dropped, any other kept" % carriage,
            contents(carriage),
            str([(0, b"a"), (1, b"x"), (2, b"y\r"), (3, b"\rz"), (4, b"w\ry"), (5, b"v")]),
        )
    )
    checks.append(
        (
            "TextFileInitializer of b'x\\nx\\r\\n': the second line is x again",
            contents(b"x\nx\r\n"),
            "FailedPreconditionError: HashTable has different value for same key. Key x has 0 and trying to "
            "add value 1",
        )
    )
    # The last line, with no "\n" after it, is one only if something is left of it.
    checks.append(("TextFileInitializer of b'a\\n\\r'", contents(b"a\n\r"), str([(0, b"a")])))
    for data, position in ((b"a\n\nb\n", 3), (b"a\n\r\nb\n", 4)):
        checks.append(
            (
                "TextFileInitializer of %r" % data,
                contents(data),
                "InvalidArgumentError: Invalid content in <tmp>/f%d: empty line found at position %d."
                % (files.count, position),
            )
        )
    try:
        tf.keras.layers.StringLookup(vocabulary=files.put(b"a\n\nb\n"))
        seen = "a layer"
    except tf.errors.OpError as e:
        seen = files.error(e)
    checks.append(
        (
            "Keras StringLookup of b'a\\n\\nb\\n'",
            seen,
            "InvalidArgumentError: Invalid content in <tmp>/f%d: empty line found at position 3." % files.count,
        )
    )
    return checks


def d6(files):
    """tf.io.parse_example with RaggedFeature: values of another type, and missing ones."""
    example = tf.train.Example
    feature = tf.train.Feature

    def record(**kind):
        return example(features=tf.train.Features(feature={"f": feature(**kind)})).SerializeToString()

    ints = record(int64_list=tf.train.Int64List(value=[3, 4]))
    others = {
        "a bytes_list [b'x']": (record(bytes_list=tf.train.BytesList(value=[b"x"])), "string"),
        "an empty bytes_list": (record(bytes_list=tf.train.BytesList()), "string"),
        "a float_list [1.0]": (record(float_list=tf.train.FloatList(value=[1.0])), "float"),
    }
    spec = {"f": tf.io.RaggedFeature(tf.int64, row_splits_dtype=tf.int64)}

    @tf.function  # as a map step runs it
    def parse(records):
        parsed = tf.io.parse_example(records, spec)["f"]
        return parsed.flat_values, parsed.row_splits

    def parsed(records):
        try:
            values, splits = parse(tf.constant(records))
        except tf.errors.OpError as e:
            # In a graph the message is one line among where the node was made.
            cause = [line.strip() for line in e.message.splitlines() if "Key: " in line]
            return "%s: %s" % (type(e).__name__, cause[0] if cause else files.error(e))
        return str(tf.RaggedTensor.from_row_splits(values, splits).to_list())

    checks = []
    for name, (other, actual) in others.items():
        checks.append(
            (
                "parse_example, RaggedFeature(tf.int64), %s in record 1" % name,
                parsed([ints, other]),
                "InvalidArgumentError: Name: <unknown>, Key: f, Index: 1.  Data types don't match. "
                "Expected type: int64, Actual type: %s" % actual,
            )
        )
    missing = [example().SerializeToString(), record(), record(int64_list=tf.train.Int64List())]
    checks.append(
        (
            "parse_example, RaggedFeature(tf.int64): absent, a Feature of no list, an empty int64_list",
            parsed([ints] + missing),
            str([[3, 4], [], [], []]),
        )
    )
    return checks


FACTS = [
    ("D1", d1),
    ("D2", d2),
    ("D3", d3),
    ("D4", d4),
    ("D5", d5),
    ("D6", d6),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.parse_args()
    # Its own warnings repeat the errors this script provokes on purpose.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    global tf
    tf = quiet.import_tensorflow()
    started = time.monotonic()
    failed = total = 0
    with tempfile.TemporaryDirectory(prefix="measure_readers_") as root:
        files = Files(root)
        for fact_id, measure in FACTS:
            for what, seen, expected in measure(files):
                # A check may show more than it compares: (compared, shown).
                seen, shown = seen if isinstance(seen, tuple) else (seen, seen)
                total += 1
                failed += seen != expected
                if seen == expected:
                    print("PASS  %s %s: %s" % (fact_id, what, shown))
                else:
                    print("FAIL  %s %s: saw %s (docs/runtime.md: %s)" % (fact_id, what, shown, expected))
    print(
        "%d of %d checks as documented, in %.1f s after TensorFlow's import"
        % (total - failed, total, time.monotonic() - started)
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
