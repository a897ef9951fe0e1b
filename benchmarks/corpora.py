"""The deterministic corpus, made once under --dir and kept while its sizes are the same: the
word parts, the tf.Example shards, one large TFRecord file and the listing layouts."""

import glob
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import time

from benchmarks import REPO
from benchmarks.options import FLAGS
from benchmarks.scale_examples import WIDE_TERM_BYTES, WIDE_TERMS_DISTINCT, WIDE_TERMS_EXAMPLES

__all__ = ["MB", "PARTS", "SMALL_EXAMPLES", "WIDE_EXAMPLES", "make_corpus", "scale_sizes"]

PARTS = ("small", "tiny", "huge", "giant")  # the word parts
MB = 1e6
SMALL_EXAMPLES = 20_000  # the small transform part's examples
WIDE_EXAMPLES = 1_000_000  # the wide vocabulary part's examples, each of its own term
EXAMPLE_BYTES = 293  # a make_examples.py example with --embedding_dim 64, GZIP'd (measured)
TINY_PER_DIRECTORY = 1000
BLOCK = 8 << 20
BLOCKS = 16
HARD_LINKED = (300, 200)  # files, hard links of each: 60,000 names


def _is_made(stamp: str, spec: dict) -> bool:
    """Whether `stamp` records `spec`: the part there was made with these sizes."""
    if not os.path.exists(stamp):
        return False
    with open(stamp) as f:
        return json.load(f) == spec


def _stamp(stamp: str, spec: dict) -> None:
    with open(stamp, "w") as f:
        json.dump(spec, f)


