"""The "layouts" part: directories that are hard to list, the default command's start-up on
each (the listing included) against Python's import of TensorFlow, and the coordinator's peak RSS."""

import functools
import json
import os
import sys
import tempfile

from benchmarks.names import TF_IMPORT
from benchmarks.timing import Contender, Run, measure

__all__ = ["contenders"]


def run_tf_import() -> Run:
    """Python importing TensorFlow, and nothing else: the yardstick of start-up."""
    seconds, rss, _ = measure([sys.executable, "-c", "import tensorflow"])
    return seconds, rss, {}


def run_layout(directory: str) -> Run:
    """The default command (wordcount) over one directory, listed by the job itself."""
    output = tempfile.mktemp(suffix=".json")
    command = [sys.executable, "-m", "tf2_mapreduce.coordinator", "--input", directory, "--output", output]
    seconds, rss, _ = measure(command + ["--progress_every=60"])
    with open(output) as f:
        result = json.load(f)
    os.unlink(output)
    found = {
        "files": len(result["per_file"]),
        "words": result["total_words"],
        "startup": result["timings"]["startup"],
        "map_seconds": result["timings"]["map"],
    }
    return seconds, rss, found


def contenders(paths: list[str]) -> list[Contender]:
    """TensorFlow's import, then the default command on each layout of `paths`."""
    return [(TF_IMPORT, run_tf_import)] + [
        ("wordcount: " + os.path.basename(d), functools.partial(run_layout, d)) for d in paths
    ]
