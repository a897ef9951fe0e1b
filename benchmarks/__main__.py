"""`python -m benchmarks [flags]`: makes the corpus, times each part's contenders in turns,
and prints the tables and targets (docs/performance.md); `--peer=NAME` runs one plain peer."""

import importlib.util
import json
import os
import shutil

from absl import app, flags

from benchmarks import examples, layouts, options, scale, storage, transform, wordcount
from benchmarks.corpora import MB, PARTS, make_corpus
from benchmarks.example_peers import PEERS as EXAMPLE_PEERS
from benchmarks.options import FLAGS
from benchmarks.peers import PEERS as WORD_PEERS
from benchmarks.report import report
from benchmarks.timing import Contender, time_part

__all__ = ["main"]

# --help lists the flags of the main module: these are this one's.
flags.adopt_module_key_flags(options)

PEERS = WORD_PEERS | EXAMPLE_PEERS
# The other parts, in the order they are timed, after the word parts.
CONTENDERS = {
    "examples": examples.contenders,
    "record": examples.record_contenders,
    "layouts": layouts.contenders,
    "storage": storage.contenders,
    "transform": transform.contenders,
    "transform_small": transform.small_contenders,
    "transform_wide": transform.wide_contenders,
    "transform_keras": transform.keras_contenders,
    "transform_scale": scale.scale_contenders,
}


def _contenders(part: str, paths: list[str], spark: bool) -> list[Contender]:
    """[(name, run)] for one part of the corpus; each run returns (seconds, rss, result)."""
    if part in PARTS:
        return wordcount.contenders(part, paths, spark)
    return CONTENDERS[part](paths)


def main(argv: list[str]) -> None:
    if FLAGS.peer:
        with open(argv[1][1:]) as f:
            paths = [line for line in f.read().splitlines() if line]
        print(json.dumps(PEERS[FLAGS.peer](paths)))
        return
    parts = make_corpus(FLAGS.dir)
    rows = []
    spark = importlib.util.find_spec("pyspark") is not None and bool(shutil.which("java"))
    for part in [p for p in PARTS + tuple(CONTENDERS) if p in parts and p in FLAGS.parts]:
        paths = parts[part]
        size = sum(os.path.getsize(p) for p in paths) / MB
        print("%s: %d files, %.0f MB" % (part, len(paths), size), flush=True)
        rows += time_part(part, size, _contenders(part, paths, spark), FLAGS.repeats)
    report(rows, spark)


if __name__ == "__main__":
    app.run(main)
