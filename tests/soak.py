"""A randomized fault soak: rounds on real multi-process clusters, each one job and one
fault drawn at random at a random moment, the whole result checked against plain Python.

    python tests/soak.py --rounds 100                    # a new random seed, printed
    python tests/soak.py --seed 7 --round 12             # replays round 12 of seed 7 exactly

Each round starts 2 ps and 3 workers (`python -m tf2_mapreduce.server`, each with its own
TF_CONFIG), runs one job (sum, vector sum, per-key sum, vocabularies and statistics of
tf.Example features, the examples written again as shards, in turn; the text holds gzip
and zlib files, the examples GZIP'd and plain TFRecord shards) and injects one fault:
kill -9 of one or two workers, of a worker then restarted, of a ps (restarted; the same
command run again), of the coordinator (run again), SIGSTOP of a worker, a second job on
kept servers, or (as root, with iproute2) a worker's network link cut, in network
namespaces. It then checks the result file (or every vocabulary file, or stats.json) against
`bytes.split()` / `Counter` / protobuf parsing record by record, whole,
that every server not killed exited 0 by itself, and that no process of the round is left.
Exit status 0 when every round passed.
"""

import argparse
import collections
import gzip
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zlib

import portpicker

# Before TensorFlow is imported (by the helpers): through the package, none of its
# start-up lines on the soak's stderr; then its log level for the children.
import tf2_mapreduce  # noqa: F401, I001

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from helpers import oracle_stats, oracles, switched_hosts  # noqa: E402
from helpers.storage_faults import REFUSE, RESET, STALL, STATUS, Fault  # noqa: E402

from tf2_mapreduce.cluster import orphans  # noqa: E402
from tf2_mapreduce.outputs import files as output  # noqa: E402  (its unescape reads a per-key table back)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
JOBS = ("wordcount", "wc", "wordfreq", "vocab", "stats", "reshard", "transform")
EXAMPLE_JOBS = ("vocab", "stats", "reshard", "transform")  # over the tf.Example shards, written to a directory
# The jobs that write records, and their flags: their data/ is checked against a fault-free run's.
WRITING = {
    "reshard": ("--num_shards=3",),
    "transform": ("--num_shards=3", "--preprocessing_fn=helpers.transforms:examples_fn"),
}
# Enough that the example jobs map for a few progress reports, so that a fault drawn
# "running" strikes while they run (with 800, stats mapped for under a second).
EXAMPLES_PER_SHARD = 3000
# The features of scripts/make_examples.py that vocab counts, with their types there.
FEATURES = (("query", "string"), ("tags", "string"), ("user_id", "int64"), ("clicks", "int64"))
FAULTS = (
    "kill_worker",
    "kill_two_workers",
    "restart_worker",
    "kill_ps",
    "kill_coordinator",
    "stop_worker",
    "second_job",
    "cut_link",
    "storage_outage",
)
NUM_PS, NUM_WORKERS = 2, 3
COORDINATOR_TIMEOUT = 240  # seconds a coordinator may run before the round fails
SERVER_EXIT = 45  # seconds servers get to exit by themselves once the coordinator has exited
SHUTDOWN_TIMEOUT = 20  # the coordinator's --shutdown_timeout: a restarted worker is up well within it
CONNECT_TIMEOUT = 20  # the coordinator's --connect_timeout: how long it waits for a worker killed before the job
PROGRESS_SHARE = re.compile(r"\] \d+/\d+ files \((\d+)%\)")  # a progress report's share of the input done
MARK = "TF2MR_SOAK"  # in every child's environment: how leftovers of a round are found


class Expected(collections.namedtuple("Expected", "per_file counts vocab stats records references read_size")):
    """What a round's result must be (`oracle`), and the --read_size of the round."""

    __slots__ = ()

    def __new__(cls, per_file, counts, vocab, stats, records, references, read_size=None):
        return super().__new__(cls, per_file, counts, vocab, stats, records, references, read_size)


class Failed(Exception):
    """A round's check did not hold; the message says which and how."""


# ---------------------------------------------------------------- corpus and oracle

