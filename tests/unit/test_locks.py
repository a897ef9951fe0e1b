"""The lease that locks an output directory on remote storage (outputs/locks.py), on a
local path: `release` waits for a renewal under way, so that no thread of ours is in
TensorFlow's file system as the interpreter exits, and removes the lease."""

import json
import threading

from tf2_mapreduce.outputs import locks


def test_release_waits_for_a_renewal_under_way_then_removes_the_lease(tmp_path, monkeypatch):
    monkeypatch.setattr(locks, "time", _NoSleep())
    monkeypatch.setattr(locks, "LEASE_RENEW", 0.01)
    lease = locks.Lease(str(tmp_path / "lock"))
    assert lease.acquire() is None
    renewing, go_on = threading.Event(), threading.Event()
    write = locks._write

    def slow_write(target, text):
        renewing.set()
        assert go_on.wait(30), "the test never let the renewal finish"
        write(target, text)

    monkeypatch.setattr(locks, "_write", slow_write)
    assert renewing.wait(30), "no renewal began"
    released = threading.Thread(target=lease.release)
    released.start()
    released.join(0.5)  # long enough for a release that does not wait to have returned
    assert released.is_alive(), "release returned while a renewal was still writing"
    go_on.set()
    released.join(30)
    assert not released.is_alive() and not lease._renewing.is_alive()
    assert not (tmp_path / "lock").exists()


def test_a_lease_held_by_another_is_refused_naming_its_holder(tmp_path, monkeypatch):
    path = tmp_path / "lock"
    monkeypatch.setattr(locks, "time", _NoSleep())
    held = locks.Lease(str(path))
    assert held.acquire() is None
    assert json.loads(path.read_text())["id"] == held._id
    refused = locks.Lease(str(path)).acquire()
    assert refused.startswith(locks._holder().rsplit(" since ", 1)[0]), refused
    held.release()
    assert not path.exists()


class _NoSleep:
    """`time` for the module under test, but for its half-second wait after a claim."""

    def __getattr__(self, name):
        import time

        return getattr(time, name)

    @staticmethod
    def sleep(seconds):
        pass