def _block(seed: int) -> bytes:
    """8 MB of lines of ASCII words with a Zipf-like vocabulary, ending in a newline."""
    rng = random.Random(seed)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    vocabulary = []
    for _ in range(50_000):
        length = 1 + min(11, int(rng.expovariate(0.56)))  # 3.74 bytes a word, as the corpus
        vocabulary.append("".join(rng.choice(letters) for _ in range(length)).encode())
    weights = [1.0 / (rank + 1) for rank in range(len(vocabulary))]
    words = rng.choices(vocabulary, weights, k=BLOCK // 3)
    lines, size, line = [], 0, []
    for word in words:
        line.append(word)
        if len(line) == 14:
            text = b" ".join(line) + b"\n"
            lines.append(text)
            size += len(text)
            line = []
            if size >= BLOCK:
                break
    return b"".join(lines)


def _write_words(directory: str) -> None:
    """The word parts, from the same blocks: a slice of a block per small file, a line per
    tiny file, and blocks end to end for the huge and giant files."""
    blocks = [_block(seed) for seed in range(BLOCKS)]
    for part in PARTS:
        os.makedirs(os.path.join(directory, part))
    for n in range(FLAGS.small_files):
        block = blocks[n % BLOCKS]
        start = block.index(b"\n", (n * 7919) % (BLOCK - FLAGS.small_kb * 1000)) + 1
        end = block.index(b"\n", start + FLAGS.small_kb * 1000 - 100) + 1
        with open(os.path.join(directory, "small", "part-%05d.txt" % n), "wb") as f:
            f.write(block[start:end])
    for n in range(FLAGS.tiny_files):
        # Files of one line (7 to 30 words), from anywhere in the blocks; a directory
        # per thousand, as a real store of many files would be laid out.
        block = blocks[n % BLOCKS]
        start = block.index(b"\n", (n * 104729) % (len(block) - 1000)) + 1
        end = block.index(b"\n", start) + 1
        words = block[start:end].split()[: 7 + n % 24]
        subdirectory = os.path.join(directory, "tiny", "d%04d" % (n // TINY_PER_DIRECTORY))
        if n % TINY_PER_DIRECTORY == 0:
            os.makedirs(subdirectory)
        with open(os.path.join(subdirectory, "t%07d.txt" % n), "wb") as f:
            f.write(b" ".join(words) + b"\n")
    for name, size in (("huge", FLAGS.huge_mb), ("giant", FLAGS.giant_mb)):
        if size:
            with open(os.path.join(directory, name, "%s.txt" % name), "wb") as f:
                for k in range(size * 1000 * 1000 // BLOCK + 1):
                    f.write(blocks[(k * 5) % BLOCKS])


def make_corpus(directory: str) -> dict[str, list[str]]:
    """Writes the corpus unless the same one is there; returns {part: [paths]}."""
    spec = {
        "small_files": FLAGS.small_files,
        "small_kb": FLAGS.small_kb,
        "tiny_files": FLAGS.tiny_files,
        "huge_mb": FLAGS.huge_mb,
        "giant_mb": FLAGS.giant_mb,
        "version": 2,
    }
    stamp = os.path.join(directory, "corpus.json")
    if not _is_made(stamp, spec):
        shutil.rmtree(directory, ignore_errors=True)
        started = time.monotonic()
        _write_words(directory)
        _stamp(stamp, spec)
        print("made the corpus in %.0f s" % (time.monotonic() - started), flush=True)
    parts = {name: sorted(glob.glob(os.path.join(directory, name, "*.txt"))) for name in PARTS}
    parts["tiny"] = sorted(glob.glob(os.path.join(directory, "tiny", "*", "*.txt")))
    parts["examples"] = make_examples(os.path.join(directory, "examples"))
    parts["record"] = make_record_file(os.path.join(directory, "record"), parts["examples"])
    parts["layouts"] = make_layouts(os.path.join(directory, "layouts"))
    parts["storage"] = parts["small"][:40]
    parts["transform"] = parts["examples"][: FLAGS.transform_shards]
    parts["transform_keras"] = parts["transform"]
    parts["transform_small"] = make_small_examples(os.path.join(directory, "transform_small"))
    parts["transform_wide"] = make_wide_examples(os.path.join(directory, "transform_wide"))
    if "transform_scale" in FLAGS.parts:  # hundreds of MB, made only to be timed
        parts["transform_scale"] = make_scale_examples(os.path.join(directory, "transform_scale"))
    if "transform" in FLAGS.parts and not os.path.exists(FLAGS.tft_python):
        print("transform: not timed: no tf.Transform at %s (--tft_python; docs/performance.md)" % FLAGS.tft_python)
        parts["transform"] = []
    return {name: paths for name, paths in parts.items() if paths}


def _write_layouts(layouts: list[str], files: int) -> None:
    hard_links, one_directory, tree = layouts
    os.makedirs(hard_links)
    for n in range(HARD_LINKED[0]):
        original = os.path.join(hard_links, "f%03d-000.txt" % n)
        with open(original, "wb") as f:
            f.write(b"w%d\n" % n)
        for k in range(1, HARD_LINKED[1]):
            os.link(original, os.path.join(hard_links, "f%03d-%03d.txt" % (n, k)))
    os.makedirs(one_directory)
    for n in range(files):
        with open(os.path.join(one_directory, "f%07d.txt" % n), "wb") as f:
            f.write(b"w%d\n" % (n % 1000))
    per_leaf = max(1, files // 10_000)
    for n in range(files):
        leaf = os.path.join(tree, "%02d" % (n // per_leaf // 100 % 100), "%02d" % (n // per_leaf % 100))
        if n % per_leaf == 0:
            os.makedirs(leaf, exist_ok=True)
        with open(os.path.join(leaf, "f%07d.txt" % n), "wb") as f:
            f.write(b"w%d\n" % (n % 1000))


def make_layouts(directory: str) -> list[str]:
    """Directories that are hard to list, each of one-word files: 300 files with 200 hard
    links each in one directory; --layout_files files in one directory; as many in a
    3-level tree (100 x 100 directories). Returns their paths."""
    spec = {"files": FLAGS.layout_files, "hard_linked": list(HARD_LINKED)}  # as JSON reads it back
    stamp = os.path.join(directory, "layouts.json")
    layouts = [os.path.join(directory, name) for name in ("hard_links", "one_directory", "tree")]
    if not spec["files"]:
        return []
    if not _is_made(stamp, spec):
        shutil.rmtree(directory, ignore_errors=True)
        started = time.monotonic()
        _write_layouts(layouts, spec["files"])
        _stamp(stamp, spec)
        print("made the listing layouts in %.0f s" % (time.monotonic() - started), flush=True)
    return layouts


def make_examples(directory: str) -> list[str]:
    """The tf.Example part (scripts/make_examples.py: 16 GZIP'd shards, a 64-float
    embedding per example), unless the same one is there; returns its paths."""
    spec = {"examples": FLAGS.examples_mb * 1000 * 1000 // EXAMPLE_BYTES, "shards": 16, "embedding_dim": 64}
    return _made_examples(directory, spec)


def make_small_examples(directory: str) -> list[str]:
    """The small transform part: scripts/make_examples.py's 20,000 examples in 4 GZIP'd
    shards (about 540 KB, no embedding), unless they are there; returns their paths."""
    return _made_examples(directory, {"examples": SMALL_EXAMPLES, "shards": 4, "embedding_dim": 0})


def make_wide_examples(directory: str) -> list[str]:
    """The wide vocabulary part: `benchmarks.wide_examples`' 1,000,000 examples (4 GZIP'd
    shards, about 9 MB), unless they are there; returns their paths."""
    spec = {"examples": WIDE_EXAMPLES, "version": 1}
    stamp = os.path.join(directory, "examples.json")
    if not _is_made(stamp, spec):
        shutil.rmtree(directory, ignore_errors=True)
        started = time.monotonic()
        command = [sys.executable, "-m", "benchmarks.wide_examples", "--output_dir", directory]
        subprocess.run(command + ["--examples=%d" % WIDE_EXAMPLES], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        _stamp(stamp, spec)
        print("made the wide examples in %.0f s" % (time.monotonic() - started), flush=True)
    return sorted(glob.glob(os.path.join(directory, "*.tfrecord.gz")))


def scale_sizes() -> list[int]:
    """The scale part's sizes, in examples: tf.Transform's (if it runs), N, 2N."""
    return ([FLAGS.scale_tft_examples] if FLAGS.scale_tft_examples else []) + [
        FLAGS.scale_examples,
        2 * FLAGS.scale_examples,
    ]


def make_scale_examples(directory: str) -> list[str]:
    """The scale part: `benchmarks.scale_examples`' examples at each of `scale_sizes` (half
    as many distinct terms), and with `--scale_wide_terms` those of a vocabulary over 2 GiB,
    a directory each, unless they are there; returns their paths."""
    sizes = [("%d" % examples, examples, examples // 2, 11) for examples in scale_sizes()]
    if FLAGS.scale_wide_terms:
        wide = (WIDE_TERMS_EXAMPLES, WIDE_TERMS_DISTINCT, WIDE_TERM_BYTES)
        sizes.append(("wide-terms-%d" % WIDE_TERMS_EXAMPLES, *wide))
    paths = []
    for name, examples, distinct, term_bytes in sizes:
        into = os.path.join(directory, name)
        spec = {"examples": examples, "distinct": distinct, "version": 1}
        if term_bytes != 11:  # the spec of the examples made before terms had a width
            spec["term_bytes"] = term_bytes
        stamp = os.path.join(into, "examples.json")
        if not _is_made(stamp, spec):
            shutil.rmtree(into, ignore_errors=True)
            started = time.monotonic()
            command = [sys.executable, "-m", "benchmarks.scale_examples", "--output_dir", into]
            command += ["--examples=%d" % examples, "--distinct=%d" % distinct, "--term_bytes=%d" % term_bytes]
            subprocess.run(command, check=True, cwd=REPO, stdout=subprocess.DEVNULL)
            _stamp(stamp, spec)
            print("made %d scale examples in %.0f s" % (examples, time.monotonic() - started), flush=True)
        paths += sorted(glob.glob(os.path.join(into, "*.tfrecord.gz")))
    return paths


def _made_examples(directory: str, spec: dict) -> list[str]:
    """scripts/make_examples.py's examples as `spec` gives its flags, in `directory`, unless
    the same ones are there; returns their paths (none for 0 examples)."""
    stamp = os.path.join(directory, "examples.json")
    if spec["examples"] and not _is_made(stamp, spec):
        shutil.rmtree(directory, ignore_errors=True)
        started = time.monotonic()
        script = os.path.join(REPO, "scripts", "make_examples.py")
        subprocess.run(
            [sys.executable, script, "--output_dir", directory]
            + ["--%s=%d" % (name, value) for name, value in spec.items()],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        _stamp(stamp, spec)
        print("made the examples in %.0f s" % (time.monotonic() - started), flush=True)
    return sorted(glob.glob(os.path.join(directory, "*.tfrecord.gz"))) if spec["examples"] else []


def make_record_file(directory: str, shards: list[str]) -> list[str]:
    """One uncompressed TFRecord file of about --record_mb MB: the example shards inflated
    and put end to end, again until it is that large (TFRecord files put end to end are
    one). Returns [its path], or [] for --record_mb=0."""
    spec = {"mb": FLAGS.record_mb, "examples": FLAGS.examples_mb}
    path = os.path.join(directory, "examples.tfrecord")
    stamp = os.path.join(directory, "record.json")
    if not spec["mb"] or not shards:
        return []
    if not _is_made(stamp, spec):
        shutil.rmtree(directory, ignore_errors=True)
        os.makedirs(directory)
        started = time.monotonic()
        with open(path, "wb") as out:
            while out.tell() < spec["mb"] * MB:
                for shard in shards:
                    with gzip.open(shard, "rb") as f:
                        shutil.copyfileobj(f, out, 16 << 20)
                    if out.tell() >= spec["mb"] * MB:
                        break
        _stamp(stamp, spec)
        print("made the TFRecord file in %.0f s" % (time.monotonic() - started), flush=True)
    return [path]
