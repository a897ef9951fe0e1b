"""The "transform" part: one preprocessing_fn over the tf.Example shards, our `--job=transform`
(a process per task) against tf.Transform 1.21 on Beam's DirectRunner (in a venv of its own);
the "transform_small" part: the same function over 20,000 examples, against TensorFlow's import;
the "transform_wide" part: a vocabulary of a million terms applied, against one of a thousand;
the "transform_keras" part: the transform part's, against Keras's adapt of its analyzers alone."""

import glob
import gzip
import json
import os
import re
import shutil
import struct
import sys
import tempfile

from benchmarks import REPO
from benchmarks.layouts import run_tf_import
from benchmarks.names import (
    KERAS_ALL,
    KERAS_ALL_DEFAULT,
    KERAS_ALL_OURS,
    KERAS_FEW,
    KERAS_FEW_DEFAULT,
    KERAS_FEW_OURS,
    TF_IMPORT,
    TRANSFORM_NARROW,
    TRANSFORM_OURS,
    TRANSFORM_SMALL,
    TRANSFORM_TFT,
    TRANSFORM_WIDE,
)
from benchmarks.options import FLAGS
from benchmarks.timing import Contender, Run, measure

__all__ = ["contenders", "small_contenders", "wide_contenders", "keras_contenders"]

KERAS_FEW_SHARDS = 3  # 655,290 examples: about the smallest size the target holds from (600,000)

# make_examples.py's features, as their schema: score and the embedding in every example,
# one value and 64; the others missing from some examples, or lists.
SCHEMA = """\
feature { name: "query" type: BYTES }
feature { name: "tags" type: BYTES }
feature { name: "user_id" type: INT }
feature { name: "clicks" type: INT }
feature { name: "score" type: FLOAT presence { min_fraction: 1.0 } shape { dim { size: 1 } } }
feature { name: "embedding" type: FLOAT presence { min_fraction: 1.0 } shape { dim { size: 64 } } }
"""
MODULE = "bench_transform_fn"  # the module the coordinator imports: preprocessing_fn against ours
# The summary line of our transform pass, on stdout: its examples and seconds.
PASS_LINE = re.compile(r"^transform: (\d+) examples written .*, ([0-9.]+) s$", re.MULTILINE)


def prepare(directory: str, embedding: bool = True) -> tuple[str, str]:
    """Writes the schema, and the module of our side's preprocessing_fn (the `embedding` passed
    through, or none), into `directory`; returns the schema's path and the PYTHONPATH that
    finds the module (and this package)."""
    os.makedirs(directory, exist_ok=True)
    schema = os.path.join(directory, "raw_schema.pbtxt")
    with open(schema, "w") as f:
        f.write(SCHEMA)
    with open(os.path.join(directory, MODULE + ".py"), "w") as f:
        f.write("import tf2_mapreduce.transform as tft\nfrom benchmarks.tf_transform import preprocessing_fn as of\n\n")
        f.write("preprocessing_fn = of(tft, embedding=%s)\n" % embedding)
    return schema, os.pathsep.join([directory, REPO])


def ours_command(listing: str, schema: str, output_dir: str, processes: bool = True) -> list[str]:
    """Our side: the default command with a process per task, or as it is (`processes`
    False: the cluster in the command's process)."""
    return (
        [sys.executable, "-m", "tf2_mapreduce.coordinator", "--job=transform"]
        + [
            "--preprocessing_fn=%s:preprocessing_fn" % MODULE,
            "--schema=" + schema,
            "--input",
            "@" + listing,
            "--output_dir",
            output_dir,
            "--progress_every=60",
        ]
        + (["--local_cluster=processes"] if processes else [])
    )


def tft_command(tft_python: str, pattern: str, schema: str, output_dir: str) -> list[str]:
    """tf.Transform's side: benchmarks/tf_transform.py run with `tft_python`, a Python of tf.Transform's venv."""
    return [tft_python, "-m", "benchmarks.tf_transform", "--input", pattern] + [
        "--schema",
        schema,
        "--output_dir",
        output_dir,
    ]


def count_records(directory: str) -> int:
    """The records of the GZIP'd TFRecord files under `directory`/data, counted by their
    length fields (each file one GZIP stream, or several: Python's gzip reads both)."""
    count = 0
    for path in glob.glob(os.path.join(directory, "data", "*")):
        with gzip.open(path, "rb") as f:
            while header := f.read(12):
                (length,) = struct.unpack("<Q", header[:8])
                f.seek(length + 4, 1)
                count += 1
    return count


def _raw_pattern(paths: list[str], work: str) -> str:
    """A pattern of exactly `paths`, for Beam's reader: their directory's, or links under `work`
    where they are only the first of its shards."""
    pattern = os.path.join(os.path.dirname(paths[0]), "*")
    if len(paths) < len(glob.glob(pattern)):
        pattern = os.path.join(work, "raw", "*")
        os.makedirs(os.path.dirname(pattern))
        for path in paths:
            os.symlink(path, os.path.join(work, "raw", os.path.basename(path)))
    return pattern


