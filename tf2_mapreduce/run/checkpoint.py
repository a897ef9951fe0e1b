"""Checkpoints of a running job: its reduce state on the ps tasks (which also says
which files are done) and a manifest of its inputs, so a job stopped by a failure
resumes later without redoing finished files or counting any of them twice.
"""

import hashlib
import json
import os

import tensorflow as tf

from tf2_mapreduce import log, storage
from tf2_mapreduce.errors import UsageError, connectivity_errors, first_line
from tf2_mapreduce.outputs import files as output
from tf2_mapreduce.paths import join

__all__ = ["JobCheckpoint", "manifest"]

MANIFEST = "manifest.json"
# 2: per-piece rows carry a committed marker; 3: per-key done markers in the table; 4: and
# each table counts the pieces and bytes it has committed; 5: the pieces' fingerprint
# is a digest of their columns
FORMAT = 5


def manifest(job, num_ps, plan):
    """What makes a checkpoint belong to a job: the job and its parameters, its ps
    layout, its inputs with their sizes and modification times, how they were cut
    into pieces (`plan`: the unit of its state), and how each is decompressed."""
    return {
        "format": FORMAT,
        "job": job.name,
        "config": job.config,
        "num_ps": num_ps,
        "read_size": plan.read_size,
        "pieces": plan.fingerprint(),
        "files": [list(f) for f in zip(plan.files.paths, plan.files.sizes.tolist(), plan.files.mtimes.tolist())],
        "compressed": {path: c for path, c in zip(plan.files.paths, plan.compressions) if c},
    }


def _fingerprint(document):
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode("utf-8", "surrogateescape")).hexdigest()


def _difference(old, new):
    """Why manifest `new` is not the job of checkpoint manifest `old`, in a few words."""
    if old.get("format") != FORMAT:
        return "it was written by another version of tf2_mapreduce"
    if old["job"] != new["job"]:
        return "it is a checkpoint of {setting:job}=%s" % old["job"]
    if old["config"] != new["config"]:
        return "it was made with other job parameters (%s)" % json.dumps(old["config"], sort_keys=True)
    if old["num_ps"] != new["num_ps"]:
        return "it was made on %d ps task(s), this cluster has %d" % (old["num_ps"], new["num_ps"])
    before = {f[0]: f for f in old["files"]}
    now = {f[0]: f for f in new["files"]}
    for path in before.keys() - now.keys():
        return "input %s is not in this job's inputs" % path
    for path in now.keys() - before.keys():
        return "input %s is new" % path
    for path, size, mtime_ns in new["files"]:
        if before[path][1] != size:
            return "input %s changed size (%d bytes, now %d)" % (path, before[path][1], size)
        if before[path][2] != mtime_ns:
            return "input %s was modified" % path
    if [f[0] for f in old["files"]] != [f[0] for f in new["files"]]:
        return "the inputs are listed in another order"
    if old.get("compressed") != new["compressed"]:
        return "its inputs were decompressed otherwise ({setting:compression})"
    if old["read_size"] != new["read_size"]:
        return "it was made with {setting:read_size}=%d" % old["read_size"]
    return "the inputs were cut into pieces differently"


def _listed(directory):
    """How many checkpoints the index of `directory` lists (0 if it has none, or one that
    cannot be parsed); waits out an outage of its storage."""
    from google.protobuf import text_format
    from tensorflow.python.training.checkpoint_state_pb2 import CheckpointState  # the index's own format

    def read():
        try:
            with tf.io.gfile.GFile(join(directory, "checkpoint"), "r") as f:
                return f.read()
        except tf.errors.NotFoundError:
            return ""

    state = CheckpointState()
    try:
        text_format.Parse(storage.retrying(read, directory), state)
    except text_format.ParseError:
        return 0
    return len(state.all_model_checkpoint_paths) or int(bool(state.model_checkpoint_path))


def _manager(checkpoint, directory, max_to_keep, attempts=3):
    """A `tf.train.CheckpointManager` of `directory`. TensorFlow's reads its index once and
    takes a read that fails for "no checkpoint" (it logs "Checkpoint ignored"): a job would
    start over for an outage. So the index is read first, through the outage, and the
    manager made again while it finds none of what the index lists."""
    listed = _listed(directory)
    for _ in range(attempts):
        manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep)
        if manager.checkpoints or not listed:
            return manager
        _listed(directory)  # waits while the index cannot be read; then the manager reads it again
    return manager


