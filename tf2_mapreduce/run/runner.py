"""Runs a job on a connected cluster, as named steps: plan its pieces, prepare this run's
state on the ps tasks, run rounds of map steps until every piece is committed or
skipped, and collect the exact result. No flags or printing here; `cli.py` is the CLI.
"""

import contextlib
import threading
import time
from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from tf2_mapreduce import native, storage
from tf2_mapreduce.errors import JobFailed
from tf2_mapreduce.inputs import formats
from tf2_mapreduce.inputs.files import Inputs
from tf2_mapreduce.inputs.plan import Plan
from tf2_mapreduce.outputs.result import Result
from tf2_mapreduce.outputs.sinks import sink_of
from tf2_mapreduce.run import failures, mapstep, ps_health, rounds
from tf2_mapreduce.run.loop import DRAIN_TIMEOUT, TICK, Progress, RunLoop, StopRequest
from tf2_mapreduce.run.on_workers import OnWorkers
from tf2_mapreduce.run.options import Options
from tf2_mapreduce.run.recovery import Recovery
from tf2_mapreduce.run.run_state import RunState, how_to_resume

__all__ = ["Prepared", "prepare", "Progress", "JobRun", "DRAIN_TIMEOUT"]


@dataclass(frozen=True)
class Prepared:
    """A job fit to its inputs and ready to run: what `prepare` makes, once."""

    job: object  # the `Job` to run (`Job.prepared` may have made a new one)
    found: Inputs
    options: Options

    def run(self, prepare, run_pass, claimed=None):
        """Runs the job, one pass: `run_pass(self)`, its `Result` (as `passes.PreparedPasses.run`)."""
        return run_pass(self)


def prepare(job, found, options=Options()) -> Prepared:
    """The one preparation of `job` for its inputs `found` (`inputs.files.Inputs`) and
    `options`, before anything runs: the inputs' formats checked against what the job
    reads (`formats.check`), a writing job's sink against the job and where it writes
    (`Sink.check_job`), and the job fit to them (`Job.prepared`: an untyped feature's
    type read from the first examples, say). Blocking; raises `UsageError` /
    `InputError` for inputs that do not fit the job."""
    formats.check(found.files, job.format, options.format, options.compression, native.unavailable())
    sink = sink_of(job.reducer)
    if sink is not None:
        sink.check_job(job, options.output_dir)
    return Prepared(job.prepared(found.files, options.compression), found, options)


class _MapSteps(dict):
    """A kind of piece -> its map step, built (and traced) only when a round first has
    pieces of that kind: tracing a step costs a fraction of a second."""

    def __init__(self, build):
        super().__init__()
        self._build = build

    def __missing__(self, kind):
        self[kind] = step = self._build(kind)
        return step


def _result(run, resumed, done, figures, collected, steps) -> Result:
    """The `Result` of `run` (a `JobRun`), once collected: reads nothing more."""
    finished = time.monotonic()
    skipped = [(run.plan.describe(i), why) for i, why in sorted(run.recovery.skipped.items())]
    return Result(
        job=run.job.name,
        total=collected.total,
        distinct=collected.distinct,
        files_done=int(run.plan.file_done(done).sum()),
        bytes_done=figures.bytes_done,
        per_file=collected.per_file,
        skipped=run.found.skipped + run.plan.skipped + skipped,
        resumed_from=resumed[0],
        files_resumed=resumed[1],
        seconds=finished - run.loop.started,
        map_seconds=finished - run.first_schedule if run.first_schedule else 0.0,
        steps_per_worker=steps,
        config=dict(run.job.config),
        hidden=list(run.found.hidden),
        duplicates=list(run.found.duplicates),
        _reducer=run.job.reducer,
        _state=run.state.values,
        _run=run,
    )


