"""Vocabulary files (`outputs.vocabulary`) from a table's entries in any order, against
plain Python: tf.Transform's order, --min_count then --top_k, the terms a line cannot hold
set aside and never dropped, TFRecord vocabularies holding every term, and a summary
without writing that says what writing would."""

import collections
import gzip
import os
import random
import struct

import pytest

from tf2_mapreduce.outputs import sorted_runs, vocabulary
from tf2_mapreduce.outputs.files import unescape
from tf2_mapreduce.reducers.keys import TFT, KeySpace

TERMS = [b"a", b"b", b"c", b"ab", b"", b"new\nline", b"cr\r", b"\xff\xfe", b"caf\xc3\xa9", b"z"]


def entries(seed=0):
    rng = random.Random(seed)
    counts = collections.Counter({term: rng.choice([1, 2, 2, 3, 5]) for term in TERMS})
    pairs = list(counts.items())
    rng.shuffle(pairs)
    return pairs, counts


def tft_ordered(counts):
    return sorted(sorted(counts.items(), reverse=True), key=lambda pair: -pair[1])


def lines(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]


def records(path):
    data, found, at = gzip.open(path).read(), [], 0
    while at < len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        found.append(data[at + 12 : at + 12 + length])
        at += 16 + length
    return found


def _in_order(pairs):
    """(vocabulary index, term, count) of one vocabulary's `pairs`, in tf.Transform's order."""
    return ((0, term, count) for term, count in sorted_runs.sorted_entries(pairs, order=TFT))


@pytest.mark.parametrize("top_k, min_count", [(None, 1), (3, 1), (None, 2), (2, 3)])
def test_text_vocabularies_in_tftransforms_order(tmp_path, top_k, min_count):
    pairs, counts = entries()
    terms, reserved = _in_order(pairs), {}
    written = vocabulary.write(KeySpace("words"), terms, str(tmp_path), top_k, min_count)
    ordered = [(t, c) for t, c in tft_ordered(counts) if c >= min_count]
    holdable = [(t, c) for t, c in ordered if vocabulary.holdable(t)]
    kept = holdable[:top_k] if top_k is not None else holdable
    assert lines(tmp_path / "vocab_words.txt") == [t for t, _ in kept]
    assert lines(tmp_path / "counts_words.tsv") == [b"%d\t%s" % (c, t) for t, c in kept]
    aside = [line.split(b"\t") for line in lines(tmp_path / "unwritable_words.tsv")]
    assert [(unescape(t.decode()), int(c)) for c, t in aside] == [
        (t, c) for t, c in ordered if not vocabulary.holdable(t)
    ]
    summary = written["words"]
    assert summary["values"] == sum(counts.values()) and summary["distinct"] == len(counts)
    assert summary["written"] == len(kept) and summary["beyond_top_k"] == len(holdable) - len(kept)
    assert summary["below_min_count"] == sum(1 for c in counts.values() if c < min_count)
    assert reserved == {}
    assert vocabulary.summarize(KeySpace("words"), pairs, top_k, min_count) == (written, reserved)


def test_tfrecord_vocabularies_hold_every_term(tmp_path):
    pairs, counts = entries(3)
    terms = _in_order(pairs)
    written = vocabulary.write(KeySpace("words"), terms, str(tmp_path), file_format="tfrecord_gzip")
    assert sorted(os.listdir(tmp_path)) == ["counts_words.tfrecord.gz", "vocab_words.tfrecord.gz"]
    assert records(tmp_path / "vocab_words.tfrecord.gz") == [t for t, _ in tft_ordered(counts)]
    assert written["words"]["written"] == len(counts)


def test_names_are_escaped_into_file_names_and_formats_checked():
    assert vocabulary.file_names("a/b c")["vocabulary"] == "vocab_a%2Fb%20c.txt"
    with pytest.raises(Exception, match="vocabulary_format=csv: one of text, tfrecord_gzip"):
        vocabulary.summarize(KeySpace("words"), [], file_format="csv")
