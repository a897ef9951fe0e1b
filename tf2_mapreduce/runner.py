"""Runs a job on a connected cluster: schedules its map steps with ClusterCoordinator,
watches the tasks, checkpoints, reports progress, and returns the exact result read
back from the ps tasks. No flags or printing here; `cli.py` is the CLI.
"""

import contextlib
import threading
import time
import uuid
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from tf2_mapreduce import checkpoint as checkpoint_lib
from tf2_mapreduce import failures, mapstep, ps_health, reduce, rounds, stall
from tf2_mapreduce import inputs as inputs_lib
from tf2_mapreduce.errors import Cancelled, ClusterError, Interrupted, JobFailed, UsageError, op_error_cause

__all__ = ["Options", "Progress", "Result", "JobRun", "connect"]

TICK = 1.0  # seconds between the run loop's checks of workers, stop requests, checkpoints
JOIN_GRACE = 5.0  # seconds join() gets to return once every piece is committed
DRAIN_TIMEOUT = 30.0  # seconds a stopped run waits for its steps in flight to end


@dataclass(frozen=True)
class Options:
    split_size: int = 64 << 20  # at most this many bytes per map step
    read_size: int = 8 << 20  # files are cut into pieces of about this size, read one at a time
    max_pieces: int = 0  # pieces per map step at most; 0: up to rounds.MAX_PIECES_PER_STEP
    on_error: str = "fail"  # "fail": stop at the first unreadable input; "skip": leave it out, say so
    format: str = "auto"  # what the inputs are: "text", "tfrecord", or "auto": what the job reads
    compression: str = "auto"  # "none", "gzip", "zlib", or "auto": by each file's name (inputs.compression_of)
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
    rounds_rerun: int  # times the pieces left were scheduled again after a failed round


@dataclass(frozen=True)
class Result:
    job: object  # jobs.Job
    files: list  # of inputs.InputFile
    pieces: list  # of inputs.Piece
    piece_done: np.ndarray  # which pieces were counted
    skipped: list  # (path or "path (bytes a-b)", reason) of inputs left out with on_error="skip"
    resumed_from: str  # the checkpoint the run started from, or None
    files_resumed: int  # files whose every piece was done in that checkpoint
    seconds: float
    first_schedule: float  # time.monotonic() when the first map step was scheduled (None if none was)
    finished: float  # time.monotonic() when the result was read
    steps_per_worker: tuple  # map steps each worker ran in this run, retries included
    stats: object  # reduce.Stats at the end: pieces and bytes done, total, distinct keys
    # Per-piece values or the per-key tables, read on demand from the ps tasks: they
    # must still be up (the coordinator reads before it tells them to exit).
    reducer: object

    @property
    def total(self):
        return self.stats.value

    @property
    def file_done(self):
        """Which files were counted whole, as a bool array in file order."""
        return _files_done(self.pieces, self.piece_done, len(self.files))

    @property
    def files_done(self):
        return int(self.file_done.sum())

    @property
    def total_bytes(self):
        return self.stats.bytes_done

    def file_values(self):
        """For a per-piece reducer: each file's value (row), its pieces folded."""
        piece_file = np.array([p.file for p in self.pieces], dtype=np.int64)
        return self.reducer.file_values(piece_file, len(self.files), self.piece_done)


class _MapSteps(dict):
    """A kind of piece -> its map step, built (and traced) only when a round first has
    pieces of that kind: tracing a step costs a fraction of a second."""

    def __init__(self, build):
        super().__init__()
        self._build = build

    def __missing__(self, kind):
        self[kind] = step = self._build(kind)
        return step


def _files_done(pieces, piece_done, num_files):
    piece_file = np.array([p.file for p in pieces], dtype=np.int64)
    total = np.bincount(piece_file, minlength=num_files)
    done = np.bincount(piece_file[piece_done], minlength=num_files)
    return (total > 0) & (done == total)


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
        raise ClusterError(
            "the coordinator cannot serve as chief on %s: %s (is the port in use?)" % (chief, op_error_cause(e))
        ) from None
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    for device in task_devices:
        try:
            with tf.device(device):
                tf.zeros([]).numpy()
        except tf.errors.OpError as e:
            raise ClusterError("%s does not answer: %s" % (device, op_error_cause(e))) from None
    return coordinator


