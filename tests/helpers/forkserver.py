"""Servers and coordinators forked from a process that has imported TensorFlow: a test's ps
and worker tasks start in a tenth of a second instead of 3 s of CPU each (their imports took
a quarter of the cluster tier's CPU: 453 of 1850 s, 2026-11-30; the coordinators', 335 s).

`ForkServer` is the client of such a process (`forkserver_process`), one per program and
environment, and `ForkedProcess` a child seen as a `subprocess.Popen`.

What a forked program does not run is the import itself: TensorFlow's start-up lines are
in the fork server's log, not filtered out of the program's; numpy's BLAS has one thread;
its parent is the fork server. A forked coordinator finds TensorFlow imported, so it lists
and stats its inputs in its own process, not in a child forked before the import. A test
about a program's start-up (what it prints, the native ops it finds, what its environment
changes, its listing) runs it with `exec`, as `ConfiguredCluster` does for any server given
an environment or a command prefix of its own, and `run_cli` for a coordinator not asked to
be forked.
"""

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from helpers.forkserver_process import PROGRAMS, line
from tf2_mapreduce.cluster.spec import TASK_ENV

__all__ = ["ForkServer", "ForkedProcess", "for_env"]

# Each process's own, or set by the shell, exec or pytest (the running test's name): they
# may differ between a forked and an exec'd process without changing what TensorFlow reads.
_PER_PROCESS = ("TF_CONFIG", "_", "SHLVL", "PWD", "OLDPWD", "PYTEST_CURRENT_TEST")
_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forkserver_process.py")


def shared_env(env):
    """What of a process's environment `env` TensorFlow's import reads: all but its own task,
    with what a task sets before the import (`TASK_ENV`) where `env` does not."""
    return {k: v for k, v in {**TASK_ENV, **env}.items() if k not in _PER_PROCESS}