def run_transform(paths: list[str], side: str) -> Run:
    """One side of the transform part over `paths`: ours, the default command with a process
    per task ("ours") or as it is ("default"); or tf.Transform's in its venv ("tft"). The
    result is the examples it wrote."""
    work = tempfile.mkdtemp(prefix="tf2_mapreduce-bench-transform-")
    schema, pythonpath = prepare(work)
    output_dir = os.path.join(work, "out")
    if side in ("ours", "default"):
        listing = os.path.join(work, "inputs.txt")
        with open(listing, "w") as f:
            f.write("\n".join(paths))
        command = ours_command(listing, schema, output_dir, processes=side == "ours")
    else:
        command = tft_command(FLAGS.tft_python, _raw_pattern(paths, work), schema, output_dir)
    return _measured(command, pythonpath, work, output_dir)


def _measured(command: list[str], pythonpath: str, work: str, output_dir: str) -> Run:
    """`command` timed with `pythonpath`, its result the examples it wrote into `output_dir`,
    and the transform pass's seconds as the command prints them (as "map_seconds": the
    part's steady time); `work` removed after."""
    seconds, rss, stdout = measure(command, dict(os.environ, PYTHONPATH=pythonpath, TF_CPP_MIN_LOG_LEVEL="2"))
    found = {"examples": count_records(output_dir)}
    shutil.rmtree(work)
    printed = PASS_LINE.search(stdout)
    if printed:
        found["map_seconds"] = float(printed.group(2))
    return seconds, rss, found


def run_small(paths: list[str]) -> Run:
    """The small part: the default command (in-process, the schema inferred) as a new user
    first runs it, end to end. The result is the examples it wrote."""
    work = tempfile.mkdtemp(prefix="tf2_mapreduce-bench-transform-small-")
    _, pythonpath = prepare(work, embedding=False)
    output_dir = os.path.join(work, "out")
    command = [sys.executable, "-m", "tf2_mapreduce.coordinator", "--job=transform"] + [
        "--preprocessing_fn=%s:preprocessing_fn" % MODULE,
        "--output_dir",
        output_dir,
        "--progress_every=60",
        *paths,
    ]
    return _measured(command, pythonpath, work, output_dir)


# compute_and_apply_vocabulary of one feature of benchmarks.wide_examples: a module each.
VOCABULARY_MODULE = """import tf2_mapreduce.transform as tft


def preprocessing_fn(inputs):
    return {"id": tft.compute_and_apply_vocabulary(inputs[%r])}
"""
WIDE_SCHEMA = 'feature { name: "wide" type: BYTES }\nfeature { name: "narrow" type: BYTES }\n'


def run_vocabulary(paths: list[str], feature: str) -> Run:
    """The wide part: a vocabulary of `feature` applied to every example, the default
    command with a process per task (`_measured`)."""
    work = tempfile.mkdtemp(prefix="tf2_mapreduce-bench-transform-wide-")
    with open(os.path.join(work, MODULE + ".py"), "w") as f:
        f.write(VOCABULARY_MODULE % feature)
    schema = os.path.join(work, "raw_schema.pbtxt")
    with open(schema, "w") as f:
        f.write(WIDE_SCHEMA)
    output_dir = os.path.join(work, "out")
    command = [sys.executable, "-m", "tf2_mapreduce.coordinator", "--job=transform"] + [
        "--preprocessing_fn=%s:preprocessing_fn" % MODULE,
        "--schema=" + schema,
        "--output_dir",
        output_dir,
        "--progress_every=60",
        "--local_cluster=processes",
        *paths,
    ]
    return _measured(command, os.pathsep.join([work, REPO]), work, output_dir)


def wide_contenders(paths: list[str]) -> list[Contender]:
    """A vocabulary of a million terms, and one of a thousand, over the same examples."""
    return [
        (TRANSFORM_WIDE, lambda: run_vocabulary(paths, "wide")),
        (TRANSFORM_NARROW, lambda: run_vocabulary(paths, "narrow")),
    ]


def small_contenders(paths: list[str]) -> list[Contender]:
    """TensorFlow's import (the yardstick: the target is it plus 3 s), and the small part."""
    return [(TF_IMPORT, run_tf_import), (TRANSFORM_SMALL, lambda: run_small(paths))]


def run_keras(paths: list[str]) -> Run:
    """Keras's side: its layers adapted to `paths` (benchmarks/keras_adapt.py), in a process
    of its own; the result is the examples it read."""
    with tempfile.NamedTemporaryFile("w", prefix="tf2_mapreduce-bench-keras-", suffix=".txt") as listing:
        listing.write("\n".join(paths))
        listing.flush()
        command = [sys.executable, "-m", "benchmarks.keras_adapt", listing.name]
        seconds, rss, stdout = measure(command, dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2"))
    return seconds, rss, json.loads(stdout.strip().splitlines()[-1])


def keras_contenders(paths: list[str]) -> list[Contender]:
    """Ours, the whole transform (a process per task, and the default command), and Keras's
    adapt alone, over the first 3 shards and over `paths` (the transform part's)."""
    few = paths[:KERAS_FEW_SHARDS]
    return [
        (KERAS_FEW_OURS, lambda: run_transform(few, "ours")),
        (KERAS_FEW_DEFAULT, lambda: run_transform(few, "default")),
        (KERAS_FEW, lambda: run_keras(few)),
        (KERAS_ALL_OURS, lambda: run_transform(paths, "ours")),
        (KERAS_ALL_DEFAULT, lambda: run_transform(paths, "default")),
        (KERAS_ALL, lambda: run_keras(paths)),
    ]


def contenders(paths: list[str]) -> list[Contender]:
    return [
        (TRANSFORM_OURS, lambda: run_transform(paths, "ours")),
        (TRANSFORM_TFT, lambda: run_transform(paths, "tft")),
    ]
