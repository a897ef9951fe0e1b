"""Jobs over gzip and zlib compressed text: each file one piece, streamed in chunks cut at
record boundaries, counted exactly as its decompressed bytes by plain Python; a truncated
or corrupt file fails the job or is skipped, never counted short."""

import collections
import gzip
import os
import zlib

import pytest
from helpers.corpora import write_corpus

import tf2_mapreduce as mr
from tf2_mapreduce.errors import JobFailed

JOBS = {"wordcount": mr.WordCount(), "linecount": mr.LineCount(), "wc": mr.Wc()}


def run(inprocess, job, specs, **options):
    return inprocess.run(job, specs, **options)


def compress(path, kind):
    with open(path, "rb") as f:
        data = f.read()
    if kind == "gz":
        packed = gzip.compress(data, mtime=0)
    else:
        packed = zlib.compress(data)
    target = "%s.%s" % (path, kind)
    with open(target, "wb") as f:
        f.write(packed)
    os.unlink(path)
    return target


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Random texts (odd whitespace, \\r, no final newline, empty files), half gzip and a
    quarter zlib; a large one so that it streams in several chunks; with each file's text."""
    directory = str(tmp_path_factory.mktemp("compressed"))
    paths = write_corpus(directory, 24, seed=11)
    with open(os.path.join(directory, "large.txt"), "wb") as f:
        f.write(b"alpha beta\r\ngamma\t\x0bdelta  " * 40_000 + b"last")
    paths.append(os.path.join(directory, "large.txt"))
    texts = {}
    for n, path in enumerate(paths):
        with open(path, "rb") as f:
            text = f.read()
        if n % 4 != 3:
            path = compress(path, "gz" if n % 2 else "zz")
        texts[path] = text
    return directory, texts


def lines(text):
    return text.count(b"\n") + (1 if text and not text.endswith(b"\n") else 0)


@pytest.mark.parametrize(
    "name, oracle",
    [
        ("wordcount", lambda text: len(text.split())),
        ("linecount", lines),
        ("wc", lambda text: (lines(text), len(text.split()), len(text))),
    ],
)
def test_compressed_text_counts_as_its_decompressed_bytes(inprocess, corpus, name, oracle):
    directory, texts = corpus
    # A small read_size: the large file streams in many chunks, each cut at a record boundary.
    result = run(inprocess, JOBS[name], [directory], read_size=64 << 10)
    got = {f.path: list(f.value) if name == "wc" else f.value for f in result.per_file}
    assert got == {path: list(oracle(text)) if name == "wc" else oracle(text) for path, text in texts.items()}


def test_wordfreq_over_compressed_text_matches_counter(inprocess, corpus):
    directory, texts = corpus
    result = run(inprocess, mr.WordFreq(), [directory], read_size=64 << 10)
    expected = collections.Counter(word for text in texts.values() for word in text.split())
    assert dict(result.entries()) == expected


def test_a_truncated_or_corrupt_compressed_file_fails_or_is_skipped(inprocess, corpus, tmp_path):
    _, texts = corpus
    compressed = [path for path in texts if path.endswith((".gz", ".zz"))]
    good = compressed[:4]
    truncated, corrupt = str(tmp_path / "cut.txt.gz"), str(tmp_path / "bad.txt.zz")
    with open(next(p for p in compressed if p.endswith(".gz")), "rb") as f:
        data = f.read()
    with open(truncated, "wb") as f:
        f.write(data[: len(data) - 9])  # the trailer and a little more: all but the end decompresses
    packed = bytearray(zlib.compress(b"some words here\n" * 5000))
    packed[len(packed) // 2] ^= 0xFF
    with open(corrupt, "wb") as f:
        f.write(bytes(packed))
    job = mr.WordCount()
    with pytest.raises(JobFailed, match=r"cut.txt.gz: truncated GZIP file|bad.txt.zz: corrupt ZLIB file"):
        run(inprocess, job, good + [truncated, corrupt])
    result = run(inprocess, job, good + [truncated, corrupt], on_error="skip")
    skipped = dict(result.skipped)
    assert sorted(skipped) == sorted([truncated, corrupt])
    assert skipped[truncated].startswith("truncated GZIP file") and skipped[corrupt].startswith("corrupt ZLIB file")
    assert result.total == sum(len(texts[p].split()) for p in good)
