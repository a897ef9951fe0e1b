"""A function run in a forked child process that dies with this one, its answer read
back through a pipe: work beside this process before TensorFlow's threads exist."""

import os
import signal

from tf2_mapreduce.cluster import orphans

__all__ = ["Forked"]

# In a child of `Forked.start`: the write end of the pipe it answers through. A child it
# forks in turn closes it, or its parent would read that pipe until the grandchild ended
# too: where it outlives the child (no PR_SET_PDEATHSIG, or stuck in a file system's
# call), `answer()` would wait for it, however long, after the child died.
_answering = None


class Forked:
    """`make()` (returning bytes) run in a child forked by `start`.

    The child has SIGINT and SIGTERM at their defaults (this process's handlers stop
    its job), is killed by the kernel when this process dies, and exits when `make`
    returns or raises. `answer()` is blocking; `close()` is not, but for the reap.
    """

    def __init__(self, pid: int, fd: int):
        self.pid, self.fd = pid, fd

    @classmethod
    def start(cls, make, close_fds=()) -> "Forked | None":
        """Forks a child that runs `make`; None where it cannot fork. `close_fds`: what
        the child closes first (the pipes of children forked before it)."""
        parent = os.getpid()
        try:
            read, write = os.pipe()
        except OSError:
            return None
        try:
            pid = os.fork()
        except OSError:
            os.close(read)
            os.close(write)
            return None
        if pid == 0:
            global _answering
            status = 1
            try:
                inherited = () if _answering is None else (_answering,)
                for fd in (read, *close_fds, *inherited):
                    os.close(fd)
                _answering = write
                for signum in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(signum, signal.SIG_DFL)
                try:
                    orphans.die_with_parent(parent)
                except (OSError, AttributeError):  # refused, or no prctl (not Linux)
                    pass  # then it ends at its write to a closed pipe
                data = make()
                with os.fdopen(write, "wb") as out:
                    out.write(data)
                status = 0
            finally:
                os._exit(status)
        os.close(write)
        return cls(pid, read)

    def answer(self) -> bytes | None:
        """What `make()` returned, once the child has ended; None if it failed or died,
        or cannot be reaped (a host that reaps children itself): then its bytes may be
        short. Call once."""
        with os.fdopen(self.fd, "rb") as f:
            data = f.read()
        self.fd = None
        try:
            _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            status = -1
        self.pid = None
        return data if status == 0 else None

    def close(self) -> None:
        """Kills and reaps the child and closes its pipe, unless `answer()` did."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.pid = None
