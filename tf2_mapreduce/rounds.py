"""One round of map steps: the pieces left cut into splits and scheduled with
ClusterCoordinator from a thread of its own, while the run loop keeps watching.
"""

import threading
import time

import tensorflow as tf

from tf2_mapreduce import inputs as inputs_lib

__all__ = ["Round", "STEPS_PER_WORKER", "MAX_PIECES_PER_STEP"]

# ClusterCoordinator costs ~0.5 ms a closure (docs/runtime.md); more splits than this per
# worker buys no balance, fewer leaves a worker idle at the end.
STEPS_PER_WORKER = 8
MAX_PIECES_PER_STEP = 256


class Round:
    """Map steps over `pending` pieces: packed several to a step, or one per step for
    the pieces in `alone` (to pin a failure on one). Steps run at least once, as
    ClusterCoordinator runs them; the steps (`mapstep.build`, one for whole files,
    one for byte ranges) commit exactly once.

    `start()` is non-blocking: schedule() blocks while TF's queue is full and join()
    until every step ran, so both happen on a thread of the round's own, which sets
    `finished` (and `wake`) when join() returned or raised (`error`).
    """

    def __init__(self, coordinator, steps, files, pieces, pending, alone, num_workers, split_size, max_pieces, wake):
        self.coordinator = coordinator
        self.steps = steps  # whole files? -> the map step
        self.wake = wake
        self.first_schedule = None  # time.monotonic() when the first step was scheduled
        self.error = None
        self.finished = False
        self._scheduled = []  # (piece ids, RemoteValue) of every step scheduled
        packed = [i for i in pending if i not in alone]
        single = [i for i in pending if i in alone]
        per_step = inputs_lib.split_bytes(
            sum(pieces[i].size for i in packed), num_workers, split_size, STEPS_PER_WORKER
        )
        self._splits = []  # (whole files?, tf.data pipeline of splits)
        for ids, size, most in ((packed, per_step, max_pieces or MAX_PIECES_PER_STEP), (single, 1, 1)):
            for whole in (True, False):
                chosen = [i for i in ids if inputs_lib.whole_file(pieces[i], files) == whole]
                if chosen:
                    self._splits.append((whole, inputs_lib.splits(files, pieces, chosen, size, most)))

    def start(self):
        threading.Thread(target=self._drive, name="tf2_mapreduce-schedule", daemon=True).start()

    def _drive(self):
        try:
            for whole, dataset in self._splits:
                for split in dataset:
                    self.first_schedule = self.first_schedule or time.monotonic()
                    self._scheduled.append((split[0].numpy(), self.coordinator.schedule(self.steps[whole], args=split)))
            self.coordinator.join()
        except Exception as e:  # handed to the run loop
            self.error = e
        finally:
            self.finished = True
            self.wake.set()

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
