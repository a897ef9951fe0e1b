"""Benchmark: tf2_mapreduce against the usual tools, on one generated corpus, in one run.

    python scripts/bench.py                          # the default corpus, about 6 GB
    python scripts/bench.py --small_files 200 --tiny_files 2000 --huge_mb 0 --giant_mb 0   # a quick run

Generates a deterministic corpus in parts (sizes are flags): "small", files of 252 KB;
"tiny", 100,000 files of about 100 bytes; "huge", one 1 GB file; "giant", one 4 GB
file. Then times, on each part: `wc -w`, `mawk` where it is installed, Python's
bytes.split() in one process, and in two with multiprocessing.Pool(2) over 32 MiB
tasks (large files cut into whitespace-aligned ranges, small files batched: the
strongest plain peer), `find | xargs cat | wc -w` on the tiny files, PySpark local[2]
when it is importable, our map step in a single process, and our job on local clusters
(the default command is "1ps+2w in-process"); and word frequencies, ours against
collections.Counter in one process and in Pool(2). A tf.Example dataset ("examples", 1 GB
of GZIP'd TFRecord shards from make_examples.py) times a vocabulary of 3 features: ours
against one plain tf.data + parse_example pass per core, and Pool(2) parsing with
protobuf into Counters; and our statistics (`--job=stats`) of the same 3 features and of
every feature (the embedding too). "record" is those examples inflated into one
uncompressed TFRecord file of 4 GB: vocab with one worker and with two (the file cut into
byte ranges), and one tf.data pass. "layouts" are directories hard to list (60,000 hard
links of 300 files; 1,000,000 files in one directory; as many in a 3-level tree): the
default command's start-up against Python's import of TensorFlow, and the coordinator's
peak RSS. "storage" is 40 of the small files as objects of a Cloud Storage server on
loopback (the tests' emulator behind a TLS proxy): the default command on them against
the same files on local disk, and with 5% of the reads answered 503 (TensorFlow's own
retry settings). Each contender runs --repeats times,
in turns; the report gives medians with their range, ratios against wc -w and Pool(2),
and the performance targets, each met or not. Every run's result must agree with the
others, or the benchmark fails. Peak RSS is reported per role (coordinator, ps,
worker), start-up (imports, cluster) apart from the map phase.
"""

import atexit
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
import types

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string(
    "dir", os.path.join(tempfile.gettempdir(), "tf2_mapreduce-bench"), "Where the corpus is (made once)."
)
flags.DEFINE_integer("small_files", 2000, "Number of small files.", lower_bound=0)
flags.DEFINE_integer("small_kb", 252, "Size of each small file, in KB.", lower_bound=1)
flags.DEFINE_integer("tiny_files", 100_000, "Number of tiny files (about 100 bytes each).", lower_bound=0)
flags.DEFINE_integer("huge_mb", 1024, "Size of the one huge file, in MB; 0 for none.", lower_bound=0)
flags.DEFINE_integer("giant_mb", 4096, "Size of the one giant file, in MB; 0 for none.", lower_bound=0)
flags.DEFINE_integer(
    "examples_mb", 1024, "Size of the tf.Example dataset (GZIP'd TFRecord shards), in MB; 0 for none.", lower_bound=0
)
flags.DEFINE_integer(
    "record_mb", 4096, "Size of the one uncompressed TFRecord file of examples, in MB; 0 for none.", lower_bound=0
)
flags.DEFINE_integer(
    "layout_files",
    1_000_000,
    "Files in each listing layout (one directory; a 3-level tree); 0 for none.",
    lower_bound=0,
)
flags.DEFINE_list(
    "parts",
    ["small", "tiny", "huge", "giant", "examples", "record", "layouts", "storage", "transform"],
    "Parts of the corpus to time (all are made).",
)
flags.DEFINE_string(
    "tft_python",
    "/tmp/tft/bin/python",
    "The transform part's tf.Transform side: a Python with tensorflow-transform 1.21 (a venv of its own).",
)
flags.DEFINE_integer(
    "transform_shards",
    16,
    "Shards of the tf.Example part that the transform part reads (16: all, 1 GB).",
    lower_bound=1,
)
flags.DEFINE_list("clusters", ["1x2", "1x1", "2x2"], "Local clusters to time, as PSxWORKERS.")
flags.DEFINE_bool("wordfreq", True, "Also time word frequencies against collections.Counter.")
flags.DEFINE_integer("repeats", 3, "Runs of each contender, taken in turns; the report gives medians.", lower_bound=1)
flags.DEFINE_string("json", None, "Also write the rows as JSON to this path.")
flags.DEFINE_string("peer", None, "Internal: run one peer in this process and print its result as JSON.")

