"""tf.Transform's mappers of tokenized text: `ngrams`, `bag_of_words` and `word_count`, over
the tokens of each example (a 2-D SparseTensor, a row an example), as tft computes them."""

from tf2_mapreduce.lazy_tf import tf

__all__ = ["ngrams", "bag_of_words", "word_count"]


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
