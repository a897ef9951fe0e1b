"""What a run does after a failed round (`run.recovery`), with fake ps tasks and state:
pieces committed on some ps tasks only run with their like; a step's failure on inputs is
run in parts, then skipped or failed as on_error says; a map output's fault and a lost
ps end the job; workers that cannot reach a ps that is fine are waited for; steps that
cannot reach their storage are waited for, never skipped, and stop the job past its patience."""

import threading
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

from tf2_mapreduce.cluster.spec import ClusterSpec
from tf2_mapreduce.errors import MAP_OUTPUT, ClusterError, JobFailed, MapOutputError
from tf2_mapreduce.run import failures, recovery
from tf2_mapreduce.storage import OUTAGE_EXIT, OUTAGE_MARK, Patience, StorageOutage

SPEC = ClusterSpec({"chief": ["h:1"], "ps": ["h:2", "h:3"], "worker": ["h:4"]}, "chief", 0)


class Ps:
    def __init__(self, down=None):
        self._down = down or {}

    def down(self):
        return self._down

    def failure(self, error, how, when, saved):
        return ClusterError("ps lost: %s. %s" % (error.message, how))


class State:
    def __init__(self, partial=None):
        self._partial = np.zeros(10, np.int64) if partial is None else np.asarray(partial)
        self.plan = SimpleNamespace(
            describe=lambda piece: "f%d.txt" % piece,
            file_of=lambda piece: SimpleNamespace(path="f%d.txt" % piece, size=5),
        )

    def partial(self):
        return self._partial

    def changed(self):
        return {}

    pieces_done = 0

    def figures(self):
        return SimpleNamespace(pieces_done=self.pieces_done)

    def how_to_resume(self):
        return "Restart it."

    def save_for_resume(self):
        return "; checkpoint saved"

    saved = None
    resumes_from = None


def make(on_error="fail", ps=None, state=None, retry_wait=0.0, patience=None):
    return recovery.Recovery(
        failures.FailurePolicy(on_error),
        ps or Ps(),
        state or State(),
        SPEC,
        threading.Event(),
        retry_wait,
        patience or Patience(),
    )


def unreadable(path):
    return tf.errors.NotFoundError(None, None, "%s; No such file or directory" % path)


def test_pieces_committed_on_some_ps_tasks_run_only_with_their_like():
    where = np.array([0, 1, 0, 2, 1, 0, 0, 0, 0, 0])
    run = make(state=State(where))
    run.groups = [[0, 1, 2, 9]]
    assert sorted(map(sorted, run.groups_for([0, 1, 2, 3, 4, 5]))) == [[0, 2], [1, 4], [3]]


def test_a_step_that_failed_on_inputs_is_run_in_parts_then_the_one_is_skipped_or_fails_the_job():
    skip = make("skip")
    error = unreadable("f3.txt")
    skip.after(error, [(np.array([1, 2, 3]), error)])
    assert skip.groups == [[1, 2, 3]] and skip.skipped == {}
    skip.after(error, [(np.array([3]), error)])
    assert skip.skipped == {3: "no such file or directory (it was there when the inputs were listed)"}
    fail = make("fail")
    with pytest.raises(JobFailed, match=r"a map step failed: f3.txt: no such file or directory"):
        fail.after(error, [(np.array([3]), error)])


def test_a_map_outputs_fault_fails_the_job_whatever_on_error_says():
    error = tf.errors.InvalidArgumentError(
        None, None, "assertion failed: [%sjob x: map_fn returned floats]" % MAP_OUTPUT
    )
    with pytest.raises(MapOutputError, match=r"^job x: map_fn returned floats$"):
        make("skip").after(error, [(np.array([0, 1]), error)])
    traced = MapOutputError("job x: map_fn returned float32 values")
    with pytest.raises(MapOutputError) as raised:
        make("skip").after(traced, [])
    assert raised.value is traced


def test_a_lost_ps_ends_the_job_and_a_ps_that_answers_is_waited_for():
    unavailable = tf.errors.UnavailableError(None, None, "connection refused")
    with pytest.raises(ClusterError, match=r"ps lost: connection refused\. Restart it\."):
        make(ps=Ps(down={1: "connection refused"})).after(unavailable, [])
    waiting = make()
    waiting.after(unavailable, [])  # every ps answers: retried, not an error
    assert waiting.skipped == {} and waiting.groups == []


def outage(path):
    return tf.errors.InternalError(
        None,
        None,
        "%sAll 10 retry attempts failed. The last failure: Error executing an HTTP request: HTTP response "
        "code 503 when reading %s\nAdditional GRPC error information from remote target /job:worker/replica:0/task:0"
        % (OUTAGE_MARK, path),
    )


@pytest.mark.parametrize("on_error", ["fail", "skip"])
def test_a_step_that_cannot_reach_its_storage_is_waited_for_and_never_skipped(on_error):
    waits = []
    run = make(on_error, patience=Patience(60, lambda *wait: waits.append(wait), first=0.01))
    error = outage("gs://b/f3.txt")
    run.after(error, [(np.array([3]), error)])
    # With another step's bad input in the same round: that one is decided, this one waited for.
    bad = unreadable("f1.txt")
    run.after(bad, [(np.array([3]), error), (np.array([1, 2]), bad)])
    assert run.skipped == {} and run.groups == [[1, 2]]
    assert [(path, cause) for path, cause, _, _ in waits] == [("gs://b/f3.txt", "HTTP 503")] * 2


def test_an_outage_past_the_patience_stops_with_a_checkpoint_and_its_own_exit():
    state = State()
    run = make("skip", state=state, patience=Patience(0.05, lambda *wait: None, first=0.01))
    error = outage("gs://b/f3.txt")
    run.after(error, [])
    state.pieces_done = 4  # a piece committed since: the outage is over, and its clock starts again
    run.after(error, [])
    run.after(error, [])
    with pytest.raises(StorageOutage) as raised:
        for _ in range(20):
            run.after(error, [])
    assert raised.value.exit_code == OUTAGE_EXIT
    assert str(raised.value).startswith("gs://b/f3.txt: storage could not be reached for 0s (HTTP 503)")
    assert str(raised.value).endswith("; checkpoint saved") and run.skipped == {}
