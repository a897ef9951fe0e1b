"""The ps tasks as a run sees them (`run.ps_health`): which are down (nothing accepts a
connection), reads retried while every ps answers and given up on when one is down, and
the error a lost ps means, naming it and saying how to resume."""

import socket

import pytest
import tensorflow as tf

from tf2_mapreduce.cluster.spec import ClusterSpec
from tf2_mapreduce.errors import ClusterError, JobFailed
from tf2_mapreduce.run import ps_health, run_state


@pytest.fixture
def listening():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield "127.0.0.1:%d" % s.getsockname()[1]


def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "127.0.0.1:%d" % s.getsockname()[1]


def spec(*ps):
    return ClusterSpec({"chief": ["h:1"], "ps": list(ps), "worker": ["h:3"]}, "chief", 0)


def test_a_ps_that_accepts_no_connection_is_down(listening):
    health = ps_health.PsHealth(spec(listening, closed_port()))
    assert list(health.down()) == [1] and "refused" in health.down()[1]


def test_reads_are_retried_while_every_ps_answers_and_not_when_one_is_down(listening, monkeypatch):
    monkeypatch.setattr(ps_health, "READ_RETRY", 0.01)
    failures = [tf.errors.UnavailableError(None, None, "connection reset")] * 3
    calls = []

    def flaky():
        calls.append(1)
        if failures:
            raise failures.pop()
        return "read"

    assert ps_health.PsHealth(spec(listening)).read(flaky) == "read" and len(calls) == 4
    with pytest.raises(tf.errors.UnavailableError):
        ps_health.PsHealth(spec(closed_port())).read(
            lambda: (_ for _ in ()).throw(tf.errors.UnavailableError(None, None, "x"))
        )
    stop = ClusterError("stopped")
    with pytest.raises(ClusterError, match="stopped"):
        ps_health.PsHealth(spec(listening), interrupted=lambda: stop).read(
            lambda: (_ for _ in ()).throw(tf.errors.CancelledError(None, None, "cancelled"))
        )


def test_the_error_of_a_lost_ps_names_it_and_how_to_resume(listening):
    down = closed_port()
    health = ps_health.PsHealth(spec(listening, down))
    error = health.failure(tf.errors.UnavailableError(None, None, "gone"), "Restart it.", saved=("ckpt-3", 12))
    assert isinstance(error, ClusterError)
    assert str(error).startswith("ps 1 at %s (connection refused) failed during the job" % down)
    assert str(error).endswith("Restart it.") and error.checkpoint == "ckpt-3" and error.files_done == 12
    assert error.failed_tasks == {("ps", 1): "connection refused"}
    fine = ps_health.PsHealth(spec(listening))
    other = fine.failure(tf.errors.InvalidArgumentError(None, None, "bad shape"), "unused")
    assert isinstance(other, JobFailed) and str(other) == "InvalidArgumentError: bad shape"


@pytest.mark.parametrize(
    "saved, looked, says",
    [
        (("gs://b/ckpt/ckpt-3", 7), True, "the job resumes from gs://b/ckpt/ckpt-3 (7 of 10 files done)"),
        (None, False, "it resumes from the newest checkpoint in gs://b/ckpt, if any"),
        (None, True, "no checkpoint of this run was saved yet, so the rerun starts it over"),
    ],
)
def test_the_resume_hint_says_what_a_rerun_resumes_from(saved, looked, says):
    assert says in run_state.how_to_resume("gs://b/ckpt", 10, saved, looked)
    assert "start over" in run_state.how_to_resume(None, 10, saved=None, looked=looked)
