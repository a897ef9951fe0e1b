"""The "transform_scale" part: a transform at the scale people leave Beam for, ours with a
process per task, at a size and at twice it (20 and 40 million examples by default;
`benchmarks.scale_examples`): two vocabularies of every distinct term (one whole, one
top_k 1,000,000), a z-score and 100 buckets of a float of as many distinct values. Each run's output is checked whole against an oracle that
reads the raw files itself (numpy, exact integers), every task's peak memory reported."""

import glob
import os
import shutil
import sys
import tempfile
from fractions import Fraction

import numpy as np

from benchmarks import REPO, scale_examples
from benchmarks.corpora import scale_sizes
from benchmarks.names import SCALE_ONCE, SCALE_TFT, SCALE_TWICE, SCALE_WIDE_TERMS
from benchmarks.options import FLAGS
from benchmarks.scale_examples import BUCKETS, TOP_K
from benchmarks.timing import Contender, Run, measure
from benchmarks.transform import PASS_LINE, tft_command

__all__ = ["run_scale", "run_scale_tft", "scale_contenders", "exact"]


# The module our side's coordinator imports.
MODULE = "import tf2_mapreduce.transform as tft\nfrom benchmarks.scale_examples import preprocessing_fn as of\n\npreprocessing_fn = of(tft)\n"
SCHEMA = 'feature { name: "%s" type: BYTES }\nfeature { name: "%s" type: FLOAT }\n' % (
    scale_examples.TERM,
    scale_examples.X,
)
_BATCH = 1 << 16


def _read(paths, features):
    """Every example of `paths` (GZIP'd TFRecords), in order, parsed by TensorFlow's own
    parse_example: {name: a numpy array}; `features`: {name: (dtype)}, each one value."""
    import tensorflow as tf

    spec = {name: tf.io.FixedLenFeature([], dtype) for name, dtype in features.items()}
    dataset = tf.data.TFRecordDataset(paths, compression_type="GZIP").batch(_BATCH)
    dataset = dataset.map(lambda records: tf.io.parse_example(records, spec))
    parts = {name: [] for name in features}
    for batch in dataset:
        for name in features:
            values = batch[name].numpy()
            # Strings as a bytes array, a batch at a time: not an object a string.
            parts[name].append(values.astype(bytes) if values.dtype == object else values)
    return {name: np.concatenate(parts[name]) if parts[name] else np.array([]) for name in features}


def _float32(value: Fraction) -> np.float32:
    """`value` rounded once to the nearest float32 (ties to even)."""
    near = np.float32(float(value))
    candidates = [np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf))]
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - value), int(c.view(np.uint32)) & 1))


