"""Runs a job on a connected cluster: schedules its map steps with ClusterCoordinator,
watches the tasks, checkpoints, reports progress, and returns the exact result read
back from the ps tasks. No flags or printing here; `coordinator.py` is the CLI.
"""

import math
import re
import threading
import time
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from tf2_mapreduce import checkpoint as checkpoint_lib
from tf2_mapreduce import cluster as cluster_lib
from tf2_mapreduce import inputs as inputs_lib
from tf2_mapreduce import reduce
from tf2_mapreduce.errors import ClusterError, Interrupted, JobFailed, op_error_cause

__all__ = ["Options", "Progress", "Result", "JobRun", "connect", "files_per_step"]

# ClusterCoordinator costs ~0.5 ms a closure (design.md); more closures than this
# per worker buys no balance, fewer leaves a worker idle at the end.
STEPS_PER_WORKER = 4
MAX_FILES_PER_STEP = 64
TICK = 1.0  # seconds between the run loop's checks of workers, stop requests, checkpoints
WORKER_DOWN_AFTER = 3.0  # seconds without a heartbeat answer before a worker counts as down

# Errors that a map step raises because of one input file, not because of the cluster.
FILE_ERRORS = (
    tf.errors.NotFoundError,
    tf.errors.PermissionDeniedError,
    tf.errors.FailedPreconditionError,
    tf.errors.InvalidArgumentError,
    tf.errors.DataLossError,
    tf.errors.OutOfRangeError,
)
CHANGED = "tf2_mapreduce: changed since listing"
CHANGED_LINE = re.compile(r"\[%s\] \[(\d+)\] .*\[(\d+)\] \[(\d+)\]$" % re.escape(CHANGED))
READ_ERROR_LINE = re.compile(r"^(.*); ([^;]*)$")  # TF's "<path>; <strerror>"
PS_TARGET = re.compile(r"remote target /job:ps/replica:\d+/task:(\d+)")
CONNECTIVITY_ERRORS = (tf.errors.UnavailableError, tf.errors.CancelledError, tf.errors.AbortedError,
                       tf.errors.DeadlineExceededError)
TRANSIENT_BUDGET = 120.0  # seconds of failed rounds tolerated while every ps is fine
@dataclass(frozen=True)
class Options:
    step_files: int = 0  # files per map step; 0 picks from the input size
    on_error: str = "fail"  # "fail": stop at the first unreadable file; "skip": leave it out, say so
    checkpoint_dir: str = None
    checkpoint_every: float = 30.0
    worker_timeout: float = 300.0  # give up after this long without progress while a worker is down
    progress_every: float = 2.0


@dataclass(frozen=True)
class Progress:
    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int
    value: object  # the sum so far: an int, or a tuple for a vector sum
    distinct: int  # keys so far for a per-key sum, else None
    seconds: float  # since the run started
    files_skipped: int
    steps_per_worker: tuple  # map steps each worker ran, retries included


@dataclass(frozen=True)
class Result:
    job: object  # jobs.Job
    files: list  # of inputs.InputFile
    done: np.ndarray  # which files were counted, in `files` order
    skipped: list  # (InputFile, reason) of files left out with on_error="skip"
    resumed_from: str  # the checkpoint the run started from, or None
    files_resumed: int  # files already done in that checkpoint
    seconds: float
    steps_per_worker: tuple  # map steps each worker ran in this run, retries included
    stats: object  # reduce.Stats at the end: files and bytes done, total, distinct keys
    # Per-file values or the per-key tables, read on demand from the ps tasks: they
    # must still be up (the coordinator reads before it tells them to exit).
    reducer: object

    @property
    def total(self):
        return self.stats.value

    @property
    def files_done(self):
        return self.stats.files_done

    @property
    def total_bytes(self):
        return self.stats.bytes_done


def connect(cluster_resolver, task_devices):
    """Connects this process, as chief, to the cluster; returns a ClusterCoordinator.

    Blocking. Strategy creation is lazy, so one tiny op then runs on each of
    `task_devices`, to surface a broken connection here rather than mid-job. Does
    not wait for tasks to come up; callers check first (`cluster.wait_for_tasks`).
    """
    chief = cluster_resolver.cluster_spec().task_address("chief", 0)
    try:
        strategy = tf.distribute.experimental.ParameterServerStrategy(cluster_resolver)
    except tf.errors.OpError as e:
        # TF's only word for a chief port that is taken is "Could not start gRPC server".
        raise ClusterError("the coordinator cannot serve as chief on %s: %s (is the port in use?)"
                           % (chief, op_error_cause(e))) from None
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    for device in task_devices:
        try:
            with tf.device(device):
                tf.zeros([]).numpy()
        except tf.errors.OpError as e:
            raise ClusterError("%s does not answer: %s" % (device, op_error_cause(e))) from None
    return coordinator