POOL = "python Pool(2), 32 MiB tasks"  # the strongest plain peer
POOL_FREQ = "freq: python Pool(2) Counter"
FIND_CAT = "find | xargs cat | wc -w"
DEFAULT = "tf2_mapreduce 1ps+2w in-process"  # what the default command runs
DEFAULT_FREQ = "freq: " + DEFAULT
PARTS = ("small", "tiny", "huge", "giant")
TFDATA = "tf.data + parse_example, 2 processes"  # one plain pass per core: the vocab target's yardstick
POOL_EXAMPLES = "python Pool(2) protobuf + Counter"
VOCAB = "tf2_mapreduce vocab 1ps+2w in-process"
STATS = "tf2_mapreduce stats 1ps+2w in-process"
STATS_ALL = "tf2_mapreduce stats, every feature"
# The same two jobs with a process per task: what each task (ps, worker, coordinator) holds.
VOCAB_TASKS = "tf2_mapreduce vocab 1ps+2w processes"
STATS_ALL_TASKS = "tf2_mapreduce stats, every feature, 1ps+2w processes"
# One large TFRecord file, cut into byte ranges: one worker, two, and one tf.data pass
# (a TFRecord file cannot be split by the plain peers, nor by Beam's source).
TFDATA_ONE = "tf.data + parse_example, 1 process"
TF_IMPORT = "python -c 'import tensorflow'"
VOCAB_ONE_WORKER = "tf2_mapreduce vocab 1ps+1w processes"
VOCAB_TWO_WORKERS = "tf2_mapreduce vocab 1ps+2w processes"
STORAGE_LOCAL = "default command, local disk"
STORAGE_GCS = "default command, gs:// (loopback server)"
STORAGE_503 = "default command, gs://, 5% of reads 503"
TRANSFORM_OURS = "transform: a process per task"
TRANSFORM_TFT = "transform: tf.Transform 1.21, DirectRunner"
FEATURES = ("query", "tags", "user_id")
EXAMPLE_BYTES = 293  # a make_examples.py example with --embedding_dim 64, GZIP'd (measured)
TINY_PER_DIRECTORY = 1000
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
        "tiny_files": FLAGS.tiny_files,
        "huge_mb": FLAGS.huge_mb,
        "giant_mb": FLAGS.giant_mb,
        "version": 2,
    }
    stamp = os.path.join(directory, "corpus.json")
    if not (os.path.exists(stamp) and json.load(open(stamp)) == spec):
        shutil.rmtree(directory, ignore_errors=True)
        started = time.monotonic()
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
        json.dump(spec, open(stamp, "w"))
        print("made the corpus in %.0f s" % (time.monotonic() - started), flush=True)
    parts = {name: sorted(glob.glob(os.path.join(directory, name, "*.txt"))) for name in PARTS}
    parts["tiny"] = sorted(glob.glob(os.path.join(directory, "tiny", "*", "*.txt")))
    parts["examples"] = make_examples(os.path.join(directory, "examples"))
    parts["record"] = make_record_file(os.path.join(directory, "record"), parts["examples"])
    parts["layouts"] = make_layouts(os.path.join(directory, "layouts"))
    parts["storage"] = parts["small"][:40]
    parts["transform"] = parts["examples"][: FLAGS.transform_shards]
    if "transform" in FLAGS.parts and not os.path.exists(FLAGS.tft_python):
        print("transform: not timed: no tf.Transform at %s (--tft_python; docs/performance.md)" % FLAGS.tft_python)
        parts["transform"] = []
    return {name: paths for name, paths in parts.items() if paths}


HARD_LINKED = (300, 200)  # files, hard links of each: 60,000 names


