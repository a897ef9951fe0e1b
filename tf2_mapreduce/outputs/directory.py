"""An output directory that holds one job's complete result: claimed before the job (one
writer at a time), written aside, put in place when complete, and never left with the
files of an earlier result beside the new one. Locally and on any tf.io.gfile path."""

import json
import os
import time
import uuid

from tf2_mapreduce import storage
from tf2_mapreduce.errors import OutputError, UsageError, cause_of
from tf2_mapreduce.inputs import lookup
from tf2_mapreduce.outputs import files as output
from tf2_mapreduce.outputs import locks
from tf2_mapreduce.paths import join, local_path

__all__ = ["ResultDirectory", "MANIFEST", "LOCK", "PIECES"]

# Written last, once every file of the result is in place: its list of files is what a
# later result replaces. Hidden ("_"), as Hadoop's _SUCCESS: not an input when listed.
MANIFEST = "_tf2_mapreduce.json"
LOCK = "_tf2_mapreduce.lock"
_STAGING = ".tf2_mapreduce-staging-"
# The files a writing job's map steps write as it runs (`outputs.sinks`): kept by a claim,
# since a rerun that resumes from a checkpoint needs them, and removed once a result is in place.
PIECES = ".tf2_mapreduce-pieces"


def _gfile():
    import tensorflow as tf

    return tf.io.gfile


def _read_once(path):
    with _gfile().GFile(path, "rb") as f:
        return f.read()


def _read(path):
    """The text of the object `path`, through an outage of its storage."""
    return storage.retrying(lambda: _read_once(path), path)


def _remove_if_there(path):
    """Removes `path`; one already gone is fine (an earlier attempt may have removed it
    as its storage failed to say so)."""
    import tensorflow as tf

    try:
        tf.io.gfile.remove(path)
    except tf.errors.NotFoundError:
        pass


def _top(name):
    """The name in the result directory itself of a result's file `name` ("data/part-0" -> "data")."""
    return name.split("/", 1)[0]


def _files_under(path, prefix=""):
    """The names of the files under the directory `path`, subdirectories' as "dir/name",
    sorted; through an outage of its storage (`lookup.children`)."""
    local = local_path(path)
    if local is not None:
        found = []
        for root, dirs, names in os.walk(local):
            dirs.sort()
            relative = os.path.relpath(root, local)
            found += [name if relative == "." else relative + "/" + name for name in names]
        return sorted(found)
    found = []
    for name in lookup.children(path):
        if name.endswith("/"):
            found += _files_under(join(path, name.rstrip("/")), prefix + name)
        else:
            found.append(prefix + name)
    return sorted(found)


