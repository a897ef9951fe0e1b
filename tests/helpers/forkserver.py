"""Servers forked from one process that has imported TensorFlow: a test's ps and worker
tasks start in a tenth of a second instead of 3 s of CPU each (their imports took a
quarter of the cluster tier's CPU: 453 of 1850 s, 2026-11-30).

Run as a script, this is that process: it imports TensorFlow and `tf2_mapreduce.server`
with the environment every server of the session shares, then, asked on its stdin (a
socket), forks a child that runs the server's `main` as `python -m tf2_mapreduce.server`
would, and reports each child's exit. Imported, `ForkServer` is its client, and
`ForkedProcess` a child seen as a `subprocess.Popen`.

What a forked server does not run is the import itself: TensorFlow's start-up lines are
in the fork server's log, not filtered out of the server's; numpy's BLAS has one thread;
the server's parent is the fork server. A test about a server's start-up (what it
prints, the native ops it finds, what its environment changes) runs it with `exec`, as
`ConfiguredCluster` does for any server given an environment or a command prefix of its
own.
"""

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading

from tf2_mapreduce.cluster.spec import TASK_ENV

__all__ = ["ForkServer", "ForkedProcess", "for_env"]

# Each server's own, or set by the shell, exec or pytest (the running test's name): they
# may differ between a forked and an exec'd server without changing what TensorFlow reads.
_PER_PROCESS = ("TF_CONFIG", "_", "SHLVL", "PWD", "OLDPWD", "PYTEST_CURRENT_TEST")


def shared_env(env):
    """What of a server's environment `env` TensorFlow's import reads: all but its own task,
    with what the server sets before the import (`TASK_ENV`) where `env` does not."""
    return {k: v for k, v in {**TASK_ENV, **env}.items() if k not in _PER_PROCESS}


class ForkedProcess:
    """A server forked by the fork server, with the part of `subprocess.Popen` that tests
    use: `pid`, `returncode` (negative: killed by that signal), `poll`, `wait`,
    `send_signal`, `kill`. Signals go through the fork server, which reaps its children
    itself: one sent after the exit is dropped there, never sent to a pid used again."""

    def __init__(self, args, pid, server):
        self.args = args
        self.pid = pid
        self.returncode = None
        self._exited = threading.Event()
        self._server = server

    def _exit(self, code):
        self.returncode = code
        self._exited.set()

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        if not self._exited.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, signum):
        if self.returncode is None:
            self._server.send({"signal": self.pid, "signum": int(signum)})

    def kill(self):
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """The client of a fork server for servers of environment `env` (their TF_CONFIG aside),
    logging to `log_path`; `preexec_fn` runs in it before exec. It dies with this process
    (so must `preexec_fn` have it), and its children with it."""

    def __init__(self, env, log_path, preexec_fn):
        self.env = shared_env(env)
        ours, theirs = socket.socketpair()
        with open(log_path, "wb") as log:
            self._proc = subprocess.Popen(
                [sys.executable, os.path.abspath(__file__)],
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
        # Its environment once TensorFlow is imported: the import sets a few variables
        # (TF2_BEHAVIOR, say), which a server exec'd may have had already or not.
        first = self._file.readline()
        if not first:
            self._proc.wait()
            raise RuntimeError("the fork server exited with status %s (log: %s)" % (self._proc.returncode, log_path))
        self._imported = shared_env(json.loads(first)["imported"])
        self._lock = threading.Lock()
        self._started = []  # replies to requests, in order
        self._ready = threading.Condition()
        self._children = {}  # pid -> ForkedProcess
        self._early = {}  # pid -> status of a child that exited before its reply was read
        # Its socket closed: it died. Told by the reader, which sees it before `poll()` can.
        self._gone = False
        threading.Thread(target=self._read, daemon=True).start()

    def serves(self, env):
        """Whether a server of environment `env` forked from this one is the server exec'd."""
        if self._gone or self._proc.poll() is not None:
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
                self._sock.sendall(_line(message))
            except OSError:  # the fork server is gone, and its children with it
                pass

    def start(self, flags, env, log_path, cwd):
        """Forks a server running `python -m tf2_mapreduce.server flags` with `env`, its
        stdout and stderr to `log_path`; blocking until it is forked."""
        open(log_path, "wb").close()  # there once this returns, as for a process started with it
        request = {"flags": list(flags), "env": env, "log": str(log_path), "cwd": cwd}
        with self._lock:
            self._sock.sendall(_line(request))
            with self._ready:
                if not self._ready.wait_for(lambda: self._started or self._gone, timeout=30):
                    self._proc.kill()  # a late answer would be taken for the next request's
                    raise RuntimeError("the fork server did not answer in 30 s")
                if not self._started:
                    raise RuntimeError("the fork server exited with status %s" % self._proc.wait(timeout=30))
                pid = self._started.pop(0)
                child = ForkedProcess([sys.executable, "-m", "tf2_mapreduce.server", *flags], pid, self)
                self._children[pid] = child
                if pid in self._early:
                    child._exit(self._early.pop(pid))
        return child

    def _read(self):
        for line in self._file:
            message = json.loads(line)
            with self._ready:
                if "forked" in message:
                    self._started.append(message["forked"])
                elif message["exited"] in self._children:
                    self._children.pop(message["exited"])._exit(message["status"])
                else:
                    self._early[message["exited"]] = message["status"]
                self._ready.notify_all()
        with self._ready:  # gone: its children were killed with it (PR_SET_PDEATHSIG)
            self._gone = True
            for child in self._children.values():
                child._exit(-signal.SIGKILL)
            self._children.clear()
            self._ready.notify_all()


def _line(message):
    """A message of the protocol between a fork server and its client: a line of JSON."""
    return json.dumps(message).encode() + b"\n"


_current = None


def for_env(env, preexec_fn):
    """This test process's fork server for servers of environment `env` (their TF_CONFIG
    aside): started on first use, and again where `env` differs in what TensorFlow reads."""
    global _current
    if _current is None or not _current.serves(env):
        if _current is not None:
            _current.close()
        else:
            atexit.register(_close_current)
        _current = ForkServer(env, _LOG % os.getpid(), preexec_fn)
    return _current


# Kept while its test process runs, for a post-mortem of a fork server that would not start.
_LOG = os.path.join(tempfile.gettempdir(), "tf2_mapreduce-forkserver-%d.log")


def _close_current():
    _current.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_LOG % os.getpid())


