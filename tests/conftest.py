"""Shared test helpers: the independent oracle, corpora, real processes reaped on exit."""

import collections
import ctypes
import faulthandler
import gzip
import json
import os
import queue
import random
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass

import portpicker
import pytest

from tf2_mapreduce.cluster import orphans

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "scripts")

# A test that hangs (TF's join() can block forever) is killed with a traceback
# after this many seconds instead of eating CI's time.
TEST_TIMEOUT = 240
# Run in each child before exec: the kernel kills it when the test process dies,
# even when the hang guard ends it with os._exit and nothing is reaped.
die_with_the_tests = orphans.dying_with(os.getpid())


@pytest.fixture(autouse=True)
def hang_guard():
    faulthandler.dump_traceback_later(TEST_TIMEOUT, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def oracle_words(paths):
    """Total words per Python's bytes.split(), file by file: the independent answer."""
    total = 0
    for path in paths:
        with open(path, "rb") as f:
            total += len(f.read().split())
    return total


WHITESPACE = [b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c", b"\r\n", b"   "]
WORD_BYTES = b"abcxyz\xa0\xc2\x85\xe2\x80\x83\x1c\x1f\xff\x00.,"


def write_corpus(directory, num_files, seed=0, max_words=400):
    """Writes `num_files` files of random words and whitespace; returns their paths.

    Words mix ASCII with bytes that look like spaces but are not ASCII whitespace
    (NBSP, NEL, EM SPACE in UTF-8, \\x1c-\\x1f) and invalid UTF-8. Every 7th file is empty.
    """
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    paths = []
    for n in range(num_files):
        parts = []
        if n % 7 != 3:
            for _ in range(rng.randint(0, max_words)):
                parts.append(bytes(rng.choice(WORD_BYTES) for _ in range(rng.randint(1, 8))))
                parts.append(rng.choice(WHITESPACE))
            if parts and rng.random() < 0.5:
                parts.pop()  # no trailing whitespace at end of file
        path = os.path.join(directory, "f%04d.txt" % n)
        with open(path, "wb") as f:
            f.write(rng.choice([b"", b" ", b"\t\n"]) + b"".join(parts))
        paths.append(path)
    return paths


INPROCESS_PS, INPROCESS_WORKERS = 2, 2


@pytest.fixture(scope="session")
def inprocess():
    """A connected `Cluster` of 2 ps and 2 worker servers inside this test process, its
    chief (the public API's `Cluster.local()`). TF cannot stop servers, and lets a
    process connect to one cluster in its life: one serves every test of the session."""
    import tf2_mapreduce as mr

    with mr.Cluster.local(INPROCESS_PS, INPROCESS_WORKERS) as cluster:
        yield cluster


def job_run(cluster, job, files, on_progress=None, **options):
    """A `runner.JobRun` of `job` over `files` (`inputs.InputFile`s) on `cluster`, planned
    and not yet run: for tests that change inputs between planning and reading."""
    from tf2_mapreduce.inputs.files import Inputs
    from tf2_mapreduce.run import runner

    prepared = cluster.prepare(job, Inputs(files=list(files)), **options)
    return runner.JobRun(prepared, cluster._coordinator, cluster.spec, None, on_progress)


def run_job(cluster, job, files, on_progress=None, **options):
    """`cluster.run(job, ...)` over `files`: `inputs.InputFile`s as listed, or specs."""
    from tf2_mapreduce.inputs.files import InputFile, Inputs

    files = list(files)
    if files and all(isinstance(f, InputFile) for f in files):
        files = Inputs(files=files)
    return cluster.run(job, files, on_progress=on_progress, **options)


def task_env(**extra):
    env = dict(os.environ, GRPC_FAIL_FAST="use_caller", TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    env.pop("TF_CONFIG", None)
    env.update(extra)
    return env


class Processes:
    """Real processes started by a test; every one is killed and reaped at teardown."""

    def __init__(self):
        self.procs = []

    def start(self, args, env, log_path):
        log = open(log_path, "wb")
        proc = subprocess.Popen(
            args, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_the_tests
        )
        log.close()
        self.procs.append(proc)
        return proc

    def reap(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
        for proc in self.procs:
            proc.wait(timeout=30)


@pytest.fixture
def processes():
    procs = Processes()
    try:
        yield procs
    finally:
        procs.reap()


@dataclass
class CliRun:
    pid: int
    returncode: int
    stdout: str
    stderr: str


def run_cli(args, env, timeout=180, command=None):
    """Runs `python -m tf2_mapreduce.coordinator args` (or `command` + args) to the
    end, within `timeout` s."""
    proc = subprocess.Popen(
        (command or [sys.executable, "-m", "tf2_mapreduce.coordinator"]) + list(args),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
        preexec_fn=die_with_the_tests,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail("coordinator still running after %ds; stderr:\n%s" % (timeout, err.decode(errors="replace")))
    return CliRun(proc.pid, proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))


def servers_of(parent_pid):
    """Live tf2_mapreduce.server processes started by the coordinator `parent_pid`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"tf2_mapreduce.server" in argv and b"--parent_pid=%d" % parent_pid in argv:
            found.append(int(pid))
    return found


SERVER_EXIT_TIMEOUT = 30


class ConfiguredCluster:
    """A cluster described by make_configs.py files, its servers started on demand."""

    def __init__(self, tmp_path, processes, num_ps, num_workers):
        self.dir = str(tmp_path / "configs")
        self.processes = processes
        ports = [portpicker.pick_unused_port() for _ in range(1 + num_ps + num_workers)]
        hosts = ["localhost:%d" % p for p in ports]
        subprocess.run(
            [
                sys.executable,
                os.path.join(SCRIPTS, "make_configs.py"),
                "--out_dir",
                self.dir,
                "--chief_host",
                hosts[0],
                "--ps_hosts",
                ",".join(hosts[1 : 1 + num_ps]),
                "--worker_hosts",
                ",".join(hosts[1 + num_ps :]),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
        self.tasks = [("ps", i) for i in range(num_ps)] + [("worker", i) for i in range(num_workers)]
        self.addresses = dict(zip([("chief", 0)] + self.tasks, hosts))
        self.servers = {}

    def config(self, role, index):
        return os.path.join(self.dir, "config_%s_%d.sh" % (role, index))

    def start(self, role, index, *flags, wrap=lambda command: command, env=None):
        """Starts a server the README's way: source its config file, run the module.
        `wrap` may prefix the server's command (to run it with fewer privileges, say);
        `env` adds to its environment."""
        server = wrap([sys.executable, "-m", "tf2_mapreduce.server", *flags])
        proc = self.processes.start(
            ["bash", "-c", 'source "$1" && shift && exec "$@"', "-", self.config(role, index), *server],
            env=task_env(**(env or {})),
            log_path=os.path.join(self.dir, "%s-%d.log" % (role, index)),
        )
        self.servers[role, index] = proc
        return proc

    def start_all(self, *flags):
        for role, index in self.tasks:
            self.start(role, index, *flags)

    def chief_env(self):
        out = subprocess.run(
            ["bash", "-c", 'source "$1" && printf %s "$TF_CONFIG"', "-", self.config("chief", 0)],
            capture_output=True,
            check=True,
            timeout=30,
        )
        return task_env(TF_CONFIG=out.stdout.decode())

    def exit_codes(self):
        """Waits for every started server to exit by itself; returns their statuses."""
        codes = {}
        for key, proc in self.servers.items():
            try:
                codes[key] = proc.wait(timeout=SERVER_EXIT_TIMEOUT)
            except subprocess.TimeoutExpired:
                codes[key] = "still running after %ds" % SERVER_EXIT_TIMEOUT
        return codes

    def log(self, role, index):
        with open(os.path.join(self.dir, "%s-%d.log" % (role, index)), "rb") as f:
            return f.read().decode(errors="replace")


# A killed worker that stays down delays the coordinator's exit by its --shutdown_timeout
# (30 s by default: room for a supervisor to bring it back and have it told the job is
# over). A test whose killed worker stays down sets it short and checks the coordinator
# gave up on that worker with a warning.
GONE_WORKER_SHUTDOWN = ("--shutdown_timeout", "2")


def gave_up_on(stderr, role, index):
    """Whether the coordinator warned that it could not tell `role` `index` the job is over."""
    return ("could not tell %s %d that the job is over: connection refused" % (role, index)) in stderr


def live_args(inputs, output, *extra):
    """A job's flags for a test that acts mid-job: one file a step and progress reported
    often, so that there is a moment to act on."""
    return ["--input", str(inputs), "--files_per_step", "1", "--progress_every", "0.2", "--output", str(output), *extra]


def read_result(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def assert_matches_oracle(result, paths):
    assert result["total_words"] == oracle_words(paths)
    assert {r["path"]: r["words"] for r in result["per_file"]} == {p: oracle_words([p]) for p in paths}
    assert result["files"] == len(paths)
    assert result["bytes"] == sum(os.path.getsize(p) for p in paths)


class LiveCoordinator:
    """`python -m tf2_mapreduce.coordinator` running in the background; its stderr
    is read as it comes, so a test can act at a point the job reports reaching."""

    def __init__(self, args, env, processes, log_path, command=None):
        self.proc = subprocess.Popen(
            (command or [sys.executable, "-m", "tf2_mapreduce.coordinator"]) + list(args),
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            preexec_fn=die_with_the_tests,
        )
        processes.procs.append(self.proc)
        self.lines = queue.Queue()
        self.stderr = []
        self.log_path = log_path
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        # Kept in the log file too, for a failure's post-mortem: pytest shows only the tail.
        with open(self.log_path, "w", encoding="utf-8") as log:
            for raw in self.proc.stderr:
                line = raw.decode(errors="replace").rstrip("\n")
                log.write(line + "\n")
                log.flush()
                self.stderr.append(line)
                self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, pattern, timeout=120):
        """Blocks until a stderr line matches `pattern`; returns the match."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                line = None
            if line is None:
                pytest.fail("no stderr line matched %r; stderr:\n%s" % (pattern, "\n".join(self.stderr[-30:])))
            match = re.search(pattern, line)
            if match:
                return match

    def wait_for_files(self, count, timeout=120):
        """Blocks until progress reports at least `count` files done; returns the count."""
        while True:
            done = int(self.wait_for(r"\] (\d+)/\d+ files", timeout).group(1))
            if done >= count:
                return done

    def finish(self, timeout=180):
        """Waits for the exit; returns (status, stdout, stderr)."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail("coordinator still running after %ds; stderr:\n%s" % (timeout, "\n".join(self.stderr[-30:])))
        stdout = self.proc.stdout.read().decode(errors="replace")
        while self.lines.get() is not None:  # the reader has seen the end of stderr
            pass
        self.lines.put(None)
        return self.proc.returncode, stdout, "\n".join(self.stderr)

    def signal_another_thread(self, signum):
        """Sends `signum` to one of the process's threads other than its main one, as the
        kernel may deliver a signal sent to the process: its Python handler then runs
        only when the main thread next wakes."""
        threads = sorted(int(tid) for tid in os.listdir("/proc/%d/task" % self.proc.pid))
        other = next(tid for tid in threads if tid != self.proc.pid)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.tgkill(self.proc.pid, other, signum) != 0:
            raise OSError(ctypes.get_errno(), "tgkill %d %d" % (self.proc.pid, other))


def oracle_counter(paths):
    """Every word's count, per Python's bytes.split(): the independent answer for wordfreq."""
    counts = collections.Counter()
    for path in paths:
        with open(path, "rb") as f:
            counts.update(f.read().split())
    return counts


ODD_WORD_BYTES = [b"\xff", b"\\", b"\xc2\xa0", b"\x1c", b"\xc3\xa9", b"\x00", b"\\x41", b"\x7f"]


def write_zipf_corpus(directory, num_files, distinct=20_000, samples=60_000, seed=0):
    """Writes a corpus in which each of `distinct` words occurs at least once and
    `samples` more words follow a Zipf law (s=1); returns the paths. Some words hold
    bytes that must be escaped in output (invalid UTF-8, NBSP, control bytes, backslashes)."""
    rng = random.Random(seed)
    vocabulary = []
    for i in range(distinct):
        word = b"w%x" % i
        if i % 97 == 5:
            word += ODD_WORD_BYTES[(i // 97) % len(ODD_WORD_BYTES)]
        vocabulary.append(word)
    weights = [1.0 / (rank + 1) for rank in range(distinct)]
    tokens = vocabulary + rng.choices(vocabulary, weights, k=samples)
    rng.shuffle(tokens)
    os.makedirs(directory, exist_ok=True)
    paths = []
    per_file = -(-len(tokens) // num_files)
    for n in range(num_files):
        chunk = tokens[n * per_file : (n + 1) * per_file]
        path = os.path.join(directory, "z%04d.txt" % n)
        with open(path, "wb") as f:
            for word in chunk:
                f.write(word + rng.choice(WHITESPACE))
        paths.append(path)
    return paths


def read_tfrecords(path):
    """The records of a TFRecord file, read in plain Python (gzip or zlib by its name):
    8 bytes of length, 4 of its CRC, the record, 4 of the record's CRC."""
    with open(path, "rb") as f:
        data = f.read()
    if path.endswith(".gz"):
        data = gzip.decompress(data)
    elif path.endswith((".zz", ".zlib")):
        data = zlib.decompress(data)
    records, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        records.append(data[offset + 12 : offset + 12 + length])
        offset += 12 + length + 4
    return records


def oracle_vocab(paths, features):
    """Per feature of `features` ([(name, "string" | "int64")]): a Counter of its values
    (int64 values as decimal bytes) and the examples without any value of it; and the
    examples read. Each record parsed by protobuf itself (`Example.FromString`)."""
    from tensorflow.core.example import example_pb2

    counts = {name: collections.Counter() for name, _ in features}
    missing = collections.Counter()
    examples = 0
    for path in paths:
        for record in read_tfrecords(path):
            example = example_pb2.Example.FromString(record)
            examples += 1
            for name, kind in features:
                feature = example.features.feature.get(name)
                values = []
                if feature is not None:
                    values = (
                        feature.bytes_list.value if kind == "string" else [b"%d" % v for v in feature.int64_list.value]
                    )
                counts[name].update(values)
                missing[name] += not values
    return {"examples": examples, "counts": counts, "missing": missing}


def tft_ordered(counter):
    """(term, count) pairs as tf.Transform orders a vocabulary: count descending, then the
    term in reverse lexicographic order."""
    by_term = sorted(counter.items(), reverse=True)
    return sorted(by_term, key=lambda pair: -pair[1])
