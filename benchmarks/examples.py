"""The tf.Example parts: "examples" (GZIP'd shards) and "record" (one TFRecord file cut into
byte ranges), our vocab and stats jobs against plain tf.data passes and Pool(2) with protobuf."""

import collections
import json
import os
import shutil
import sys
import tempfile

from benchmarks.example_peers import vocab_result
from benchmarks.names import (
    FEATURES,
    POOL_EXAMPLES,
    STATS,
    STATS_ALL,
    STATS_ALL_TASKS,
    TFDATA,
    TFDATA_ONE,
    VOCAB,
    VOCAB_ONE_WORKER,
    VOCAB_TASKS,
    VOCAB_TWO_WORKERS,
)
from benchmarks.peers import run_peer
from benchmarks.timing import Contender, Run, measure

__all__ = ["contenders", "record_contenders"]


def _run_job(command: list[str], paths: list[str]) -> tuple[float, dict[str, float], str]:
    """`command` (our coordinator, with every flag but its inputs and output directory) over
    `paths`; returns (seconds, {role: peak RSS MB}, the output directory)."""
    listing = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    listing.write("\n".join(paths))
    listing.close()
    output_dir = tempfile.mkdtemp()
    command += ["--input", "@" + listing.name, "--output_dir", output_dir, "--progress_every=60"]
    seconds, rss, _ = measure(command)
    os.unlink(listing.name)
    return seconds, rss, output_dir


def _unescape(term: bytes) -> bytes:
    from tf2_mapreduce.outputs import files as output

    return output.unescape(term.decode())


def run_vocab(paths: list[str], processes: bool = False, num_workers: int | None = None) -> Run:
    """Our vocab job, the default command (an in-process cluster; a process per task
    with `processes`; `num_workers` if given), its vocabularies read back."""
    command = [sys.executable, "-m", "tf2_mapreduce.coordinator", "--job=vocab", "--features=" + ",".join(FEATURES)]
    command += ["--local_cluster=processes"] if processes else []
    command += ["--num_workers=%d" % num_workers] if num_workers else []
    seconds, rss, output_dir = _run_job(command, paths)
    with open(os.path.join(output_dir, "summary.json")) as f:
        summary = json.load(f)
    counts = {}
    for name in FEATURES:
        counts[name] = collections.Counter()
        for kind in ("counts", "unwritable"):
            with open(os.path.join(output_dir, "%s_%s.tsv" % (kind, name)), "rb") as f:
                for line in f:
                    count, term = line.rstrip(b"\n").split(b"\t", 1)
                    counts[name][term if kind == "counts" else _unescape(term)] = int(count)
    shutil.rmtree(output_dir)
    found = vocab_result(summary["examples"], counts)
    found.update(startup=summary["timings"]["total"] - summary["timings"]["map"], map_seconds=summary["timings"]["map"])
    return seconds, rss, found


def run_stats(paths: list[str], every: bool = False, processes: bool = False) -> Run:
    """Our stats job over the vocabulary's features (or `every` feature), the default
    command (a process per task with `processes`), its stats.json read back: the
    examples, and the values of those features."""
    command = [sys.executable, "-m", "tf2_mapreduce.coordinator", "--job=stats"]
    command += [] if every else ["--features=" + ",".join(FEATURES)]
    command += ["--local_cluster=processes"] if processes else []
    seconds, rss, output_dir = _run_job(command, paths)
    with open(os.path.join(output_dir, "stats.json")) as f:
        document = json.load(f)
    shutil.rmtree(output_dir)
    features = document["features"]
    found = {
        "examples": document["num_examples"],
        "values": sum(features[name]["tot_num_values"] for name in FEATURES),
        "startup": document["timings"]["total"] - document["timings"]["map"],
        "map_seconds": document["timings"]["map"],
    }
    return seconds, rss, found


def contenders(paths: list[str]) -> list[Contender]:
    """The "examples" part: a plain tf.data pass per core, Pool(2) with protobuf and Counter,
    our vocab job, and our stats job of the same features and of every feature."""
    return [
        (TFDATA, lambda: run_peer("tfdata", paths)),
        (POOL_EXAMPLES, lambda: run_peer("pool_examples", paths)),
        (VOCAB, lambda: run_vocab(paths)),
        (STATS, lambda: run_stats(paths)),
        (STATS_ALL, lambda: run_stats(paths, every=True)),
        (VOCAB_TASKS, lambda: run_vocab(paths, processes=True)),
        (STATS_ALL_TASKS, lambda: run_stats(paths, every=True, processes=True)),
    ]


def record_contenders(paths: list[str]) -> list[Contender]:
    """The "record" part: one tf.data pass, and our vocab job on one worker and on two."""
    return [
        (TFDATA_ONE, lambda: run_peer("tfdata_one", paths)),
        (VOCAB_ONE_WORKER, lambda: run_vocab(paths, processes=True, num_workers=1)),
        (VOCAB_TWO_WORKERS, lambda: run_vocab(paths, processes=True, num_workers=2)),
    ]