def _moments(x):
    """The mean and population variance of `x` (float32 >= 1: multiples of 2**-23), exact,
    each rounded once to float32."""
    units = (x.astype(np.float64) * 2**23).astype(np.int64)
    total = int(units.sum())
    # Squares summed in uint64 by chunks too small to overflow it, the chunks' in Python.
    largest = int(np.abs(units).max()) if len(units) else 1
    per_chunk = max(1, (1 << 64) // max(largest * largest, 1) - 1)
    chunks = np.array_split(units.astype(np.uint64), len(units) // per_chunk + 1)
    squares = sum(int((chunk * chunk).sum()) for chunk in chunks)
    n = len(units)
    mean = Fraction(total, n * 2**23)
    variance = Fraction(squares, n * 2**46) - mean * mean
    return _float32(mean), _float32(variance)


def _vocabulary(terms):
    """tf.Transform's vocabulary of `terms` (bytes): count descending, then bytes
    descending; and each term's rank in it."""
    distinct, which, counts = np.unique(terms, return_inverse=True, return_counts=True)
    order = np.lexsort((-np.arange(len(distinct)), -counts))
    rank = np.empty(len(distinct), np.int64)
    rank[order] = np.arange(len(distinct))
    return distinct[order], rank[which]


def _file_lines(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]


def exact(raw_paths, output_dir) -> list[str]:
    """What the transform wrote into `output_dir` that differs from the oracle's, from
    `raw_paths`: each vocabulary's file, and every example's every feature. Empty if exact."""
    raw = _read(raw_paths, {scale_examples.TERM: "string", scale_examples.X: "float32"})
    terms, x = raw[scale_examples.TERM], raw[scale_examples.X]
    problems = []
    vocabulary, rank = _vocabulary(terms)
    assets = os.path.join(output_dir, "transform_fn", "assets")
    if _file_lines(os.path.join(assets, "whole")) != vocabulary.tolist():
        problems.append("the whole vocabulary differs from the oracle's")
    if _file_lines(os.path.join(assets, "top")) != vocabulary[:TOP_K].tolist():
        problems.append("the top_k vocabulary differs from the oracle's")
    ordered = np.sort(x)
    n = len(ordered)
    boundaries = ordered[[k * n // BUCKETS for k in range(1, BUCKETS)]]
    mean, variance = _moments(x)
    expected = {
        "whole": rank,
        "top": np.where(rank < TOP_K, rank, -1),
        "bucket": np.searchsorted(boundaries, x, side="right"),
        "z": (x - mean) / np.sqrt(variance) if variance else x - mean,
    }
    data = sorted(glob.glob(os.path.join(output_dir, "data", "*")))
    written = _read(data, {"whole": "int64", "top": "int64", "bucket": "int64", "z": "float32"})
    for name, values in expected.items():
        got = written[name]
        if len(got) != n:
            problems.append("%s: %d examples written, not %d" % (name, len(got), n))
        elif not np.array_equal(
            got.view(np.uint32) if name == "z" else got, values.view(np.uint32) if name == "z" else values
        ):
            first = int(np.argmax((got.view(np.uint32) != values.view(np.uint32)) if name == "z" else got != values))
            problems.append("%s: example %d is %r, not %r" % (name, first, got[first], values[first]))
    return problems


def _checked(command: list[str], paths: list[str], pythonpath: str, work: str) -> Run:
    """`command` timed (it writes `work`/out), its output checked against the oracle (`exact`);
    the result: whether exact (and the first problems), the transform pass's seconds where printed."""
    output_dir = os.path.join(work, "out")
    env = dict(os.environ, PYTHONPATH=pythonpath, TF_CPP_MIN_LOG_LEVEL="2")
    try:
        seconds, rss, stdout = measure(command + ["--output_dir", output_dir], env)
        problems = exact(paths, output_dir)
        whole = os.path.join(output_dir, "transform_fn", "assets", "whole")
        vocabulary_bytes = os.path.getsize(whole) if os.path.exists(whole) else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
    found = {"examples": len(paths) and _examples(paths), "exact": not problems, "problems": problems[:3]}
    found["vocabulary_bytes"] = vocabulary_bytes
    printed = PASS_LINE.search(stdout)
    if printed:
        found["map_seconds"] = float(printed.group(2))
    return seconds, rss, found


def _examples(paths: list[str]) -> int:
    """The examples of a size, by its directory's name (`corpora.make_scale_examples`)."""
    return int(os.path.basename(os.path.dirname(paths[0])).rsplit("-", 1)[-1])


def _schema(work: str) -> str:
    path = os.path.join(work, "raw_schema.pbtxt")
    with open(path, "w") as f:
        f.write(SCHEMA)
    return path


def run_scale(paths: list[str]) -> Run:
    """Our transform over `paths`, the CLI with a process per task (`_checked`)."""
    work = tempfile.mkdtemp(prefix="tf2_mapreduce-bench-transform-scale-")
    with open(os.path.join(work, "scale_fn.py"), "w") as f:
        f.write(MODULE)
    command = [sys.executable, "-m", "tf2_mapreduce.coordinator", "--job=transform"] + [
        "--preprocessing_fn=scale_fn:preprocessing_fn",
        "--schema=" + _schema(work),
        "--progress_every=60",
        "--local_cluster=processes",
        *paths,
    ]
    return _checked(command, paths, os.pathsep.join([work, REPO]), work)


def run_scale_tft(paths: list[str]) -> Run:
    """tf.Transform's side over `paths` (its Beam pipeline on the DirectRunner, in its venv:
    `benchmarks.tf_transform`), checked as ours (its quantiles are approximate: its buckets
    differ, which the result says)."""
    work = tempfile.mkdtemp(prefix="tf2_mapreduce-bench-transform-scale-tft-")
    pattern = os.path.join(os.path.dirname(paths[0]), "*.tfrecord.gz")
    command = tft_command(FLAGS.tft_python, pattern, _schema(work), "")[:-2]
    command += ["--make_fn", "benchmarks.scale_examples:preprocessing_fn"]
    return _checked(command, paths, REPO, work)


def scale_contenders(paths: list[str]) -> list[Contender]:
    """Ours at N examples and at 2N, and tf.Transform at its size if it runs (`corpora.scale_sizes`)."""
    sizes = scale_sizes()
    by_size = {size: [p for p in paths if os.path.basename(os.path.dirname(p)) == "%d" % size] for size in sizes}
    contenders = [
        (SCALE_ONCE, lambda: run_scale(by_size[sizes[-2]])),
        (SCALE_TWICE, lambda: run_scale(by_size[sizes[-1]])),
    ]
    wide_terms = [p for p in paths if os.path.basename(os.path.dirname(p)).startswith("wide-terms-")]
    if wide_terms:
        contenders.append((SCALE_WIDE_TERMS, lambda: run_scale(wide_terms)))
    if FLAGS.scale_tft_examples:
        contenders.insert(0, (SCALE_TFT, lambda: run_scale_tft(by_size[sizes[0]])))
    return contenders