WHITESPACE = [b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c", b"\r\n", b"  \n"]
WORD_BYTES = b"abcdefghij\xa0\xc2\x85\x1c\x1f\xff.,"


def write_corpus(directory, rng):
    """Many small files and two larger ones (cut into pieces by --read_size); returns paths."""
    os.makedirs(directory)
    vocabulary = [bytes(rng.choice(WORD_BYTES) for _ in range(rng.randint(1, 7))) for _ in range(3000)]
    paths = []
    for n in range(402):
        words = 40_000 if n >= 400 else (0 if n % 9 == 4 else rng.randint(1, 300))
        parts = []
        for word in rng.choices(vocabulary, k=words):
            parts.append(word)
            parts.append(rng.choice(WHITESPACE))
        if parts and rng.random() < 0.5:
            parts.pop()  # no whitespace at the end of the file
        data = b"".join(parts)
        # Some files compressed (one of the large ones too): each is one piece, streamed.
        path = os.path.join(directory, "f%03d.txt%s" % (n, COMPRESSED.get(n % 7, "")))
        with open(path, "wb") as f:
            f.write(
                gzip.compress(data, mtime=0)
                if path.endswith(".gz")
                else zlib.compress(data)
                if path.endswith(".zz")
                else data
            )
        paths.append(path)
    return paths


COMPRESSED = {3: ".gz", 5: ".zz"}  # by file number modulo 7


def text_of(path):
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        return gzip.decompress(data)
    return zlib.decompress(data) if path.endswith(".zz") else data


def write_examples(directory):
    """TFRecord shards of tf.Example records with every tricky value (scripts/make_examples.py):
    GZIP'd ones and plain ones. Returns their paths."""
    script = os.path.join(REPO, "scripts", "make_examples.py")
    for seed, shards, compression in ((1, 24, "GZIP"), (2, 6, "NONE")):
        subprocess.run(
            [
                sys.executable,
                script,
                "--output_dir",
                directory,
                "--shards",
                str(shards),
                "--examples",
                str(shards * EXAMPLES_PER_SHARD),
                "--seed",
                str(seed),
                "--compression",
                compression,
                "--tricky",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
    return sorted(os.path.join(directory, name) for name in os.listdir(directory))


def vocab_counts(paths):
    """{feature: {"counts": Counter of its values, "examples", "missing", "values"}} of
    every feature of FEATURES over the records of `paths`, each parsed by protobuf itself
    (helpers/oracles.py): int64 values as decimal bytes; an example misses a feature when
    it has no value of it."""
    found = oracles.oracle_vocab(paths, FEATURES)
    return {
        name: {
            "counts": found["counts"][name],
            "examples": found["examples"],
            "missing": found["missing"][name],
            "values": sum(found["counts"][name].values()),
        }
        for name, _ in FEATURES
    }


def oracle(paths, examples):
    """Per file (lines, words, bytes) by plain Python, and every word's count; and for
    `examples` (None where no round reads them), each feature's counts by protobuf itself
    (helpers/oracles.py), the figures of stats.json (helpers/oracle_stats.py) and every
    record in input order."""
    per_file, counts = {}, collections.Counter()
    for path in paths:
        data = text_of(path)
        words = data.split()
        lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
        per_file[path] = (lines, len(words), len(data))
        counts.update(words)
    if examples is None:
        return Expected(per_file, counts, None, None, None, None)
    vocab = vocab_counts(examples)
    records = [record for path in sorted(examples) for record in oracles.read_tfrecords(path)]
    figures = oracle_stats.figures(oracle_stats.records_of(examples))
    return Expected(per_file, counts, vocab, figures, records, References(os.path.dirname(examples[0])))


def reads_examples(job, fault):
    """Whether a round of `job` and `fault` runs a job over the tf.Example shards."""
    second = JOBS[(JOBS.index(job) + 1) % len(JOBS)] if fault == "second_job" else job
    return job in EXAMPLE_JOBS or second in EXAMPLE_JOBS


class References:
    """The data/ a fault-free run of a job that writes records writes, by its sha256: made
    once per job and --read_size (where the pieces are cut), on an in-process cluster."""

    def __init__(self, examples):
        self.examples = examples
        self._digests = {}

    def digest(self, job, read_size):
        if (job, read_size) not in self._digests:
            out = tempfile.mkdtemp(prefix="tf2_mapreduce-soak-reference-")
            argv = [sys.executable, "-m", "tf2_mapreduce.coordinator", "--job=" + job, "--input", self.examples]
            argv += ["--output_dir", os.path.join(out, "out"), "--read_size=%d" % read_size, *WRITING[job]]
            env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "tests"))
            subprocess.run(argv, check=True, capture_output=True, timeout=COORDINATOR_TIMEOUT, env=env)
            self._digests[job, read_size] = oracles.data_digest(os.path.join(out, "out"))
            shutil.rmtree(out)
        return self._digests[job, read_size]


def holdable(term):
    return bool(term) and b"\n" not in term and b"\r" not in term


def read_lines(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]


def check_vocabularies(directory, vocab):
    """Raises `Failed` unless every vocabulary file and the summary are the oracle's."""
    try:
        with open(os.path.join(directory, "summary.json")) as f:
            summary = json.load(f)
    except OSError as e:
        raise Failed("no summary of the vocabularies: %s" % e) from None
    examples = vocab[FEATURES[0][0]]["examples"]
    if summary["examples"] != examples:
        raise Failed("%d examples, oracle %d" % (summary["examples"], examples))
    for name, _ in FEATURES:
        want = vocab[name]
        ranked = oracles.tft_ordered(want["counts"])
        written = [(t, c) for t, c in ranked if holdable(t)]
        terms = read_lines(os.path.join(directory, "vocab_%s.txt" % name))
        counts = [line.split(b"\t", 1) for line in read_lines(os.path.join(directory, "counts_%s.tsv" % name))]
        aside = [line.split(b"\t", 1) for line in read_lines(os.path.join(directory, "unwritable_%s.tsv" % name))]
        if terms != [t for t, _ in written] or [(t, int(c)) for c, t in counts] != written:
            got = dict((t, int(c)) for c, t in counts)
            wrong = sorted(t for t in set(got) | {t for t, _ in written} if got.get(t) != want["counts"].get(t))
            raise Failed(
                "vocabulary %s: %d of %d terms wrong%s"
                % (
                    name,
                    len(wrong),
                    len(written),
                    ", first %r: %s, oracle %s" % (wrong[0], got.get(wrong[0]), want["counts"].get(wrong[0]))
                    if wrong
                    else " (order)",
                )
            )
        if [(output.unescape(t.decode()), int(c)) for c, t in aside] != [(t, c) for t, c in ranked if not holdable(t)]:
            raise Failed("vocabulary %s: the unwritable terms are not the oracle's" % name)
        got = summary["vocabularies"][name]
        if (got["values"], got["distinct"], got["missing"]) != (want["values"], len(want["counts"]), want["missing"]):
            raise Failed(
                "vocabulary %s: summary %s, oracle %s" % (name, got, {k: want[k] for k in ("values", "missing")})
            )


def check_stats(directory, stats):
    """Raises `Failed` unless stats.json holds the oracle's figures, every one."""
    try:
        with open(os.path.join(directory, "stats.json")) as f:
            document = json.load(f)
    except (OSError, ValueError) as e:
        raise Failed("no stats.json: %s" % e) from None
    if document["num_examples"] != stats["num_examples"]:
        raise Failed("%d examples, oracle %d" % (document["num_examples"], stats["num_examples"]))
    for name in sorted(set(document["features"]) | set(stats["features"])):
        got, want = document["features"].get(name), stats["features"].get(name)
        if got != want:
            wrong = sorted(k for k in set(got or {}) | set(want or {}) if (got or {}).get(k) != (want or {}).get(k))
            raise Failed("feature %s: %s differ from the oracle's" % (name, ", ".join(wrong) or "presence"))


def check_records(directory, records):
    """Raises `Failed` unless data/ holds every record of the inputs once, in input order,
    and the directory nothing but the result."""
    data = os.path.join(directory, "data")
    try:
        names = sorted(os.listdir(data))
        left = sorted(set(os.listdir(directory)) - {"data", "_tf2_mapreduce.json"})
    except OSError as e:
        raise Failed("no data/: %s" % e) from None
    if left:
        raise Failed("left in the output directory: %s" % ", ".join(left))
    got = [record for name in names for record in oracles.read_tfrecords(os.path.join(data, name))]
    if got != records:
        first = next((k for k, (a, b) in enumerate(zip(got, records)) if a != b), min(len(got), len(records)))
        raise Failed("%d records written, %d read; they differ from record %d on" % (len(got), len(records), first))


def check_transformed(directory, records):
    """Raises `Failed` unless data/ holds every input example transformed once, in input
    order, bit for bit as the saved transform_fn maps it, and the query vocabulary is tft's
    of the examples' queries (counted by protobuf)."""
    import tensorflow as tf
    from helpers.transforms import RAW, TRANSFORMED, first_difference

    data = os.path.join(directory, "data")
    try:
        names = sorted(os.listdir(data))
    except OSError as e:
        raise Failed("no data/: %s" % e) from None
    got = [record for name in names for record in oracles.read_tfrecords(os.path.join(data, name))]
    if len(got) != len(records):
        raise Failed("%d examples written, %d read" % (len(got), len(records)))
    served = tf.saved_model.load(os.path.join(directory, "transform_fn")).transform_fn(
        tf.io.parse_example(records, RAW)
    )
    written = tf.io.parse_example(got, TRANSFORMED)
    differing = first_difference(served, written, TRANSFORMED)
    if differing:
        raise Failed("%s: the examples written are not what transform_fn makes of the inputs, in order" % differing)
    queries = collections.Counter(
        q
        for record in records
        for q in tf.train.Example.FromString(record).features.feature["query"].bytes_list.value
        if q and b"\n" not in q and b"\r" not in q
    )
    want = [t for t, _ in oracles.tft_ordered(queries)][:500]
    with open(
        os.path.join(directory, "transform_fn", "assets", "vocab_compute_and_apply_vocabulary_vocabulary"), "rb"
    ) as f:
        if f.read().split(b"\n")[:-1] != want:
            raise Failed("the query vocabulary is not tft's of the inputs")


def check_result(job, path, expected, local=lambda path: path):
    """Raises `Failed` unless the result file at `path` is the oracle's, whole; `local`
    maps a path the result names to the corpus's (the bucket's copy to the file)."""
    per_file, counts, vocab, stats, records = expected[:5]
    if job in WRITING:
        reference = expected.references.digest(job, expected.read_size)
        if oracles.data_digest(path) != reference:
            raise Failed("data/ is not the bytes a fault-free run wrote")
    if job == "reshard":
        check_records(path, records)
        return
    if job == "transform":
        check_transformed(path, records)
        return
    if job == "vocab":
        check_vocabularies(path, vocab)
        return
    if job == "stats":
        check_stats(path, stats)
        return
    if job == "wordfreq":
        with open(path, encoding="utf-8") as f:
            rows = [line.rstrip("\n").split("\t") for line in f]
        table = [(output.unescape(word), int(count)) for word, count in rows]
        want = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        if table != want:
            got = dict(table)
            wrong = sorted(w for w in set(got) | set(counts) if got.get(w) != counts.get(w))
            if not wrong:
                raise Failed("the table's counts are right but its order is not")
            raise Failed(
                "%d of %d words wrong, first %r: %s, oracle %s"
                % (len(wrong), len(counts), wrong[0], got.get(wrong[0]), counts.get(wrong[0]))
            )
        return
    with open(path) as f:
        document = json.load(f)
    names = ("lines", "words", "bytes") if job == "wc" else ("words",)
    got = {local(row["path"]): tuple(row[name] for name in names) for row in document["per_file"]}
    want = {p: (values if job == "wc" else values[1:2]) for p, values in per_file.items()}
    if got != want:
        wrong = sorted(p for p in set(got) | set(want) if got.get(p) != want.get(p))
        raise Failed(
            "%d of %d files wrong, first %s: %s, oracle %s"
            % (len(wrong), len(want), wrong[0], got.get(wrong[0]), want.get(wrong[0]))
        )
    totals = tuple(sum(v[k] for v in want.values()) for k in range(len(names)))
    got_totals = tuple(document["totals"][n] for n in names) if job == "wc" else (document["total_words"],)
    if got_totals != totals:
        raise Failed("totals %s, oracle %s" % (got_totals, totals))


# ---------------------------------------------------------------- hosts


class Loopback:
    """Every task on this host's loopback, on ports of its own."""

    def __init__(self, names):
        self.addresses = {name: "localhost:%d" % portpicker.pick_unused_port() for name in names}

    def command(self, name, argv):
        return argv

    def delete(self):
        pass


# ---------------------------------------------------------------- one round


class Bucket:
    """The corpus as objects of a Cloud Storage server on loopback, made once, for the
    rounds whose storage fails (`storage_outage`)."""

    made = None

    def __init__(self, corpus):
        from helpers.gcs_server import GcsServer

        self.corpus = corpus
        self.server = GcsServer(tempfile.mkdtemp(prefix="tf2_mapreduce-soak-gcs-"))
        self.server.create_bucket("soak")
        for kind, directory in corpus.items():
            for name in sorted(os.listdir(directory)):
                with open(os.path.join(directory, name), "rb") as f:
                    self.server.put("soak", "%s/%s" % (kind, name), f.read())

    @classmethod
    def of(cls, corpus):
        if cls.made is None:
            cls.made = cls(corpus)
        return cls.made

    def local(self, path):
        """The corpus file of the object `path` names."""
        kind, name = path[len("gs://soak/") :].split("/", 1)
        return os.path.join(self.corpus[kind], name)


class Round:
    """One round: a cluster, its coordinator runs, one fault, the checks."""

    def __init__(self, number, seed, job, fault, corpus, expected, work_dir):
        self.number, self.job, self.fault = number, job, fault
        self.rng = random.Random("%d:%d:run" % (seed, number))
        self.corpus = corpus
        self.dir = os.path.join(work_dir, "round-%03d" % number)
        os.makedirs(self.dir)
        self.mark = "%d:%d" % (os.getpid(), number)
        self.tasks = [("ps", i) for i in range(NUM_PS)] + [("worker", i) for i in range(NUM_WORKERS)]
        names = ["chief"] + ["%s%d" % task for task in self.tasks]
        self.hosts = switched_hosts.SwitchedHosts(names, number % 250) if fault == "cut_link" else Loopback(names)
        self.jobs = {
            "chief": [self.hosts.addresses["chief"]],
            "ps": [self.hosts.addresses["ps%d" % i] for i in range(NUM_PS)],
            "worker": [self.hosts.addresses["worker%d" % i] for i in range(NUM_WORKERS)],
        }
        self.servers = {}  # (role, index) -> Popen of its current process
        self.killed = set()  # tasks killed and not restarted: they are not expected to exit
        # Tasks restarted after they had been told the job was over: servers of no job,
        # which wait for the next coordinator (it is the cluster manager's to stop them).
        self.after_the_end = set()
        self.children = []
        self.runs = 0
        checkpoint_every, files_per_step = self.rng.uniform(0.3, 3.0), self.rng.randint(1, 4)
        read_size = self.rng.choice([16 << 10, 64 << 10, 256 << 10])
        self.expected = expected._replace(read_size=read_size)
        self.flags = [
            "--checkpoint_every=%.1f" % checkpoint_every,
            "--files_per_step=%d" % files_per_step,
            "--read_size=%d" % read_size,
            "--progress_every=0.1",
            "--worker_timeout=60",
            "--connect_timeout=%d" % CONNECT_TIMEOUT,
            "--shutdown_timeout=%d" % SHUTDOWN_TIMEOUT,
        ]
        # When the fault strikes: seconds after the coordinator starts (while it imports
        # TensorFlow and connects), once a share of the input is done by its progress
        # reports (while the job runs: most rounds; a time after the first report
        # missed most of the stats job, which maps for a second), or late (often after
        # the job ended).
        self.bucket = Bucket.of(corpus) if fault == "storage_outage" else None
        self.phase = self.rng.choices(("starting", "running", "late"), weights=(2, 7, 1))[0]
        self.moment = self.rng.uniform(0.0, {"starting": 4.0, "running": 0.8, "late": 10.0}[self.phase])
        self.notes = []

    def env(self, role, index):
        env = dict(os.environ, GRPC_FAIL_FAST="use_caller", TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
        env["TF_CONFIG"] = json.dumps({"cluster": self.jobs, "task": {"type": role, "index": index}})
        env[MARK] = self.mark
        env["PYTHONPATH"] = os.path.join(REPO, "tests")  # the transform job's preprocessing_fn: helpers.transforms
        return self.bucket.server.env(env) if self.bucket else env

    def spawn(self, host, argv, env, log):
        with open(os.path.join(self.dir, log), "ab") as out:
            proc = subprocess.Popen(
                self.hosts.command(host, argv),
                env=env,
                cwd=REPO,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=orphans.dying_with(os.getpid()),
            )
        self.children.append(proc)
        return proc

    def start_server(self, role, index, *flags):
        self.servers[role, index] = self.spawn(
            "%s%d" % (role, index),
            [sys.executable, "-m", "tf2_mapreduce.server", "--idle_timeout=300", *flags],
            self.env(role, index),
            "%s%d.log" % (role, index),
        )
        if (role, index) in self.killed and "the job is over" in self.log_tail("%s%d.log" % (role, index), 10**6):
            self.after_the_end.add((role, index))
            self.notes.append("%s %d restarted after it was told the job was over" % (role, index))
        self.killed.discard((role, index))

    def wait_serving(self, timeout=120):
        """Blocks until every server has said it serves (they boot in parallel)."""
        deadline = time.monotonic() + timeout
        for role, index in self.tasks:
            while "serving on" not in self.log_tail("%s%d.log" % (role, index), lines=10**6):
                if self.servers[role, index].poll() is not None or time.monotonic() > deadline:
                    raise Failed("%s %d did not start: %s" % (role, index, self.log_tail("%s%d.log" % (role, index))))
                time.sleep(0.1)  # polls the log the server writes once it serves

    def kill_server(self, role, index):
        self.servers[role, index].kill()
        self.servers[role, index].wait(30)
        self.killed.add((role, index))

    def coordinator(self, job, output, checkpoint_dir, *extra):
        self.runs += 1
        argv = [
            sys.executable,
            "-m",
            "tf2_mapreduce.coordinator",
            "--job=%s" % job,
            "--input",
            self.input(job),
            "--output_dir" if job in EXAMPLE_JOBS else "--output",
            output,
            *(["--features=" + ",".join(name for name, _ in FEATURES)] if job == "vocab" else []),
            *WRITING.get(job, ()),
            "--checkpoint_dir",
            checkpoint_dir,
            *self.flags,
            *extra,
        ]
        return self.spawn("chief", argv, self.env("chief", 0), "coordinator-%d.log" % self.runs)

    def input(self, job):
        kind = "examples" if job in EXAMPLE_JOBS else "text"
        return "gs://soak/" + kind if self.bucket else self.corpus[kind]

    def output(self, job, n=0):
        if job in EXAMPLE_JOBS:
            return os.path.join(self.dir, "%s-%d" % (job, n))
        return os.path.join(self.dir, "result-%d.%s" % (n, "tsv" if job == "wordfreq" else "json"))

    def log_tail(self, name, lines=3):
        try:
            with open(os.path.join(self.dir, name), "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            return "(no log)"
        kept = [
            line
            for line in text.splitlines()
            if line.strip() and not line.startswith(("W0000", "I0000", "E0000", "WARNING"))
        ]
        return " | ".join(kept[-lines:])

    def finish(self, proc, expect=(0,)):
        """Waits for a coordinator run; raises `Failed` unless it exits with one of `expect`."""
        try:
            code = proc.wait(COORDINATOR_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise Failed(
                "coordinator run %d still running after %ds: %s"
                % (self.runs, COORDINATOR_TIMEOUT, self.log_tail("coordinator-%d.log" % self.runs))
            ) from None
        if code not in expect:
            raise Failed(
                "coordinator run %d exited %d, expected %s: %s"
                % (self.runs, code, " or ".join(map(str, expect)), self.log_tail("coordinator-%d.log" % self.runs))
            )
        return code

    def when(self):
        """The fault's moment, as the round's line says it."""
        if self.phase == "running":
            return "running@%d%%" % (100 * self.moment)
        return "%s+%.1fs" % (self.phase, self.moment)

    def at_the_moment(self, proc):
        """Waits until the fault's moment; False if the coordinator exited first."""
        deadline = None if self.phase == "running" else time.monotonic() + self.moment
        while deadline is None or time.monotonic() < deadline:
            if proc.poll() is not None:
                self.notes.append("late: the job ended before the fault")
                return False
            if deadline is None and self.done_share() >= self.moment:
                return True
            time.sleep(0.02)  # the moment is the scenario, drawn at random
        return True

    def done_share(self):
        """The share of the input done by the running coordinator's last progress report
        (0 before the first)."""
        shares = PROGRESS_SHARE.findall(self.log_tail("coordinator-%d.log" % self.runs, lines=10**6))
        return int(shares[-1]) / 100 if shares else 0.0

    def run(self):
        keep = ("--keep_serving",) if self.fault == "second_job" else ()
        for role, index in self.tasks:
            self.start_server(role, index, *keep)
        self.wait_serving()
        first = self.coordinator(self.job, self.output(self.job), os.path.join(self.dir, "ckpt"), *keep)
        getattr(self, "fault_" + self.fault)(first)
        self.check_servers(kept=bool(keep))

    def rerun(self, n=0, expect=(0,)):
        """The same command again; checks its result."""
        self.finish(self.coordinator(self.job, self.output(self.job, n), os.path.join(self.dir, "ckpt")), expect)
        check_result(self.job, self.output(self.job, n), self.expected)

    def workers(self, count):
        return self.rng.sample([("worker", i) for i in range(NUM_WORKERS)], count)

    def job_started(self):
        """Whether the running coordinator has reported progress: it is connected."""
        return "tf2_mapreduce: [" in self.log_tail("coordinator-%d.log" % self.runs, lines=10**6)

    def fault_kill_worker(self, first, count=1):
        if not self.at_the_moment(first):
            self.finish(first)
            check_result(self.job, self.output(self.job), self.expected)
            return
        killed = self.workers(count)
        before = not self.job_started()
        for task in killed:
            self.kill_server(*task)
        # Killed before the coordinator connected, a worker is a cluster that never came
        # up: the coordinator gives up after --connect_timeout (exit 3) unless it had
        # connected by then. The same command then runs once they are back.
        if self.finish(first, expect=(0, 3) if before else (0,)) == 0:
            check_result(self.job, self.output(self.job), self.expected)
            return
        self.notes.append("killed before the job started")
        for task in killed:
            self.start_server(*task)
        self.rerun(n=1)

    def fault_kill_two_workers(self, first):
        self.fault_kill_worker(first, count=2)

    def fault_restart_worker(self, first):
        if self.at_the_moment(first):
            task = self.workers(1)[0]
            self.kill_server(*task)
            time.sleep(self.rng.uniform(0.2, 4.0))  # how long it stays down: the scenario
            self.start_server(*task)
        self.finish(first)
        check_result(self.job, self.output(self.job), self.expected)

    def fault_stop_worker(self, first):
        if self.at_the_moment(first):
            proc = self.servers[self.workers(1)[0]]
            proc.send_signal(signal.SIGSTOP)
            time.sleep(self.rng.uniform(2.0, 8.0))  # how long it stays stopped: the scenario
            proc.send_signal(signal.SIGCONT)
        self.finish(first)
        check_result(self.job, self.output(self.job), self.expected)

    def fault_storage_outage(self, first):
        """The inputs' storage fails for a while, in one of the ways real storage does;
        the job waits it out and its result is exact."""
        if self.at_the_moment(first):
            fault = Fault(
                self.rng.choice((STATUS, STATUS, RESET, STALL, REFUSE)),
                kinds=self.rng.choice((("read",), ("read", "stat"), ("list", "stat", "read"))),
                status=self.rng.choice((503, 429, 500)),
                after_bytes=self.rng.randint(0, 4000),
                stall=1.0,
                share=self.rng.choice((1.0, 0.5, 0.1)),
                seconds=self.rng.uniform(1.0, 8.0),
                seed=self.rng.randrange(1 << 30),
            )
            self.bucket.server.faults.add(fault)
            self.notes.append("%s %s of %s, %.1fs" % (fault.action, fault.share, "/".join(fault.kinds), fault.seconds))
        try:
            self.finish(first)
        finally:
            self.bucket.server.faults.clear()
        check_result(self.job, self.output(self.job), self.expected, self.bucket.local)

    def fault_cut_link(self, first):
        if self.at_the_moment(first):
            name = "worker%d" % self.workers(1)[0][1]
            self.hosts.set_link(name, "down")
            time.sleep(self.rng.uniform(2.0, 8.0))  # how long the link stays down: the scenario
            self.hosts.set_link(name, "up")
        self.finish(first)
        check_result(self.job, self.output(self.job), self.expected)

    def fault_kill_ps(self, first):
        if not self.at_the_moment(first):
            self.finish(first)
            check_result(self.job, self.output(self.job), self.expected)
            return
        task = ("ps", self.rng.randrange(NUM_PS))
        before = not self.job_started()
        self.kill_server(*task)
        # Restarted after a while, as a cluster manager would, whether or not the
        # coordinator has noticed yet.
        time.sleep(self.rng.uniform(0.0, 3.0))
        self.start_server(*task)
        if self.finish(first, expect=(0, 3)) == 0:
            self.notes.append("killed before the job started" if before else "the job ended before the ps died")
            check_result(self.job, self.output(self.job), self.expected)
            return
        self.rerun(n=1)

    def fault_kill_coordinator(self, first):
        if not self.at_the_moment(first):
            # It ended and told the servers so: there is nothing to rerun on.
            self.finish(first)
            check_result(self.job, self.output(self.job), self.expected)
            return
        first.kill()
        if first.wait(COORDINATOR_TIMEOUT) == 0:  # it ended just before the kill
            check_result(self.job, self.output(self.job), self.expected)
            return
        self.rerun(n=1)

    def fault_second_job(self, first):
        self.finish(first)
        check_result(self.job, self.output(self.job), self.expected)
        # The next job kind, on the same servers, with a checkpoint directory of its own.
        second = JOBS[(JOBS.index(self.job) + 1) % len(JOBS)]
        self.finish(
            self.coordinator(second, self.output(second, 1), os.path.join(self.dir, "ckpt-2"), "--keep_serving")
        )
        check_result(second, self.output(second, 1), self.expected)
        # And the first job again: every count from empty tables.
        self.finish(
            self.coordinator(self.job, self.output(self.job, 2), os.path.join(self.dir, "ckpt-3"), "--keep_serving")
        )
        check_result(self.job, self.output(self.job, 2), self.expected)

    def check_servers(self, kept):
        """Every server not killed exits 0 by itself (or, kept, is still serving)."""
        deadline = time.monotonic() + SERVER_EXIT
        for task, proc in sorted(self.servers.items()):
            if task in self.killed or task in self.after_the_end:
                continue
            if kept:
                if proc.poll() is not None:
                    raise Failed(
                        "kept %s %d exited with %d: %s" % (*task, proc.returncode, self.log_tail("%s%d.log" % task))
                    )
                continue
            try:
                code = proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise Failed(
                    "%s %d still running %ds after the job: %s" % (*task, SERVER_EXIT, self.log_tail("%s%d.log" % task))
                ) from None
            if code != 0:
                raise Failed("%s %d exited with %d: %s" % (*task, code, self.log_tail("%s%d.log" % task)))

    def close(self):
        """Kills and reaps every child, deletes the namespaces; raises `Failed` if any
        process of the round is still alive after that."""
        for proc in self.children:
            if proc.poll() is None:
                proc.kill()
        for proc in self.children:
            proc.wait(30)
        self.hosts.delete()
        left = leftovers(self.mark)
        if left:
            raise Failed("processes of the round left: %s" % left)


def leftovers(mark):
    """Pids of live processes whose environment carries `mark`."""
    found = []
    needle = ("%s=%s" % (MARK, mark)).encode()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if needle in f.read().split(b"\0"):
                    with open("/proc/%s/stat" % pid) as s:
                        if s.read().rsplit(")", 1)[1].split()[0] != "Z":
                            found.append(int(pid))
        except OSError:
            continue
    return found


# ---------------------------------------------------------------- the soak


def plan(seed, rounds, faults, jobs=JOBS):
    """(job, fault) of each round: jobs in turn; the first rounds cover every fault once,
    in an order drawn from the seed; later rounds draw their fault at random."""
    order = list(faults)
    random.Random("%d:order" % seed).shuffle(order)
    drawn = []
    for number in range(rounds):
        fault = order[number] if number < len(order) else random.Random("%d:%d" % (seed, number)).choice(faults)
        drawn.append((jobs[number % len(jobs)], fault))
    return drawn


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=None, help="default: a new random seed, printed")
    parser.add_argument("--round", type=int, default=None, help="run only this round of --seed (a replay)")
    parser.add_argument("--faults", default=",".join(FAULTS), help="comma-separated faults to draw from")
    parser.add_argument("--jobs", default=",".join(JOBS), help="comma-separated jobs to take in turn")
    parser.add_argument(
        "--work_dir", default=None, help="default: a temporary directory, removed unless a round failed"
    )
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "big")
    faults = [f for f in args.faults.split(",") if f]
    unknown = set(faults) - set(FAULTS)
    if unknown:
        parser.error("unknown fault(s) %s; known: %s" % (", ".join(sorted(unknown)), ", ".join(FAULTS)))
    jobs = [j for j in args.jobs.split(",") if j]
    if not jobs or set(jobs) - set(JOBS):
        parser.error("--jobs: choose from %s" % ", ".join(JOBS))
    why_not = switched_hosts.why_not() if "cut_link" in faults else None
    if why_not:
        print("soak: no cut_link rounds: %s" % why_not, flush=True)
        faults.remove("cut_link")
    rounds = plan(seed, max(args.rounds, (args.round or 0) + 1), faults, jobs)
    chosen = [args.round] if args.round is not None else range(args.rounds)
    work_dir = args.work_dir or tempfile.mkdtemp(prefix="tf2_mapreduce-soak-")
    print(
        "soak: seed %d, %d round(s), faults %s; replay a round with: "
        "python tests/soak.py --seed %d --faults %s --jobs %s --round N"
        % (seed, len(chosen), ",".join(faults), seed, ",".join(faults), ",".join(jobs)),
        flush=True,
    )
    corpus = {"text": os.path.join(work_dir, "corpus")}
    paths = write_corpus(corpus["text"], random.Random(1))
    # The shards and their oracles are most of a short soak's set-up: made only for the
    # rounds that read them.
    examples = None
    if any(reads_examples(*rounds[number]) for number in chosen):
        corpus["examples"] = os.path.join(work_dir, "examples")
        examples = write_examples(corpus["examples"])
    expected = oracle(paths, examples)
    tally = collections.defaultdict(lambda: [0, 0])  # fault or job -> [rounds, passed]
    failed = []
    for number in chosen:
        job, fault = rounds[number]
        started = time.monotonic()
        one = Round(number, seed, job, fault, corpus, expected, work_dir)
        try:
            try:
                one.run()
            finally:
                one.close()
            verdict = "ok"
        except Failed as e:
            verdict = "FAILED: %s" % e
            failed.append(number)
        for key in (fault, job):
            tally[key][0] += 1
            tally[key][1] += verdict == "ok"
        notes = " (%s)" % "; ".join(one.notes) if one.notes else ""
        print(
            "round %d: job=%s fault=%s at=%s -> %s%s (%.1fs)"
            % (number, job, fault, one.when(), verdict, notes, time.monotonic() - started),
            flush=True,
        )
        if verdict == "ok":
            shutil.rmtree(one.dir, ignore_errors=True)
    print("soak: seed %d: %d of %d round(s) passed" % (seed, len(chosen) - len(failed), len(chosen)))
    for key in list(FAULTS) + list(JOBS):
        if key in tally:
            print("  %-18s %3d rounds, %3d passed" % (key, *tally[key]))
    if failed:
        print(
            "soak: failed rounds %s; logs in %s; replay: python tests/soak.py --seed %d --round N"
            % (failed, work_dir, seed)
        )
        return 1
    if not args.work_dir:
        shutil.rmtree(work_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