class JobCheckpoint:
    """Saves and restores a job's reduce state in `directory` (any tf.io.gfile path).

    Saves go through `tf.train.CheckpointManager`: each is written to new files and
    the directory's `checkpoint` index is replaced atomically afterwards, so a save
    torn by a crash leaves the previous checkpoint intact. The manifest is written
    once, atomically, and a fingerprint of it is saved inside every checkpoint.
    """

    def __init__(self, directory, job_manifest, state, max_to_keep=3):
        """`state`: the reducer's `reduce.CheckpointState` (its objects on the ps tasks)."""
        self.directory = directory
        self.manifest = job_manifest
        fingerprint = _fingerprint(job_manifest)
        self._fingerprint = tf.Variable(fingerprint, trainable=False, name="manifest_fingerprint")
        self._expected = fingerprint
        self._prepare = state.prepare
        self._checkpoint = tf.train.Checkpoint(manifest_fingerprint=self._fingerprint, **state.save)
        self._restore_into = tf.train.Checkpoint(manifest_fingerprint=self._fingerprint, **state.restore)
        storage.retrying(self._check_manifest, directory)
        self._manager = _manager(self._checkpoint, directory, max_to_keep)
        # Numbered after the newest existing checkpoint: a resumed run must never
        # write over the checkpoint it resumed from (the saving object's own counter
        # starts again at 0).
        self._number = 1 + max((int(path.rsplit("-", 1)[1]) for path in self._manager.checkpoints), default=0)

    def _refuse(self, why):
        return UsageError(
            "{setting:checkpoint_dir} %s holds another job's checkpoint: %s. Resume with the same inputs and "
            "cluster, or start over with a new {setting:checkpoint_dir} (or delete this one)" % (self.directory, why)
        )

    def _check_manifest(self):
        path = join(self.directory, MANIFEST)
        if tf.io.gfile.exists(path):
            with tf.io.gfile.GFile(path, "r") as f:
                try:
                    old = json.load(f)
                except ValueError as e:
                    raise self._refuse("its %s is not valid JSON (%s)" % (MANIFEST, e)) from None
            if _fingerprint(old) != self._expected:
                raise self._refuse(_difference(old, self.manifest))
            return
        if tf.io.gfile.exists(join(self.directory, "checkpoint")):
            raise self._refuse("it has checkpoints but no %s" % MANIFEST)
        tf.io.gfile.makedirs(self.directory)
        temporary = "%s.tmp-%d" % (path, os.getpid())
        file = tf.io.gfile.GFile(temporary, "w")
        json.dump(self.manifest, file)
        output.put_in_place(file, temporary, path)

    def restore(self):
        """Restores the newest readable checkpoint; returns its path, or None if none.

        Blocking. A checkpoint that cannot be read (damaged files) is logged as a
        warning and the one before it is tried; if none can be, the job starts over.
        A task that cannot be reached raises (one of `connectivity_errors()`), as does
        storage that cannot be (`storage.outage_cause`): that says nothing about the
        files, and the caller may retry.
        """
        for path in reversed(self._manager.checkpoints):
            try:
                self._restore_into.restore(path).assert_existing_objects_matched()
            except connectivity_errors():
                raise
            except tf.errors.OpError as e:
                if storage.outage_cause(e):
                    raise
                log.warning("checkpoint %s cannot be read (%s); trying an older one" % (path, first_line(e)))
                continue
            except Exception as e:  # damaged files fail in many ways: DataLoss, a short read's IndexError...
                log.warning("checkpoint %s cannot be read (%s); trying an older one" % (path, first_line(e)))
                continue
            if self._fingerprint.numpy().decode() != self._expected:
                raise self._refuse("checkpoint %s does not match its %s" % (path, MANIFEST))
            return path
        return None

    def save(self):
        """Saves the reduce state now; returns the checkpoint's path. Blocking.

        Safe while map steps run: the reducer's state is saved as one consistent
        snapshot (for per-key sums, taken inside their commits' critical sections).
        """
        if self._prepare:
            self._prepare()
        # Numbered before it is written: a save that failed half-way (an outage) is
        # never written over by the next, which may come after the index named it.
        self._number += 1
        return self._manager.save(checkpoint_number=self._number - 1)
