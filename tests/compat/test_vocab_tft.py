"""Our vocab job's files against tf.Transform 1.21's own vocabulary files of the same examples (in
its venv: peer_tft.py), byte for byte: bytes features with terms a line cannot hold, and an int64
one, whole, cut by top_k inside a tie, and thinned by a frequency threshold; terms that differ by
NUL bytes at their end, in a tie, where a complemented order put a term before its extension."""

import json
import os

import pytest
from helpers.corpora import VOCAB_FEATURES, write_examples
from helpers.oracles import oracle_vocab, tft_ordered
from peers import HERE, made_once, run_peer

import tf2_mapreduce as mr

pytestmark = [pytest.mark.compat, pytest.mark.cluster]

SCHEMA = """\
feature { name: "query" type: BYTES }
feature { name: "tags" type: BYTES }
feature { name: "user_id" type: INT }
"""
# Ours: Result.write_dir's (top_k, min_count), as --top_k and --min_count; tf.Transform's:
# compute_and_apply_vocabulary's top_k and frequency_threshold; and the features compared so.
# Each top_k cuts inside a tie of the feature's counts (test_the_cases_that_matter_are_in_the_data);
# each vocabulary costs tf.Transform seconds of Beam stages.
SETTINGS = {
    "whole": (None, 1, ["query", "tags", "user_id"]),
    "top3": (3, 1, ["tags"]),
    "top14_min2": (14, 2, ["query", "user_id"]),
}
COMPARED = [(setting, name) for setting, (_, _, names) in SETTINGS.items() for name in names]
PEER_TIMEOUT = 300  # Beam's run took 30 s on a loaded 2-core machine
OURS_TIMEOUT = 120  # our job: 5 s
# In every one of a few examples of their own: a tie of terms that are each other's prefix
# but for NUL bytes, and bytes that complement to NUL or to 0xff (reducers/keys.py).
NUL_TERMS = [b"ab", b"ab\x00", b"ab\x00\x00", b"ab\x00\x01", b"ab\xff", b"\x00", b"\xff\x00", b"\xff"]
NUL_EXAMPLES = 7


def write_nul_terms(path):
    """A GZIP'd TFRecord file of NUL_EXAMPLES examples, each with every NUL_TERMS as tags; its path."""
    import tensorflow as tf

    tags = tf.train.Feature(bytes_list=tf.train.BytesList(value=NUL_TERMS))
    record = tf.train.Example(features=tf.train.Features(feature={"tags": tags})).SerializeToString()
    with tf.io.TFRecordWriter(path, "GZIP") as writer:
        for _ in range(NUL_EXAMPLES):
            writer.write(record)
    return path


def tft_options(top_k, min_count):
    return {**({"top_k": top_k} if top_k else {}), **({"frequency_threshold": min_count} if min_count > 1 else {})}


@pytest.fixture(scope="module")
def vocabularies(tft_python, inprocess, tmp_path_factory, worker_id):
    """{(setting, feature): (our vocab_FEATURE.txt, tf.Transform's file)}, and the oracle's counts."""

    def make():
        work = str(tmp_path_factory.mktemp("vocab_tft"))
        paths = write_examples(os.path.join(work, "raw"), 4, 800, seed=3)
        paths.append(write_nul_terms(os.path.join(work, "raw", "nul_terms.tfrecord.gz")))
        result = inprocess.run(mr.Vocab(VOCAB_FEATURES), paths)
        for setting, (top_k, min_count, _) in SETTINGS.items():
            result.write_dir(os.path.join(work, setting), top_k=top_k, min_count=min_count)
        schema = os.path.join(work, "schema.pbtxt")
        with open(schema, "w") as f:
            f.write(SCHEMA)
        wanted = {"%s_%s" % (s, name): [name, tft_options(*SETTINGS[s][:2])] for s, name in COMPARED}
        out = os.path.join(work, "tft")
        args = [os.path.join(HERE, "peer_tft.py"), "vocab", os.path.join(work, "raw", "*"), schema, out]
        run_peer(tft_python, args + [json.dumps(wanted)], os.path.join(work, "peer_tft.log"), PEER_TIMEOUT)
        files = {
            "%s_%s" % (s, name): [
                os.path.join(work, s, "vocab_%s.txt" % name),
                os.path.join(out, "transform_fn", "assets", "%s_%s" % (s, name)),
            ]
            for s, name in COMPARED
        }
        return {"raw": paths, "files": files}

    made = made_once(tmp_path_factory, worker_id, "vocab_tft", make, PEER_TIMEOUT + OURS_TIMEOUT)

    def read(path):
        with open(path, "rb") as f:
            return f.read()

    files = {(s, name): tuple(map(read, made["files"]["%s_%s" % (s, name)])) for s, name in COMPARED}
    return files, oracle_vocab(made["raw"], VOCAB_FEATURES)["counts"]


@pytest.mark.parametrize("setting, feature", COMPARED)
def test_our_vocabulary_file_is_tfts_byte_for_byte(vocabularies, setting, feature):
    files, _ = vocabularies
    ours, theirs = files[setting, feature]
    assert ours == theirs
    assert ours.count(b"\n") > 1


def writable(term):
    return term and b"\n" not in term and b"\r" not in term


def test_the_cases_that_matter_are_in_the_data(vocabularies):
    """What makes the files above worth comparing, from the oracle's counts: terms a line cannot
    hold (both leave them out), terms that are not UTF-8 or hold a tab, negative ids; each top_k
    cuts inside a tie (which terms stay is then the order's to say), and each threshold leaves
    terms out and keeps those of the threshold's count."""
    files, counts = vocabularies
    assert {b"", b"a\nb", b"c\rd", b"\xff\xfe", b"tab\tx"} <= set(counts["tags"])
    lines = files["whole", "tags"][0].split(b"\n")
    assert lines[-1] == b"" and all(writable(line) for line in lines[:-1])
    assert {b"\xff\xfe", b"tab\tx"} <= set(lines)
    assert {counts["tags"][term] for term in NUL_TERMS} == {NUL_EXAMPLES}  # a tie, its order the terms'
    assert set(NUL_TERMS) <= set(lines)
    assert any(term.startswith(b"-") for term in counts["user_id"])
    for setting, name in COMPARED:
        top_k, min_count, _ = SETTINGS[setting]
        ranked = [c for term, c in tft_ordered(counts[name]) if c >= min_count and writable(term)]
        assert not top_k or ranked[top_k - 1] == ranked[top_k], (setting, name)
        assert min_count == 1 or min(counts[name].values()) < min_count == ranked[-1], (setting, name)
