"""What the coordinator's messages to the servers (`cluster.channel`) wait for, and leave
running once sent: no call's whole timeout on a task that is gone, and nothing an exiting
interpreter would not wait for. A daemon thread that comes back from TensorFlow's C++
after the interpreter began to finalize is ended by pthread_exit, which aborts the
process ("FATAL: exception not rethrown"). The servers are stood in for (a task told at
once, a heartbeat answered at once, a session whose calls say what the task did); no
real session is made."""

import threading
import types

import pytest
import tensorflow as tf

from tf2_mapreduce.cluster import channel, heartbeats
from tf2_mapreduce.cluster import spec as cluster_spec

# Nothing listens there: no test here connects.
SPEC = cluster_spec.ClusterSpec(
    {"chief": ["localhost:1"], "ps": ["localhost:2"], "worker": ["localhost:3", "localhost:4"]}, "chief", 0
)
ADDRESSES = ["localhost:2", "localhost:3", "localhost:4"]  # of the ps and workers
WAIT = 60  # seconds; a bound on waits for threads that answer at once


def named(prefix):
    return [thread for thread in threading.enumerate() if thread.name.startswith(prefix)]


def test_request_exit_returns_with_each_sessions_close_in_a_thread_an_exiting_interpreter_waits_for(monkeypatch):
    release = threading.Event()
    monkeypatch.setattr(channel, "_try_telling", lambda _channel, _message: None)  # every task answered
    monkeypatch.setattr(channel._Channel, "close", lambda _channel: release.wait(WAIT))
    try:
        assert channel.request_exit(SPEC, channel.new_coordinator_id()) == {}
        closing = named("tf2_mapreduce-close-")
        assert sorted(thread.name for thread in closing) == [
            "tf2_mapreduce-close-ps0",
            "tf2_mapreduce-close-worker0",
            "tf2_mapreduce-close-worker1",
        ]
        # The telling threads that start them are daemons, whose flag a thread inherits.
        assert not any(thread.daemon for thread in closing)
    finally:
        release.set()
    for thread in named("tf2_mapreduce-close-"):
        thread.join(WAIT)


def test_a_task_not_told_at_first_is_named_with_its_own_address_and_told_again(monkeypatch):
    tried = {}
    all_tried = threading.Barrier(len(ADDRESSES))  # every task's thread started: the loop over them is done

    def first_fails(task_channel, _message):
        tried[task_channel.address] = tried.get(task_channel.address, 0) + 1
        if tried[task_channel.address] > 1:
            return None
        all_tried.wait(WAIT)
        return ("busy", False)

    monkeypatch.setattr(channel, "_try_telling", first_fails)
    monkeypatch.setattr(channel._Channel, "close", lambda _channel: None)
    retried = []
    failed = channel.request_exit(
        SPEC, channel.new_coordinator_id(), within=WAIT, on_retry=lambda *args: retried.append(args)
    )
    assert failed == {}
    assert sorted(retried) == [
        ("ps", 0, "localhost:2", "busy"),
        ("worker", 0, "localhost:3", "busy"),
        ("worker", 1, "localhost:4", "busy"),
    ]
    assert tried == {address: 2 for address in ADDRESSES}


def test_leaving_heartbeats_waits_for_a_send_in_flight_then_closes_each_session_apart(monkeypatch):
    lock = threading.Lock()
    sending, closed = set(), []
    all_sending, leaving = threading.Event(), threading.Event()

    def send(self, message):
        with lock:
            sending.add(self.address)
            if sorted(sending) == ADDRESSES:
                all_sending.set()
        leaving.wait(WAIT)  # in flight while the heartbeats stop

    def close(self):
        with lock:
            closed.append(self.address)

    monkeypatch.setattr(channel._Channel, "send", send)
    monkeypatch.setattr(channel._Channel, "close", close)
    with heartbeats.Heartbeats(SPEC, channel.new_coordinator_id()):
        assert all_sending.wait(WAIT), sending
        leaving.set()
    assert named("tf2_mapreduce-heartbeat-") == []
    closing = named("tf2_mapreduce-close-heartbeat-")
    assert not any(thread.daemon for thread in closing)
    for thread in closing:
        thread.join(WAIT)
    assert sorted(closed) == ADDRESSES


class _Task:
    """Stands in for a told task's session and port: JOB_OVER is queued and answered at
    once; each ACK attempt has an outcome in turn, the last one repeated (None: queued and
    replied to; an error: no reply, which takes the attempt's whole timeout on `clock`).
    With `exits`, the task exits as it takes the first ACK, so its port refuses
    connections from then on."""

    def __init__(self, task, acks, exits):
        self.task = task
        self.acks = list(acks)
        self.exits = exits
        self.gone = False
        self.clock = 0.0
        self.ack_timeouts = []  # each ACK attempt's timeout in ms (None: the session's own)

    def run(self, fetch, feed=None, options=None):
        if fetch is self.task.answer:
            return 7
        if feed[self.task.kind] != channel.ACK:
            return None
        self.ack_timeouts.append(options.timeout_in_ms if options else None)
        self.gone = self.exits
        outcome = self.acks.pop(0) if len(self.acks) > 1 else self.acks[0]
        if outcome is not None:
            self.clock += options.timeout_in_ms / 1000 if options else channel.SEND_TIMEOUT
            raise outcome

    def probe(self, _address):
        return "connection refused" if self.gone else None

    def refuses(self, _address):
        return self.gone