class ForkedProcess:
    """A program forked by the fork server, with the part of `subprocess.Popen` that tests
    use: `pid`, `returncode` (negative: killed by that signal), `poll`, `wait`,
    `send_signal`, `kill`, and `stdout`, `stderr` and `communicate` where its output is
    piped. Signals go through the fork server, which reaps its children itself: one sent
    after the exit is dropped there, never sent to a pid used again."""

    def __init__(self, args, pid, server, stdout=None, stderr=None):
        self.args = args
        self.pid = pid
        self.returncode = None
        self.stdout, self.stderr = stdout, stderr
        self._exited = threading.Event()
        self._server = server
        self._output, self._readers = {}, []

    def _exit(self, code):
        self.returncode = code
        self._exited.set()

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def communicate(self, timeout=None):
        """(stdout, stderr), read to their ends, once the program has exited; as Popen's,
        `subprocess.TimeoutExpired` after `timeout` s, and may be called again."""
        end = None if timeout is None else time.monotonic() + timeout
        if not self._readers:
            self._readers = [
                threading.Thread(target=self._drain, args=(f,), daemon=True) for f in (self.stdout, self.stderr)
            ]
            for reader in self._readers:
                reader.start()
        for reader in self._readers:
            reader.join(None if end is None else max(0.0, end - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(None if end is None else max(0.0, end - time.monotonic()))
        return self._output[self.stdout], self._output[self.stderr]

    def _drain(self, f):
        self._output[f] = f.read()
        f.close()

    def send_signal(self, signum):
        if self.returncode is None:
            self._server.send({"signal": self.pid, "signum": int(signum)})

    def kill(self):
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The client of a fork server of `program` (a key of `PROGRAMS`) for processes of
    environment `env` (their TF_CONFIG aside), logging to `log_path`; `preexec_fn` runs in it
    before exec. It dies with this process (so must `preexec_fn` have it), and its children
    with it."""

    def __init__(self, program, env, log_path, preexec_fn):
        self.program = program
        self.env = shared_env(env)
        ours, theirs = socket.socketpair()
        with open(log_path, "wb") as log:
            self._proc = subprocess.Popen(
                [sys.executable, _SCRIPT, program],
                # One BLAS thread: a fork copies only the thread that forks (TensorFlow's
                # import starts no other).
                env=dict(self.env, OPENBLAS_NUM_THREADS="1"),
                stdin=theirs,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=preexec_fn,
            )
        theirs.close()
        self._sock = ours
        self._file = ours.makefile("rb")
        # Its environment once TensorFlow is imported: the imports set a few variables
        # (TF2_BEHAVIOR, say), which a process exec'd may have had already or not.
        first = self._file.readline()
        if not first:
            self._proc.wait()
            with open(log_path, "rb") as log:
                tail = log.read()[-2000:].decode(errors="replace")
            raise RuntimeError(
                "the fork server exited with status %s; its log ends:\n%s" % (self._proc.returncode, tail)
            )
        self._imported = shared_env(json.loads(first)["imported"])
        self._lock = threading.Lock()
        self._started = []  # replies to requests, in order
        self._ready = threading.Condition()
        self._children = {}  # pid -> ForkedProcess
        self._early = {}  # pid -> status of a child that exited before its reply was read
        threading.Thread(target=self._read, daemon=True).start()

    def serves(self, env):
        """Whether a process of environment `env` forked from this one is the one exec'd."""
        if self._proc.poll() is not None:
            return False
        wanted = shared_env(env)
        return all(wanted.get(k) in (self.env.get(k), self._imported.get(k)) for k in set(wanted) | set(self.env))

    def close(self):
        """Stops the fork server (its children die with it) and reaps it."""
        self._proc.kill()
        self._proc.wait()
        self._sock.close()

    def send(self, message):
        with self._lock:
            try:
                self._sock.sendall(line(message))
            except OSError:  # the fork server is gone, and its children with it
                pass

    def start(self, flags, env, cwd, log_path=None):
        """Forks the program with `flags` and `env` in `cwd`, its stdin /dev/null, its
        stdout and stderr to `log_path`, or to pipes (the handle's `stdout` and `stderr`)
        where it is None; blocking until it is forked."""
        ours, theirs = [], []
        theirs.append(os.open(os.devnull, os.O_RDONLY))
        if log_path is None:
            for _ in range(2):
                read, write = os.pipe()
                ours.append(os.fdopen(read, "rb"))
                theirs.append(write)
        else:
            log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            theirs += [log, os.dup(log)]
        request = {"flags": list(flags), "env": env, "cwd": cwd}
        try:
            with self._lock:
                socket.send_fds(self._sock, [line(request)], theirs)
                pid = self._forked()
        finally:
            for fd in theirs:
                os.close(fd)
        args = [sys.executable, "-m", PROGRAMS[self.program], *flags]
        with self._ready:
            child = ForkedProcess(args, pid, self, *ours)
            self._children[pid] = child
            if pid in self._early:
                child._exit(self._early.pop(pid))
        return child

    def _forked(self):
        with self._ready:
            if not self._ready.wait_for(lambda: self._started or self._proc.poll() is not None, timeout=30):
                self._proc.kill()  # a late answer would be taken for the next request's
                raise RuntimeError("the fork server did not answer in 30 s")
            if not self._started:
                raise RuntimeError("the fork server exited with status %s" % self._proc.returncode)
            return self._started.pop(0)

    def _read(self):
        for message in self._file:
            message = json.loads(message)
            with self._ready:
                if "forked" in message:
                    self._started.append(message["forked"])
                elif message["exited"] in self._children:
                    self._children.pop(message["exited"])._exit(message["status"])
                else:
                    self._early[message["exited"]] = message["status"]
                self._ready.notify_all()
        with self._ready:  # gone: its children were killed with it (PR_SET_PDEATHSIG)
            for child in self._children.values():
                child._exit(-signal.SIGKILL)
            self._children.clear()
            self._ready.notify_all()


_current = {}  # program -> its ForkServer


def for_env(program, env, preexec_fn):
    """This test process's fork server of `program` for processes of environment `env`
    (their TF_CONFIG aside): started on first use, and again where `env` differs in what
    TensorFlow reads."""
    server = _current.get(program)
    if server is None or not server.serves(env):
        if server is not None:
            server.close()
        elif not _current:
            atexit.register(_close_all)
        _current[program] = server = ForkServer(program, env, _LOG % (os.getpid(), program), preexec_fn)
    return server


# Kept while its test process runs, for a post-mortem of a fork server that would not start.
_LOG = os.path.join(tempfile.gettempdir(), "tf2_mapreduce-forkserver-%d-%s.log")


def _close_all():
    for program, server in _current.items():
        server.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_LOG % (os.getpid(), program))
