"""One run's state on the ps tasks, its alone: the reducer's (the result so far), the map
steps each worker ran and the whole files found changed; named for the run, checked
empty when it starts, and restored from and saved to its checkpoint.
"""

import uuid

import numpy as np
import tensorflow as tf

from tf2_mapreduce import log, storage
from tf2_mapreduce.errors import JobFailed, op_error_cause
from tf2_mapreduce.run import checkpoint as checkpoint_lib
from tf2_mapreduce.state.counters import ChangedFiles, StopFlag, WorkerSteps

__all__ = ["RunState", "how_to_resume"]


class RunState:
    """The state a run of `job` over `plan` places on the ps tasks of `spec`, read and
    written through `ps` (`ps_health.PsHealth`: reads retried while every ps answers).

    Every resource is new and named for this run (`run_id`, random), so a run that
    starts over starts from empty state and a resumed run holds exactly its
    checkpoint's, whatever earlier runs left on servers that outlived them (`prepare`
    checks it). With `checkpoint_dir` the state is saved there (`save`) and a run of
    the same job resumes from it.
    """

    def __init__(self, job, plan, spec, ps, checkpoint_dir=None):
        self.plan = plan
        self._ps = ps
        self.run_id = uuid.uuid4().hex
        ps_devices = spec.devices(roles=("ps",))
        self.values = job.reducer.create_state(plan.sizes, ps_devices, self.run_id)
        self.worker_steps = WorkerSteps(spec.num_workers, ps_devices[0])
        self.changed_files = ChangedFiles(len(plan.pieces), ps_devices[0])
        self.stop_flag = StopFlag(ps_devices[0])
        self.checkpoint = None
        if checkpoint_dir:
            manifest = checkpoint_lib.manifest(job, spec.num_ps, plan)
            self.checkpoint = checkpoint_lib.JobCheckpoint(checkpoint_dir, manifest, self.values.checkpoint_state())
        self.saved = None  # (path, files done) of the last checkpoint saved
        self.resumed = None  # (path, files done) of the checkpoint this run resumed from
        self._looked = False  # whether `prepare` read its checkpoint directory
        self.released = False

    def prepare(self):
        """Checks that this run's state on every ps is empty, then restores the newest
        readable checkpoint if there is one; returns (its path or None, files it holds
        done). Blocking."""
        self._check_empty("a ps must start every run empty (a bug in tf2_mapreduce: please report it)")
        if not self.checkpoint:
            return None, 0
        resumed_from = self._ps.read(self._restore)
        files_resumed = self.files_done()
        self._looked = True
        if resumed_from:
            self.resumed = (resumed_from, files_resumed)
            log.info(
                "resuming from %s: %d of %d files already done" % (resumed_from, files_resumed, len(self.plan.files))
            )
        return resumed_from, files_resumed

    def _restore(self):
        """Restores the newest readable checkpoint; returns its path, or None if there
        is none. Safe to retry, since a restore overwrites the whole state."""
        path = storage.retrying(self.checkpoint.restore, self.checkpoint.directory)
        if path is None:
            # A restore that failed on one ps's files may have restored another's
            # (docs/runtime.md): a run that starts over must not keep any of it.
            self.values.reset()
            self._check_empty(
                "a checkpoint that could not be restored left it, and emptying it failed "
                "(a bug in tf2_mapreduce: please report it)"
            )
        return path

    def _check_empty(self, why):
        """Raises `JobFailed` unless this run's state on every ps is still empty."""
        leftover = self._ps.read(self.values.leftover)
        if leftover:
            raise JobFailed("%s holds state that this run did not write: %s" % (leftover, why))

    def done(self) -> np.ndarray:
        """Which pieces are committed, as a bool array in piece order. Blocking."""
        return self._ps.read(self.values.done)

    def files_done(self) -> int:
        """Files whose every piece is committed. Blocking."""
        return int(self.plan.file_done(self.done()).sum())

    def partial(self) -> np.ndarray:
        """For each piece committed on some ps tasks only (a checkpoint restored from copies
        of each ps's state made apart), a bit per ps that holds it; 0 for the others. Blocking."""
        return self._ps.read(self.values.partial)

    def figures(self):
        """The state's `state.base.Figures` now. Blocking."""
        return self._ps.read(self.values.figures)

    def steps_per_worker(self) -> tuple:
        return self._ps.read(self.worker_steps.read)

    def changed(self) -> dict:
        """{piece: size now} of the whole files a map step found changed. Blocking."""
        return self._ps.read(self.changed_files.read)

    def save(self, last=False) -> bool:
        """Saves a checkpoint now (with a checkpoint directory); blocking. Returns whether
        it did: one its storage cannot take (an outage, past TensorFlow's retries) is a
        warning, and the run goes on: the next save tries again, or, after the `last` (at
        the end of the job), a rerun resumes from the checkpoint before it."""
        files_done = self.files_done()
        try:
            path = self._ps.read(self.checkpoint.save)
        except tf.errors.OpError as e:
            cause = storage.outage_cause(e)
            if not cause:
                raise
            after = (
                "the result is whole; a rerun resumes from the checkpoint saved before, if any"
                if last
                else "the job goes on, and the next checkpoint tries again"
            )
            log.warning(
                "checkpoint not saved: %s cannot be reached (%s); %s" % (self.checkpoint.directory, cause, after)
            )
            return False
        self.saved = (path, files_done)
        log.info("checkpoint saved: %d of %d files done (%s)" % (files_done, len(self.plan.files), path))
        return True

    def save_for_resume(self):
        """Saves a checkpoint if the run has a directory; returns a hint on resuming."""
        if not self.checkpoint:
            return " (without {setting:checkpoint_dir}, a rerun starts over)"
        try:
            if not self.save():
                return "; saving a checkpoint failed (its storage cannot be reached)"
        except tf.errors.OpError as e:
            return "; saving a checkpoint failed (%s)" % op_error_cause(e)
        return "; checkpoint saved (%d of %d files done): the same command resumes from it" % (
            self.saved[1],
            len(self.plan.files),
        )

    @property
    def resumes_from(self):
        """(checkpoint, files done) a rerun resumes from: this run's last save, else the
        checkpoint it resumed from; None if neither."""
        return self.saved or self.resumed

    def how_to_resume(self):
        """What a rerun after a ps failure does, for the error that says so."""
        directory = self.checkpoint.directory if self.checkpoint else None
        return how_to_resume(directory, len(self.plan.files), self.resumes_from, self._looked)

    def release(self):
        """Frees this run's state on the ps tasks, for servers kept for more jobs; its
        result's per-piece values and tables cannot be read afterwards. Blocking."""
        self.released = True
        self.values.release()
        self.worker_steps.release()
        self.changed_files.release()
        self.stop_flag.release()


def how_to_resume(checkpoint_dir, files: int, saved=None, looked=True) -> str:
    """What a rerun after a ps failure does, for the error that says so: `saved` is the
    (checkpoint, files done of `files`) of the run's last save or of the one it resumed
    from, if any; `looked`, whether the run looked in `checkpoint_dir` yet (before, it
    cannot say whether it holds one)."""
    if saved:
        return "Restart it, then run the same command: the job resumes from %s (%d of %d files done)" % (
            saved[0],
            saved[1],
            files,
        )
    if not checkpoint_dir:
        return (
            "Restart it, then run the same command to start over "
            "(with {setting:checkpoint_dir}, a rerun resumes instead)"
        )
    if not looked:
        return "Restart it, then run the same command: it resumes from the newest checkpoint in %s, if any" % (
            checkpoint_dir
        )
    return "Restart it, then run the same command: no checkpoint of this run was saved yet, so the rerun starts it over"
