"""The watchdog of a job that makes no progress while workers are down: TensorFlow's
join() would wait for them forever.
"""

import time

from tf2_mapreduce import log
from tf2_mapreduce.errors import ClusterError

__all__ = ["StallWatch"]


class StallWatch:
    """Tells a stalled run from a slow one, by the pieces done and the workers'
    heartbeats (`cluster.heartbeats.Heartbeats`; None: never stalled)."""

    def __init__(self, cluster, heartbeats, worker_timeout):
        self.cluster = cluster
        self.heartbeats = heartbeats
        self.worker_timeout = worker_timeout
        self._progress = (-1, time.monotonic())  # (pieces done, when that count was first seen)

    def down_workers(self) -> list:
        """[(index, address)] of the workers down (`cluster.heartbeats.DOWN_AFTER`)."""
        return [
            (index, address)
            for _, index, address in self.cluster.tasks(roles=("worker",))
            if self.heartbeats.is_down("worker", index)
        ]

    def say_changes(self) -> None:
        """Says which workers went down, or answer again, since it was last said, in one line
        each (TensorFlow's record of a lost worker is cut to its first line:
        `quiet.hide_runtime_records`). Before a stall is checked: a worker that a stall names
        for a failed heartbeat was said down first (one that hangs is named for its silence,
        after 3 s; its heartbeat fails after `channel.SEND_TIMEOUT`). Non-blocking."""
        changes = self.heartbeats.changes("worker") if self.heartbeats else []
        if not changes:
            return
        others = (
            ": the other workers run its steps meanwhile" if len(self.down_workers()) < self.cluster.num_workers else ""
        )
        for index, address, cause in changes:
            if cause is None:
                log.info("worker %d at %s answers again" % (index, address))
                continue
            log.warning(
                "worker %d at %s stopped answering (%s)%s; restarted at that address, it is taken back once "
                "every worker lost is up again" % (index, address, cause, others)
            )

    def restart(self) -> None:
        """Counts progress from now, from none: for work other than the rounds' steps."""
        self._progress = (-1, time.monotonic())

    def check(self, pieces_done, doing: str = "no map step finished"):
        """None, or why the run stalled: (message, every worker down?) when no map step
        finished (`pieces_done` the same; `doing` says what did not) for `worker_timeout`
        s while a worker is down. Non-blocking.

        TF's join() waits forever for failed workers; and until every failed worker
        is back, ClusterCoordinator does not re-admit the restarted ones (it rebuilds
        the whole cluster's context), so a job can stall with a worker answering.
        Slow steps on workers that all answer are not a stall.
        """
        now = time.monotonic()
        if pieces_done != self._progress[0]:
            self._progress = (pieces_done, now)
            return None
        if not self.heartbeats or now - self._progress[1] <= self.worker_timeout:
            return None
        down = self.down_workers()
        if not down:
            return None
        detail = ", ".join(
            "worker %d at %s (%s)" % (index, address, self.heartbeats.failing("worker", index) or "no answer")
            for index, address in down
        )
        everyone = len(down) == self.cluster.num_workers
        if everyone:
            which = "every worker is down"
        else:
            verb = "is" if len(down) == 1 else "are"
            which = "%d of %d workers %s down" % (len(down), self.cluster.num_workers, verb)
        message = "%s for %gs ({setting:worker_timeout}) and %s: %s. " % (
            doing,
            self.worker_timeout,
            which,
            detail,
        )
        return message, everyone

    def raise_if_stalled(self, pieces_done, doing: str, some_down: str, resume=lambda: "") -> None:
        """Raises `ClusterError` where `check` finds a stall: what did not progress, which
        workers are down, and what to do: start them all again where every worker is
        down, else `some_down`; then `resume()` (what a resume will find, said once the
        run's state is saved). Non-blocking, but for `resume()`."""
        self.say_changes()
        stalled = self.check(pieces_done, doing)
        if stalled:
            message, everyone = stalled
            how = "Start the workers again, then run the same command" if everyone else some_down
            raise ClusterError(message + how + resume())
