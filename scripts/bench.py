"""Benchmark: tf2_mapreduce against the usual tools, on one generated corpus, in one run.

    python scripts/bench.py                          # the default corpus, about 1.8 GB
    python scripts/bench.py --small_files 200 --large_files 0 --huge_mb 0   # a quick run

Generates a deterministic corpus (many small files, a few large ones, one huge one;
sizes are flags), then times, on each part: `wc -w`, `mawk` where it is installed,
Python's bytes.split() in one process, and in two with multiprocessing.Pool(2) over
32 MiB tasks (large files cut into whitespace-aligned ranges, small files batched: the
strongest plain peer),
PySpark local[2] when it is importable, our map step in a single process, and our job
on local clusters of several sizes; and word frequencies, ours against
collections.Counter in one process and in Pool(2). Each contender runs --repeats times,
in turns; the report gives medians with their range, and ratios against wc -w and
Pool(2). Every run's result must agree with the others, or the benchmark fails. Peak
RSS is reported per role (coordinator, ps, worker), start-up (imports, cluster) apart
from the map phase.
"""

import collections
import functools
import glob
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "dir", os.path.join(tempfile.gettempdir(), "tf2_mapreduce-bench"), "Where the corpus is (made once)."
)
flags.DEFINE_integer("small_files", 2000, "Number of small files.", lower_bound=0)
flags.DEFINE_integer("small_kb", 252, "Size of each small file, in KB.", lower_bound=1)
flags.DEFINE_integer("large_files", 2, "Number of large files.", lower_bound=0)
flags.DEFINE_integer("large_mb", 128, "Size of each large file, in MB.", lower_bound=1)
flags.DEFINE_integer("huge_mb", 1024, "Size of the one huge file, in MB; 0 for none.", lower_bound=0)
flags.DEFINE_list("clusters", ["1x2", "1x1", "2x2"], "Local clusters to time, as PSxWORKERS.")
flags.DEFINE_bool("wordfreq", True, "Also time word frequencies against collections.Counter.")
flags.DEFINE_integer("repeats", 3, "Runs of each contender, taken in turns; the report gives medians.", lower_bound=1)
flags.DEFINE_string("json", None, "Also write the rows as JSON to this path.")
flags.DEFINE_string("peer", None, "Internal: run one peer in this process and print its result as JSON.")

POOL = "python Pool(2), 32 MiB tasks"  # the strongest plain peer
POOL_FREQ = "freq: python Pool(2) Counter"
BLOCK = 8 << 20
BLOCKS = 16
MB = 1e6


# ---------------------------------------------------------------- the corpus


def _block(seed):
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


