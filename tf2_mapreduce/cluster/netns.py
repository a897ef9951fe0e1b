"""A private network for a local cluster: TF's servers listen on every interface and
run whatever any client sends them, so the coordinator moves itself, before it
starts them, into a new network namespace that has nothing but its own loopback.
"""

import ctypes
import errno
import fcntl
import os
import socket
import struct

from tf2_mapreduce.errors import ClusterError
from tf2_mapreduce.paths import local_path, needs_network

__all__ = ["enter_private_network", "network_path", "isolate"]

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
IFREQ = "16sH22x"  # struct ifreq: the interface name, then ifr_flags in the union


def _unshare(flags):
    if ctypes.CDLL(None, use_errno=True).unshare(flags) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def enter_private_network():
    """Moves this process into a new network namespace with only `lo`, up; the
    processes and threads it starts afterwards share it, and nothing outside can
    reach them. Returns None, or why the OS refused (then nothing changed). Raises
    `ClusterError` if the namespace was made but could not be set up.

    Call it before any thread starts: unprivileged users need a new user namespace
    for it (mapping their own uid, so files keep their owner), which the kernel
    grants only to a single-threaded process. Linux only.
    """
    uid, gid = os.getuid(), os.getgid()
    try:
        try:
            _unshare(CLONE_NEWNET)  # enough where we may administer networks (root)
            in_user_namespace = False
        except OSError as e:
            if e.errno != errno.EPERM:
                raise
            _unshare(CLONE_NEWUSER | CLONE_NEWNET)
            in_user_namespace = True
    except (OSError, AttributeError) as e:  # AttributeError: no unshare() in this libc
        return "unshare: %s" % (e.strerror if isinstance(e, OSError) and e.strerror else e)
    try:
        if in_user_namespace:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", "%d %d 1" % (uid, uid))
            _write("/proc/self/gid_map", "%d %d 1" % (gid, gid))
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            _, flags = struct.unpack(IFREQ, fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0)))
            fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))
    except OSError as e:
        raise ClusterError(
            "cannot set up the local cluster's private network (%s); run with --noprivate_network" % (e.strerror or e)
        ) from None
    return None


def network_path(specs):
    """The first of `specs` (input specs and output paths; None is skipped) that a
    private network would cut off: a path on a remote filesystem (gs://, s3://,
    hdfs://...), given directly or listed in a local @list file; else None."""
    for spec in filter(None, specs):
        if needs_network(spec):
            return spec
        listed = local_path(spec[1:]) if spec.startswith("@") else None
        if listed is not None:
            try:
                with open(listed, "rb") as f:
                    for line in f:
                        path = line.strip().decode("utf-8", "replace")
                        if needs_network(path):
                            return path
            except OSError:
                pass  # reported with its path when the inputs are listed
    return None


def isolate(enabled, paths):
    """Moves this process, before it starts a local cluster, into a private network if
    `enabled` (`--private_network`) and none of `paths` (inputs and outputs) needs the
    network; returns None, or why the cluster's ports stay exposed."""
    if not enabled:
        return "--noprivate_network"
    remote = network_path(paths)
    if remote:
        return "%s needs the network, so no private network" % remote
    refused = enter_private_network()
    return refused and "no private network: %s" % refused
