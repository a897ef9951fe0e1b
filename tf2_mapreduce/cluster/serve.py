"""A ps or worker task's server: a TensorFlow gRPC server set up for
ParameterServerStrategy that, unlike a bare `tf.distribute.Server`, returns once a
coordinator says the job is over (`python -m tf2_mapreduce.server` runs it)."""

import time

from tf2_mapreduce import native
from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import ClusterError, op_error_cause

__all__ = ["serve", "IDLE_EXIT"]

IDLE_EXIT = 4


def serve(cluster, keep_serving=False, idle_timeout=0, log=print):
    """Starts this task's server; blocks until a coordinator says the job is over and
    acknowledges the server's answer (or, gone, stays silent for `ACK_GRACE` s).

    Returns the exit status: 0 when told the job is over, `IDLE_EXIT` when no
    coordinator was heard from for `idle_timeout` seconds (0: wait forever). With
    `keep_serving`, the end of a job is ignored and the server serves the next one.
    Raises `ClusterError` if the server cannot start (its port is taken, say).
    """
    from tf2_mapreduce.cluster import channel as server_channel

    server = _start(cluster, log)
    queue = server_channel.ControlQueue(server, cluster.task_type, cluster.task_index)
    task = "%s %d" % (cluster.task_type, cluster.task_index)
    return _until_told(queue, task, keep_serving, idle_timeout, log)


def _start(cluster, log):
    """This task's server, started, its native ops loaded first. Raises `ClusterError`."""
    import tensorflow as tf

    role, index = cluster.task_type, cluster.task_index
    # Before serving: a map step that arrives must find the native ops registered. Said
    # either way, so that each task's log tells whether it has them.
    loaded = native.load() is not None
    log(
        "tf2_mapreduce server: %s %d: native ops %s"
        % (role, index, "loaded" if loaded else "not loaded (%s)" % native.unavailable())
    )
    try:
        server = tf.distribute.Server(
            tf.train.ClusterSpec(cluster.jobs),
            job_name=role,
            task_index=index,
            protocol="grpc",
            config=cluster_spec.server_config(cluster.num_workers),
            start=True,
        )
    except (tf.errors.OpError, ValueError) as e:
        cause = op_error_cause(e) if isinstance(e, tf.errors.OpError) else str(e)
        raise ClusterError("%s %d cannot serve on %s: %s" % (role, index, cluster.address, cause)) from None
    log("tf2_mapreduce server: %s %d serving on %s (cluster: %s)" % (role, index, cluster.address, cluster.describe()))
    return server


def _until_told(queue, task, keep_serving, idle_timeout, log):
    """Reads the coordinators' messages on `queue` until one says the job is over and
    acknowledges the answer (`serve`'s exit status), or none is heard for `idle_timeout` s."""
    from tf2_mapreduce.cluster import channel as server_channel

    newest = 0  # the id of the newest coordinator heard from
    ended = 0  # the id of the last coordinator whose end of job was heard
    acknowledge_by = None  # once told to exit: when to stop waiting for the ACK
    while True:
        if acknowledge_by is None:
            message = queue.next(timeout=idle_timeout)
        else:
            message = queue.next(timeout=max(acknowledge_by - time.monotonic(), 0.001))
        if message is None:
            if acknowledge_by is not None:
                log(
                    "tf2_mapreduce server: %s: the coordinator did not acknowledge the end of its job in %gs; exiting"
                    % (task, server_channel.ACK_GRACE)
                )
                return 0
            log("tf2_mapreduce server: %s: no coordinator for %gs (--idle_timeout), exiting" % (task, idle_timeout))
            return IDLE_EXIT
        if message.kind == server_channel.ACK:
            if acknowledge_by is not None and message.coordinator == ended:
                return 0
            continue
        if message.kind != server_channel.JOB_OVER:
            newest = max(newest, message.coordinator)
            continue
        # Answered each time it is heard: a coordinator tells again when it missed an answer.
        queue.answer(message)
        if message.coordinator < newest:
            # A coordinator that ended keeps telling tasks it could not reach for a
            # while; a newer one may be running its own job here meanwhile.
            log("tf2_mapreduce server: %s: ignoring the end of an earlier coordinator's job" % task)
            continue
        newest = message.coordinator
        if message.coordinator != ended:
            ended = message.coordinator
            log(
                "tf2_mapreduce server: %s: the job is over, %s"
                % (task, "serving the next (--keep_serving)" if keep_serving else "exiting")
            )
        if not keep_serving:
            acknowledge_by = time.monotonic() + server_channel.ACK_GRACE