def files_per_step(num_files, num_workers):
    """Files per map step: a few steps per worker, at most `MAX_FILES_PER_STEP`."""
    return max(1, min(MAX_FILES_PER_STEP, math.ceil(num_files / (STEPS_PER_WORKER * num_workers))))


def _map_step(job, reducer, worker_steps):
    """The scheduled step: reads its files, checks they are as listed, maps, commits."""
    @tf.function(
        input_signature=[tf.TensorSpec([None], tf.int64), tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.int64)]
    )
    def map_step(ids, paths, sizes):
        def read(file):
            file_id, path, size = file
            text = tf.io.read_file(path)
            # A file that changed since it was listed is not the file the job was
            # asked to count (and would not match its checkpoint): refuse it.
            length = tf.cast(tf.strings.length(text), tf.int64)
            unchanged = tf.debugging.Assert(tf.equal(length, size), [CHANGED, file_id, path, size, length])
            with tf.control_dependencies([unchanged]):
                return tf.identity(text)

        texts = tf.map_fn(read, (ids, paths, sizes), fn_output_signature=tf.string)
        reducer.commit(ids, job.map_fn(texts))
        worker_steps.count_this_step()

    return map_step


def _file_failure(error, files):
    """(path, reason) of the input file a map step failed on."""
    line = op_error_cause(error)
    changed = CHANGED_LINE.search(line)
    if changed:
        file_id, listed, now = (int(x) for x in changed.groups())
        return files[file_id].path, "changed since it was listed (%d bytes then, %d now)" % (listed, now)
    read_error = READ_ERROR_LINE.match(line)
    if not read_error:
        return None, line
    path, why = read_error.groups()
    why = why[:1].lower() + why[1:]
    if isinstance(error, tf.errors.NotFoundError):
        why += " (it was there when the inputs were listed)"
    return path, why


def _file_cause(error, files):
    path, why = _file_failure(error, files)
    return why if path is None else "%s: %s" % (path, why)


