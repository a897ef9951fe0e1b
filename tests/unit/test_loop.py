"""The coordinator's loop while a round runs (`run.loop`), with a fake round and state:
progress reported on its timer and once the pieces are done, a checkpoint on its timer,
a stop request stops the round and its queued steps and raises after a checkpoint, a
stall stops the run."""

import logging
import threading
import time
from types import SimpleNamespace

import pytest

from tf2_mapreduce.cluster.spec import ClusterSpec
from tf2_mapreduce.errors import Cancelled, ClusterError, Interrupted
from tf2_mapreduce.reducers import Sum
from tf2_mapreduce.run import loop
from tf2_mapreduce.run.options import Options
from tf2_mapreduce.state.base import Figures

SPEC = ClusterSpec({"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3"]}, "chief", 0)
PIECES = 4


class State:
    """A run's state: pieces done move on as `advance` says; saves are counted."""

    def __init__(self, checkpoint=True):
        self.done = 0
        self.checkpoint = object() if checkpoint else None
        self.saves = 0
        self.saved = None
        self.resumed = None
        self.plan = SimpleNamespace(pieces=[None] * PIECES, files=[None] * 2, total_bytes=40)
        self.stop_flag = SimpleNamespace(set=lambda: setattr(self, "stopping", True))
        self.stopping = False

    def figures(self):
        return Figures(self.done, 10 * self.done, 100 + self.done)

    def files_done(self):
        return self.done // 2

    def steps_per_worker(self):
        return (self.done,)

    def save(self):
        self.saves += 1
        self.saved = ("ckpt-%d" % self.saves, self.files_done())

    def save_for_resume(self):
        self.save()
        return "; checkpoint saved"

    @property
    def resumes_from(self):
        return self.saved or self.resumed


class Round:
    def __init__(self):
        self.finished = False
        self.stopped = threading.Event()

    def stop(self):
        self.stopped.set()

    def wait(self, timeout):
        return True


def run_loop(state, progress_every=0.05, checkpoint_every=30.0, worker_timeout=300.0, heartbeats=None):
    options = Options(progress_every=progress_every, checkpoint_every=checkpoint_every, worker_timeout=worker_timeout)
    wake = threading.Event()
    stop = loop.StopRequest(wake)
    reports = []
    return loop.RunLoop(state, Sum("words"), SPEC, heartbeats, options, reports.append, stop, wake), reports


def advancing(state, each=0.03):
    def advance():
        while state.done < PIECES:
            time.sleep(each)  # the pieces a fake round commits, one at a time
            state.done += 1

    threading.Thread(target=advance, daemon=True).start()


def test_progress_is_reported_and_the_round_ends_once_every_piece_is_done():
    state = State()
    run, reports = run_loop(state, progress_every=0.02, checkpoint_every=0.05)
    advancing(state)
    assert run.watch(Round(), skipped_pieces=0, skipped=1) is True
    assert reports and reports[-1].files_total == 2 and reports[-1].bytes_total == 40 and reports[-1].files_skipped == 1
    assert [p.value for p in reports] == sorted(p.value for p in reports) and reports[0].value >= 100
    assert state.saves >= 1
    last = run.report(skipped=0)
    assert last == Figures(PIECES, 10 * PIECES, 100 + PIECES)


def test_the_last_report_is_made_unless_the_one_before_said_the_same():
    state = State()
    run, reports = run_loop(state)
    run.report(skipped=0, last=True)  # none before it: made
    state.done = 1
    run.report(skipped=0)
    assert run.report(skipped=0, last=True) == Figures(1, 10, 101)
    assert [p.files_done for p in reports] == [0, 0]
    run.report(skipped=1, last=True)  # an input skipped since: made
    state.done = 2
    run.report(skipped=1, last=True)
    assert [(p.bytes_done, p.files_skipped) for p in reports] == [(0, 0), (10, 0), (10, 1), (20, 1)]
    run.report(skipped=1)  # not the last: said again whatever it says
    assert len(reports) == 5
    run.on_outage("gs://b/x", "503", 2.0, 58.0)  # reported at once, the wait said
    run.report(skipped=1, last=True)  # the same figures, but no longer waiting: made
    assert [p.storage is not None for p in reports[5:]] == [True, False]


def test_a_round_that_ends_by_itself_returns_false():
    state = State()
    run, _ = run_loop(state)
    round_ = Round()
    round_.finished = True
    assert run.watch(round_, 0, 0) is False


@pytest.mark.parametrize("signum, error", [(None, Cancelled), (15, Interrupted)])
def test_a_stop_request_stops_the_round_saves_a_checkpoint_and_raises(signum, error):
    state = State()
    run, _ = run_loop(state)
    round_ = Round()
    run.stop.request(signum)
    with pytest.raises(error) as raised:
        run.watch(round_, 0, 0)
    assert round_.stopped.is_set() and state.stopping and state.saves == 1 and raised.value.checkpoint == "ckpt-1"
    assert "checkpoint saved" in str(raised.value)


def test_a_stop_noticed_where_nothing_is_saved_names_the_checkpoint_a_rerun_resumes_from():
    state = State()
    state.resumed = ("ckpt-0", 1)  # this run resumed from it, and saved none since
    run, _ = run_loop(state)
    run.stop.request()
    error = run.stopped(" while a ps could not be read")
    assert isinstance(error, Cancelled) and error.checkpoint == "ckpt-0" and state.saves == 0


def test_no_progress_while_every_worker_is_down_stops_the_run_with_a_checkpoint(caplog):
    class Down:
        def is_down(self, role, index):
            return True

        said = False

        def changes(self, role):
            said, self.said = self.said, True
            return [] if said else [(0, "h:3", "connection refused"), (1, "h:4", "connection refused")]

        def failing(self, role, index):
            return "connection refused"

    state = State()
    run, _ = run_loop(state, progress_every=0.01, worker_timeout=0.01, heartbeats=Down())
    with caplog.at_level(logging.WARNING, logger="tf2_mapreduce"):
        with pytest.raises(
            ClusterError,
            match=r"every worker is down: worker 0 at h:3 \(connection refused\)\. Start the workers again",
        ):
            run.watch(Round(), 0, 0)
    assert state.saves == 1
    # Each said down before the stall that names it.
    assert [str(r.msg).split(":")[0] for r in caplog.records] == ["worker 0 at h", "worker 1 at h"]
    assert not [r for r in caplog.records if "other workers" in str(r.msg)]  # there are none to run its steps
