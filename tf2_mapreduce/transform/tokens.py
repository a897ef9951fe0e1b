"""tf.Transform's mappers of tokenized text: `ngrams`, `bag_of_words`, `word_count` and
`tfidf`, over the tokens of each example (a 2-D SparseTensor, a row an example), as tft
computes them."""

from tf2_mapreduce.lazy_tf import tf
from tf2_mapreduce.transform import analyzers
from tf2_mapreduce.transform.trace import NotSupported

__all__ = ["ngrams", "bag_of_words", "word_count", "tfidf"]


def _check_tokens(tokens, what):
    if not isinstance(tokens, tf.SparseTensor) or tokens.shape.rank != 2:
        raise ValueError("%s requires `tokens` to be a 2-dimensional SparseTensor" % what)


def _within_rows(rows):
    """Each value's place within its row (`rows`: the values' sorted row ids)."""
    places = tf.range(tf.size(rows, out_type=tf.int64), dtype=tf.int64)
    firsts = tf.math.unsorted_segment_min(places, rows, tf.reduce_max(tf.concat([rows, [-1]], 0)) + 1)
    return places - tf.gather(firsts, rows)


def _sparse(tokens, rows, values):
    """A SparseTensor of `values` in `rows` (sorted), each row's from place 0, as wide as
    its widest row: tft's layout."""
    places = _within_rows(rows)
    width = tf.reduce_max(tf.concat([places, [-1]], 0)) + 1
    return tf.SparseTensor(tf.stack([rows, places], 1), values, tf.stack([tokens.dense_shape[0], width]))


def ngrams(tokens, ngram_range, separator, name=None):
    """Every ngram of each row's tokens, of `ngram_range` (lo, hi) tokens joined by
    `separator`: from each token in turn, those it starts, shortest first."""
    _check_tokens(tokens, "ngrams")
    low, high = ngram_range
    if low < 1 or high < low:
        raise ValueError("Invalid ngram_range: %r" % (ngram_range,))
    with tf.name_scope(name or "ngrams"):
        rows, values = tokens.indices[:, 0], tokens.values
        count = tf.size(values)

        def shifted(tensor, by, fill):
            return tf.concat([tensor[by:], tf.fill([tf.minimum(by, count)], fill)], 0)

        following = [shifted(values, by, "") for by in range(high)]
        same_row = [tf.equal(shifted(rows, by, tf.constant(-1, tf.int64)), rows) for by in range(high)]
        grams = tf.stack([tf.strings.join(following[:k], separator=separator) for k in range(low, high + 1)], 1)
        whole = tf.stack([tf.reduce_all(tf.stack(same_row[:k], 1), 1) for k in range(low, high + 1)], 1)
        gram_rows = tf.boolean_mask(tf.tile(rows[:, None], [1, high + 1 - low]), whole)
        return _sparse(tokens, gram_rows, tf.boolean_mask(grams, whole))


def bag_of_words(tokens, ngram_range, separator, name=None):
    """Each row's distinct ngrams (`ngrams`), in the order each first appears there."""
    _check_tokens(tokens, "bag_of_words")
    with tf.name_scope(name or "bag_of_words"):
        grams = ngrams(tokens, ngram_range, separator)
        rows = grams.indices[:, 0]
        # A row's id, then a byte no decimal holds, then the ngram: one key per (row, ngram).
        keys = tf.strings.join([tf.strings.as_string(rows), grams.values], separator="\x00")
        distinct, index = tf.unique(keys)
        firsts = tf.math.unsorted_segment_min(
            tf.range(tf.size(keys, out_type=tf.int64), dtype=tf.int64), index, tf.size(distinct)
        )
        return _sparse(tokens, tf.gather(rows, firsts), tf.gather(grams.values, firsts))


def word_count(tokens, name=None):
    """Each row's count of tokens, int64 (a RaggedTensor's row lengths)."""
    with tf.name_scope(name or "word_count"):
        if isinstance(tokens, tf.RaggedTensor):
            return tokens.row_lengths()
        if not isinstance(tokens, tf.SparseTensor):
            raise ValueError("word_count requires `tokens` to be a SparseTensor or a RaggedTensor")
        ones = tf.SparseTensor(tokens.indices, tf.ones_like(tokens.values, tf.int64), tokens.dense_shape)
        counts = tf.sparse.reduce_sum(ones, axis=list(range(1, tokens.shape.rank)))
        counts.set_shape(tokens.shape[:1])  # a count a row: what a tf.Example feature of one value holds
        return counts


def tfidf(x, vocab_size, smooth=True, name=None):
    """Each row's distinct term ids of `x` (a 2-D SparseTensor of int64 ids, taken modulo
    `vocab_size`), ascending, and their weights, float32: the term's count in the row over
    the row's size (float64), times its idf, 1 + log((documents + 1) / (documents holding
    it + 1)) (`smooth`; else 1 + log(documents / documents holding it)), in float32, as tft
    computes them. Both counts are analyzers (`sum`), exact: over a vocabulary's ids, they
    are counted in a phase after it."""
    if not isinstance(x, tf.SparseTensor):
        raise NotSupported("tf2_mapreduce.transform: tfidf of a %s: a 2-D SparseTensor, as tft's" % type(x).__name__)
    if x.get_shape().ndims != 2:
        raise ValueError("tft.tfidf requires a 2D SparseTensor input. Input had %s dimensions." % x.get_shape().ndims)
    size = tf.get_static_value(vocab_size)
    if size is None:
        # The documents holding each term are an analyzer's result of vocab_size values.
        raise NotSupported("tf2_mapreduce.transform: tfidf(vocab_size=...) of a value known only when run: give an int")
    size = int(size)
    with tf.name_scope(name or "tfidf"):
        rows = x.indices[:, 0]
        # A row's terms, ascending, each with its count there: tft's order.
        keys, _, counts = tf.unique_with_counts(
            tf.sort(rows * size + tf.math.floormod(tf.cast(x.values, tf.int64), size))
        )
        term_rows, terms = keys // size, keys % size
        row_sizes = tf.math.unsorted_segment_sum(tf.ones_like(rows), rows, tf.cast(x.dense_shape[0], tf.int32))
        frequency = tf.cast(counts, tf.float64) / tf.cast(tf.gather(row_sizes, term_rows), tf.float64)
        # In a batch, the documents holding each term; over every batch, an exact sum.
        holding = tf.math.unsorted_segment_sum(tf.ones_like(terms, tf.float64), terms, size)[None, :]
        documents = analyzers.sum(tf.expand_dims(tf.shape(x)[0], 0))
        held = analyzers.sum(holding, reduce_instance_dims=False)
        documents, held = tf.cast(documents, tf.float32), tf.cast(held, tf.float32)
        if smooth:
            idf = tf.math.log((documents + 1.0) / (1.0 + held)) + 1.0
        else:
            idf = tf.math.log(documents / held) + 1.0
        weights = tf.cast(frequency, tf.float32) * tf.gather(idf, terms)
        ids = _sparse(x, term_rows, terms)
        return ids, tf.SparseTensor(ids.indices, weights, ids.dense_shape)