class JobRun:
    """One run of `job` over `files` on a connected cluster; call `run()` once.

    Guarantees: every file's value is committed exactly once (see `PerFileSum`)
    although map steps execute at least once; a file is either counted or, with
    on_error="skip", listed in `Result.skipped` with its reason, never dropped
    silently. With a checkpoint directory the run resumes where a previous run of
    the same job stopped, and saves its state every `checkpoint_every` seconds, when
    it is stopped, and at the end.
    """

    def __init__(self, job, files, coordinator, cluster, options=Options(), heartbeats=None, on_progress=None, log=None):
        self.files = files
        self._total_bytes = sum(f.size for f in files)
        self.coordinator = coordinator
        self.cluster = cluster
        self.options = options
        self.heartbeats = heartbeats  # control.Heartbeats, or None: no worker watchdog
        self.on_progress = on_progress or (lambda progress: None)
        self.log = log or (lambda line: None)
        ps_devices = ["/job:ps/replica:0/task:%d/device:CPU:0" % i for i in range(cluster.num_ps)]
        self.job = job
        self.reducer = reduce.for_job(job, [f.size for f in files], ps_devices)
        self.checkpoint = None
        if options.checkpoint_dir:
            self.checkpoint = checkpoint_lib.JobCheckpoint(
                options.checkpoint_dir, checkpoint_lib.manifest(job, cluster.num_ps, files),
                self.reducer.checkpoint_state())
        self.worker_steps = reduce.WorkerSteps(cluster.num_workers, ps_devices[0])
        self.step = _map_step(job, self.reducer, self.worker_steps)
        self.skipped = {}  # file id -> reason
        self._alone = set()  # ids to run one per step, to find which of them fails
        self._saved = None  # (path, files done) of the last checkpoint saved
        self._wake = threading.Event()
        self._stop_signal = None
        self._start = None
        self._progress = (-1, time.monotonic())  # (files done, when that count was first seen)
        self._transient_since = None

    def request_stop(self, signum):
        """Asks the run to checkpoint and stop; safe to call from a signal handler."""
        self._stop_signal = signum
        self._wake.set()

    def run(self):
        """Runs the job to its end; blocking. Returns a `Result`.

        Raises `JobFailed` (an input failed at read time with on_error="fail"),
        `ClusterError` (a ps failed; no progress for `worker_timeout` s while
        workers were down) or `Interrupted` (after `request_stop`); each message
        says how to resume.
        """
        self._start = time.monotonic()
        try:
            resumed_from = self.checkpoint.restore(warn=self.log) if self.checkpoint else None
            done = self.reducer.done()
            files_resumed = int(done.sum())
            if resumed_from:
                self.log("resuming from %s: %d of %d files already done" % (resumed_from, files_resumed, len(self.files)))
            while True:
                pending = [i for i in np.flatnonzero(~done) if i not in self.skipped]
                if not pending:
                    break
                error, failures = self._round(pending)
                done = self.reducer.done()
                if error is None:
                    lost = [i for i in pending if not done[i]]
                    if lost:  # join() returned, so every step ran: a file without a value would be lost silently
                        raise JobFailed("%d file(s) were never committed, first %s" % (len(lost), self.files[lost[0]].path))
                    break
                self._after_failed_round(error, failures)
            stats = self._report()
            if self.checkpoint:
                self._save()
        except tf.errors.OpError as e:
            raise self._cluster_failure(e) from e
        return Result(
            self.job, self.files, done, [(self.files[i], why) for i, why in sorted(self.skipped.items())],
            resumed_from, files_resumed, time.monotonic() - self._start, self.worker_steps.read(), stats, self.reducer,
        )

    def _round(self, pending):
        """Schedules `pending` files and waits; returns (error, [(ids, error)...]).

        The first item is None if every step succeeded; otherwise it is the error
        join() raised and the list names the steps that failed with their own error.
        """
        alone = [i for i in pending if i in self._alone]
        batched = [i for i in pending if i not in self._alone]
        step_files = self.options.step_files or files_per_step(len(batched), self.cluster.num_workers)
        datasets = [inputs_lib.batches(self.files, ids, n) for ids, n in ((batched, step_files), (alone, 1)) if ids]
        scheduled = []
        outcome = {}

        def drive():
            try:
                for dataset in datasets:
                    for ids, paths, sizes in dataset:
                        scheduled.append((ids.numpy(), self.coordinator.schedule(self.step, args=(ids, paths, sizes))))
                self.coordinator.join()
            except Exception as e:  # handed to the run loop
                outcome["error"] = e
            finally:
                outcome["done"] = True
                self._wake.set()

        threading.Thread(target=drive, name="tf2_mapreduce-schedule", daemon=True).start()
        self._watch(outcome)
        if "error" not in outcome:
            return None, []
        failures = []
        for ids, remote_value in scheduled:
            try:  # join() waited for every step in flight, so this does not block
                remote_value.fetch()
            except tf.errors.CancelledError:
                pass
            except Exception as e:
                failures.append((ids, e))
        return outcome["error"], failures

    def _watch(self, outcome):
        """The run loop while a round runs: progress, checkpoints, watchdog, stop."""
        next_progress = time.monotonic() + self.options.progress_every
        next_checkpoint = time.monotonic() + self.options.checkpoint_every
        while not outcome.get("done"):
            self._wake.wait(min(TICK, self.options.progress_every))
            self._wake.clear()
            if self._stop_signal is not None:
                raise Interrupted(self._stop_signal, "stopped by signal %d%s" % (self._stop_signal, self._save_for_resume()))
            now = time.monotonic()
            if now >= next_progress:
                self._report()
                next_progress = now + self.options.progress_every
            self._check_stall(self.reducer.stats().files_done)
            if self.checkpoint and now >= next_checkpoint:
                self._save()
                next_checkpoint = time.monotonic() + self.options.checkpoint_every

    def _check_stall(self, files_done):
        """Raises `ClusterError` if no map step finished for `worker_timeout` s while
        a worker is down.

        TF's join() waits forever for failed workers; and until every failed worker
        is back, ClusterCoordinator does not re-admit the restarted ones (it rebuilds
        the whole cluster's context), so a job can stall with a worker answering.
        Slow steps on workers that all answer are not a stall.
        """
        now = time.monotonic()
        if files_done != self._progress[0]:
            self._progress = (files_done, now)
            return
        if not self.heartbeats or now - self._progress[1] <= self.options.worker_timeout:
            return
        down = [(index, address) for _, index, address in self.cluster.tasks(roles=("worker",))
                if self.heartbeats.silent_for("worker", index) > WORKER_DOWN_AFTER]
        if not down:
            return
        detail = ", ".join("worker %d at %s (%s)" % (index, address, self.heartbeats.failing("worker", index) or "no answer")
                           for index, address in down)
        everyone = len(down) == self.cluster.num_workers
        if everyone:
            which = "every worker is down"
        else:
            which = "%d of %d workers %s down" % (len(down), self.cluster.num_workers, "is" if len(down) == 1 else "are")
        raise ClusterError(
            "no map step finished for %gs (--worker_timeout) and %s: %s. %s%s" % (
                self.options.worker_timeout, which, detail,
                "Start the workers again, then run the same command" if everyone else
                "TF resumes only once every failed worker is back: restart them (a running job then continues), "
                "or run the same command once they are up",
                self._save_for_resume()))

    def _after_failed_round(self, error, failures):
        """Raises for a failure that ends the job; with on_error="skip", records the
        failing files (or retries a failed step's files one per step, to find them);
        waits out workers that cannot reach a ps that is fine."""
        if not isinstance(error, FILE_ERRORS) or self._failed_ps(error):
            if self._transient(error):
                return
            raise self._cluster_failure(error)
        if self.options.on_error == "fail":
            raise JobFailed("a map step failed: %s" % _file_cause(error, self.files))
        if not failures:
            raise JobFailed("a map step failed: %s" % op_error_cause(error))
        for ids, step_error in failures:
            if not isinstance(step_error, FILE_ERRORS):
                raise self._cluster_failure(step_error)
            if len(ids) == 1:
                self.skipped[int(ids[0])] = _file_failure(step_error, self.files)[1]
            else:
                self._alone.update(int(i) for i in ids)

    def _transient(self, error):
        """Whether `error` is workers failing to reach ps tasks that are, in fact, fine;
        if so, waits a little before the next round (and returns True) unless that has
        gone on for `TRANSIENT_BUDGET` s.

        Workers that outlived a ps keep their channel to it in gRPC's reconnect
        backoff for a while after it is restarted, and their steps fail fast meanwhile.
        ClusterCoordinator ignores a few such failures, then gives up.
        """
        if not isinstance(error, CONNECTIVITY_ERRORS) or self._ps_down():
            return False
        try:
            self.reducer.stats()  # this run's state is still on every ps: no ps was lost
        except tf.errors.OpError:
            return False
        now = time.monotonic()
        first = self._transient_since or now
        if now - first > TRANSIENT_BUDGET:
            return False
        self._transient_since = first
        self.log("workers cannot reach a ps yet (%s); retrying" % op_error_cause(error))
        self._wake.wait(min(TICK, self.options.progress_every) * 2)
        return True

    def _ps_down(self):
        """{ps index: reason} for the ps tasks that do not accept connections."""
        down = {}
        for _, index, address in self.cluster.tasks(roles=("ps",)):
            reason = cluster_lib.probe(address)
            if reason:
                down[index] = reason
        return down

    def _failed_ps(self, error):
        """{ps index: reason} for the ps tasks that are down or that `error` names as lost."""
        failed = self._ps_down()
        if not failed and not isinstance(error, FILE_ERRORS):
            for index in PS_TARGET.findall(error.message if isinstance(error, tf.errors.OpError) else str(error)):
                failed[int(index)] = op_error_cause(error)
        return failed

    def _cluster_failure(self, error):
        """The `ClusterError` (a ps failed) or `JobFailed` that `error` means, with how to resume."""
        failed = self._failed_ps(error)
        if not failed:
            return JobFailed("%s: %s" % (type(error).__name__, op_error_cause(error)) if isinstance(error, tf.errors.OpError) else str(error))
        names = ", ".join("ps %d at %s (%s)" % (i, self.cluster.jobs["ps"][i], why) for i, why in sorted(failed.items()))
        if self._saved:
            how = ("Restart it, then run the same command: the job resumes from %s (%d of %d files done)"
                   % (self._saved[0], self._saved[1], len(self.files)))
        elif self.checkpoint:
            how = "Restart it, then run the same command: no checkpoint was saved yet, so the job starts over"
        else:
            how = "Restart it, then run the same command to start over (with --checkpoint_dir, a rerun resumes instead)"
        return ClusterError("%s failed during the job, with its part of the results. %s" % (names, how))

    def _save(self):
        files_done = self.reducer.stats().files_done
        path = self.checkpoint.save()
        self._saved = (path, files_done)
        self.log("checkpoint saved: %d of %d files done (%s)" % (files_done, len(self.files), path))

    def _save_for_resume(self):
        """Saves a checkpoint if the run has a directory; returns a hint on resuming."""
        if not self.checkpoint:
            return " (without --checkpoint_dir, a rerun starts over)"
        try:
            self._save()
        except tf.errors.OpError as e:
            return "; saving a checkpoint failed (%s)" % op_error_cause(e)
        return "; checkpoint saved (%d of %d files done): the same command resumes from it" % (self._saved[1], len(self.files))

    def _report(self):
        """Calls `on_progress` with the state on the ps now; returns the `reduce.Stats`."""
        stats = self.reducer.stats()
        self.on_progress(Progress(stats.files_done, len(self.files), stats.bytes_done, self._total_bytes, stats.value,
                                  stats.distinct, time.monotonic() - self._start, len(self.skipped),
                                  self.worker_steps.read()))
        return stats
