"""The coordinator's loop while a round of map steps runs: progress reports, checkpoints on
a timer, the watchdog of a run stalled by workers that are down, and requests to stop.
"""

import threading
import time
from dataclasses import dataclass

from tf2_mapreduce import storage
from tf2_mapreduce.errors import Cancelled, Interrupted
from tf2_mapreduce.run import stall

__all__ = ["Progress", "StopRequest", "RunLoop", "TICK", "JOIN_GRACE", "DRAIN_TIMEOUT"]

TICK = 1.0  # seconds between the loop's checks of workers, stop requests, checkpoints
JOIN_GRACE = 5.0  # seconds join() gets to return once every piece is committed
DRAIN_TIMEOUT = 30.0  # seconds a stopped run waits for its steps in flight to end


@dataclass(frozen=True)
class Progress:
    """A running job's figures, as reported every `progress_every` seconds."""

    files_done: int
    files_total: int
    bytes_done: int
    bytes_total: int
    value: object  # the job's value so far (`Reducer.value`): an int, a tuple for a vector sum...
    distinct: int | None  # keys so far for a per-key job, else None
    seconds: float  # since the run started
    files_skipped: int
    steps_per_worker: tuple  # map steps each worker ran, retries included
    rounds_rerun: int  # times the pieces left were scheduled again after a failed round
    storage: str | None = None  # while storage cannot be reached: what, for how long (else None)


class StopRequest:
    """A request that the run checkpoint and stop, made from any thread or a signal handler."""

    def __init__(self, wake: threading.Event):
        self.signum = None  # the signal that asked (0: a cancel), None while none did
        self._wake = wake

    def request(self, signum: int | None = None) -> None:
        """Non-blocking; safe in a signal handler."""
        self.signum = signum if signum is not None else 0
        self._wake.set()

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def error(self, why: str, checkpoint: str | None):
        """The error the stop raises: `Cancelled`, or `Interrupted` for a signal."""
        if self.signum == 0:
            return Cancelled("cancelled%s" % why, checkpoint)
        return Interrupted(self.signum, "stopped by signal %d%s" % (self.signum, why), checkpoint)


class RunLoop:
    """Watches the rounds of a run whose state is `state` (`run_state.RunState`): calls
    `on_progress` with a `Progress` every `options.progress_every` s (and when storage is
    waited for, `on_outage`), saves a checkpoint
    every `options.checkpoint_every` s, raises `ClusterError` for a stall (`stall`) and
    `Cancelled` / `Interrupted` once `stop` is requested, a checkpoint saved first."""

    def __init__(self, state, reducer, spec, heartbeats, options, on_progress, stop, wake, skipped=lambda: 0):
        self.skipped = skipped  # () -> inputs left out so far
        self.state = state
        self.reducer = reducer
        self.options = options
        self.reported = on_progress is not None
        self.on_progress = on_progress or (lambda progress: None)
        self.stop = stop
        self.wake = wake
        self.stall = stall.StallWatch(spec, heartbeats, options.worker_timeout)
        self.started = time.monotonic()
        self.rounds_rerun = 0
        self.outage = None  # what the next report says of storage that cannot be reached
        self._said = None  # (pieces done, inputs skipped, storage waited for) of the last report made

    def on_outage(self, path: str, cause: str, waited: float, left: float) -> None:
        """A `storage.Patience` waits for `path`'s storage: said in a progress report (logged
        where nobody takes the reports)."""
        if not self.reported:
            storage.log_wait(path, cause, waited, left)
        self.outage = "waiting for storage: %s (%s) for %.0fs, up to %.0fs more" % (path, cause, waited, left)
        self.report(self.skipped())

    def report(self, skipped: int, last: bool = False):
        """Calls `on_progress` with the state on the ps now (`skipped`: inputs left out so
        far); returns its `state.base.Figures`. Blocking. The `last` report of a run is
        not made where the one before it said the same (a piece commits with its value:
        the same pieces done, the same figures) and no storage waited for."""
        figures = self.state.figures()
        said, self._said = self._said, (figures.pieces_done, skipped, self.outage)
        if last and said == self._said and self.outage is None:
            return figures
        plan = self.state.plan
        self.on_progress(
            Progress(
                self.state.files_done(),
                len(plan.files),
                figures.bytes_done,
                plan.total_bytes,
                self.reducer.value(figures),
                figures.distinct,
                time.monotonic() - self.started,
                skipped,
                self.state.steps_per_worker(),
                self.rounds_rerun,
                self.outage,
            )
        )
        self.outage = None
        return figures

    def stopped(self, where: str = ""):
        """The error a requested stop raises; `where` it was noticed, or "" to save a
        checkpoint first and say how to resume."""
        hint = self.state.save_for_resume() if not where else ""
        resumes_from = self.state.resumes_from
        return self.stop.error(where + hint, resumes_from[0] if resumes_from else None)

    def watch(self, round_, skipped_pieces: int, skipped: int) -> bool:
        """Blocks while `round_` (`rounds.Round`) runs. Returns False when its join()
        returned, or True as soon as every piece not skipped is committed: a step still
        in flight on a worker cut off from the network (no connection reset, so TF waits
        for TCP to give up) can only commit nothing more."""
        pieces = len(self.state.plan.pieces) - skipped_pieces
        next_progress = time.monotonic() + self.options.progress_every
        next_checkpoint = time.monotonic() + self.options.checkpoint_every
        while not round_.finished:
            self.wake.wait(min(TICK, self.options.progress_every))
            self.wake.clear()
            if self.stop.requested:
                round_.stop()
                # Steps still queued fail at once rather than run: the round ends as soon
                # as those already running do (TF cancels the queue at a step's failure).
                self.state.stop_flag.set()
                round_.wait(DRAIN_TIMEOUT)
                raise self.stopped()
            now = time.monotonic()
            if now >= next_progress:
                figures = self.report(skipped)
                next_progress = now + self.options.progress_every
            else:
                figures = self.state.figures()
            if figures.pieces_done >= pieces:
                round_.wait(JOIN_GRACE)  # join() returns at once unless a step is stuck
                return True
            self._check_stall(figures.pieces_done)
            if self.state.checkpoint and now >= next_checkpoint:
                self.state.save()
                next_checkpoint = time.monotonic() + self.options.checkpoint_every
        return False

    def _check_stall(self, pieces_done):
        self.stall.raise_if_stalled(
            pieces_done,
            "no map step finished",
            "TF resumes only once every failed worker is back: restart them (a running job then continues), "
            "or run the same command once they are up",
            self.state.save_for_resume,
        )