def make_corpus(directory):
    """Writes the corpus unless the same one is there; returns {part: [paths]}."""
    spec = {
        "small_files": FLAGS.small_files,
        "small_kb": FLAGS.small_kb,
        "large_files": FLAGS.large_files,
        "large_mb": FLAGS.large_mb,
        "huge_mb": FLAGS.huge_mb,
        "version": 1,
    }
    stamp = os.path.join(directory, "corpus.json")
    if not (os.path.exists(stamp) and json.load(open(stamp)) == spec):
        shutil.rmtree(directory, ignore_errors=True)
        started = time.monotonic()
        blocks = [_block(seed) for seed in range(BLOCKS)]
        for part in ("small", "large", "huge"):
            os.makedirs(os.path.join(directory, part))
        for n in range(FLAGS.small_files):
            block = blocks[n % BLOCKS]
            start = block.index(b"\n", (n * 7919) % (BLOCK - FLAGS.small_kb * 1000)) + 1
            end = block.index(b"\n", start + FLAGS.small_kb * 1000 - 100) + 1
            with open(os.path.join(directory, "small", "part-%05d.txt" % n), "wb") as f:
                f.write(block[start:end])
        for name, count, size in (
            ("large", FLAGS.large_files, FLAGS.large_mb),
            ("huge", 1 if FLAGS.huge_mb else 0, FLAGS.huge_mb),
        ):
            for n in range(count):
                with open(os.path.join(directory, name, "%s-%d.txt" % (name, n)), "wb") as f:
                    for k in range(size * 1000 * 1000 // BLOCK + 1):
                        f.write(blocks[(k * 5 + n) % BLOCKS])
        json.dump(spec, open(stamp, "w"))
        print("made the corpus in %.0f s" % (time.monotonic() - started), flush=True)
    parts = {name: sorted(glob.glob(os.path.join(directory, name, "*.txt"))) for name in ("small", "large", "huge")}
    parts["all"] = parts["small"] + parts["large"] + parts["huge"]
    return {name: paths for name, paths in parts.items() if paths}


# ---------------------------------------------------------------- peers, run as `--peer=NAME`

CHUNK = 16 << 20


def words_in(path):
    """bytes.split() word count of one file, read in chunks (a word cut by a chunk
    boundary is counted once)."""
    total, tail = 0, b""
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                return total + len(tail.split())
            data = tail + chunk
            cut = max(data.rfind(c) for c in b" \t\n\r\x0b\x0c")
            total += len(data[: cut + 1].split())
            tail = data[cut + 1 :]


def counter_of(path):
    counts, tail = collections.Counter(), b""
    with open(path, "rb") as f:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                counts.update(tail.split())
                return counts
            data = tail + chunk
            cut = max(data.rfind(c) for c in b" \t\n\r\x0b\x0c")
            counts.update(data[: cut + 1].split())
            tail = data[cut + 1 :]


def peer_python(paths):
    return {"words": sum(words_in(p) for p in paths)}


POOL_TASK = 32 << 20  # bytes a Pool(2) task reads: a range of a large file, or a batch of small ones
WHITESPACE = b" \t\n\r\x0b\x0c"


def _after_whitespace(f, position, size):
    """The first offset after `position` that follows a whitespace byte (or `size`)."""
    f.seek(position)
    while position < size:
        block = f.read(1 << 16)
        hits = [i for i in (block.find(bytes([c])) for c in WHITESPACE) if i >= 0]
        if hits:
            return position + min(hits) + 1
        position += len(block)
    return size


def pool_tasks(paths):
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


def _ranges(task):
    for path, start, end in task:
        with open(path, "rb") as f:
            f.seek(start)
            yield f.read(end - start)


def _pool_words(task):
    return sum(len(data.split()) for data in _ranges(task))


def _pool_counter(task):
    counts = collections.Counter()
    for data in _ranges(task):
        counts.update(data.split())
    return counts


def peer_multiprocessing(paths):
    with multiprocessing.Pool(2) as pool:
        return {"words": sum(pool.imap_unordered(_pool_words, pool_tasks(paths)))}


def _frequencies(counts):
    return {
        "words": sum(counts.values()),
        "distinct": len(counts),
        "top": [[w.decode(), c] for w, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]],
        "digest": _digest(counts.items()),
    }


def peer_pool_counter(paths):
    counts = collections.Counter()
    with multiprocessing.Pool(2) as pool:
        for part in pool.imap_unordered(_pool_counter, pool_tasks(paths)):
            counts.update(part)
    return _frequencies(counts)


def peer_counter(paths):
    counts = collections.Counter()
    for p in paths:
        counts.update(counter_of(p))
    return _frequencies(counts)


def _digest(items):
    import hashlib

    return hashlib.sha256(b"".join(b"%s\t%d\n" % kv for kv in sorted(items))).hexdigest()


def peer_spark(paths):
    from pyspark import SparkContext

    sc = SparkContext("local[2]", "bench", conf=None)
    sc.setLogLevel("ERROR")
    try:
        lines = sc.textFile(",".join(paths), use_unicode=False)
        return {"words": lines.map(lambda line: len(line.split())).sum()}
    finally:
        sc.stop()


def peer_map_step(paths):
    """Our map step on one process, no cluster: read pieces, count, add."""
    import tensorflow as tf

    from tf2_mapreduce import inputs, jobs, mapstep, reduce

    files = inputs.expand(paths).files
    pieces, _ = inputs.plan(files, 8 << 20, "words")
    job = jobs.BUILT_IN["wordcount"]
    total = tf.Variable(tf.constant(0, tf.int64))

    class Sum:
        def commit(self, ids, values):
            total.assign_add(tf.reduce_sum(values))

    class NoSteps:
        def count_this_step(self):
            pass

    changed_files = reduce.ChangedFiles(len(pieces), "/cpu:0")
    started = time.monotonic()
    for whole in (True, False):
        chosen = [i for i, p in enumerate(pieces) if inputs.whole_file(p, files) == whole]
        if chosen:
            step = mapstep.build(job, Sum(), NoSteps(), changed_files, whole)
            for split in inputs.splits(files, pieces, chosen, 64 << 20, 256):
                step(*split)
    return {"words": int(total.numpy()), "map_seconds": time.monotonic() - started}


