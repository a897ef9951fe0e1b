"""Shared test helpers: the independent oracle, corpora, real processes reaped on exit."""

import faulthandler
import os
import random
import signal
import subprocess
import sys
from dataclasses import dataclass

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPTS = os.path.join(REPO, "scripts")

# A test that hangs (TF's join() can block forever) is killed with a traceback
# after this many seconds instead of eating CI's time.
TEST_TIMEOUT = 240


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
        proc = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
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


def run_cli(args, env, timeout=180):
    """Runs `python -m tf2_mapreduce.coordinator args` to the end, within `timeout` s."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tf2_mapreduce.coordinator", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        cwd=REPO,
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
