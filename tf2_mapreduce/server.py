"""A ps or worker task: `python -m tf2_mapreduce.server`, its role taken from TF_CONFIG
(or another source, see `cluster_sources`).

Runs a TensorFlow gRPC server set up for ParameterServerStrategy and, unlike a bare
`tf.distribute.Server`, exits with status 0 once a coordinator says the job is over.
"""

import os
import sys
import time

from absl import app, flags

from tf2_mapreduce import native, quiet
from tf2_mapreduce.cli import console
from tf2_mapreduce.cluster import orphans
from tf2_mapreduce.cluster import sources as cluster_sources
from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import ClusterError, Error, UsageError, op_error_cause

__all__ = ["serve"]

IDLE_EXIT = 4
EXIT_GRACE = 0.5  # seconds


def serve(cluster, keep_serving=False, idle_timeout=0, log=print):
    """Starts this task's server; blocks until a coordinator says the job is over.

    Returns the exit status: 0 when told the job is over, `IDLE_EXIT` when no
    coordinator was heard from for `idle_timeout` seconds (0: wait forever). With
    `keep_serving`, the end of a job is ignored and the server serves the next one.
    Raises `ClusterError` if the server cannot start (its port is taken, say).
    """
    import tensorflow as tf

    from tf2_mapreduce.cluster import channel as server_channel

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
    queue = server_channel.ControlQueue(server, role, index)
    newest = 0  # the id of the newest coordinator heard from
    while True:
        message = queue.next(timeout=idle_timeout)
        if message is None:
            log(
                "tf2_mapreduce server: %s %d: no coordinator for %gs (--idle_timeout), exiting"
                % (role, index, idle_timeout)
            )
            return IDLE_EXIT
        if message.kind != server_channel.JOB_OVER:
            newest = max(newest, message.coordinator)
            continue
        if message.coordinator < newest:
            # A coordinator that ended keeps telling tasks it could not reach for a
            # while; a newer one may be running its own job here meanwhile.
            log("tf2_mapreduce server: %s %d: ignoring the end of an earlier coordinator's job" % (role, index))
            continue
        if not keep_serving:
            log("tf2_mapreduce server: %s %d: the job is over, exiting" % (role, index))
            # Exiting at once would often cut off the reply to the coordinator
            # that sent the message, leaving it to wait for its deadline.
            time.sleep(EXIT_GRACE)
            return 0
        log("tf2_mapreduce server: %s %d: the job is over, serving the next (--keep_serving)" % (role, index))


FLAGS = flags.FLAGS
cluster_sources.define_flags(FLAGS)
flags.adopt_module_key_flags(cluster_sources)  # for --help: absl lists the main module's own
flags.DEFINE_bool("keep_serving", False, "Keep serving after a job ends, for the next coordinator.")
flags.DEFINE_float(
    "idle_timeout",
    900.0,
    "Exit with status 4 after this many seconds without a coordinator (none connected, or "
    "the last one died); 0 waits forever. Coordinators send heartbeats every second.",
)
flags.DEFINE_integer(
    "parent_pid", None, "Exit when the process with this pid dies (set by the local cluster launcher)."
)


def main(argv):
    console.show_log("tf2_mapreduce server: ")
    if len(argv) > 1:
        raise app.UsageError("unexpected arguments: %s" % " ".join(argv[1:]))
    try:
        if FLAGS.parent_pid:
            orphans.die_with_parent(FLAGS.parent_pid)
        for name, value in cluster_spec.TASK_ENV.items():  # before TensorFlow is imported
            os.environ.setdefault(name, value)
        cluster = cluster_sources.resolve(FLAGS, expect_roles=("ps", "worker"))
        if cluster is None:
            raise UsageError(
                "TF_CONFIG is not set: it must name this task (a ps or worker) and the cluster "
                "(or see --cluster_resolver)"
            )
        if FLAGS.idle_timeout and FLAGS.idle_timeout < 5:
            raise UsageError("--idle_timeout=%g: use 0 (never) or at least 5 seconds" % FLAGS.idle_timeout)
        native.mode()
        quiet.import_tensorflow(verbose=FLAGS["verbosity"].present)
        code = serve(
            cluster,
            keep_serving=FLAGS.keep_serving,
            idle_timeout=FLAGS.idle_timeout,
            log=lambda line: print(line, flush=True),
        )
    except Error as e:
        print("tf2_mapreduce server: error: %s" % e.cli_message(), file=sys.stderr, flush=True)
        sys.exit(e.exit_code)
    # TF's gRPC server has no working stop(); leave without waiting for its threads.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    app.run(main)
