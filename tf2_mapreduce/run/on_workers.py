"""Work a run hands the workers besides its map steps, each item at least once: a writing
job's shards joined where the pieces are (`outputs.sinks.shards`), in parallel.
"""

import threading

from tf2_mapreduce import storage
from tf2_mapreduce.errors import ClusterError
from tf2_mapreduce.run.failures import output_failure
from tf2_mapreduce.run.loop import TICK

__all__ = ["OnWorkers"]


class OnWorkers:
    """Runs a tf.function on the workers of a run's `coordinator`, once for each of its
    arguments, watched as the run's rounds are: `stall` (`run.stall.StallWatch`) ends a
    wait for workers that are all down, `stopped()` (the error of a stop asked for, or
    None) one the user ends."""

    def __init__(self, coordinator, stall, stopped):
        self.coordinator = coordinator
        self.stall = stall
        self.stopped = stopped

    def each(self, function, arguments: list, path: str) -> list:
        """[function(*args) for args in `arguments`], each run on a worker at least once
        (ClusterCoordinator runs a closure again elsewhere when its worker fails): the
        function must give the same result when run again. Blocking. Those that met an
        outage of the storage (the native ops' `storage.OUTAGE_MARK`) are run again, with
        the process's patience (`storage.retrying`, naming `path`), until it runs out
        (`StorageOutage`); an output that cannot be written (`errors.CANNOT_WRITE`) is an
        `OutputError`; any other error is raised as the first that failed raised it."""
        results = [None] * len(arguments)
        left = list(range(len(arguments)))

        def attempt():
            with self.coordinator.strategy.scope():
                scheduled = [(i, self.coordinator.schedule(function, args=arguments[i])) for i in left]
            error = self._joined([remote for _, remote in scheduled])
            for i, remote in scheduled:
                try:
                    results[i] = remote.fetch()
                    left.remove(i)
                except Exception:  # noqa: BLE001, S110 - what failed is run again, or the error raised
                    pass
            if error is not None:
                raise output_failure(getattr(error, "message", "")) or error

        storage.retrying(attempt, path)
        return results

    def _joined(self, remotes):
        """Waits for `remotes` (what `schedule` returned) to be done; returns the error
        join() raised, or None. Raises `ClusterError` if none finished for the run's
        worker_timeout while a worker was down (TF's join() would wait for them forever)."""
        finished = [0]
        outcome = {}

        def wait():
            try:
                for remote in remotes:
                    try:
                        remote.fetch()
                    except Exception:  # noqa: BLE001, S110 - join() raises the first error
                        pass
                    finished[0] += 1
                self.coordinator.join()
            except Exception as e:  # noqa: BLE001 - handed to the caller
                outcome["error"] = e
            outcome["done"] = True

        thread = threading.Thread(target=wait, name="tf2_mapreduce-on-workers", daemon=True)
        thread.start()
        while "done" not in outcome:
            thread.join(TICK)
            stopped = self.stopped()
            if stopped is not None:
                raise stopped
            stalled = self.stall.check(finished[0])
            if stalled:
                raise ClusterError(stalled[0] + "Start the workers again, then run the same command")
        return outcome.get("error")
