"""The word rule against its oracle, Python's bytes.split(), on edge cases and random
bytes: in TensorFlow's ops and in the native ops (`native/words.cc`), which must agree."""

import collections
import random

import pytest
import tensorflow as tf

from tf2_mapreduce import native
from tf2_mapreduce.jobs.wordcount import count_words, count_words_each, count_words_in_tf
from tf2_mapreduce.jobs.wordfreq import word_counts, words

assert native.load() is not None, native.unavailable()  # else the native rule goes untested
COUNTERS = {"native": tf.function(count_words), "tf": tf.function(count_words_in_tf)}


@pytest.fixture(params=sorted(COUNTERS))
def count(request):
    return COUNTERS[request.param]


CASES = [
    b"",
    b" ",
    b"word",
    b"two words",
    b"  leading",
    b"trailing  ",
    b"\t\ttabs\tbetween\twords\t",
    b"crlf\r\nline\r\nendings\r\n",
    b"bare\rcarriage\rreturns",
    b"vertical\x0btab and form\x0cfeed",
    b"runs \t\n\r\x0b\x0c of \n\n\n every whitespace",
    b"\xc2\xa0nbsp\xc2\xa0is\xc2\xa0not\xc2\xa0ascii\xc2\xa0space",
    b"nel\xc2\x85and em\xe2\x80\x83space",
    b"info\x1cseparators\x1d\x1e\x1fare word bytes",
    b"invalid \xff\xfe utf-8 \xc3 bytes",
    b"nul\x00bytes\x00inside",
    b"\n",
    b"a",
    b"a b",
    "naïve café Straße 東京".encode(),
]


@pytest.mark.parametrize("text", CASES, ids=[repr(c)[:40] for c in CASES])
def test_edge_cases_match_bytes_split(text, count):
    assert int(count(tf.constant(text))) == len(text.split())


def random_texts(seed, number, longest):
    rng = random.Random(seed)
    alphabet = b" \t\n\r\x0b\x0cab\x00\x1c\x85\xa0\xc2\xff"
    return [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, longest))) for _ in range(number)]


def test_random_bytes_match_bytes_split(count):
    for text in random_texts(1234, 500, 300):
        assert int(count(tf.constant(text))) == len(text.split()), text


@pytest.mark.parametrize("form", ["native", "tf"])
def test_a_batch_is_counted_text_by_text(form, monkeypatch):
    if form == "tf":
        monkeypatch.setattr(native, "load", lambda: None)
    each = tf.function(count_words_each, autograph=False)
    texts = CASES + random_texts(7, 100, 300)
    assert each(tf.constant(texts)).numpy().tolist() == [len(t.split()) for t in texts]
    assert each(tf.constant([], tf.string)).numpy().tolist() == []


def long_word_texts(seed):
    """Words of every length up to 40 bytes, many sharing their first 16 bytes or all
    but their last byte (the native table keeps a word's first 16 bytes apart from the
    rest), placed at the ends of texts as well as inside them."""
    rng = random.Random(seed)
    stems = [b"p" * 16, b"q" * 15 + b"\xff", b"\x00" * 16, b"ab" * 8]
    texts = []
    for _ in range(200):
        words = []
        for _ in range(rng.randint(0, 12)):
            word = bytes(rng.choice(b"ab\x00\xff") for _ in range(rng.randint(1, 40)))
            words.append(rng.choice(stems + [b""]) + word if rng.random() < 0.5 else word)
        texts.append(rng.choice([b" ", b"\n", b"\t\r"]).join(words))
    return texts


def as_counter(output):
    if isinstance(output, tf.Tensor):
        return collections.Counter(output.numpy().tolist())
    keys, counts = output
    assert len(set(keys.numpy().tolist())) == len(keys.numpy())  # distinct words
    return collections.Counter(dict(zip(keys.numpy().tolist(), counts.numpy().tolist())))


@pytest.mark.parametrize("split", [word_counts, words], ids=["native", "tf"])
def test_word_frequencies_match_counter(split):
    split = tf.function(split)
    texts = CASES + random_texts(99, 200, 200) + long_word_texts(5)
    oracle = collections.Counter(w for t in texts for w in t.split())
    assert as_counter(split(tf.constant(texts))) == oracle
    assert as_counter(split(tf.constant([], tf.string))) == collections.Counter()


def test_every_single_byte_value(count):
    # Only the six ASCII whitespace bytes separate words, as in bytes.split().
    for value in range(256):
        text = b"a" + bytes([value]) + b"b"
        assert int(count(tf.constant(text))) == len(text.split()), value


def test_unicode_spaces_differ_from_str_split(count):
    # Documented difference: str.split() also splits on Unicode spaces, bytes.split() does not.
    text = "one\u00a0two\u2003three".encode("utf-8")
    assert int(count(tf.constant(text))) == 1
    assert len(text.decode("utf-8").split()) == 3
