"""`transform.tokens` (tft's ngrams, bag_of_words, word_count) against plain Python over
random rows of tokens: empty rows, rows shorter than an ngram, repeated tokens, a last
empty row; eagerly and traced."""

import random

import pytest
import tensorflow as tf

import tf2_mapreduce.transform as tft


def rows_of(seed):
    rng = random.Random(seed)
    rows = [
        [rng.choice([b"a", b"b", b"cc", b"d d", b""]) for _ in range(rng.choice([0, 1, 2, 3, 5, 8]))] for _ in range(60)
    ]
    return rows + [[]]


def sparse(rows):
    indices = [[r, c] for r, row in enumerate(rows) for c in range(len(row))]
    values = [token for row in rows for token in row]
    return tf.SparseTensor(
        tf.constant(indices, tf.int64, shape=[len(indices), 2]),
        tf.constant(values, tf.string, shape=[len(values)]),
        [len(rows), max(len(row) for row in rows)],
    )


def oracle_ngrams(row, low, high, separator):
    return [separator.join(row[i : i + k]) for i in range(len(row)) for k in range(low, high + 1) if i + k <= len(row)]


def first_seen(values):
    return list(dict.fromkeys(values))


def per_row(result, count):
    got = [[] for _ in range(count)]
    for (r, c), value in zip(result.indices.numpy().tolist(), result.values.numpy().tolist()):
        assert c == len(got[r])  # each row's values from place 0, in order
        got[r].append(value)
    return got


@pytest.mark.parametrize(
    "seed, ngram_range, separator", [(0, (1, 1), b" "), (1, (1, 3), b" "), (2, (2, 4), b"|"), (3, (2, 2), b"")]
)
@pytest.mark.parametrize("traced", [False, True])
def test_ngrams_bag_of_words_and_word_count_are_those_of_each_row(seed, ngram_range, separator, traced):
    rows = rows_of(seed)
    tokens = sparse(rows)
    calls = {
        "ngrams": lambda t: tft.ngrams(t, ngram_range, separator.decode()),
        "bag": lambda t: tft.bag_of_words(t, ngram_range, separator.decode()),
        "count": lambda t: tft.word_count(t),
    }
    if traced:
        calls = {name: tf.function(call) for name, call in calls.items()}
    grams = [oracle_ngrams(row, *ngram_range, separator) for row in rows]
    assert per_row(calls["ngrams"](tokens), len(rows)) == grams
    assert per_row(calls["bag"](tokens), len(rows)) == [first_seen(row) for row in grams]
    assert calls["count"](tokens).numpy().tolist() == [len(row) for row in rows]


def test_bad_tokens_and_ranges_are_refused():
    with pytest.raises(ValueError, match="Invalid ngram_range"):
        tft.ngrams(sparse(rows_of(0)), (2, 1), " ")
    with pytest.raises(ValueError, match="2-dimensional SparseTensor"):
        tft.bag_of_words(tf.constant([b"a"]), (1, 1), " ")
