"""The watchdog of a stalled run (`run.stall`): a run that makes progress, or whose
workers all answer, is never stalled; no progress for the time-out while a worker is
down is, naming each worker down and whether it is every one. A worker that goes down or
comes back is said once."""

import logging

from tf2_mapreduce.cluster import heartbeats
from tf2_mapreduce.cluster.spec import ClusterSpec
from tf2_mapreduce.run import stall

SPEC = ClusterSpec({"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3", "h:4"]}, "chief", 0)


class Heartbeats:
    """Fake heartbeats: each worker silent for the seconds given."""

    def __init__(self, silent):
        self.silent = silent

    def silent_for(self, role, index):
        return self.silent.get(index, 0.0)

    def is_down(self, role, index):
        return self.silent.get(index, 0.0) > heartbeats.DOWN_AFTER

    def changes(self, role):
        return []

    def failing(self, role, index):
        return "connection refused" if self.silent.get(index, 0.0) else None


def watch(silent, timeout=0.0):
    return stall.StallWatch(SPEC, Heartbeats(silent), worker_timeout=timeout)


def test_progress_or_answering_workers_are_no_stall():
    watch_ = watch({0: 10.0}, timeout=60.0)
    assert watch_.check(1) is None and watch_.check(1) is None  # not for the time-out yet
    answering = watch({}, timeout=0.0)
    assert answering.check(5) is None and answering.check(5) is None
    moving = watch({0: 10.0, 1: 10.0}, timeout=0.0)
    assert moving.check(1) is None and moving.check(2) is None  # each count new: progress
    assert stall.StallWatch(SPEC, None, 0.0).check(3) is None and stall.StallWatch(SPEC, None, 0.0).check(3) is None


def test_no_progress_while_a_worker_is_down_is_a_stall_that_names_it():
    one = watch({1: 2 * heartbeats.DOWN_AFTER})
    assert one.check(7) is None
    message, everyone = one.check(7)
    assert not everyone
    assert "no map step finished for 0s ({setting:worker_timeout}) and 1 of 2 workers is down" in message
    assert "worker 1 at h:4 (connection refused)" in message
    both = watch({0: 9.0, 1: 9.0})
    both.check(3)
    message, everyone = both.check(3)
    assert everyone and "every worker is down: worker 0 at h:3" in message


def test_a_worker_down_then_back_is_said_once_each_whichever_run_watches(caplog):
    beats = heartbeats.Heartbeats(SPEC, 1)  # not entered: no heartbeat is sent
    silent = {0: 0.0, 1: 0.0}
    beats.silent_for = lambda role, index: silent[index]
    beats.failing = lambda role, index: "connection refused" if silent[index] else None
    first, second = (stall.StallWatch(SPEC, beats, 60.0) for _ in range(2))  # two passes on one cluster
    with caplog.at_level(logging.INFO, logger="tf2_mapreduce"):
        first.say_changes()
        beats.failing = lambda role, index: None
        silent[1] = heartbeats.DOWN_AFTER + 0.1
        first.say_changes()  # silent, its heartbeat not failed: this process was paused
        beats.failing = lambda role, index: "connection refused" if silent[index] else None
        first.say_changes()
        first.say_changes()
        second.say_changes()
        silent[1] = 0.5
        second.say_changes()
        first.say_changes()
    assert [str(record.msg) for record in caplog.records] == [
        "worker 1 at h:4 stopped answering (connection refused): the other workers run its steps meanwhile; "
        "restarted at that address, it is taken back once every worker lost is up again",
        "worker 1 at h:4 answers again",
    ]
    assert first.down_workers() == []
