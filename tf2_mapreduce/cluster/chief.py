"""This process as a cluster's chief: connected to its tasks (in bounded time: TensorFlow
can stall for minutes), their native ops checked, and every server told that the job is
over when it ends."""

import threading
import time

from tf2_mapreduce import log, native, quiet
from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import ClusterError, op_error_cause

__all__ = ["connect", "check_native", "tell_job_over", "wait_awake", "WAKE_FOR_SIGNALS", "LOCAL_EXIT_TIMEOUT"]

WAKE_FOR_SIGNALS = 0.1  # seconds between a waiting main thread's checks for signals
LOCAL_EXIT_TIMEOUT = 10.0  # seconds local servers get to exit by themselves once told


def wait_awake(done, wait, seconds=None) -> bool:
    """Waits until `done()`, at most `seconds` (None: as long as it takes), calling
    `wait(s)` (which blocks up to s) in slices; returns `done()`. In slices: a signal the
    kernel hands to another thread (one of TensorFlow's) runs its Python handler only
    once the main thread wakes, so a SIGTERM would otherwise wait for the end."""
    deadline = None if seconds is None else time.monotonic() + seconds
    while not done():
        left = WAKE_FOR_SIGNALS if deadline is None else deadline - time.monotonic()
        if left <= 0:
            return False
        wait(min(left, WAKE_FOR_SIGNALS))
    return True


def _within(seconds, connect):
    """`connect()`, or a `ClusterError` after `seconds`: TensorFlow can stall for minutes
    creating the strategy when a task dies mid-connect (docs/runtime.md), and offers no
    way to cancel, so the attempt is left behind in its thread."""
    outcome = {}

    def attempt():
        try:
            outcome["value"] = connect()
        except BaseException as e:  # handed to the caller
            outcome["error"] = e

    thread = threading.Thread(target=attempt, name="tf2_mapreduce-connect", daemon=True)
    thread.start()
    if not wait_awake(lambda: not thread.is_alive(), thread.join, seconds):
        raise ClusterError(
            "connecting to the cluster took over %gs; check that every task of the cluster is up" % seconds
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def connect(spec, servers, timeout, verbose):
    """Connects this process to the cluster of `spec` as its chief; returns the
    ClusterCoordinator. Blocking: waits for every ps and worker to accept connections
    (servers of a cluster but this process's: local `servers` in it need not), then
    connects, each for at most `timeout` s."""
    tf = quiet.import_tensorflow(verbose)
    if servers is None or not servers.in_process:
        cluster_spec.wait_for_tasks(spec, timeout, check=servers.check_alive if servers else None)
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(spec.jobs), task_type="chief", task_id=0, rpc_layer="grpc"
    )
    return _within(timeout, lambda: _coordinator(tf, resolver, spec.devices()))


def _coordinator(tf, cluster_resolver, task_devices):
    """A ClusterCoordinator of the cluster, this process its chief. Blocking. Strategy
    creation is lazy, so one tiny op then runs on each of `task_devices`, to surface a
    broken connection here rather than mid-job."""
    chief = cluster_resolver.cluster_spec().task_address("chief", 0)
    try:
        strategy = tf.distribute.experimental.ParameterServerStrategy(cluster_resolver)
    except tf.errors.OpError as e:
        # TF's only word for a chief port that is taken is "Could not start gRPC server".
        raise ClusterError(
            "the coordinator cannot serve as chief on %s: %s (is the port in use?)" % (chief, op_error_cause(e))
        ) from None
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    for device in task_devices:
        try:
            with tf.device(device):
                tf.zeros([]).numpy()
        except tf.errors.OpError as e:
            raise ClusterError("%s does not answer: %s" % (device, op_error_cause(e))) from None
    return coordinator


def check_native(spec):
    """Map steps are traced here, with the native ops if this process has them, and
    per-key tables are made from here: a worker without them could run no map step, a
    ps no table. With TF2_MAPREDUCE_NATIVE=require that is a `ClusterError`; else every
    job goes without them, said once. Blocking."""

    if native.load() is None:
        return
    for role, index, address in spec.tasks(roles=("worker", "ps")):
        if native.missing_on(cluster_spec.device(role, index)) is None:
            continue
        where = "%s %d at %s has not loaded them (see its log)" % (role, index, address)
        if native.mode() == "require":
            raise ClusterError("%s=require, but %s" % (native.ENV, where))
        native.disable(where)
        log.warning("jobs go without tf2_mapreduce's native ops: %s. So %s" % (where, native.WEAKER))
        return


def tell_job_over(spec, coordinator_id, servers, shutdown_timeout):
    """Tells every server of `spec` that the job is over, trying for `shutdown_timeout` s;
    local `servers` are not tried again once gone (children cannot come back) and get a
    moment to exit. Blocking."""
    from tf2_mapreduce.cluster import channel as server_channel

    def on_retry(role, index, address, why):
        log.info(
            "could not tell %s %d at %s that the job is over yet (%s); trying for up to %gs ({setting:shutdown_timeout})"
            % (role, index, address, why, shutdown_timeout)
        )

    local = servers is not None
    failed = server_channel.request_exit(
        spec, coordinator_id, within=shutdown_timeout, on_retry=on_retry, gone_is_final=local
    )
    for (role, index), why in sorted(failed.items()):
        log.warning(
            "could not tell %s %d that the job is over: %s; it exits after its {setting:idle_timeout} "
            "(within %gs if it heard)" % (role, index, why, server_channel.ACK_GRACE)
        )
    if local:
        for (role, index), (code, tail) in sorted(servers.await_exit(LOCAL_EXIT_TIMEOUT).items()):
            status = "did not exit" if code is None else "exited with status %d" % code
            log.warning("local %s %d %s: %s" % (role, index, status, tail))
