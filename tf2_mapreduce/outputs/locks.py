"""Who may write an output directory: one job at a time, by a lock its holder's death
releases (flock on local disks, a lease renewed by its holder elsewhere)."""

import fcntl
import json
import os
import socket
import threading
import time
import uuid

from tf2_mapreduce import storage

__all__ = ["LocalLock", "Lease", "LEASE", "LEASE_RENEW"]

# A lock on remote storage is a lease (TF's client cannot create an object only if it is
# absent): renewed this often by its holder, stale this long after its last renewal.
LEASE_RENEW = 5.0
LEASE = 30.0


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


def _read_once(path):
    with _gfile().GFile(path, "rb") as f:
        return f.read()


def _read(path):
    """The text of the object `path`, through an outage of its storage."""
    return storage.retrying(lambda: _read_once(path), path)


def _write(path, text):
    with _gfile().GFile(path, "w") as f:
        f.write(text)


class LocalLock:
    """flock on a file in the directory: the kernel releases it when its holder dies. Its
    holder removes the file before it lets go, so none is left beside a result; a job
    that opened the file before that and locks it after finds it gone, and opens the
    file now there (as a lock on a file no longer in the directory locks nothing)."""

    def __init__(self, path):
        self.path = path
        self._fd = None

    def acquire(self):
        """None once held, else what the holder wrote."""
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 4096, 0).decode("utf-8", "replace")
                os.close(fd)
                return holder or "another process"
            if self._is_the_file(fd):
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, _holder().encode(), 0)
        self._fd = fd
        return None

    def _is_the_file(self, fd):
        try:
            return os.path.samestat(os.fstat(fd), os.stat(self.path))
        except FileNotFoundError:
            return False

    def release(self):
        if self._fd is not None:
            try:
                os.unlink(self.path)  # while still held: see the class
            except FileNotFoundError:
                pass
            os.close(self._fd)
            self._fd = None


class Lease:
    """A lock object renewed by its holder: another job finding it renewed within `LEASE`
    seconds refuses; one stale for longer (its holder died) is taken over."""

    def __init__(self, path):
        self.path = path
        self._stop = threading.Event()
        self._renewing = None
        self._id = uuid.uuid4().hex

    def _read(self, patient=True):
        """The lease as written; None if absent or half-written by a dying holder. Waits
        out an outage if `patient`: taken for "absent", a held directory would be taken."""
        try:
            return json.loads(_read(self.path) if patient else _read_once(self.path))
        except storage.StorageOutage:
            raise
        except Exception:  # noqa: BLE001 - absent, or half-written by a dying holder
            return None

    def _write(self, patient=True):
        text = json.dumps({"id": self._id, "holder": _holder(), "renewed": time.time()})
        if patient:
            storage.retrying(lambda: _write(self.path, text), self.path)
        else:
            _write(self.path, text)

    def acquire(self):
        held = self._read()
        if held and held.get("id") != self._id and time.time() - held.get("renewed", 0) < LEASE:
            return "%s (renewed %.0f s ago; a lock whose job died lapses %g s after that)" % (
                held.get("holder"),
                time.time() - held["renewed"],
                LEASE,
            )
        self._write()
        time.sleep(0.5)  # two jobs that wrote at once: the last write wins, the other reads it back
        if (self._read() or {}).get("id") != self._id:
            return "another job that claimed it at the same moment"
        # A daemon, so that a holder that never releases still exits; `release` waits for
        # it: a daemon thread still in TensorFlow's file system as the interpreter exits
        # is ended by pthread_exit, whose unwind through TensorFlow's C++ aborts.
        self._renewing = threading.Thread(target=self._renew, name="tf2_mapreduce-lease", daemon=True)
        self._renewing.start()
        return None

    def _renew(self):
        while not self._stop.wait(LEASE_RENEW):
            try:
                self._write(patient=False)
            except Exception:  # noqa: BLE001 - storage out for a moment: the next renewal tries again
                pass

    def release(self):
        """Stops the renewals, waiting for one under way, and removes the lease if it is
        still this holder's. Best effort: a lease left behind lapses by itself."""
        self._stop.set()
        if self._renewing is not None:
            self._renewing.join()
        try:
            if (self._read(patient=False) or {}).get("id") == self._id:
                _gfile().remove(self.path)
        except Exception:  # noqa: BLE001 - best effort: it lapses by itself
            pass


def _holder():
    return "%s pid %d since %s" % (socket.gethostname(), os.getpid(), time.strftime("%Y-%m-%d %H:%M:%S"))