PEERS = {
    "python": peer_python,
    "multiprocessing": peer_multiprocessing,
    "counter": peer_counter,
    "pool_counter": peer_pool_counter,
    "spark": peer_spark,
    "map_step": peer_map_step,
}


# ---------------------------------------------------------------- measuring


def _children(pid):
    """All descendants of `pid`."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                pass
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def _role(pid, root):
    if pid == root:
        return "main"
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = f.read().split(b"\0")
    except OSError:
        return "child"
    for item in env:
        if item.startswith(b"TF_CONFIG="):
            return json.loads(item[len(b"TF_CONFIG=") :])["task"]["type"]
    return "child"


def _peak_rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def measure(command, env=None):
    """Runs `command`; returns (seconds, {role: peak RSS MB}, stdout). Fails loudly."""
    started = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peaks = collections.defaultdict(int)
    done = threading.Event()

    def sample():
        while not done.wait(0.05):
            for pid in [proc.pid] + _children(proc.pid):
                role = _role(pid, proc.pid)
                peaks[role] = max(peaks[role], _peak_rss_kb(pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    seconds = time.monotonic() - started
    done.set()
    sampler.join()
    if proc.returncode != 0:
        sys.exit("benchmark run failed (%s): %s\n%s" % (proc.returncode, " ".join(command), err.decode()[-3000:]))
    return seconds, {role: kb / 1000 for role, kb in peaks.items()}, out.decode()


def run_peer(name, paths):
    listing = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    listing.write("\n".join(paths))
    listing.close()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    seconds, rss, out = measure([sys.executable, os.path.abspath(__file__), "--peer=" + name, "@" + listing.name], env)
    os.unlink(listing.name)
    return seconds, rss, json.loads(out.strip().splitlines()[-1])


def run_wc(paths):
    listing = tempfile.NamedTemporaryFile("wb", delete=False)
    listing.write(b"\0".join(os.fsencode(p) for p in paths) + b"\0")
    listing.close()
    seconds, rss, out = measure(["wc", "-w", "--files0-from=" + listing.name])
    os.unlink(listing.name)
    return seconds, rss, {"words": int(out.strip().splitlines()[-1].split()[0])}


def run_mawk(paths):
    # awk's default field separator is runs of blanks and newlines: the same words as
    # bytes.split() on this corpus, which holds no other whitespace.
    seconds, rss, out = measure(["mawk", '{ n += NF } END { printf "%.0f\\n", n }', *paths])
    return seconds, rss, {"words": int(out.strip())}


def run_ours(paths, job, num_ps, num_workers, local_cluster="processes"):
    listing = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    listing.write("\n".join(paths))
    listing.close()
    output = tempfile.mktemp(suffix=".json" if job == "wordcount" else ".tsv")
    command = [
        sys.executable,
        "-m",
        "tf2_mapreduce.coordinator",
        "--job=" + job,
        "--input",
        "@" + listing.name,
        "--num_ps=%d" % num_ps,
        "--num_workers=%d" % num_workers,
        "--output",
        output,
        "--progress_every=60",
        "--local_cluster=" + local_cluster,
    ]
    seconds, rss, out = measure(command)
    os.unlink(listing.name)
    if job == "wordcount":
        result = json.load(open(output))
        found = {
            "words": result["total_words"],
            "startup": result["timings"]["startup"],
            "map_seconds": result["timings"]["map"],
        }
    else:
        counts = []
        with open(output, "rb") as f:
            for line in f:
                word, count = line.rstrip(b"\n").split(b"\t")
                counts.append((word, int(count)))
        found = {
            "words": sum(c for _, c in counts),
            "distinct": len(counts),
            "top": [[w.decode(), c] for w, c in counts[:5]],
            "digest": _digest(counts),
        }
    os.unlink(output)
    return seconds, rss, found


# ---------------------------------------------------------------- the report


def main(argv):
    if FLAGS.peer:
        paths = [line for line in open(argv[1][1:]).read().splitlines() if line]
        print(json.dumps(PEERS[FLAGS.peer](paths)))
        return
    parts = make_corpus(FLAGS.dir)
    rows = []
    spark = _importable("pyspark") and shutil.which("java")
    for part in [p for p in ("small", "huge", "all") if p in parts]:
        paths = parts[part]
        print("%s: %d files, %.0f MB" % (part, len(paths), sum(os.path.getsize(p) for p in paths) / MB), flush=True)
        size = sum(os.path.getsize(p) for p in paths) / MB
        contenders = _contenders(part, paths, spark)
        runs = {name: [] for name, _ in contenders}
        for repeat in range(FLAGS.repeats):  # A B C A B C ...: a slow moment hits every contender alike
            for name, run in contenders:
                runs[name].append(run())
                print("  %-6s %-36s %7.2f s  (run %d)" % (part, name, runs[name][-1][0], repeat + 1), flush=True)
        for name, _ in contenders:
            rows.append(_row(part, name, size, runs[name]))
    report(rows, spark)


def _contenders(part, paths, spark):
    """[(name, run)] for one part of the corpus; each run returns (seconds, rss, result)."""
    contenders = [
        ("wc -w", lambda: run_wc(paths)),
        ("python bytes.split, 1 process", lambda: run_peer("python", paths)),
        (POOL, lambda: run_peer("multiprocessing", paths)),
    ]
    if shutil.which("mawk"):
        contenders.append(("mawk", lambda: run_mawk(paths)))
    if part == "small":
        if spark:
            contenders.append(("pyspark local[2]", lambda: run_peer("spark", paths)))
        contenders.append(("our map step, 1 process", lambda: run_peer("map_step", paths)))
    for spec in FLAGS.clusters if part == "small" else FLAGS.clusters[:1]:
        num_ps, num_workers = (int(x) for x in spec.split("x"))
        for local_cluster in ("processes", "inprocess") if spec == FLAGS.clusters[0] else ("processes",):
            name = "tf2_mapreduce %dps+%dw%s" % (
                num_ps,
                num_workers,
                " in-process" if local_cluster == "inprocess" else "",
            )
            contenders.append(
                (name, functools.partial(run_ours, paths, "wordcount", num_ps, num_workers, local_cluster))
            )
    if part == "small" and FLAGS.wordfreq:
        contenders.append(("freq: python Counter", lambda: run_peer("counter", paths)))
        contenders.append((POOL_FREQ, lambda: run_peer("pool_counter", paths)))
        for spec in FLAGS.clusters[:1] + [c for c in FLAGS.clusters if c.startswith("2x")][:1]:
            num_ps, num_workers = (int(x) for x in spec.split("x"))
            contenders.append(
                (
                    "freq: tf2_mapreduce %dps+%dw" % (num_ps, num_workers),
                    functools.partial(run_ours, paths, "wordfreq", num_ps, num_workers),
                )
            )
        num_ps, num_workers = (int(x) for x in FLAGS.clusters[0].split("x"))
        contenders.append(
            (
                "freq: tf2_mapreduce %dps+%dw in-process" % (num_ps, num_workers),
                functools.partial(run_ours, paths, "wordfreq", num_ps, num_workers, "inprocess"),
            )
        )
    return contenders


def _row(part, name, size, runs):
    """One contender's runs as a row: median and range of the wall time, the largest
    peak RSS per role, the median start-up and map phase, and the result, which must
    be the same in every run."""
    timing = ("startup", "map_seconds")
    results = [{k: v for k, v in result.items() if k not in timing} for _, _, result in runs]
    if any(r != results[0] for r in results):
        sys.exit("%s %s: runs disagree: %s" % (part, name, results))
    seconds = [s for s, _, _ in runs]
    rss = collections.defaultdict(float)
    for _, peaks, _ in runs:
        for role, mb in peaks.items():
            rss[role] = max(rss[role], mb)

    def median_of(key):
        values = [result[key] for _, _, result in runs if result.get(key)]
        return statistics.median(values) if values else None

    return dict(
        part=part,
        run=name,
        seconds=statistics.median(seconds),
        low=min(seconds),
        high=max(seconds),
        mb=size,
        rss=dict(rss),
        result=results[0],
        startup=median_of("startup"),
        steady=median_of("map_seconds"),
    )


def _importable(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None


def report(rows, spark):
    print()
    print(
        "| part | run | wall s, median (min-max) | MB/s | wc -w / run | run / Pool(2) | start-up s | map s "
        "| map MB/s | peak RSS MB | result |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    failures = []
    for part in dict.fromkeys(r["part"] for r in rows):
        group = [r for r in rows if r["part"] == part]
        wc = next(r for r in group if r["run"] == "wc -w")
        pool = {
            kind: next((r for r in group if r["run"] == name), None)
            for kind, name in (("words", POOL), ("freq", POOL_FREQ))
        }
        for kind in ("words", "freq"):
            results = {
                json.dumps({k: v for k, v in r["result"].items() if k != "words" or kind == "words"}, sort_keys=True)
                for r in group
                if r["run"].startswith("freq:") == (kind == "freq")
            }
            words = {r["result"]["words"] for r in group if r["run"].startswith("freq:") == (kind == "freq")}
            if len(words) > 1 or (kind == "freq" and len(results) > 1):
                failures.append("%s %s: results disagree: %s" % (part, kind, sorted(results)))
        for r in group:
            mb_s = r["mb"] / r["seconds"]
            steady = "%.2f" % r["steady"] if r["steady"] else ""
            steady_mb = "%.0f" % (r["mb"] / r["steady"]) if r["steady"] else ""
            startup = "%.2f" % r["startup"] if r["startup"] else ""
            rss = ", ".join("%s %.0f" % (role, mb) for role, mb in sorted(r["rss"].items()))
            result = "%d words" % r["result"]["words"] + (
                ", %d distinct" % r["result"]["distinct"] if "distinct" in r["result"] else ""
            )
            peer = pool["freq" if r["run"].startswith("freq:") else "words"]
            print(
                "| %s | %s | %.2f (%.2f-%.2f) | %.0f | %.2fx | %s | %s | %s | %s | %s | %s |"
                % (
                    part,
                    r["run"],
                    r["seconds"],
                    r["low"],
                    r["high"],
                    mb_s,
                    wc["seconds"] / r["seconds"],
                    "%.2fx" % (r["seconds"] / peer["seconds"]) if peer else "",
                    startup,
                    steady,
                    steady_mb,
                    rss,
                    result,
                )
            )
    if not spark:
        print("\n(pyspark local[2] not run: pyspark or java is not installed)")
    targets(rows)
    if FLAGS.json:
        json.dump(rows, open(FLAGS.json, "w"), indent=1)
    if failures:
        sys.exit("RESULTS DISAGREE:\n" + "\n".join(failures))


def targets(rows):
    """The targets of issue 5, measured in this run."""
    small = {r["run"]: r for r in rows if r["part"] == "small"}
    if "wc -w" not in small or "tf2_mapreduce 1ps+2w" not in small:
        return
    wc, ours = small["wc -w"], small["tf2_mapreduce 1ps+2w"]
    fastest = min((r for name, r in small.items() if name.startswith("tf2_mapreduce")), key=lambda r: r["seconds"])
    wc_rate = wc["mb"] / wc["seconds"]
    checks = [
        ("map phase >= 3x wc -w throughput", (ours["mb"] / ours["steady"]) / wc_rate, 3.0),
        ("end to end faster than wc -w (%s)" % fastest["run"], wc["seconds"] / fastest["seconds"], 1.0),
    ]
    counter = small.get("freq: python Counter")
    freqs = [r for name, r in small.items() if name.startswith("freq: tf2_mapreduce")]
    if counter and freqs:
        best = min(freqs, key=lambda r: r["seconds"])
        checks.append(
            ("wordfreq >= 2x python Counter (%s)" % best["run"][6:], counter["seconds"] / best["seconds"], 2.0)
        )
    print("\ntargets (measured ratios):")
    for name, ratio, goal in checks:
        print("  %-62s %5.2fx  %s" % (name, ratio, "met" if ratio >= goal else "NOT met (goal %.0fx)" % goal))


if __name__ == "__main__":
    app.run(main)
