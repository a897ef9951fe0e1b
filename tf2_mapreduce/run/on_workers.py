"""Work a run hands the workers besides its map steps, each item at least once: a writing
job's shards joined where the pieces are (`outputs.sinks.shards`), in parallel.
"""

import threading

from tf2_mapreduce import log, storage
from tf2_mapreduce.errors import JobFailed
from tf2_mapreduce.run.failures import output_failure
from tf2_mapreduce.run.loop import DRAIN_TIMEOUT, TICK

__all__ = ["OnWorkers"]


class OnWorkers:
    """Runs a tf.function once for each of its arguments on the workers of a run's
    `coordinator`, watched as the run's rounds are: `stall` (`run.stall.StallWatch`) ends
    a wait for workers that are down, `stopped()` (the error of a stop asked for, or None)
    one the user ends. `free()` says whether TF's one queue of closures holds nothing else:
    no map step of the run in flight (a step stuck on a worker cut off from the network
    holds it, its join() waiting, and schedule() for that join, until TCP gives up), no
    other job running; else the work is done in this process."""

    def __init__(self, coordinator, stall, stopped, free):
        self.coordinator = coordinator
        self.stall = stall
        self.stopped = stopped
        self.free = free
        self._ended = threading.Event()
        self._ended.set()

    def each(self, function, arguments: list, path: str) -> list:
        """[function(*args) for args in `arguments`], each run on a worker at least once
        (ClusterCoordinator runs a closure again elsewhere when its worker fails), or on
        this process where the workers' queue is not `free`: the function must give the same
        result when run again. Blocking. Those that met an outage of the storage (the
        native ops' `storage.OUTAGE_MARK`) are run again, with the process's patience
        (`storage.retrying`, naming `path`), until it runs out (`StorageOutage`); an output
        that cannot be written (`errors.CANNOT_WRITE`) is an `OutputError`; any other error
        is raised as the first that failed raised it."""
        results = [None] * len(arguments)
        left = list(range(len(arguments)))
        here = not self.free()
        if here:
            log.info("the workers are busy with other steps: %d item(s) written by this process" % len(left))

        def attempt():
            error = (
                self._here(function, arguments, left, results)
                if here
                else self._there(function, arguments, left, results)
            )
            if error is not None:
                raise output_failure(getattr(error, "message", "")) or error
            if left:  # never without an error: another join() of the coordinator took it
                raise JobFailed("%d of %d item(s) of %s were never done" % (len(left), len(arguments), path))

        storage.retrying(attempt, path)
        return results

    @staticmethod
    def _here(function, arguments, left, results):
        """Runs the items `left` in this process, in order, until one fails: its error, or None."""
        for i in list(left):
            try:
                results[i] = function(*arguments[i]).numpy()
            except Exception as e:  # noqa: BLE001 - handed to the caller
                return e
            left.remove(i)
        return None

    def _there(self, function, arguments, left, results):
        """Runs the items `left` on the workers, scheduled and waited for on a thread while
        this one watches: the error of the first that failed, or None. Raises the stop's
        error, or `ClusterError` when none ended for the run's worker_timeout while a
        worker was down (TF's join() would wait for them forever)."""
        finished = [0]
        outcome = {}

        def run():
            try:
                with self.coordinator.strategy.scope():
                    scheduled = [(i, self.coordinator.schedule(function, args=arguments[i])) for i in left]
                for i, remote in scheduled:
                    try:
                        results[i] = remote.fetch()
                        left.remove(i)
                    except Exception:  # noqa: BLE001, S110 - join() raises the first error
                        pass
                    finished[0] += 1
                self.coordinator.join()
            except Exception as e:  # noqa: BLE001 - handed to the caller
                outcome["error"] = e
            finally:
                self._ended.set()

        self._ended.clear()
        self.stall.restart()
        threading.Thread(target=run, name="tf2_mapreduce-on-workers", daemon=True).start()
        while not self._ended.wait(TICK):
            stopped = self.stopped()
            if stopped is not None:
                self._ended.wait(DRAIN_TIMEOUT)  # what is in flight cannot be cancelled: its end is waited for
                raise stopped
            some_down = "Restart the workers that are down, then run the same command"
            self.stall.raise_if_stalled(finished[0], "nothing more was written", some_down)
        return outcome.get("error")

    def wait(self, timeout: float) -> bool:
        """Whether no item is in flight on a worker, waiting up to `timeout` s. Blocking."""
        return self._ended.wait(timeout)
