"""The independent answers: words, counts, records and vocabularies computed in plain
Python (bytes.split(), Counter, protobuf parsing each record), and the checks of results
against them."""

import collections
import gzip
import hashlib
import json
import os
import struct
import zlib

from helpers.corpora import VOCAB_FEATURES as FEATURES
from tf2_mapreduce.outputs import files as output


def oracle_words(paths):
    """Total words per Python's bytes.split(), file by file: the independent answer."""
    total = 0
    for path in paths:
        with open(path, "rb") as f:
            total += len(f.read().split())
    return total


def oracle_counter(paths):
    """Every word's count, per Python's bytes.split(): the independent answer for wordfreq."""
    counts = collections.Counter()
    for path in paths:
        with open(path, "rb") as f:
            counts.update(f.read().split())
    return counts


def read_result(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def assert_matches_oracle(result, paths):
    assert result["total_words"] == oracle_words(paths)
    assert {r["path"]: r["words"] for r in result["per_file"]} == {p: oracle_words([p]) for p in paths}
    assert result["files"] == len(paths)
    assert result["bytes"] == sum(os.path.getsize(p) for p in paths)


def ordered(counter, min_count=1):
    """(word, count) pairs as wordfreq writes them: count descending, then the word."""
    return sorted(((w, c) for w, c in counter.items() if c >= min_count), key=lambda kv: (-kv[1], kv[0]))


def read_tsv(path):
    """The (word, count) rows of a wordfreq table, its words unescaped."""
    with open(path, encoding="utf-8") as f:
        rows = [line.rstrip("\n").split("\t") for line in f]
    return [(output.unescape(word), int(count)) for word, count in rows]


def read_tfrecords(path):
    """The records of a TFRecord file, read in plain Python (gzip or zlib by its name):
    8 bytes of length, 4 of its CRC, the record, 4 of the record's CRC."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    elif path.endswith((".zz", ".zlib")):
        data = zlib.decompress(data)
    return parse_tfrecords(data)


def parse_tfrecords(data):
    """The records of a TFRecord file's bytes (uncompressed), read in plain Python."""
    records, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        records.append(data[offset + 12 : offset + 12 + length])
        offset += 12 + length + 4
    return records


def oracle_vocab(paths, features):
    """Per feature of `features` ([(name, "string" | "int64")]): a Counter of its values
    (int64 values as decimal bytes) and the examples without any value of it; and the
    examples read. Each record parsed by protobuf itself (`Example.FromString`)."""
    from tensorflow.core.example import example_pb2

    counts = {name: collections.Counter() for name, _ in features}
    missing = collections.Counter()
    examples = 0
    for path in paths:
        for record in read_tfrecords(path):
            example = example_pb2.Example.FromString(record)
            examples += 1
            for name, kind in features:
                feature = example.features.feature.get(name)
                values = []
                if feature is not None:
                    values = (
                        feature.bytes_list.value if kind == "string" else [b"%d" % v for v in feature.int64_list.value]
                    )
                counts[name].update(values)
                missing[name] += not values
    return {"examples": examples, "counts": counts, "missing": missing}


def tft_ordered(counter):
    """(term, count) pairs as tf.Transform orders a vocabulary: count descending, then the
    term in reverse lexicographic order."""
    by_term = sorted(counter.items(), reverse=True)
    return sorted(by_term, key=lambda pair: -pair[1])


def record_starts(path):
    """The offset of every record of the TFRecord file at `path`, and its size: where a
    cut may fall."""
    starts, offset = [], 0
    for record in read_tfrecords(path):
        starts.append(offset)
        offset += 16 + len(record)
    return starts + [offset]


def read_lines(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]


def assert_vocabularies(directory, oracle, top_k=None, min_count=1):
    """Every file under `directory` against the oracle: vocabulary, counts, unwritable
    terms, summary; each vocabulary loaded by StringLookup and TextFileInitializer.
    The features are those of `corpora.write_examples` (`corpora.VOCAB_FEATURES`)."""
    import tensorflow as tf

    from tf2_mapreduce.outputs import vocabulary

    with open(os.path.join(directory, vocabulary.SUMMARY)) as f:
        summary = json.load(f)
    assert summary["examples"] == oracle["examples"]
    for name, _ in FEATURES:
        counts = oracle["counts"][name]
        ranked = [(t, c) for t, c in tft_ordered(counts) if c >= min_count]
        written = [(t, c) for t, c in ranked if vocabulary.holdable(t)][:top_k]
        aside = [(t, c) for t, c in ranked if not vocabulary.holdable(t)]
        path = os.path.join(directory, "vocab_%s.txt" % name)
        assert read_lines(path) == [t for t, _ in written]
        rows = [line.split(b"\t", 1) for line in read_lines(os.path.join(directory, "counts_%s.tsv" % name))]
        assert [(t, int(c)) for c, t in rows] == written
        rows = [line.split(b"\t", 1) for line in read_lines(os.path.join(directory, "unwritable_%s.tsv" % name))]
        assert [(output.unescape(t.decode()), int(c)) for c, t in rows] == aside
        assert summary["vocabularies"][name] == {
            "values": sum(counts.values()),
            "distinct": len(counts),
            "missing": oracle["missing"][name],
            "written": len(written),
            "unwritable": len(aside),
            "unwritable_values": sum(c for _, c in aside),
            "below_min_count": sum(1 for c in counts.values() if c < min_count),
            "beyond_top_k": sum(1 for t, c in ranked if vocabulary.holdable(t)) - len(written),
            "files": vocabulary.file_names(name),
        }
        terms = tf.constant([t for t, _ in written] + [b"never seen"])
        lookup = tf.keras.layers.StringLookup(vocabulary=path)
        assert lookup(terms).numpy().tolist() == list(range(1, len(written) + 1)) + [0]  # index 0: out of vocabulary
        table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                path, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER
            ),
            default_value=-1,
        )
        assert table.lookup(terms).numpy().tolist() == list(range(len(written))) + [-1]
    return summary


def data_digest(directory):
    """The sha256 of a writing job's data/ under `directory`: its files' names and bytes, in name order."""
    h = hashlib.sha256()
    data = os.path.join(directory, "data")
    for name in sorted(os.listdir(data)):
        with open(os.path.join(data, name), "rb") as f:
            h.update(name.encode() + b"\0" + f.read())
    return h.hexdigest()


def data_records(directory):
    """The records of a writing job's data/ under `directory`, shard by shard, read in plain Python."""
    data = os.path.join(directory, "data")
    return [r for name in sorted(os.listdir(data)) for r in read_tfrecords(os.path.join(data, name))]
