"""Stats of many local files at once: size, modification time, inode and whether this
user may read each, in several forked processes where there are many."""

import functools
import os
import stat
import struct
import sys

import numpy as np

from tf2_mapreduce.inputs import forked

__all__ = ["stat_files", "inode_key", "inode_keys"]


def inode_key(device: int, inode: int) -> bytes:
    """A file's identity, its device and inode number, as 16 bytes (`inode_keys` makes
    the same for many)."""
    return struct.pack("=QQ", device, inode)


# Statting this many local files or more is spread over several processes: a stat in a
# directory of a million files costs 2 us, the Python around it 1 us, and forking 1 ms.
_FORK_AT = 20_000
_MAX_PROCESSES = 4
_GROUPS = frozenset([os.getegid(), *os.getgroups()]) if hasattr(os, "getegid") else frozenset()


def _mode_lets_read(st, euid, path):
    """Whether a file's mode bits let user `euid` read it, as open() decides from them:
    the owner's bits for its owner, else the group's for a member, else the others'.
    An ACL can still refuse a file they let read (it then fails when read, naming it);
    one they refuse is for the caller to ask of open(), which root, or an ACL, may pass.
    A stat and these bits are half the cost of a stat and an access(), which decides
    where there is no user id (not POSIX)."""
    if euid is None:
        return os.access(path, os.R_OK)
    if st.st_uid == euid:
        return st.st_mode & stat.S_IRUSR
    if st.st_gid in _GROUPS:
        return st.st_mode & stat.S_IRGRP
    return st.st_mode & stat.S_IROTH


def _stat_chunk(paths):
    """(size, mtime_ns, device, inode, fine) of each local path as an int64 array of 5
    rows (device and inode as uint64 bits); fine: a regular file its mode lets us read,
    else all 0 (the caller then says why)."""
    sizes, mtimes, devices, inodes, fine = [], [], [], [], []
    euid = os.geteuid() if hasattr(os, "geteuid") else None
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            st = None
        if st is not None and stat.S_ISREG(st.st_mode) and _mode_lets_read(st, euid, path):
            sizes.append(st.st_size)
            mtimes.append(st.st_mtime_ns)
            devices.append(st.st_dev)
            inodes.append(st.st_ino)
            fine.append(1)
        else:
            sizes.append(0)
            mtimes.append(0)
            devices.append(0)
            inodes.append(0)
            fine.append(0)
    columns = np.empty((5, len(paths)), dtype=np.int64)
    columns[0], columns[1], columns[4] = sizes, mtimes, fine
    columns[2] = np.array(devices, dtype=np.uint64).view(np.int64)
    columns[3] = np.array(inodes, dtype=np.uint64).view(np.int64)
    return columns


def inode_keys(devices: np.ndarray, inodes: np.ndarray) -> list:
    """Each file's device and inode number (int64 arrays of their uint64 bits) as 16
    bytes, as `inode_key` packs them: a million keys made in C, not in a Python loop."""
    return np.ascontiguousarray(np.stack([devices, inodes], axis=1)).view("V16").ravel().tolist()


def _stat_bytes(paths):
    """`_stat_chunk` as bytes, to send from a forked process."""
    return _stat_chunk(paths).tobytes()


def stat_files(paths: list) -> np.ndarray:
    """`_stat_chunk` of many local paths (size, mtime_ns, device, inode, fine: int64 rows
    in path order; fine: a regular file its mode lets us read, else all 0), in parts in
    forked processes where there are many and TensorFlow is not imported (its threads do
    not survive a fork). A part whose process fails is statted here: the same columns,
    later. Blocking; on an error here, the processes forked are killed and reaped."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    parts = min(_MAX_PROCESSES, cpus, len(paths) // _FORK_AT)
    if parts < 2 or "tensorflow" in sys.modules or not hasattr(os, "fork"):
        return _stat_chunk(paths)
    bounds = [len(paths) * k // parts for k in range(parts + 1)]
    shares = list(zip(bounds[1:-1], bounds[2:]))
    children = []
    try:
        for a, b in shares:
            close_fds = [child.fd for child in children if child]
            children.append(forked.Forked.start(functools.partial(_stat_bytes, paths[a:b]), close_fds))
        columns = [_stat_chunk(paths[: bounds[1]])]
        for child, (a, b) in zip(children, shares):
            data = child.answer() if child else None
            if data is not None and len(data) == 5 * 8 * (b - a):
                columns.append(np.frombuffer(data, dtype=np.int64).reshape(5, b - a))
            else:
                columns.append(_stat_chunk(paths[a:b]))
        return np.concatenate(columns, axis=1)
    finally:
        for child in filter(None, children):
            child.close()
