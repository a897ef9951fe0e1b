"""No orphaned tasks: a child process that the kernel kills when its parent dies,
even by SIGKILL (Linux's PR_SET_PDEATHSIG), so nothing outlives a killed launcher.
"""

import ctypes
import os
import signal

__all__ = ["die_with_parent", "dying_with"]

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Has the kernel kill this process when its parent `parent_pid` dies; exits at once
    if it already has. Raises `OSError` where prctl is refused."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)


def dying_with(parent_pid: int):
    """A `subprocess` preexec_fn: the child dies with `parent_pid` (normally the caller)."""
    return lambda: die_with_parent(parent_pid)