def make_layouts(directory):
    """Directories that are hard to list, each of one-word files: 300 files with 200 hard
    links each in one directory; --layout_files files in one directory; as many in a
    3-level tree (100 x 100 directories). Returns their paths."""
    spec = {"files": FLAGS.layout_files, "hard_linked": list(HARD_LINKED)}  # as JSON reads it back
    stamp = os.path.join(directory, "layouts.json")
    layouts = [os.path.join(directory, name) for name in ("hard_links", "one_directory", "tree")]
    if not spec["files"]:
        return []
    if not (os.path.exists(stamp) and json.load(open(stamp)) == spec):
        shutil.rmtree(directory, ignore_errors=True)
        started = time.monotonic()
        os.makedirs(layouts[0])
        for n in range(HARD_LINKED[0]):
            original = os.path.join(layouts[0], "f%03d-000.txt" % n)
            with open(original, "wb") as f:
                f.write(b"w%d\n" % n)
            for k in range(1, HARD_LINKED[1]):
                os.link(original, os.path.join(layouts[0], "f%03d-%03d.txt" % (n, k)))
        os.makedirs(layouts[1])
        for n in range(spec["files"]):
            with open(os.path.join(layouts[1], "f%07d.txt" % n), "wb") as f:
                f.write(b"w%d\n" % (n % 1000))
        per_leaf = max(1, spec["files"] // 10_000)
        for n in range(spec["files"]):
            leaf = os.path.join(layouts[2], "%02d" % (n // per_leaf // 100 % 100), "%02d" % (n // per_leaf % 100))
            if n % per_leaf == 0:
                os.makedirs(leaf, exist_ok=True)
            with open(os.path.join(leaf, "f%07d.txt" % n), "wb") as f:
                f.write(b"w%d\n" % (n % 1000))
        json.dump(spec, open(stamp, "w"))
        print("made the listing layouts in %.0f s" % (time.monotonic() - started), flush=True)
    return layouts


def make_examples(directory):
    """The tf.Example part (scripts/make_examples.py: 16 GZIP'd shards, a 64-float
    embedding per example), unless the same one is there; returns its paths."""
    spec = {"examples": FLAGS.examples_mb * 1000 * 1000 // EXAMPLE_BYTES, "shards": 16, "embedding_dim": 64}
    stamp = os.path.join(directory, "examples.json")
    if spec["examples"] and not (os.path.exists(stamp) and json.load(open(stamp)) == spec):
        shutil.rmtree(directory, ignore_errors=True)
        started = time.monotonic()
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "make_examples.py")
        subprocess.run(
            [sys.executable, script, "--output_dir", directory]
            + ["--%s=%d" % (name, value) for name, value in spec.items()],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        json.dump(spec, open(stamp, "w"))
        print("made the examples in %.0f s" % (time.monotonic() - started), flush=True)
    return sorted(glob.glob(os.path.join(directory, "*.tfrecord.gz"))) if spec["examples"] else []


def make_record_file(directory, shards):
    """One uncompressed TFRecord file of about --record_mb MB: the example shards inflated
    and put end to end, again until it is that large (TFRecord files put end to end are
    one). Returns [its path], or [] for --record_mb=0."""
    import gzip

    spec = {"mb": FLAGS.record_mb, "examples": FLAGS.examples_mb}
    path = os.path.join(directory, "examples.tfrecord")
    stamp = os.path.join(directory, "record.json")
    if not spec["mb"] or not shards:
        return []
    if not (os.path.exists(stamp) and json.load(open(stamp)) == spec):
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
        json.dump(spec, open(stamp, "w"))
        print("made the TFRecord file in %.0f s" % (time.monotonic() - started), flush=True)
    return [path]


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


def _tfdata_pass(paths, compression="GZIP"):
    """One plain pass over `paths`: tf.data's reader, batches parsed by parse_example, the
    values counted (so that nothing is optimized away); returns (examples, values, loop seconds)."""
    import tensorflow as tf

    spec = {name: tf.io.RaggedFeature(tf.int64 if name == "user_id" else tf.string) for name in FEATURES}

    @tf.function
    def run(paths):
        def sizes(records):
            parsed = tf.io.parse_example(records, spec)
            values = tf.add_n([tf.size(parsed[name].flat_values, out_type=tf.int64) for name in FEATURES])
            return tf.stack([tf.size(records, out_type=tf.int64), values])

        batches = tf.data.TFRecordDataset(paths, compression).batch(1024).map(sizes)
        return batches.reduce(tf.zeros([2], tf.int64), lambda total, batch: total + batch)

    started = time.monotonic()
    examples, values = run(tf.constant(paths)).numpy().tolist()
    return examples, values, time.monotonic() - started


def peer_tfdata(paths):
    with multiprocessing.Pool(2) as pool:
        halves = pool.map(_tfdata_pass, [paths[0::2], paths[1::2]])
    return {
        "examples": sum(h[0] for h in halves),
        "values": sum(h[1] for h in halves),
        "map_seconds": max(h[2] for h in halves),
    }


def peer_tfdata_one(paths):
    examples, values, seconds = _tfdata_pass(paths, "")
    return {"examples": examples, "values": values, "map_seconds": seconds}


def _example_counts(path):
    import tensorflow as tf

    counts = {name: collections.Counter() for name in FEATURES}
    examples = 0
    # Batches: TF's eager iterator costs tens of microseconds an element, more than parsing one.
    for batch in tf.data.TFRecordDataset(path, "GZIP").batch(4096).as_numpy_iterator():
        examples += len(batch)
        for record in batch:
            feature = tf.train.Example.FromString(record).features.feature
            for name in FEATURES:
                if name in feature:
                    kind = feature[name]
                    counts[name].update(
                        [b"%d" % v for v in kind.int64_list.value] if name == "user_id" else kind.bytes_list.value
                    )
    return examples, counts


def _vocab_result(examples, counts):
    return {
        "examples": examples,
        "values": sum(sum(c.values()) for c in counts.values()),
        "distinct": sum(len(c) for c in counts.values()),
        "digest": _digest((name.encode() + b"/" + term, n) for name, c in counts.items() for term, n in c.items()),
    }


def peer_pool_examples(paths):
    counts = {name: collections.Counter() for name in FEATURES}
    examples = 0
    with multiprocessing.Pool(2) as pool:
        for n, part in pool.imap_unordered(_example_counts, paths):
            examples += n
            for name in FEATURES:
                counts[name].update(part[name])
    return _vocab_result(examples, counts)


PEERS = {
    "tfdata": peer_tfdata,
    "tfdata_one": peer_tfdata_one,
    "pool_examples": peer_pool_examples,
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


def run_find_cat(directory):
    seconds, rss, out = measure(["sh", "-c", "find %s -name '*.txt' -print0 | xargs -0 cat | wc -w" % directory])
    return seconds, rss, {"words": int(out.strip())}


def run_mawk(paths):
    # awk's default field separator is runs of blanks and newlines: the same words as
    # bytes.split() on this corpus, which holds no other whitespace.
    seconds, rss, out = measure(["mawk", '{ n += NF } END { printf "%.0f\\n", n }', *paths])
    return seconds, rss, {"words": int(out.strip())}


def run_vocab(paths, processes=False, num_workers=None):
    """Our vocab job, the default command (an in-process cluster; a process per task
    with `processes`; `num_workers` if given), its vocabularies read back."""
    listing = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    listing.write("\n".join(paths))
    listing.close()
    output_dir = tempfile.mkdtemp()
    command = [sys.executable, "-m", "tf2_mapreduce.coordinator", "--job=vocab", "--features=" + ",".join(FEATURES)]
    command += ["--input", "@" + listing.name, "--output_dir", output_dir, "--progress_every=60"]
    command += ["--local_cluster=processes"] if processes else []
    command += ["--num_workers=%d" % num_workers] if num_workers else []
    seconds, rss, _ = measure(command)
    os.unlink(listing.name)
    summary = json.load(open(os.path.join(output_dir, "summary.json")))
    counts = {}
    for name in FEATURES:
        counts[name] = collections.Counter()
        for kind in ("counts", "unwritable"):
            with open(os.path.join(output_dir, "%s_%s.tsv" % (kind, name)), "rb") as f:
                for line in f:
                    count, term = line.rstrip(b"\n").split(b"\t", 1)
                    counts[name][term if kind == "counts" else output_unescape(term)] = int(count)
    shutil.rmtree(output_dir)
    found = _vocab_result(summary["examples"], counts)
    found.update(startup=summary["timings"]["total"] - summary["timings"]["map"], map_seconds=summary["timings"]["map"])
    return seconds, rss, found


def run_stats(paths, every=False, processes=False):
    """Our stats job over the vocabulary's features (or `every` feature), the default
    command (a process per task with `processes`), its stats.json read back: the
    examples, and the values of those features."""
    listing = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False)
    listing.write("\n".join(paths))
    listing.close()
    output_dir = tempfile.mkdtemp()
    command = [sys.executable, "-m", "tf2_mapreduce.coordinator", "--job=stats"]
    command += [] if every else ["--features=" + ",".join(FEATURES)]
    command += ["--input", "@" + listing.name, "--output_dir", output_dir, "--progress_every=60"]
    command += ["--local_cluster=processes"] if processes else []
    seconds, rss, _ = measure(command)
    os.unlink(listing.name)
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


def run_transform(paths, side):
    """One side of the transform part (scripts/bench_transform.py) over `paths`: ours, the
    default command with a process per task; or tf.Transform's in its venv. The result is
    the examples it wrote."""
    import bench_transform

    work = tempfile.mkdtemp(prefix="tf2_mapreduce-bench-transform-")
    schema, pythonpath = bench_transform.prepare(work)
    output_dir = os.path.join(work, "out")
    if side == "ours":
        listing = os.path.join(work, "inputs.txt")
        with open(listing, "w") as f:
            f.write("\n".join(paths))
        command = bench_transform.ours_command(listing, schema, output_dir)
    else:
        # Beam reads a pattern: the shards are the first of the part's, in its directory.
        pattern = os.path.join(os.path.dirname(paths[0]), "*")
        if len(paths) < len(glob.glob(pattern)):
            pattern = os.path.join(work, "raw", "*")
            os.makedirs(os.path.dirname(pattern))
            for path in paths:
                os.symlink(path, os.path.join(work, "raw", os.path.basename(path)))
        command = bench_transform.tft_command(FLAGS.tft_python, pattern, schema, output_dir)
    seconds, rss, _ = measure(command, dict(os.environ, PYTHONPATH=pythonpath, TF_CPP_MIN_LOG_LEVEL="2"))
    found = {"examples": bench_transform.count_records(output_dir)}
    shutil.rmtree(work)
    return seconds, rss, found


def output_unescape(term):
    from tf2_mapreduce.outputs import files as output

    return output.unescape(term.decode())


def run_tf_import():
    """Python importing TensorFlow, and nothing else: the yardstick of start-up."""
    seconds, rss, _ = measure([sys.executable, "-c", "import tensorflow"])
    return seconds, rss, {}


def run_layout(directory):
    """The default command (wordcount) over one directory, listed by the job itself."""
    output = tempfile.mktemp(suffix=".json")
    command = [sys.executable, "-m", "tf2_mapreduce.coordinator", "--input", directory, "--output", output]
    seconds, rss, _ = measure(command + ["--progress_every=60"])
    result = json.load(open(output))
    os.unlink(output)
    found = {
        "files": len(result["per_file"]),
        "words": result["total_words"],
        "startup": result["timings"]["startup"],
        "map_seconds": result["timings"]["map"],
    }
    return seconds, rss, found


def run_ours(paths, job, num_ps, num_workers, local_cluster="processes", env=None):
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
    seconds, rss, out = measure(command, env)
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
    extra = ("examples", "record", "layouts", "storage", "transform")
    for part in [p for p in PARTS + extra if p in parts and p in FLAGS.parts]:
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


def _ours(paths, spec, job="wordcount", local_cluster="processes"):
    """(name, run) of our job on a local cluster `spec` ("PSxWORKERS")."""
    num_ps, num_workers = (int(x) for x in spec.split("x"))
    name = "%stf2_mapreduce %dps+%dw%s" % (
        "freq: " if job == "wordfreq" else "",
        num_ps,
        num_workers,
        " in-process" if local_cluster == "inprocess" else "",
    )
    return name, functools.partial(run_ours, paths, job, num_ps, num_workers, local_cluster)


def _contenders(part, paths, spark):
    """[(name, run)] for one part of the corpus; each run returns (seconds, rss, result).
    The tf.Example part gets a plain tf.data pass per core, Pool(2) with protobuf and
    Counter, our vocab job, and our stats job of the same features and of every feature.
    Every part gets the plain peers and the default command; the small files get every
    cluster size and peer; word frequencies run on the small files and the huge file."""
    if part == "transform":
        return [
            (TRANSFORM_OURS, lambda: run_transform(paths, "ours")),
            (TRANSFORM_TFT, lambda: run_transform(paths, "tft")),
        ]
    if part == "storage":
        import bench_storage

        bucket = bench_storage.Bucket(paths, tempfile.mkdtemp(prefix="tf2_mapreduce-bench-gcs-"))
        atexit.register(bucket.stop)
        remote = functools.partial(run_ours, bucket.directory, "wordcount", 1, 2, "inprocess", bucket.env)
        return [
            (STORAGE_LOCAL, functools.partial(run_ours, paths, "wordcount", 1, 2, "inprocess")),
            (STORAGE_GCS, remote),
            (STORAGE_503, lambda: bucket.failing(remote)),
        ]
    if part == "layouts":
        return [(TF_IMPORT, run_tf_import)] + [
            ("wordcount: " + os.path.basename(d), functools.partial(run_layout, d)) for d in paths
        ]
    if part == "record":
        return [
            (TFDATA_ONE, lambda: run_peer("tfdata_one", paths)),
            (VOCAB_ONE_WORKER, lambda: run_vocab(paths, processes=True, num_workers=1)),
            (VOCAB_TWO_WORKERS, lambda: run_vocab(paths, processes=True, num_workers=2)),
        ]
    if part == "examples":
        return [
            (TFDATA, lambda: run_peer("tfdata", paths)),
            (POOL_EXAMPLES, lambda: run_peer("pool_examples", paths)),
            (VOCAB, lambda: run_vocab(paths)),
            (STATS, lambda: run_stats(paths)),
            (STATS_ALL, lambda: run_stats(paths, every=True)),
            (VOCAB_TASKS, lambda: run_vocab(paths, processes=True)),
            (STATS_ALL_TASKS, lambda: run_stats(paths, every=True, processes=True)),
        ]
    contenders = [("wc -w", lambda: run_wc(paths)), (POOL, lambda: run_peer("multiprocessing", paths))]
    if part in ("small", "tiny"):
        contenders.append(("python bytes.split, 1 process", lambda: run_peer("python", paths)))
    if part == "tiny":
        contenders.append((FIND_CAT, lambda: run_find_cat(os.path.join(FLAGS.dir, "tiny"))))
    if shutil.which("mawk") and part != "tiny":  # 100,000 paths are too many arguments
        contenders.append(("mawk", lambda: run_mawk(paths)))
    contenders.append(_ours(paths, FLAGS.clusters[0], local_cluster="inprocess"))
    if part == "small":
        if spark:
            contenders.append(("pyspark local[2]", lambda: run_peer("spark", paths)))
        contenders.append(("our map step, 1 process", lambda: run_peer("map_step", paths)))
        contenders += [_ours(paths, spec) for spec in FLAGS.clusters]
    if FLAGS.wordfreq and part in ("small", "huge"):
        if part == "small":
            contenders.append(("freq: python Counter", lambda: run_peer("counter", paths)))
        contenders.append((POOL_FREQ, lambda: run_peer("pool_counter", paths)))
        contenders.append(_ours(paths, FLAGS.clusters[0], "wordfreq", "inprocess"))
        if part == "small":
            specs = FLAGS.clusters[:1] + [c for c in FLAGS.clusters if c.startswith("2x")][:1]
            contenders += [_ours(paths, spec, "wordfreq") for spec in specs]
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
    report_layouts([r for r in rows if r["part"] == "layouts"])
    words = [r for r in rows if r["part"] not in ("examples", "record", "layouts", "transform")]
    if words:
        report_words(words)
    failures = report_examples([r for r in rows if r["part"] == "examples"], "examples", TFDATA)
    failures += report_examples([r for r in rows if r["part"] == "record"], "record", TFDATA_ONE)
    failures += report_transform([r for r in rows if r["part"] == "transform"])
    if not spark:
        print("\n(pyspark local[2] not run: pyspark or java is not installed)")
    targets(rows)
    if FLAGS.json:
        json.dump(rows, open(FLAGS.json, "w"), indent=1)
    if failures:
        sys.exit("RESULTS DISAGREE:\n" + "\n".join(failures))


def report_words(rows):
    """The table of the word parts; exits if their results disagree."""
    print()
    print(
        "| part | run | wall s, median (min-max) | MB/s | wc -w / run | run / Pool(2) | start-up s | map s "
        "| map MB/s | peak RSS MB | result |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|---|")
    failures = []
    for part in dict.fromkeys(r["part"] for r in rows):
        group = [r for r in rows if r["part"] == part]
        wc = next((r for r in group if r["run"] == "wc -w"), None)  # none in "storage"
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
                "| %s | %s | %.2f (%.2f-%.2f) | %.0f | %s | %s | %s | %s | %s | %s | %s |"
                % (
                    part,
                    r["run"],
                    r["seconds"],
                    r["low"],
                    r["high"],
                    mb_s,
                    "%.2fx" % (wc["seconds"] / r["seconds"]) if wc else "",
                    "%.2fx" % (r["seconds"] / peer["seconds"]) if peer else "",
                    startup,
                    steady,
                    steady_mb,
                    rss,
                    result,
                )
            )
    if failures:
        sys.exit("RESULTS DISAGREE:\n" + "\n".join(failures))


def report_layouts(rows):
    """The listing layouts' table: start-up (listing included) and peak RSS per role."""
    if not rows:
        return
    print("\n| layout | wall s, median (min-max) | start-up s | map s | peak RSS MB | files |")
    print("|---|---:|---:|---:|---|---:|")
    for r in rows:
        print(
            "| %s | %.2f (%.2f-%.2f) | %s | %s | %s | %s |"
            % (
                r["run"],
                r["seconds"],
                r["low"],
                r["high"],
                "%.2f" % r["startup"] if r["startup"] else "",
                "%.2f" % r["steady"] if r["steady"] else "",
                ", ".join("%s %.0f" % (role, mb) for role, mb in sorted(r["rss"].items())),
                r["result"].get("files", ""),
            )
        )


def report_transform(rows):
    """The transform part's table, against tf.Transform's side; returns its disagreements
    (both must write every example)."""
    if not rows:
        return []
    print("\n| part | run | wall s, median (min-max) | MB/s | run / tf.Transform | peak RSS MB | result |")
    print("|---|---|---:|---:|---:|---|---|")
    theirs = next(r for r in rows if r["run"] == TRANSFORM_TFT)
    for r in rows:
        rss = ", ".join("%s %.0f" % (role, mb) for role, mb in sorted(r["rss"].items()))
        print(
            "| transform | %s | %.2f (%.2f-%.2f) | %.0f | %.2fx | %s | %d examples written |"
            % (
                r["run"],
                r["seconds"],
                r["low"],
                r["high"],
                r["mb"] / r["seconds"],
                r["seconds"] / theirs["seconds"],
                rss,
                r["result"]["examples"],
            )
        )
    if len({r["result"]["examples"] for r in rows}) > 1:
        return ["transform: the sides wrote different numbers of examples"]
    return []


def report_examples(rows, part, plain_name):
    """A tf.Example part's table, against its plain tf.data pass `plain_name`; returns its
    disagreements (every run must read the same examples and values, and ours must have
    Pool(2)'s exact counts)."""
    if not rows:
        return []
    print()
    print(
        "| part | run | wall s, median (min-max) | MB/s | run / tf.data pass | start-up s | map s | peak RSS MB | result |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|---|")
    plain = next(r for r in rows if r["run"] == plain_name)
    for r in rows:
        print(
            "| %s | %s | %.2f (%.2f-%.2f) | %.0f | %.2fx | %s | %s | %s | %d examples, %d values%s |"
            % (
                part,
                r["run"],
                r["seconds"],
                r["low"],
                r["high"],
                r["mb"] / r["seconds"],
                r["seconds"] / plain["seconds"],
                "%.2f" % r["startup"] if r["startup"] else "",
                "%.2f" % r["steady"] if r["steady"] else "",
                ", ".join("%s %.0f" % (role, mb) for role, mb in sorted(r["rss"].items())),
                r["result"]["examples"],
                r["result"]["values"],
                ", %d distinct" % r["result"]["distinct"] if "distinct" in r["result"] else "",
            )
        )
    failures = []
    if len({(r["result"]["examples"], r["result"]["values"]) for r in rows}) > 1:
        failures.append("%s: runs read different examples or values: %s" % (part, [r["result"] for r in rows]))
    vocabularies = {r["result"]["digest"] for r in rows if "digest" in r["result"]}
    if len(vocabularies) > 1:
        failures.append("%s: vocabularies disagree" % part)
    return failures


def targets(rows):
    """The performance targets, measured in this run: (target, measured, met), printed."""
    by = {(r["part"], r["run"]): r for r in rows}
    checks = []

    def ratio(part, name, peer, goal, what=None):
        if (part, name) in by and (part, peer) in by:
            value = by[part, name]["seconds"] / by[part, peer]["seconds"]
            checks.append(("%s: %s <= %.1fx %s" % (part, what or name, goal, peer), "%.2fx" % value, value <= goal))

    def map_rate(part, name):
        r = by.get((part, name))
        return r["mb"] / r["steady"] if r and r["steady"] else None

    ratio("small", DEFAULT, POOL, 1.0, "default command, end to end")
    if ("small", DEFAULT) in by and ("small", POOL) in by:
        ours, pool = by["small", DEFAULT], by["small", POOL]
        after_startup = ours["mb"] / (ours["seconds"] - ours["startup"])
        value = after_startup / (pool["mb"] / pool["seconds"])
        checks.append(("small: first map step to result >= 3x Pool(2)'s throughput", "%.2fx" % value, value >= 3))
    for part in ("tiny", "huge", "giant"):
        ratio(part, DEFAULT, POOL, 0.7, "default command")
    ratio("tiny", DEFAULT, FIND_CAT, 1.5, "default command")
    ratio("giant", DEFAULT, "wc -w", 0.5, "default command")
    huge, giant = map_rate("huge", DEFAULT), map_rate("giant", DEFAULT)
    if huge:
        checks.append(("huge: map phase >= 1000 MB/s", "%.0f MB/s" % huge, huge >= 1000))
    if huge and giant:
        checks.append(("giant: map MB/s within 15% of huge's (linear)", "%.0f MB/s" % giant, giant >= 0.85 * huge))
    for part in ("small", "huge"):
        ratio(part, DEFAULT_FREQ, POOL_FREQ, 0.6, "wordfreq, default command")
        if (part, DEFAULT_FREQ) in by:
            peak = max(by[part, DEFAULT_FREQ]["rss"].values())
            checks.append(("%s: wordfreq, every process < 1000 MB peak RSS" % part, "%.0f MB" % peak, peak < 1000))
    ratio("examples", VOCAB, TFDATA, 1.5, "vocab of 3 features, default command, end to end")
    ratio("examples", STATS, VOCAB, 1.3, "stats of the same 3 features, end to end")
    ratio("examples", STATS_ALL, VOCAB, 1.3, "stats of every feature, end to end")
    if ("examples", STATS_ALL_TASKS) in by and ("examples", VOCAB_TASKS) in by:
        # The target is per task: each role's peak against the same role's in vocab.
        ours, theirs = by["examples", STATS_ALL_TASKS]["rss"], by["examples", VOCAB_TASKS]["rss"]
        for role in ("ps", "worker", "main"):
            name = "coordinator" if role == "main" else role
            checks.append(
                (
                    "examples: stats of every feature, %s peak RSS <= vocab's %s x1.3" % (name, name),
                    "%.0f / %.0f MB" % (ours[role], theirs[role]),
                    ours[role] <= 1.3 * theirs[role],
                )
            )
    if ("examples", STATS_ALL) in by and ("examples", VOCAB) in by:
        # Every task in one process, as the default command runs them: reported, not a
        # target (a task's own peak is; the in-process sum adds the workers' and the ps's).
        peaks = [max(by["examples", run]["rss"].values()) for run in (STATS_ALL, VOCAB)]
        checks.append(
            (
                "examples: stats of every feature in one process, peak RSS (vocab's: %.0f MB)" % peaks[1],
                "%.0f MB" % peaks[0],
                None,
            )
        )
    if ("examples", VOCAB) in by and ("examples", TFDATA) in by:
        ours, plain = by["examples", VOCAB], by["examples", TFDATA]
        value = ours["steady"] / plain["steady"]
        checks.append(("examples: vocab's map phase <= 1.5x one tf.data pass per core", "%.2fx" % value, value <= 1.5))
    if ("record", VOCAB_ONE_WORKER) in by and ("record", VOCAB_TWO_WORKERS) in by:
        value = by["record", VOCAB_ONE_WORKER]["seconds"] / by["record", VOCAB_TWO_WORKERS]["seconds"]
        checks.append(("record: one TFRecord file, vocab on 2 workers >= 1.7x 1 worker", "%.2fx" % value, value >= 1.7))
    ratio("record", VOCAB_TWO_WORKERS, TFDATA_ONE, 1.0, "vocab on 2 workers, end to end")
    if ("layouts", TF_IMPORT) in by:
        tf_import = by["layouts", TF_IMPORT]["seconds"]
        for r in rows:
            if r["part"] == "layouts" and r["run"] != TF_IMPORT:
                checks.append(
                    (
                        "%s: start-up <= TF import (%.1f s) + 2 s" % (r["run"], tf_import),
                        "%.2f s" % r["startup"],
                        r["startup"] <= tf_import + 2,
                    )
                )
                peak = r["rss"].get("main", 0)
                checks.append(("%s: coordinator peak RSS < 1500 MB" % r["run"], "%.0f MB" % peak, peak < 1500))
    ratio("transform", TRANSFORM_OURS, TRANSFORM_TFT, 0.3, "analyze + materialize, against tf.Transform's DirectRunner")
    ratio("storage", STORAGE_GCS, STORAGE_LOCAL, 1.5, "the same 40 files on gs://, end to end")
    ratio("storage", STORAGE_503, STORAGE_GCS, 1.3, "with 5% of reads answered 503")
    if ("tiny", DEFAULT) in by:
        peak = by["tiny", DEFAULT]["rss"].get("main", 0)  # the coordinator: the command itself
        checks.append(("tiny: coordinator peak RSS (1M files: < 1500 MB)", "%.0f MB" % peak, None))
    print("\ntargets (measured in this run):")
    for name, measured, met in checks:
        print("  %-66s %10s  %s" % (name, measured, {True: "met", False: "NOT met", None: ""}[met]))
    return checks


if __name__ == "__main__":
    app.run(main)
