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


class _Storage:
    """A gfile of objects ({path: bytes}) whose rename is a copy, then a delete whose
    answer can be lost: done, then the try fails as TensorFlow's client gives up."""

    def __init__(self, objects, lose_delete):
        self.objects, self.lose_delete = objects, lose_delete

    def stat(self, path):
        import tensorflow as tf

        if path not in self.objects:
            raise tf.errors.NotFoundError(None, None, "%s not found" % path)
        return type("Stat", (), {"length": len(self.objects[path])})

    def rename(self, source, target, overwrite=False):
        self.stat(source)
        self.objects[target] = self.objects.pop(source)
        if self.lose_delete:
            self.lose_delete = False
            raise OSError("All 2 retry attempts failed. The last failure: HTTP response code 503")


def _moved(monkeypatch, objects, lose_delete):
    from tf2_mapreduce import storage

    monkeypatch.setattr(output, "_gfile", lambda: _Storage(objects, lose_delete))
    with storage.waiting(storage.Patience(timeout=5, on_wait=lambda *a: None, first=0.01)):
        output.move("gs://b/staged", "gs://b/result")
    return objects


def test_a_move_whose_delete_was_done_unanswered_is_done_on_the_next_try(monkeypatch):
    store = {"gs://b/staged": b"new", "gs://b/result": b"old!"}
    assert _moved(monkeypatch, store, lose_delete=True) == {"gs://b/result": b"new"}


def test_a_move_without_its_source_from_the_first_try_or_its_target_of_another_size_fails(monkeypatch):
    import pytest
    import tensorflow as tf

    with pytest.raises(tf.errors.NotFoundError):
        _moved(monkeypatch, {"gs://b/result": b"old"}, lose_delete=False)
    # The source gone after a failed try, and the target not of its size: not this move's.
    store = _Storage({"gs://b/staged": b"new"}, lose_delete=True)
    original = store.rename

    def rename_then_replaced(source, target, overwrite=False):
        try:
            original(source, target, overwrite)
        finally:
            store.objects[target] = b"another job's"

    store.rename = rename_then_replaced
    monkeypatch.setattr(output, "_gfile", lambda: store)
    from tf2_mapreduce import storage

    with pytest.raises(tf.errors.NotFoundError):
        with storage.waiting(storage.Patience(timeout=5, on_wait=lambda *a: None, first=0.01)):
            output.move("gs://b/staged", "gs://b/result")