class JobRun:
    """One run of `job` over `files` on a connected cluster; call `run()` once.

    Files are cut into pieces at record boundaries (`inputs.plan`); map steps read
    whole pieces, a few at a time. Guarantees: every piece's result is committed
    exactly once (see `reduce`) although map steps execute at least once; an input
    is either counted or, with on_error="skip", listed in `Result.skipped` with its
    reason, never dropped silently. With a checkpoint directory the run resumes
    where a previous run of the same job stopped, and saves its state every
    `checkpoint_every` seconds, when it is stopped, and at the end.
    """

    def __init__(
        self, job, files, coordinator, cluster, options=Options(), heartbeats=None, on_progress=None, log=None
    ):
        self.job = job
        self.files = files
        self.coordinator = coordinator
        self.cluster = cluster
        self.options = options
        self.heartbeats = heartbeats  # server_channel.Heartbeats, or None: no worker watchdog
        self.on_progress = on_progress or (lambda progress: None)
        self.log = log or (lambda line: None)
        if options.compression not in inputs_lib.COMPRESSIONS:
            raise UsageError(
                "{setting:compression}=%s: not a compression (%s)"
                % (options.compression, ", ".join(inputs_lib.COMPRESSIONS))
            )
        inputs_lib.check_format(files, "tfrecord" if job.records == "tfrecord" else "text", options.format)
        self._compressions = [inputs_lib.compression_of(f.path, options.compression) for f in files]
        self.pieces, planning_skipped = inputs_lib.plan(
            files, options.read_size, job.records, options.on_error, options.compression
        )
        self._total_bytes = sum(p.size for p in self.pieces)
        ps_devices = cluster.devices(roles=("ps",))
        self.run_id = uuid.uuid4().hex  # names this run's state on the ps tasks, its alone
        self.reducer = reduce.for_job(job, [p.size for p in self.pieces], ps_devices, self.run_id)
        self.checkpoint = None
        if options.checkpoint_dir:
            manifest = checkpoint_lib.manifest(
                job, cluster.num_ps, files, self.pieces, options.read_size, self._compressions
            )
            self.checkpoint = checkpoint_lib.JobCheckpoint(
                options.checkpoint_dir, manifest, self.reducer.checkpoint_state()
            )
        self.worker_steps = reduce.WorkerSteps(cluster.num_workers, ps_devices[0])
        self.changed_files = reduce.ChangedFiles(len(self.pieces), ps_devices[0])
        self.steps = _MapSteps(
            lambda kind: mapstep.build(
                job, self.reducer, self.worker_steps, self.changed_files, *kind, read_size=options.read_size
            )
        )
        self.skipped = list(planning_skipped)  # (path, reason) of whole files left out when planned
        self.skipped_pieces = {}  # piece id -> reason
        # [piece ids] of steps that failed on a file: each runs cut in parts (rounds.Round)
        # until the piece that fails is alone; kept across rounds that cancel them.
        self._groups = []
        self._saved = None  # (path, files done) of the last checkpoint saved
        self._wake = threading.Event()
        self._round_ = None  # the round running, or the last one
        self._stop_signal = None
        self._start = None
        self._first_schedule = None
        self.ps = ps_health.PsHealth(cluster, interrupted=lambda: self._stop_requested(" while a ps could not be read"))
        self.watch = stall.StallWatch(cluster, heartbeats, options.worker_timeout)
        self._transient_since = None
        self._rounds_rerun = 0
        self.released = False

    def release(self):
        """Frees this run's state on the ps tasks, for servers kept for more jobs; the
        result's per-piece values and tables cannot be read afterwards. Blocking."""
        self.released = True
        self.reducer.release()
        self.worker_steps.release()
        self.changed_files.release()

    @contextlib.contextmanager
    def reading_result(self):
        """Reads of the returned `Result` from the ps tasks (its reducer's tables,
        `file_values`) go inside this: a ps failing then raises the `ClusterError`
        that says how to resume, as during the run, so servers are kept for the
        rerun. Not retried here: a table is streamed to its reader only once."""
        try:
            yield
        except tf.errors.OpError as e:
            raise self._cluster_failure(e, "before the result was read") from e

    def drained(self, timeout):
        """Whether this run's last round has ended (no step of it scheduled or in flight),
        waiting up to `timeout` s for it. Blocking."""
        deadline = time.monotonic() + timeout
        while self._round_ is not None and not self._round_.finished:
            if time.monotonic() >= deadline:
                return False
            self._wake.wait(TICK / 10)
            self._wake.clear()
        return True

    def request_stop(self, signum=None):
        """Asks the run to checkpoint and stop: `run()` then raises `Interrupted` (for
        signal `signum`) or `Cancelled` (None). Non-blocking; safe in a signal handler."""
        self._stop_signal = signum if signum is not None else 0
        self._wake.set()

    def _stop_requested(self, why):
        """The error a requested stop raises now, or None if none was requested."""
        return self._stopped(why) if self._stop_signal is not None else None

    def _stopped(self, why=""):
        """The error a stop requested by `request_stop` raises, `why` saying where it was."""
        hint = self._save_for_resume() if not why else ""
        checkpoint = self._saved[0] if self._saved else None
        if self._stop_signal == 0:
            return Cancelled("cancelled%s%s" % (why, hint), checkpoint)
        return Interrupted(self._stop_signal, "stopped by signal %d%s%s" % (self._stop_signal, why, hint), checkpoint)

    def run(self):
        """Runs the job to its end; blocking. Returns a `Result`.

        Raises `JobFailed` (an input failed at read time with on_error="fail"),
        `ClusterError` (a ps failed; no progress for `worker_timeout` s while
        workers were down) or `Interrupted` (after `request_stop`); each message
        says how to resume.
        """
        self._start = time.monotonic()
        try:
            resumed_from, files_resumed = self._start_state()
            done = self._map_until_done()
            stats = self._report()
            if self.checkpoint:
                self._save()
            steps = self.ps.read(self.worker_steps.read)
        except tf.errors.OpError as e:
            raise self._cluster_failure(e) from e
        skipped = self.skipped + [(self._describe(i), why) for i, why in sorted(self.skipped_pieces.items())]
        finished = time.monotonic()
        return Result(
            self.job,
            self.files,
            self.pieces,
            done,
            skipped,
            resumed_from,
            files_resumed,
            finished - self._start,
            self._first_schedule,
            finished,
            steps,
            stats,
            self.reducer,
        )

    def _start_state(self):
        """Checks this run's state on the ps tasks is empty, then restores the checkpoint
        if there is one; returns (its path or None, files it holds done). A run starts
        from empty state, and a resumed one holds exactly its checkpoint's, whatever
        earlier runs left."""
        self._check_empty("a ps must start every run empty (a bug in tf2_mapreduce: please report it)")
        if not self.checkpoint:
            return None, 0
        resumed_from = self.ps.read(self._restore)
        files_resumed = self._files_done_now()
        if resumed_from:
            self.log("resuming from %s: %d of %d files already done" % (resumed_from, files_resumed, len(self.files)))
        return resumed_from, files_resumed

    def _map_until_done(self):
        """Runs rounds of map steps over the pieces not done until each is committed or
        skipped; returns which pieces are committed."""
        done = self.ps.read(self.reducer.done)
        while True:
            pending = [i for i in np.flatnonzero(~done) if i not in self.skipped_pieces]
            if not pending:
                return done
            error, step_failures = self._round(pending)
            done = self.ps.read(self.reducer.done)
            if error is None:
                lost = [i for i in pending if not done[i]]
                if lost:  # join() returned, so every step ran: a piece without a value would be lost silently
                    raise JobFailed(
                        "%d piece(s) were never committed, first of %s"
                        % (len(lost), self.files[self.pieces[lost[0]].file].path)
                    )
                return done
            self._after_failed_round(error, step_failures)
            self._rounds_rerun += 1

    def _restore(self):
        """Restores the newest readable checkpoint; returns its path, or None if there
        is none. Blocking; safe to retry, since a restore overwrites the whole state."""
        path = self.checkpoint.restore(warn=self.log)
        if path is None:
            # A restore that failed on one ps's files may have restored another's
            # (measured): a run that starts over must not keep any of it.
            self.reducer.reset()
            self._check_empty(
                "a checkpoint that could not be restored left it, and emptying it failed "
                "(a bug in tf2_mapreduce: please report it)"
            )
        return path

    def _check_empty(self, why):
        """Raises `JobFailed` unless this run's state on every ps is still empty."""
        leftover = self.ps.read(self.reducer.leftover)
        if leftover:
            raise JobFailed("%s holds state that this run did not write: %s" % (leftover, why))

    def _describe(self, piece_id):
        """A piece as users know it: its file, and the byte range if the file has several."""
        piece = self.pieces[piece_id]
        f = self.files[piece.file]
        return (
            f.path
            if inputs_lib.whole_file(piece, self.files)
            else "%s (bytes %d-%d)" % (f.path, piece.start, piece.end)
        )

    def _round(self, pending):
        """Runs a round over `pending` pieces while the run loop watches; returns
        (None, []) if every step succeeded, else (the error join() raised, [(ids,
        error)] of the steps that failed with an error of their own)."""
        pending_set = set(pending)
        self._groups = [g for g in ([i for i in group if i in pending_set] for group in self._groups) if g]
        # A piece committed on some ps tasks only goes alone, never with pieces that are not.
        partial = set(np.flatnonzero(self.ps.read(self.reducer.partial)).tolist()) & pending_set
        if partial:
            self._groups = [[i for i in group if i not in partial] for group in self._groups]
            self._groups = [g for g in self._groups if g] + [[i] for i in sorted(partial)]
        round_ = rounds.Round(
            self.coordinator,
            self.steps,
            self._kind,
            self.files,
            self.pieces,
            pending,
            self._groups,
            self.cluster.num_workers,
            self.options.split_size,
            mapstep.whole_files_bytes(self.options.read_size),
            self.options.max_pieces,
            self._wake,
        )
        self._round_ = round_
        round_.start()
        complete = self._watch(round_)
        self._first_schedule = self._first_schedule or round_.first_schedule
        if complete or round_.error is None:
            return None, []
        return round_.error, round_.step_failures()

    def _kind(self, piece_id):
        """How the map step reads the piece: ("whole" | "range" | "stream", compression)."""
        piece = self.pieces[piece_id]
        compression = self._compressions[piece.file]
        if compression or self.job.records == "tfrecord":
            return "stream", compression
        return ("whole" if inputs_lib.whole_file(piece, self.files) else "range"), ""

    def _watch(self, round_):
        """The run loop while a round runs: progress, checkpoints, watchdog, stop.

        Returns False when join() returned, or True as soon as every piece is
        committed: a step still in flight on a worker cut off from the network (no
        connection reset, so TF waits for TCP to give up) can only commit nothing more.
        """
        next_progress = time.monotonic() + self.options.progress_every
        next_checkpoint = time.monotonic() + self.options.checkpoint_every
        while not round_.finished:
            self._wake.wait(min(TICK, self.options.progress_every))
            self._wake.clear()
            if self._stop_signal is not None:
                round_.stop()
                self.drained(DRAIN_TIMEOUT)
                raise self._stopped()
            now = time.monotonic()
            if now >= next_progress:
                stats = self._report()
                next_progress = now + self.options.progress_every
            else:
                stats = self.ps.read(self.reducer.stats)
            pieces_done = stats.pieces_done
            if pieces_done >= len(self.pieces) - len(self.skipped_pieces):
                deadline = time.monotonic() + JOIN_GRACE  # join() returns at once unless a step is stuck
                while not round_.finished and time.monotonic() < deadline:
                    self._wake.wait(TICK / 10)
                return True
            self._check_stall(pieces_done)
            if self.checkpoint and now >= next_checkpoint:
                self._save()
                next_checkpoint = time.monotonic() + self.options.checkpoint_every
        return False

    def _check_stall(self, pieces_done):
        """Raises `ClusterError`, with a checkpoint saved, if the run stalled (`stall`)."""
        stalled = self.watch.check(pieces_done)
        if stalled:
            message, everyone = stalled
            how = (
                "Start the workers again, then run the same command"
                if everyone
                else "TF resumes only once every failed worker is back: restart them (a running job then continues), "
                "or run the same command once they are up"
            )
            raise ClusterError(message + how + self._save_for_resume())

    def _after_failed_round(self, error, step_failures):
        """Raises for a failure that ends the job; waits out workers that cannot reach
        a ps that is fine; re-runs a failed step's pieces in parts, to pin the error
        on one piece; then fails with it or, with on_error="skip", records it."""
        if not isinstance(error, failures.FILE_ERRORS) or self.ps.failed(error):
            if self._transient(error):
                return
            raise self._cluster_failure(error)
        if not step_failures:
            raise JobFailed("a map step failed: %s" % op_error_cause(error))
        changed = self.ps.read(self.changed_files.read)
        for ids, step_error in step_failures:
            if not isinstance(step_error, failures.FILE_ERRORS):
                raise self._cluster_failure(step_error)
            if len(ids) > 1:
                failed = {int(i) for i in ids}
                self._groups = [[i for i in group if i not in failed] for group in self._groups]
                self._groups.append(sorted(failed))
                continue
            piece = int(ids[0])
            if piece in changed:
                listed = self.files[self.pieces[piece].file]
                failure = failures.FileFailure(
                    listed.path, "changed since it was listed (%d bytes then, %d now)" % (listed.size, changed[piece])
                )
            else:
                failure = failures.file_failure(
                    op_error_cause(step_error), not_found=isinstance(step_error, tf.errors.NotFoundError)
                )
            why, path = failure.why, failure.path
            where = self._describe(piece)
            if self.options.on_error == "fail":
                raise JobFailed(
                    "a map step failed: %s: %s" % (where if path is None or where.startswith(path) else path, why)
                )
            self.skipped_pieces[piece] = why

    def _transient(self, error):
        """Whether `error` is workers failing to reach ps tasks that are, in fact, fine;
        if so, waits a little before the next round (and returns True) unless that has
        gone on for `ps_health.RETRY_BUDGET` s.

        Workers that outlived a ps keep their channel to it in gRPC's reconnect
        backoff for a while after it is restarted, and their steps fail fast meanwhile.
        ClusterCoordinator ignores a few such failures, then gives up.
        """
        if not isinstance(error, ps_health.CONNECTIVITY_ERRORS) or self.ps.down():
            return False
        try:
            self.ps.read(self.reducer.stats)  # this run's state is still on every ps: no ps was lost
        except tf.errors.OpError:
            return False
        now = time.monotonic()
        first = self._transient_since or now
        if now - first > ps_health.RETRY_BUDGET:
            return False
        self._transient_since = first
        self.log("workers cannot reach a ps yet (%s); retrying" % op_error_cause(error))
        self._wake.wait(min(TICK, self.options.progress_every) * 2)
        return True

    def _cluster_failure(self, error, when="during the job"):
        """The `ClusterError` (a ps failed) or `JobFailed` that `error` means, with how to resume."""
        if self._saved:
            how = "Restart it, then run the same command: the job resumes from %s (%d of %d files done)" % (
                self._saved[0],
                self._saved[1],
                len(self.files),
            )
        elif self.checkpoint:
            how = "Restart it, then run the same command: no checkpoint was saved yet, so the job starts over"
        else:
            how = "Restart it, then run the same command to start over (with {setting:checkpoint_dir}, a rerun resumes instead)"
        return self.ps.failure(error, how, when, self._saved)

    def _files_done_now(self):
        return int(_files_done(self.pieces, self.ps.read(self.reducer.done), len(self.files)).sum())

    def _save(self):
        files_done = self._files_done_now()
        path = self.ps.read(self.checkpoint.save)
        self._saved = (path, files_done)
        self.log("checkpoint saved: %d of %d files done (%s)" % (files_done, len(self.files), path))

    def _save_for_resume(self):
        """Saves a checkpoint if the run has a directory; returns a hint on resuming."""
        if not self.checkpoint:
            return " (without {setting:checkpoint_dir}, a rerun starts over)"
        try:
            self._save()
        except tf.errors.OpError as e:
            return "; saving a checkpoint failed (%s)" % op_error_cause(e)
        return "; checkpoint saved (%d of %d files done): the same command resumes from it" % (
            self._saved[1],
            len(self.files),
        )

    def _report(self):
        """Calls `on_progress` with the state on the ps now; returns the `reduce.Stats`."""
        stats = self.ps.read(self.reducer.stats)
        self.on_progress(
            Progress(
                self._files_done_now(),
                len(self.files),
                stats.bytes_done,
                self._total_bytes,
                stats.value,
                stats.distinct,
                time.monotonic() - self._start,
                len(self.skipped) + len(self.skipped_pieces),
                self.worker_steps.read(),
                self._rounds_rerun,
            )
        )
        return stats
