"""The end-of-job signal from the coordinator to the ps and worker servers.

TF's gRPC servers cannot be stopped from outside. Instead each server blocks on a
queue of its own (a shared name on its own device); the coordinator enqueues into it.
"""

import tensorflow as tf

__all__ = ["request_exit", "wait_for_exit_request"]

CONTROL_QUEUE = "tf2_mapreduce_control"
JOB_OVER = 1


def _task_device(role, index):
    return "/job:%s/replica:0/task:%d" % (role, index)


def _queue(device):
    with tf.device(device + "/device:CPU:0"):
        # Unbounded, so that a coordinator never blocks on a server that keeps serving.
        return tf.raw_ops.FIFOQueueV2(
            component_types=[tf.int64], shapes=[[]], capacity=-1, shared_name=CONTROL_QUEUE
        )


def request_exit(cluster):
    """Tells every ps and worker of `cluster` that the job is over; workers first.

    Blocking; one small RPC a task. Needs this process's TensorFlow context to be
    connected to `cluster` (the coordinator's is). Returns {(role, index): reason}
    for the tasks that could not be told, such as tasks that are already gone.
    """
    failed = {}
    for role, index, _ in cluster.tasks(roles=("worker", "ps")):
        device = _task_device(role, index)
        try:
            with tf.device(device + "/device:CPU:0"):
                tf.raw_ops.QueueEnqueueV2(handle=_queue(device), components=[tf.constant(JOB_OVER, tf.int64)])
        except tf.errors.OpError as e:
            failed[role, index] = e.message.splitlines()[0]
    return failed


def wait_for_exit_request(server, role, index):
    """Blocks until a coordinator calls `request_exit` for task `role:index` of `server`."""
    device = _task_device(role, index)
    with tf.Graph().as_default():
        dequeue = tf.raw_ops.QueueDequeueV2(handle=_queue(device), component_types=[tf.int64])
        # Restricted to this task, or the session would first wait for every task
        # of the cluster (the coordinator included) to answer.
        config = tf.compat.v1.ConfigProto(device_filters=[device])
        with tf.compat.v1.Session(server.target, config=config) as session:
            session.run(dequeue)
