"""Measures how long telling a local cluster of processes that the job is over takes
(docs/runtime.md, "A call whose task exits as it handles it gets no reply"): for each of
several fresh clusters, the seconds `channel.request_exit` took and whether every server
then exited 0 by itself; median, max, and the runs that lost a reply to the exit race.

    python scripts/measure_exit.py --runs 16
    PYTHONPATH=/tmp/old python scripts/measure_exit.py --runs 6   # an older checkout's code

A server exits as soon as it takes the coordinator's acknowledgement, and in some runs
(3 to 5 in 18 here) before that call's reply leaves it. Exit status 1 if any
telling waited out a session's timeout (`channel.SEND_TIMEOUT`), a task was not told, or
a server did not exit 0 within the time a coordinator gives local servers.
"""

import os
import statistics
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("runs", 16, "Clusters to start and tell.", lower_bound=1)
flags.DEFINE_integer("num_workers", 2, "Workers of each cluster (and one ps).", lower_bound=1)

START_TIMEOUT = 60  # seconds for a cluster's servers to accept connections


def tell_once():
    """Seconds the telling took, the tasks not told, and {task: status} of the servers
    that did not exit 0 by themselves."""
    from tf2_mapreduce.cluster import channel, chief, heartbeats, local
    from tf2_mapreduce.cluster import spec as cluster_spec

    spec = local.local_spec(1, FLAGS.num_workers)
    servers = local.ChildServers(spec)
    try:
        servers.start()
        cluster_spec.wait_for_tasks(spec, START_TIMEOUT, check=servers.check_alive)
        coordinator = channel.new_coordinator_id()
        # A coordinator's own heartbeats first: a server has a session of them open when told.
        with heartbeats.Heartbeats(spec, coordinator):
            pass
        started = time.monotonic()
        failed = channel.request_exit(spec, coordinator, gone_is_final=True)
        took = time.monotonic() - started
        return took, failed, servers.await_exit(chief.LOCAL_EXIT_TIMEOUT)
    finally:
        servers.close()


def main(argv):
    del argv
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # gRPC's retry warnings off stderr, as the CLI keeps them
    from tf2_mapreduce.cluster import channel

    # Checkouts before the acknowledgement's attempts have none: counted against the same 0.25 s.
    attempt = getattr(channel, "ACK_ATTEMPT", 0.25)
    took, bad = [], 0
    for run in range(FLAGS.runs):
        seconds, failed, not_zero = tell_once()
        took.append(seconds)
        bad += bool(failed or not_zero or seconds >= channel.SEND_TIMEOUT)
        print(
            "run %d: told in %.2f s; not told: %s; did not exit 0: %s"
            % (run, seconds, failed or "none", not_zero or "none")
        )
    slow = sum(seconds > attempt for seconds in took)
    print(
        "telling: median %.2f s, max %.2f s; %d of %d runs over one acknowledgement attempt (%g s), "
        "%d of %d wrong or over %g s"
        % (
            statistics.median(took),
            max(took),
            slow,
            len(took),
            attempt,
            bad,
            len(took),
            channel.SEND_TIMEOUT,
        )
    )
    return 1 if bad else 0


if __name__ == "__main__":
    app.run(main)
