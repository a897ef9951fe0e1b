"""Per-key tables written to files: words escaped so that every byte string comes back."""

import random

from tf2_mapreduce.outputs import files as output


def test_escape_is_reversible_and_printable():
    rng = random.Random(5)
    for _ in range(2000):
        word = bytes(rng.randrange(256) for _ in range(rng.randint(1, 12)))
        text = output.escape(word)
        assert output.unescape(text) == word
        assert text.isprintable() and "\t" not in text and "\n" not in text
    assert output.escape("café".encode()) == "café"
    assert output.escape(b"a\\b\xff\xc2\xa0") == "a\\\\b\\xff\\xc2\\xa0"
