"""The plain peers of the word parts: wc, mawk and find|cat as commands; bytes.split(), Pool(2),
Counter and PySpark in a process of their own (`--peer=NAME`), as is our map step alone."""

import collections
import hashlib
import json
import multiprocessing
import os
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterable, Iterator

from benchmarks.timing import Run, measure

__all__ = ["PEERS", "digest", "run_find_cat", "run_mawk", "run_peer", "run_wc"]

CHUNK = 16 << 20
POOL_TASK = 32 << 20  # bytes a Pool(2) task reads: a range of a large file, or a batch of small ones
WHITESPACE = b" \t\n\r\x0b\x0c"

Task = list[tuple[str, int, int]]  # (path, start, end) of the ranges one Pool(2) task reads


def run_peer(name: str, paths: list[str]) -> Run:
    """Peer `name` (a key of this PEERS or example_peers.PEERS) over `paths`, in a process of its own."""
    listing = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    listing.write("\n".join(paths))
    listing.close()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    seconds, rss, out = measure([sys.executable, "-m", "benchmarks", "--peer=" + name, "@" + listing.name], env)
    os.unlink(listing.name)
    return seconds, rss, json.loads(out.strip().splitlines()[-1])


def run_wc(paths: list[str]) -> Run:
    listing = tempfile.NamedTemporaryFile("wb", delete=False)
    listing.write(b"\0".join(os.fsencode(p) for p in paths) + b"\0")
    listing.close()
    seconds, rss, out = measure(["wc", "-w", "--files0-from=" + listing.name])
    os.unlink(listing.name)
    return seconds, rss, {"words": int(out.strip().splitlines()[-1].split()[0])}


def run_find_cat(directory: str) -> Run:
    seconds, rss, out = measure(["sh", "-c", "find %s -name '*.txt' -print0 | xargs -0 cat | wc -w" % directory])
    return seconds, rss, {"words": int(out.strip())}


def run_mawk(paths: list[str]) -> Run:
    # awk's default field separator is runs of blanks and newlines: the same words as
    # bytes.split() on this corpus, which holds no other whitespace.
    seconds, rss, out = measure(["mawk", '{ n += NF } END { printf "%.0f\\n", n }', *paths])
    return seconds, rss, {"words": int(out.strip())}


def digest(items: Iterable[tuple[bytes, int]]) -> str:
    """A hash of (term, count) pairs in any order: results compared without printing them."""
    return hashlib.sha256(b"".join(b"%s\t%d\n" % kv for kv in sorted(items))).hexdigest()


def _chunks(path: str) -> Iterator[bytes]:
    """`path` in chunks that end after whitespace (a word cut by a chunk boundary is read once)."""
    tail = b""
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            data = tail + chunk
            cut = max(data.rfind(c) for c in WHITESPACE)
            yield data[: cut + 1]
            tail = data[cut + 1 :]
    yield tail


def peer_python(paths: list[str]) -> dict:
    return {"words": sum(len(data.split()) for p in paths for data in _chunks(p))}


def _after_whitespace(f, position: int, size: int) -> int:
    """The first offset after `position` that follows a whitespace byte (or `size`)."""
    f.seek(position)
    while position < size:
        block = f.read(1 << 16)
        hits = [i for i in (block.find(bytes([c])) for c in WHITESPACE) if i >= 0]
        if hits:
            return position + min(hits) + 1
        position += len(block)
    return size


def pool_tasks(paths: list[str]) -> list[Task]:
    """The strongest plain peer's work list: large files cut into ranges of about
    POOL_TASK bytes that end after whitespace, small files batched to about POOL_TASK."""
    tasks, batch, batched = [], [], 0
    for path in paths:
        size = os.path.getsize(path)
        if size <= POOL_TASK:
            batch.append((path, 0, size))
            batched += size
            if batched >= POOL_TASK:
                tasks.append(batch)
                batch, batched = [], 0
            continue
        with open(path, "rb") as f:
            start = 0
            while start < size:
                end = _after_whitespace(f, min(size, start + POOL_TASK) - 1, size)
                tasks.append([(path, start, end)])
                start = end
    return tasks + ([batch] if batch else [])


def _ranges(task: Task) -> Iterator[bytes]:
    for path, start, end in task:
        with open(path, "rb") as f:
            f.seek(start)
            yield f.read(end - start)


def _pool_words(task: Task) -> int:
    return sum(len(data.split()) for data in _ranges(task))


def _pool_counter(task: Task) -> collections.Counter:
    counts = collections.Counter()
    for data in _ranges(task):
        counts.update(data.split())
    return counts


def peer_multiprocessing(paths: list[str]) -> dict:
    with multiprocessing.Pool(2) as pool:
        return {"words": sum(pool.imap_unordered(_pool_words, pool_tasks(paths)))}


def _frequencies(counts: collections.Counter) -> dict:
    return {
        "words": sum(counts.values()),
        "distinct": len(counts),
        "top": [[w.decode(), c] for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]],
        "digest": digest(counts.items()),
    }


def peer_pool_counter(paths: list[str]) -> dict:
    counts = collections.Counter()
    with multiprocessing.Pool(2) as pool:
        for part in pool.imap_unordered(_pool_counter, pool_tasks(paths)):
            counts.update(part)
    return _frequencies(counts)


def peer_counter(paths: list[str]) -> dict:
    counts = collections.Counter()
    for p in paths:
        for data in _chunks(p):
            counts.update(data.split())
    return _frequencies(counts)


def peer_spark(paths: list[str]) -> dict:
    from pyspark import SparkContext

    sc = SparkContext("local[2]", "bench", conf=None)
    sc.setLogLevel("ERROR")
    try:
        lines = sc.textFile(",".join(paths), use_unicode=False)
        return {"words": lines.map(lambda line: len(line.split())).sum()}
    finally:
        sc.stop()


def peer_map_step(paths: list[str]) -> dict:
    """Our map step on one process, no cluster: read pieces, count, add."""
    import tensorflow as tf

    import tf2_mapreduce as mr
    from tf2_mapreduce.inputs.listing import expand
    from tf2_mapreduce.inputs.plan import Plan
    from tf2_mapreduce.run import mapstep
    from tf2_mapreduce.state.counters import ChangedFiles, StopFlag

    files = expand(paths).files
    plan = Plan(files, 8 << 20, "words")
    job = mr.WordCount()
    total = tf.Variable(tf.constant(0, tf.int64))

    class Sum:
        def commit(self, ids, values, piece_bytes=None):
            total.assign_add(tf.reduce_sum(values))

    class NoSteps:
        def count_this_step(self):
            pass

    run_state = types.SimpleNamespace(
        values=Sum(),
        worker_steps=NoSteps(),
        changed_files=ChangedFiles(len(plan.pieces), "/cpu:0"),
        stop_flag=StopFlag("/cpu:0"),
    )
    started = time.monotonic()
    for whole in (True, False):
        chosen = [i for i in range(len(plan.pieces)) if plan.whole(i) == whole]
        if chosen:
            step = mapstep.build(job, run_state, "whole" if whole else "range")
            for split in plan.splits(chosen, 64 << 20, 256):
                step(*split)
    return {"words": int(total.numpy()), "map_seconds": time.monotonic() - started}


PEERS: dict[str, Callable[[list[str]], dict]] = {
    "python": peer_python,
    "multiprocessing": peer_multiprocessing,
    "counter": peer_counter,
    "pool_counter": peer_pool_counter,
    "spark": peer_spark,
    "map_step": peer_map_step,
}