def _serve(sock):
    """The fork server's loop: a child forked per request line, a line per child's exit."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children = set()  # forked and not yet reaped: the pids a signal may go to
    pending = b""
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            _report_exits(sock, children)
        if sock in ready:
            data = sock.recv(65536)
            if not data:
                return  # the tests' process is gone: its children die with this one
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                if "signal" in request:
                    if request["signal"] in children:
                        os.kill(request["signal"], request["signum"])
                    continue
                # Nothing buffered may be written twice, by this process and by the child.
                sys.stdout.flush()
                sys.stderr.flush()
                parent = os.getpid()
                pid = os.fork()
                if pid == 0:
                    _child(request, parent, sock, (wake_r, wake_w))
                children.add(pid)
                sock.sendall(_line({"forked": pid}))


def _report_exits(sock, children):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        sock.sendall(_line({"exited": pid, "status": os.waitstatus_to_exitcode(status)}))


def _child(request, parent, sock, fds):
    """In a forked child of `parent`: becomes the server the request names; never returns."""
    from tf2_mapreduce import server
    from tf2_mapreduce.cluster import orphans

    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for fd in fds:
            os.close(fd)
        orphans.die_with_parent(parent)
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND)  # made by the client
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [server.__file__] + request["flags"]
        server.run()  # ends in SystemExit, or in os._exit where the server says so
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
    except KeyboardInterrupt:  # as Python exits on it: killed by SIGINT
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def main():
    """Imports what every server imports, with this process's environment (the session's),
    then serves requests on stdin until it closes."""
    sock = socket.socket(fileno=os.dup(0))
    import tensorflow  # noqa: F401  the import the children share

    from tf2_mapreduce import server  # noqa: F401  its flags defined once, here

    threads = os.listdir("/proc/self/task")
    if len(threads) != 1:  # a fork copies only the forking thread: another's locks would stay held
        sys.exit("fork server: %d threads after TensorFlow's import, where forking needs 1" % len(threads))
    sock.sendall(_line({"imported": dict(os.environ)}))
    _serve(sock)


if __name__ == "__main__":
    main()