class JobRun:
    """One run of a `Prepared` job on a connected cluster (`spec`, `coordinator`); call
    `run()` once. Planned when made (blocking: reads a few bytes at each cut of a large
    file); a file that can no longer be read is an `InputError` (or skipped).

    Guarantees: every piece's result is committed exactly once (`slots`, `tables`)
    although map steps execute at least once; an input is either counted or, with
    on_error="skip", listed in `Result.skipped` with its reason, never dropped silently.
    With a checkpoint directory the run resumes where a previous run of the same job
    stopped, and saves its state every `checkpoint_every` s, when stopped, and at the end.
    A job whose output is written (`sink`: `outputs.sinks.Sink`) has its map steps write
    it into `options.output_dir` as they run, with the writer the sink opens for the run,
    and its result's files joined on the workers (`on_workers`) unless `busy()` (another
    job runs on the coordinator when the result is written).
    """

    def __init__(self, prepared, coordinator, spec, heartbeats=None, on_progress=None, busy=None):
        self.job, self.found, self.options = prepared.job, prepared.found, prepared.options
        options = self.options
        self.plan = Plan(self.found.files, options.read_size, self.job.format, options.on_error, options.compression)
        self.coordinator = coordinator
        self.spec = spec
        self._wake = threading.Event()
        self._stop = StopRequest(self._wake)
        self.ps = ps_health.PsHealth(spec, interrupted=self._stopped_while_waiting)
        try:
            self.state = RunState(self.job, self.plan, spec, self.ps, options.checkpoint_dir)
        except tf.errors.OpError as e:  # its state is made on the ps tasks: one lost since the last run
            resume = how_to_resume(options.checkpoint_dir, len(self.plan.files), looked=False)
            raise self.ps.failure(e, resume, "before the run started") from e
        self.loop = RunLoop(
            self.state,
            self.job.reducer,
            spec,
            heartbeats,
            options,
            on_progress,
            self._stop,
            self._wake,
            self._skipped_count,
        )
        # Waits for storage are said in the progress line as well as logged.
        self.patience = storage.Patience(options.storage_timeout, self.loop.on_outage)
        self.recovery = Recovery(
            failures.FailurePolicy(options.on_error), self.ps, self.state, spec, self._wake, 2 * TICK, self.patience
        )
        self.sink = sink_of(self.job.reducer)
        self.writer = None  # what the map steps write with, once the sink has initialized its write
        self.steps = _MapSteps(
            lambda kind: mapstep.build(self.job, self.state, *kind, options.read_size, writer=self.writer)
        )
        self._round = None  # the round running, or the last one
        self._on_workers = None  # what runs work on the workers after the rounds, once asked for
        self._busy = busy or (lambda: False)  # whether another job runs on the coordinator now
        self.first_schedule = None

    def run(self) -> Result:
        """Runs the job to its end; blocking. Returns its `Result`.

        Raises `JobFailed` (an input failed at read time with on_error="fail", or the
        result holds an input's fault, such as a feature of two types), `UsageError`
        (what the job was asked, the inputs cannot answer: `Job.finished`),
        `ClusterError` (a ps failed; no progress for `worker_timeout` s while
        workers were down) or `Interrupted` / `Cancelled` (after `request_stop`, if
        made before the result is read); each message says how to resume.
        """
        with storage.waiting(self.patience):
            return self._run()

    def _run(self) -> Result:
        self.loop.started = time.monotonic()
        try:
            resumed = self.state.prepare()
            if self.sink is not None:
                self.sink.initialize_write(self.options.output_dir, self.state.values, self.ps.read)
                self.writer = self.sink.open_writer(self.options.output_dir)
            done = self._map_until_done()
            if self._stop.requested:  # after the last round's watch: still a stop, not a result
                raise self.loop.stopped()
            figures = self.loop.report(self._skipped_count(), last=True)
            if self.state.checkpoint:
                self.state.save(last=True)
            collected = self.ps.read(lambda: self.job.reducer.collect(self.state.values, self.plan, done))
            steps = self.state.steps_per_worker()
        except tf.errors.OpError as e:
            raise self.recovery.cluster_failure(e) from e
        if collected.problems and self.options.on_error == "fail":
            raise JobFailed(collected.problems[0])
        self.job.finished(collected, self.found.files, self.options.compression)
        return _result(self, resumed, done, figures, collected, steps)

    def _map_until_done(self) -> np.ndarray:
        """Runs rounds of map steps over the pieces not done until each is committed or
        skipped; returns which pieces are committed."""
        done = self.state.done()
        while True:
            left = ~done
            left[list(self.recovery.skipped)] = False
            pending = np.flatnonzero(left)
            if not len(pending):
                return done
            error, step_failures = self._run_round(pending)
            done = self.state.done()
            if error is None:
                lost = pending[~done[pending]]
                if len(lost):  # join() returned, so every step ran: a piece without a value would be lost silently
                    raise JobFailed(
                        "%d piece(s) were never committed, first of %s" % (len(lost), self.plan.file_of(lost[0]).path)
                    )
                return done
            self.recovery.after(error, step_failures)
            self.loop.rounds_rerun += 1

    def _run_round(self, pending):
        """Runs a round over `pending` pieces while the loop watches; returns (None, []) if
        every step succeeded, else (the error join() raised, [(ids, error)] of the steps
        that failed with an error of their own)."""
        self._round = rounds.Round(
            self.coordinator,
            self.steps,
            self.plan,
            pending,
            self.recovery.groups_for(pending),
            self.spec.num_workers,
            self.options.split_size,
            mapstep.whole_files_bytes(self.options.read_size),
            self.options.max_pieces,
            self._wake,
        )
        self._round.start()
        complete = self.loop.watch(self._round, len(self.recovery.skipped), self._skipped_count())
        self.first_schedule = self.first_schedule or self._round.first_schedule
        if complete or self._round.error is None:
            return None, []
        return self._round.error, self._round.step_failures()

    def _skipped_count(self) -> int:
        return len(self.found.skipped) + len(self.plan.skipped) + len(self.recovery.skipped)

    def _stopped_while_waiting(self):
        """The error to raise if a stop was requested while a read waits for a ps, else None."""
        return self.loop.stopped(" while a ps could not be read") if self._stop.requested else None

    def request_stop(self, signum: int | None = None) -> None:
        """Asks the run to checkpoint and stop: `run()` then raises `Interrupted` (for
        signal `signum`) or `Cancelled` (None). Non-blocking; safe in a signal handler."""
        self._stop.request(signum)

    def drained(self, timeout: float) -> bool:
        """Whether this run's last round has ended (no step of it scheduled or in flight),
        and what it ran on the workers after it, waiting up to `timeout` s for each. Blocking."""
        rounds = self._round is None or self._round.wait(timeout)
        return rounds and (self._on_workers is None or self._on_workers.wait(timeout))

    @contextlib.contextmanager
    def reading_result(self):
        """Reads of the `Result` from the ps tasks go inside this: a ps failing then raises
        the `ClusterError` that says how to resume, as during the run, so servers are kept
        for the rerun. Not retried: a table is streamed to its reader only once."""
        try:
            yield
        except tf.errors.OpError as e:
            raise self.recovery.cluster_failure(e, "before the result was read") from e

    def on_workers(self) -> OnWorkers:
        """What runs work on this run's workers after its map steps (a sink's
        `finalize_write`), watched as its rounds are."""
        if self._on_workers is None:
            stall, stopped = self.loop.stall, self._stopped_while_writing
            self._on_workers = OnWorkers(self.coordinator, stall, stopped, self._queue_free)
        return self._on_workers

    def _queue_free(self) -> bool:
        """Whether work scheduled now would run at once: this run drained, and no other
        job's closures in TF's one queue. Read when the work starts."""
        return self.drained(0) and not self._busy()

    def _stopped_while_writing(self):
        return self.loop.stopped(" while its output was written") if self._stop.requested else None

    @property
    def released(self) -> bool:
        return self.state.released

    def release(self) -> None:
        """Frees this run's state on the ps tasks (`RunState.release`). Blocking. A ps
        lost raises the `ClusterError` that says how to resume, as during the run."""
        try:
            self.state.release()
        except tf.errors.OpError as e:
            raise self.recovery.cluster_failure(e, "after the run") from e