class ResultDirectory:
    """`path`, a directory holding one job's result, and no other files.

    `claim()` (blocking) refuses, with a `UsageError`, a directory that holds files of
    anything but a tf2_mapreduce result, or that another job is writing (a lock: flock
    locally, a lease elsewhere); it is made if absent. `write(make)` has `make(staging)`
    write the new result's files into a directory of their own inside it, then puts
    them in place: the old result's manifest first removed (a reader that checks it
    never takes a mix for a result), each new file moved in, the old result's other
    files removed, the new manifest written last. A failure leaves the staging files
    to the next claim, which removes them, and the previous result readable but for
    its manifest. `release()` gives the directory up. Use as a context manager.
    """

    def __init__(self, path, setting="{setting:output_dir}"):
        self.path = path
        self.setting = setting
        self.local = local_path(path)
        self._lock = None
        self._made = False  # whether claim() made the directory: release() removes it if still empty

    def __enter__(self):
        self.claim()
        return self

    def __exit__(self, *exc):
        self.release()

    def _fail(self, why):
        return UsageError("%s %s: %s" % (self.setting, self.path, why))

    def _listing(self):
        if self.local is not None:
            return sorted(os.listdir(self.local))
        return sorted(name.rstrip("/") for name in lookup.children(self.path))

    def _manifest(self):
        """The result's manifest; None if there is none, or it is not ours. An outage of
        the storage is waited out: taken for "none", the old result's files would stay."""
        try:
            if self.local is not None:
                with open(os.path.join(self.local, MANIFEST), "rb") as f:
                    return json.loads(f.read())
            return json.loads(_read(join(self.path, MANIFEST)))
        except storage.StorageOutage:
            raise
        except Exception:  # noqa: BLE001 - none, or not ours
            return None

    def claim(self):
        lock = (
            locks.LocalLock(os.path.join(self.local, LOCK))
            if self.local is not None
            else locks.Lease(join(self.path, LOCK))
        )
        for attempt in range(3):
            try:
                if self.local is not None:
                    self._made = not os.path.isdir(self.local)
                    os.makedirs(self.local, exist_ok=True)
                else:
                    storage.retrying(lambda: _gfile().makedirs(self.path), self.path)
            except storage.StorageOutage:
                raise
            except Exception as e:  # noqa: BLE001 - OSError locally, TensorFlow's errors elsewhere
                raise self._fail("cannot be made: %s" % cause_of(e)) from None
            try:
                holder = lock.acquire()
                break
            except FileNotFoundError:
                # Made by a job that failed before writing, which removed it as this one
                # opened its lock (`release`): made again.
                if attempt == 2:
                    raise self._fail("cannot be written there: it is removed as it is made") from None
            except storage.StorageOutage:
                raise
            except Exception as e:  # noqa: BLE001 - as above
                raise self._fail("cannot be written there: %s" % cause_of(e)) from None
        if holder is not None:
            raise self._fail("another job is writing it: %s" % holder)
        self._lock = lock
        try:
            self._check_contents()
        except BaseException:
            self.release()
            raise

    def _check_contents(self):
        names = self._listing()
        ours = {_top(name) for name in (self._manifest() or {}).get("files", ())} | {MANIFEST, LOCK, PIECES}
        for name in names:
            if name.startswith(_STAGING):  # what a job that died while writing left
                output.remove_tree(join(self.path, name))
        others = [n for n in names if n not in ours and not n.startswith(_STAGING)]
        if others:
            shown = ", ".join(others[:3]) + (" and %d more" % (len(others) - 3) if len(others) > 3 else "")
            raise self._fail(
                "holds files that are not a tf2_mapreduce result (%s); give a new or empty directory" % shown
            )

    def write(self, make, job: str) -> list:
        """Writes a result: `make(staging)` writes its files (flat) into `staging` and
        returns nothing; they are then put in place as the class says. Returns the
        result's file names. Raises `OutputError` naming the directory if it cannot be
        written."""
        staging = _STAGING + uuid.uuid4().hex[:12]
        staging_path = join(self.path, staging)
        try:
            storage.retrying(lambda: _gfile().makedirs(staging_path), staging_path)
        except storage.StorageOutage:
            raise
        except Exception as e:  # noqa: BLE001 - as above
            raise OutputError(self.path, cause_of(e)) from None
        make(staging_path)
        try:
            return self._put_in_place(staging_path, job)
        except storage.StorageOutage:
            raise
        except Exception as e:  # noqa: BLE001 - as above
            raise OutputError(self.path, "cannot put the result in place: %s" % cause_of(e)) from None

    def _put_in_place(self, staging_path, job):
        """`write`'s second half: each call to the storage through an outage of it
        (`storage.retrying`), each safe to repeat."""

        def retried(fn, *paths):
            return storage.retrying(lambda: fn(*paths), paths[-1])

        files = _files_under(staging_path)
        old = set((self._manifest() or {}).get("files", ()))
        retried(_remove_if_there, join(self.path, MANIFEST))
        for name in sorted({name.rsplit("/", 1)[0] for name in files if "/" in name}):
            retried(_gfile().makedirs, join(self.path, name))
        for name in files:
            output.move(join(staging_path, name), join(self.path, name))
        for name in sorted(old - set(files)):
            retried(_remove_if_there, join(self.path, name))
        for name in sorted({_top(name) for name in old if "/" in name} - {_top(name) for name in files}):
            output.remove_tree(join(self.path, name))
        output.remove_tree(staging_path)
        output.remove_tree(join(self.path, PIECES))
        temporary = join(self.path, MANIFEST + ".tmp-" + staging_path[-12:])
        manifest = _gfile().GFile(temporary, "w")
        manifest.write(json.dumps({"job": job, "files": files, "written": time.time()}, indent=1) + "\n")
        output.put_in_place(manifest, temporary, join(self.path, MANIFEST))
        return files

    def release(self):
        """Gives the directory up; one this claim made, left empty (the job failed before
        writing its result), is removed. Idempotent."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if self._made:
            self._made = False
            try:
                os.rmdir(self.local)  # only if empty: another job may have claimed it since
            except OSError:
                pass
