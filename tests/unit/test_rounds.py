"""One round of map steps (`run.rounds`), scheduled on a fake ClusterCoordinator: every
pending piece scheduled once, packed to the bytes and counts asked, a group in parts of
its own, whole files and ranges in steps of their kind; a stop schedules no more; the
steps' own errors are told apart from cancellations."""

import threading

import numpy as np
import pytest
import tensorflow as tf

from tf2_mapreduce.inputs.files import Files
from tf2_mapreduce.inputs.plan import Plan
from tf2_mapreduce.run import rounds


class Value:
    def __init__(self, error=None):
        self.error = error

    def fetch(self):
        if self.error:
            raise self.error


class Coordinator:
    """schedule() records each step's kind and piece ids; join() raises what it is told."""

    def __init__(self, errors=None, join_error=None, block=None):
        self.strategy = tf.distribute.get_strategy()  # its scope() is the one the round traces in
        self.scheduled = []
        self.errors = errors or {}
        self.join_error = join_error
        self.block = block

    def schedule(self, step, args):
        if self.block is not None:
            self.block.wait()
        ids = args[0].numpy().tolist()
        self.scheduled.append((step, ids, args[1].numpy().tolist()))
        return Value(self.errors.get(ids[0]))

    def join(self):
        if self.join_error:
            raise self.join_error


@pytest.fixture
def plan(tmp_path):
    paths, sizes = [], []
    for n in range(30):
        path = tmp_path / ("f%02d.txt" % n)
        size = 5000 if n == 29 else 100
        path.write_bytes(b"word " * (size // 5))
        paths.append(str(path))
        sizes.append(size)
    return Plan(Files(paths, sizes, [0] * len(paths)), 1000, "words")


class Step(tuple):
    """A kind of piece as its own map step, as the fake schedule records it; traced
    (`get_concrete_function`) on the thread that starts the round, never on the scheduling one."""

    traced_on = []

    def get_concrete_function(self):
        Step.traced_on.append(threading.current_thread())


class Steps(dict):
    """A kind of piece -> its map step (`Step`)."""

    def __missing__(self, kind):
        return Step(kind)


def run_round(coordinator, plan, pending, groups=(), split_size=64 << 20, whole=1 << 20, max_pieces=0):
    wake = threading.Event()
    round_ = rounds.Round(
        coordinator, Steps(), plan, pending, [list(g) for g in groups], 2, split_size, whole, max_pieces, wake
    )
    Step.traced_on.clear()
    round_.start()
    assert set(Step.traced_on) <= {threading.current_thread()}  # none on the scheduling thread
    assert round_.wait(30) and wake.is_set()
    return round_


def test_every_pending_piece_is_scheduled_once_in_steps_of_one_kind(plan):
    pending = np.arange(len(plan.pieces))
    coordinator = Coordinator()
    round_ = run_round(coordinator, plan, pending)
    scheduled = [i for _, ids, _ in coordinator.scheduled for i in ids]
    assert sorted(scheduled) == pending.tolist() and len(scheduled) == len(set(scheduled))
    for kind, ids, _ in coordinator.scheduled:
        assert {plan.kind(i) for i in ids} == {kind}
    assert round_.error is None and round_.step_failures() == [] and round_.first_schedule is not None
    # About STEPS_PER_WORKER steps a worker: none idles at the end.
    assert len(coordinator.scheduled) >= rounds.STEPS_PER_WORKER


def test_steps_are_packed_to_the_pieces_and_bytes_asked(plan):
    pending = np.arange(29)  # the small whole files
    coordinator = Coordinator()
    run_round(coordinator, plan, pending, max_pieces=4, whole=250)
    assert all(len(ids) <= 4 and plan.sizes[ids].sum() <= 250 for _, ids, _ in coordinator.scheduled)


def test_a_group_runs_in_parts_of_its_own(plan):
    group = list(range(16))
    coordinator = Coordinator()
    run_round(coordinator, plan, np.arange(29), groups=[group])
    in_group = [ids for _, ids, _ in coordinator.scheduled if set(ids) & set(group)]
    assert all(set(ids) <= set(group) for ids in in_group)
    assert len(in_group) == rounds.PARTS and sorted(i for ids in in_group for i in ids) == group


def test_a_stopped_round_schedules_no_more(plan):
    block = threading.Event()
    coordinator = Coordinator(block=block)
    wake = threading.Event()
    round_ = rounds.Round(coordinator, Steps(), plan, np.arange(29), [], 2, 64 << 20, 1 << 20, 1, wake)
    round_.start()
    round_.stop()
    block.set()
    assert round_.wait(30)
    assert len(coordinator.scheduled) <= 1


def test_a_steps_own_error_is_told_from_a_cancellation(plan):
    failed = tf.errors.DataLossError(None, None, "corrupt")
    cancelled = tf.errors.CancelledError(None, None, "cancelled")
    coordinator = Coordinator(errors={0: failed, 5: cancelled}, join_error=failed)
    round_ = run_round(coordinator, plan, np.arange(29), max_pieces=5)
    assert round_.error is failed
    assert [(ids[0], error) for ids, error in round_.step_failures()] == [(0, failed)]
