"""One round of map steps: the pieces left cut into splits and scheduled with
ClusterCoordinator from a thread of its own, while the run loop keeps watching.
"""

import math
import threading
import time

import numpy as np
import tensorflow as tf

__all__ = ["Round", "STEPS_PER_WORKER", "MAX_PIECES_PER_STEP", "PARTS", "split_bytes"]

# ClusterCoordinator costs ~0.5 ms a closure (docs/runtime.md); more splits than this per
# worker buys no balance, fewer leaves a worker idle at the end.
STEPS_PER_WORKER = 8
# A step reads and maps its whole files in one op each, and commits its pieces in one
# write per ps: what a piece costs beyond its bytes is small, and a step costs several ms.
MAX_PIECES_PER_STEP = 4096
# A step that failed on a file runs in this many parts next: TF cancels a round's other
# steps at its first failure, so a round pins only one failed part, and a few parts a
# round cost fewer rounds than halves (log8 of the pieces, not log2).
PARTS = 8


def split_bytes(total_bytes, num_workers, split_size, steps_per_worker=STEPS_PER_WORKER):
    """Bytes per split: at most `split_size`, and small enough that every worker gets
    about `steps_per_worker` splits, so that none idles at the end."""
    return max(1, min(split_size, math.ceil(total_bytes / (steps_per_worker * num_workers))))


class Round:
    """Map steps over `pending` pieces of `plan` (`plan.Plan`), packed several to a step.
    The pieces of each of `groups` run in steps of their own, `PARTS` steps a group (a
    step that failed on a file: so that a failure is pinned on one piece in a few
    rounds; a piece committed on some ps tasks only: alone). A step of whole files
    holds at most `whole_split_size` bytes of them, since it reads them all at once.
    A step holds pieces of one kind only (`plan.kind`; `steps` maps a kind to its map
    step). Steps run at least once, as ClusterCoordinator runs them; the steps
    (`mapstep.build`) commit exactly once.

    `start()` is non-blocking: schedule() blocks while TF's queue is full and join()
    until every step ran, so both happen on a thread of the round's own, which sets
    `finished` (and `wake`) when join() returned or raised (`error`).
    """

    def __init__(
        self, coordinator, steps, plan, pending, groups, num_workers, split_size, whole_split_size, max_pieces, wake
    ):
        self.coordinator = coordinator
        self.steps = steps  # a kind of piece (`plan.Plan.kind`) -> its map step, made when first asked for
        self.wake = wake
        self.first_schedule = None  # time.monotonic() when the first step was scheduled
        self.error = None
        self.finished = False
        self._stopping = threading.Event()
        self._ended = threading.Event()
        self._scheduled = []  # (piece ids, RemoteValue) of every step scheduled
        pending = np.asarray(pending, dtype=np.int64)
        grouped = np.array([i for group in groups for i in group], dtype=np.int64)
        packed = pending[~np.isin(pending, grouped)] if len(grouped) else pending
        per_step = split_bytes(int(plan.sizes[packed].sum()), num_workers, split_size)
        batches = [(packed, per_step, max_pieces or MAX_PIECES_PER_STEP)]
        batches += [(group, split_size, math.ceil(len(group) / PARTS)) for group in groups]
        self._splits = []  # (kind, tf.data pipeline of splits)
        for ids, size, most in batches:
            for kind, chosen in plan.by_kind(ids).items():
                cap = min(size, whole_split_size) if kind[0] == "whole" else size
                self._splits.append((kind, plan.splits(chosen, cap, most)))

    def start(self):
        """Starts scheduling the round's steps on a thread of its own. Blocking only while
        each kind's step is traced, here: TensorFlow's tracing on two threads at once
        crashed the coordinator (a segfault in its op creation, seen in CI: the scheduling
        thread tracing a step while the run loop traced its first progress read), so the
        scheduling thread only ever finds its steps traced. A step that fails to trace (a
        map_fn's output its reducer cannot take) ends the round as a failed schedule does."""
        try:
            # In the strategy's scope, as schedule() traces: a function's traces are
            # cached per scope, and one made outside it was made again on that thread.
            with self.coordinator.strategy.scope():
                for kind, _ in self._splits:
                    self.steps[kind].get_concrete_function()
        except Exception as e:  # handed to the run loop
            self.error = e
            self._end()
            return
        threading.Thread(target=self._drive, name="tf2_mapreduce-schedule", daemon=True).start()

    def _end(self):
        self.finished = True
        self._ended.set()
        self.wake.set()

    def _drive(self):
        try:
            for kind, dataset in self._splits:
                step = self.steps[kind]
                for split in dataset:
                    if self._stopping.is_set():
                        break
                    self.first_schedule = self.first_schedule or time.monotonic()
                    self._scheduled.append((split[0].numpy(), self.coordinator.schedule(step, args=split)))
            self.coordinator.join()
        except Exception as e:  # handed to the run loop
            self.error = e
        finally:
            self._end()

    def wait(self, timeout: float) -> bool:
        """Whether the round has `finished`, waiting up to `timeout` s for it. Blocking."""
        return self._ended.wait(timeout)

    def stop(self):
        """Schedules no more steps; `finished` is set once those in flight have ended.
        Non-blocking. A round left scheduling would hand its steps, and its errors, to
        the join() of the next run on the same coordinator."""
        self._stopping.set()

    def step_failures(self):
        """[(piece ids, error)] of the steps that failed with an error of their own.
        Once `finished` with an error; non-blocking then, as join() waited for every
        step in flight."""
        failed = []
        for ids, remote_value in self._scheduled:
            try:
                remote_value.fetch()
            except tf.errors.CancelledError:
                pass
            except Exception as e:
                failed.append((ids, e))
        return failed
