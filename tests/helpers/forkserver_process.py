"""The fork server's own process (`forkserver` is its client): it imports TensorFlow and one
program of the package once, then forks a child per request that runs that program's main.

Run as `python forkserver_process.py PROGRAM` with the environment its children share, its
stdin a Unix socket. It says `{"imported": env}` once imported; each request is a JSON line
`{"flags", "env", "cwd"}` sent with three file descriptors (the child's stdin, stdout and
stderr); it answers `{"forked": pid}`, then `{"exited": pid, "status": code}` when that child
ends, and a `{"signal": pid, "signum": n}` line is sent to a child not yet reaped.
"""

import atexit
import json
import os
import select
import signal
import socket
import sys
import time

__all__ = ["PROGRAMS", "line", "main"]

# What a child may run: the modules `python -m` would, each with its `run()`.
PROGRAMS = {"server": "tf2_mapreduce.server", "coordinator": "tf2_mapreduce.coordinator"}


def line(message):
    """A message of the protocol between a fork server and its client: a line of JSON."""
    return json.dumps(message).encode() + b"\n"


def _serve(sock, program, added):
    """The fork server's loop: a child forked per request line, a line per child's exit."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children = set()  # forked and not yet reaped: the pids a signal may go to
    pending, fds = b"", []
    while True:
        ready, _, _ = select.select([sock, wake_r], [], [])
        if wake_r in ready:
            os.read(wake_r, 4096)
            _report_exits(sock, children)
        if sock in ready:
            data, received, _, _ = socket.recv_fds(sock, 65536, 64)
            if not data:
                return  # the tests' process is gone: its children die with this one
            pending += data
            fds += received  # in the order of the requests they came with
            while b"\n" in pending:
                request, pending = pending.split(b"\n", 1)
                request = json.loads(request)
                if "signal" in request:
                    if request["signal"] in children:
                        os.kill(request["signal"], request["signum"])
                    continue
                stdio, fds = fds[:3], fds[3:]
                # Nothing buffered may be written twice, by this process and by the child.
                sys.stdout.flush()
                sys.stderr.flush()
                parent = os.getpid()
                pid = os.fork()
                if pid == 0:
                    _child(program, request, stdio, added, parent, sock, (wake_r, wake_w, *fds))
                for fd in stdio:
                    os.close(fd)
                children.add(pid)
                sock.sendall(line({"forked": pid}))


def _report_exits(sock, children):
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        sock.sendall(line({"exited": pid, "status": os.waitstatus_to_exitcode(status)}))


def _child(program, request, stdio, added, parent, sock, inherited):
    """In a forked child of `parent`: becomes the program the request runs; never returns."""
    from tf2_mapreduce.cluster import orphans

    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sock.close()
        for fd in inherited:
            os.close(fd)
        orphans.die_with_parent(parent)
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        sys.path[0] = request["cwd"]  # as `python -m` has it
        os.environ.clear()
        # What the imports here set where the environment did not (as they would in a
        # process exec'd with it), then the environment asked for.
        os.environ.update({**added, **request["env"]})
        module = sys.modules[PROGRAMS[program]]
        sys.argv = [module.__file__] + request["flags"]
        module.run()  # ends in SystemExit, or in os._exit where the program says so
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


def _import(program):
    """Imports what `program`'s process imports before it serves or runs a job."""
    if program == "coordinator":
        from tf2_mapreduce import coordinator, quiet  # noqa: F401  its flags defined once, here

        quiet.import_tensorflow()  # as the coordinator does: its start-up lines filtered out
    else:
        import tensorflow  # noqa: F401

        from tf2_mapreduce import server  # noqa: F401  its flags defined once, here


def main():
    """Imports `program` (argv[1]) with this process's environment (the session's), then
    serves requests on stdin until it closes."""
    program = sys.argv[1]
    sock = socket.socket(fileno=os.dup(0))
    before = dict(os.environ)
    _import(program)
    # A fork copies only the forking thread: another's locks would stay held. A thread the
    # import joined (the one that filters its start-up lines) may not have left the kernel yet.
    deadline = time.monotonic() + 10
    while len(os.listdir("/proc/self/task")) > 1 and time.monotonic() < deadline:
        time.sleep(0.01)  # polls the threads' count
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        sys.exit("fork server: %d threads after TensorFlow's import, where forking needs 1" % threads)
    added = {k: v for k, v in os.environ.items() if k not in before}
    sock.sendall(line({"imported": dict(os.environ)}))
    _serve(sock, program, added)


if __name__ == "__main__":
    main()