def _no_reply():
    import tensorflow as tf

    return tf.errors.DeadlineExceededError(None, None, "the reply never came")


def _told(monkeypatch, acks, exits, timeout=channel.SEND_TIMEOUT):
    """Tells a stand-in task that coordinator 7's job is over: each ACK attempt's
    timeout in ms, and whether the session was kept for the close that runs apart."""
    task = channel._Channel("ps", 0, "localhost:2")
    stand_in = _Task(task, acks, exits)
    monkeypatch.setattr(cluster_spec, "probe", stand_in.probe)
    monkeypatch.setattr(cluster_spec, "refuses", stand_in.refuses)
    monkeypatch.setattr(channel, "time", types.SimpleNamespace(monotonic=lambda: stand_in.clock))
    monkeypatch.setattr(channel, "_session", lambda *_args: stand_in)
    task.tell(channel.Message(channel.JOB_OVER, 7), timeout=timeout)
    return stand_in.ack_timeouts, task.session is stand_in


FIRST = channel.ACK_ATTEMPT * 1000


def test_an_ack_whose_server_exited_before_replying_is_not_waited_on_past_one_short_attempt(monkeypatch):
    timeouts, kept = _told(monkeypatch, [_no_reply()], exits=True)
    assert timeouts == [FIRST]
    # Dropped here, the session would be closed here, which waits out its timeout on a
    # task that is gone: it is left to the close that runs apart.
    assert kept


def test_an_ack_to_a_slow_server_still_there_is_sent_again_each_attempt_twice_as_long(monkeypatch):
    timeouts, kept = _told(monkeypatch, [_no_reply(), _no_reply(), None], exits=False)
    assert timeouts == [FIRST, 2 * FIRST, 4 * FIRST]
    assert kept


def test_an_ack_to_a_server_that_never_takes_it_is_given_up_by_its_timeout(monkeypatch):
    # Four first attempts' worth: 0.25 s, 0.5 s, then what is left, 0.25 s.
    timeouts, kept = _told(monkeypatch, [_no_reply()], exits=False, timeout=4 * channel.ACK_ATTEMPT)
    assert timeouts == [FIRST, 2 * FIRST, FIRST]
    assert kept


def test_an_ack_answered_with_an_error_of_the_servers_own_is_not_sent_again(monkeypatch):
    import tensorflow as tf

    unknown = tf.errors.NotFoundError(None, None, "session not found: a server restarted since")
    timeouts, kept = _told(monkeypatch, [unknown], exits=False)
    assert timeouts == [FIRST]
    assert kept


def _refused(beat, monkeypatch):
    monkeypatch.setattr(cluster_spec, "probe", lambda _address: "connection refused")
    beat.send(channel.Message(channel.HEARTBEAT, 1))


def _send_failed(beat, monkeypatch):
    monkeypatch.setattr(cluster_spec, "probe", lambda _address: None)
    beat.session.run = lambda *args, **kwargs: (_ for _ in ()).throw(tf.errors.UnavailableError(None, None, "gone"))
    beat.send(channel.Message(channel.HEARTBEAT, 1))


def _no_answer(beat, monkeypatch):
    monkeypatch.setattr(cluster_spec, "probe", lambda _address: None)

    def run(fetch, *args, **kwargs):  # queued, then no answer within the timeout
        if fetch is beat.answer:
            raise tf.errors.DeadlineExceededError(None, None, "no answer")

    beat.session.run = run
    beat.tell(channel.Message(channel.JOB_OVER, 1))


@pytest.mark.parametrize("fails", [_refused, _send_failed, _no_answer])
def test_a_session_dropped_for_a_task_gone_mid_job_is_closed_apart_not_by_the_sender(monkeypatch, fails):
    # Dropped by the sender, the session was closed by its finalizer there and then: a
    # heartbeat to a killed worker waited out the close's whole timeout, and the
    # coordinator's exit with it.
    closed = []
    started, release = threading.Event(), threading.Event()

    def close():
        closed.append(threading.current_thread())
        started.set()
        release.wait(WAIT)

    beat = channel._Channel("worker", 0, "localhost:3")
    beat.session = types.SimpleNamespace(close=close)
    try:
        with pytest.raises((ConnectionError, tf.errors.OpError)):
            fails(beat, monkeypatch)
        assert beat.session is None
        (closing,) = named("tf2_mapreduce-close-session")
        assert closing is not threading.current_thread() and not closing.daemon
        assert started.wait(WAIT) and closed == [closing]
    finally:
        release.set()
    closing.join(WAIT)
