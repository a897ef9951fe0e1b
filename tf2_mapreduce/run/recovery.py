"""What a run does after a round of map steps failed, as `failures.FailurePolicy` says:
wait out workers that cannot reach a ps that is fine, wait out storage that cannot be
reached, stop for the cluster, or run the failed steps' pieces in parts until one fails
alone, then fail the job or skip it."""

import time

import numpy as np
import tensorflow as tf

from tf2_mapreduce import log, storage
from tf2_mapreduce.errors import op_error_cause
from tf2_mapreduce.run import failures, ps_health

__all__ = ["Recovery"]


class Recovery:
    """A run's answers to its failed rounds, and what they leave for the next rounds:
    `groups` ([piece ids] that run in steps of their own) and `skipped` ({piece id: why},
    with on_error="skip"). `retry_wait`: seconds to wait before a retried round;
    `patience`: how long to wait out an outage of the inputs' storage (`storage.Patience`),
    each wait told to `patience.on_wait`."""

    def __init__(self, policy, ps, state, spec, wake, retry_wait, patience):
        self.policy = policy
        self.ps = ps
        self.state = state
        self.spec = spec
        self.wake = wake
        self.retry_wait = retry_wait
        self.patience = patience
        self.groups = []
        self.skipped = {}
        self._transient_since = None
        self._outage = None  # (storage.Outage, pieces done when it began) while steps meet an outage

    def groups_for(self, pending) -> list:
        """The groups of the next round over `pending` pieces. Pieces committed on some ps
        tasks only (a checkpoint copies each ps apart; a step cancelled mid-commit) run
        with the pieces done on the same ps tasks, and no others: packed with pieces done
        nowhere, a step would be refused as committed in part. Blocking."""
        where = self.state.partial()
        is_pending = np.zeros(len(where), dtype=bool)
        is_pending[pending] = True
        partial = np.flatnonzero((where != 0) & is_pending).tolist()
        partial_set = set(partial)
        groups = ([i for i in group if is_pending[i] and i not in partial_set] for group in self.groups)
        by_ps = {}
        for i in partial:
            by_ps.setdefault(int(where[i]), []).append(i)
        self.groups = [g for g in groups if g] + list(by_ps.values())
        return self.groups

    def after(self, error, step_failures) -> None:
        """Returns when the next round may run; raises the error that ends the job.
        `error`: what join() raised; `step_failures`: [(piece ids, error)] of the steps
        that failed with an error of their own."""
        # Down, not merely named: workers whose channel to a restarted ps is still in gRPC's
        # backoff name it in their errors while it answers (a retry, not a lost ps).
        kind = self.policy.round(error, self.ps.down())
        if kind == failures.RETRY and self._transient(error):
            return
        if kind == failures.OUTAGE:
            self._wait_out(error)
            return
        if kind == failures.MAP_OUTPUT_FAULT:
            raise self.policy.map_output_error(error)
        if kind == failures.OUTPUT_FAULT:
            raise failures.output_failure(str(error)) or self.cluster_failure(error)
        if kind == failures.MISSING_OP:
            workers = {index: address for _, index, address in self.spec.tasks(roles=("worker",))}
            raise self.policy.missing_op_error(error, workers, self.state.save_for_resume())
        if kind != failures.STEPS:
            raise self.cluster_failure(error)
        plan = self.state.plan
        decision = self.policy.steps(
            error,
            step_failures,
            self.state.changed(),
            plan.describe,
            lambda piece: (plan.file_of(piece).path, plan.file_of(piece).size),
        )
        if decision.cluster is not None:
            raise self.cluster_failure(decision.cluster)
        if decision.fail is not None:
            raise decision.fail
        for group in decision.regroup:
            self.groups = [[i for i in g if i not in group] for g in self.groups] + [group]
        self.skipped.update(decision.skip)
        if decision.outage is not None:
            self._wait_out(decision.outage)

    def _wait_out(self, error) -> None:
        """Waits before the next round, after steps could not reach their inputs' storage
        (`error`): from `patience.first` s, doubling, while no piece is committed; raises
        `StorageOutage` (a checkpoint saved) once that has gone on for `patience.timeout` s.
        The wait ends early for a stop request. Blocking."""
        done = self.state.figures().pieces_done
        if self._outage is None or done > self._outage[1]:
            self._outage = (storage.Outage(self.patience), done)
        path = storage.outage_path(error) or "an input"
        cause = storage.outage_cause(error) or op_error_cause(error)
        self.wake.wait(self._outage[0].next_wait(path, cause, self.state.save_for_resume))

    def _transient(self, error) -> bool:
        """Whether `error` is workers failing to reach ps tasks that are, in fact, fine;
        if so, waits a little before the next round, unless that has gone on for
        `ps_health.RETRY_BUDGET` s. Workers that outlived a ps keep their channel to it
        in gRPC's reconnect backoff for a while after it restarts (docs/runtime.md)."""
        if self.ps.down():
            return False
        try:
            self.state.figures()  # this run's state is still on every ps: no ps was lost
        except tf.errors.OpError:
            return False
        now = time.monotonic()
        self._transient_since = self._transient_since or now
        if now - self._transient_since > ps_health.RETRY_BUDGET:
            return False
        log.info("workers cannot reach a ps yet (%s); retrying" % op_error_cause(error))
        self.wake.wait(self.retry_wait)
        return True

    def cluster_failure(self, error, when="during the job"):
        """The `ClusterError` (a ps failed) or `JobFailed` that `error` means, with how to resume."""
        return self.ps.failure(error, self.state.how_to_resume(), when, self.state.resumes_from)
