"""The word parts (small, tiny, huge, giant): word count and word frequencies, our default
command and local clusters against the plain peers."""

import functools
import json
import os
import shutil
import sys
import tempfile

from benchmarks.names import FIND_CAT, POOL, POOL_FREQ
from benchmarks.options import FLAGS
from benchmarks.peers import digest, run_find_cat, run_mawk, run_peer, run_wc
from benchmarks.timing import Contender, Run, measure

__all__ = ["contenders", "run_ours"]


def _read_result(job: str, output: str) -> dict:
    """The result `job` wrote to `output`: words (and timings) of a count; words, distinct
    words, the top 5 and a digest of frequencies."""
    if job == "wordcount":
        with open(output) as f:
            result = json.load(f)
        return {
            "words": result["total_words"],
            "startup": result["timings"]["startup"],
            "map_seconds": result["timings"]["map"],
        }
    counts = []
    with open(output, "rb") as f:
        for line in f:
            word, count = line.rstrip(b"\n").split(b"\t")
            counts.append((word, int(count)))
    return {
        "words": sum(c for _, c in counts),
        "distinct": len(counts),
        "top": [[w.decode(), c] for w, c in counts[:5]],
        "digest": digest(counts),
    }


def run_ours(
    paths: list[str] | str,
    job: str,
    num_ps: int,
    num_workers: int,
    local_cluster: str = "processes",
    env: dict[str, str] | None = None,
) -> Run:
    """Our job on `paths`, given as an @list, or as `--input` itself if one string."""
    listing = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    listing.write("\n".join(paths) if not isinstance(paths, str) else "")
    listing.close()
    output = tempfile.mktemp(suffix=".json" if job == "wordcount" else ".tsv")
    command = [
        sys.executable,
        "-m",
        "tf2_mapreduce.coordinator",
        "--job=" + job,
        "--input",
        paths if isinstance(paths, str) else "@" + listing.name,
        "--num_ps=%d" % num_ps,
        "--num_workers=%d" % num_workers,
        "--output",
        output,
        "--progress_every=60",
        "--local_cluster=" + local_cluster,
    ]
    seconds, rss, _ = measure(command, env)
    os.unlink(listing.name)
    found = _read_result(job, output)
    os.unlink(output)
    return seconds, rss, found


def _ours(paths: list[str], spec: str, job: str = "wordcount", local_cluster: str = "processes") -> Contender:
    """(name, run) of our job on a local cluster `spec` ("PSxWORKERS")."""
    num_ps, num_workers = (int(x) for x in spec.split("x"))
    name = "%stf2_mapreduce %dps+%dw%s" % (
        "freq: " if job == "wordfreq" else "",
        num_ps,
        num_workers,
        " in-process" if local_cluster == "inprocess" else "",
    )
    return name, functools.partial(run_ours, paths, job, num_ps, num_workers, local_cluster)


def _frequency_contenders(part: str, paths: list[str]) -> list[Contender]:
    """Word frequencies: Counter in one process (small files), Pool(2), and ours."""
    found = []
    if part == "small":
        found.append(("freq: python Counter", lambda: run_peer("counter", paths)))
    found.append((POOL_FREQ, lambda: run_peer("pool_counter", paths)))
    found.append(_ours(paths, FLAGS.clusters[0], "wordfreq", "inprocess"))
    if part == "small":
        specs = FLAGS.clusters[:1] + [c for c in FLAGS.clusters if c.startswith("2x")][:1]
        found += [_ours(paths, spec, "wordfreq") for spec in specs]
    return found


def contenders(part: str, paths: list[str], spark: bool) -> list[Contender]:
    """[(name, run)] for one word part: the plain peers and the default command; the small
    files also get every cluster size, our map step alone and PySpark (`spark`: it is
    installed); word frequencies run on the small files and the huge file."""
    found = [("wc -w", lambda: run_wc(paths)), (POOL, lambda: run_peer("multiprocessing", paths))]
    if part in ("small", "tiny"):
        found.append(("python bytes.split, 1 process", lambda: run_peer("python", paths)))
    if part == "tiny":
        found.append((FIND_CAT, lambda: run_find_cat(os.path.join(FLAGS.dir, "tiny"))))
    if shutil.which("mawk") and part != "tiny":  # 100,000 paths are too many arguments
        found.append(("mawk", lambda: run_mawk(paths)))
    found.append(_ours(paths, FLAGS.clusters[0], local_cluster="inprocess"))
    if part == "small":
        if spark:
            found.append(("pyspark local[2]", lambda: run_peer("spark", paths)))
        found.append(("our map step, 1 process", lambda: run_peer("map_step", paths)))
        found += [_ours(paths, spec) for spec in FLAGS.clusters]
    if FLAGS.wordfreq and part in ("small", "huge"):
        found += _frequency_contenders(part, paths)
    return found
