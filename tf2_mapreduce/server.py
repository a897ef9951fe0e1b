"""`python -m tf2_mapreduce.server`: a ps or worker task of a cluster, its role from
TF_CONFIG (or another source, `cluster.sources`). Its flags and `main`; the server is
`cluster.serve`. It exits with status 0 once a coordinator says the job is over."""

import os
import sys

from absl import app, flags

from tf2_mapreduce import native, quiet
from tf2_mapreduce.cli import cluster_flags, console, help
from tf2_mapreduce.cluster import orphans
from tf2_mapreduce.cluster import sources as cluster_sources
from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import Error, UsageError

__all__ = ["main", "PROGRAM"]

FLAGS = flags.FLAGS
cluster_flags.define(FLAGS)
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

PROGRAM = help.Program(
    prefix="tf2_mapreduce server: ",
    usage="python -m tf2_mapreduce.server [flags]",
    summary="Serves as a ps or worker task of a cluster (its role from TF_CONFIG or --cluster_resolver) until a "
    "coordinator says the job is over.",
    examples=(
        ('TF_CONFIG=\'{..."task": {"type": "ps", "index": 0}}\' python -m tf2_mapreduce.server', "a ps task"),
        ("python -m tf2_mapreduce.server --cluster_resolver=slurm --port=2222", "a task of a Slurm job step"),
    ),
    groups=(
        ("serving", ("keep_serving", "idle_timeout", "verbosity")),
        ("cluster", cluster_flags.NAMES),
    ),
    exits="0 a coordinator said the job is over, 2 bad TF_CONFIG or flags, 3 cannot serve, 4 idle for --idle_timeout",
)


def main(argv):
    console.show_log("tf2_mapreduce server: ")
    if FLAGS["verbosity"].present:
        quiet.show_tensorflow_logs()
    if len(argv) > 1:
        raise app.UsageError("unexpected arguments: %s" % " ".join(argv[1:]))
    try:
        if FLAGS.parent_pid:
            orphans.die_with_parent(FLAGS.parent_pid)
        for name, value in cluster_spec.TASK_ENV.items():  # before TensorFlow is imported
            os.environ.setdefault(name, value)
        cluster = cluster_sources.resolve(cluster_flags.source(FLAGS), expect_roles=("ps", "worker"))
        if cluster is None:
            raise UsageError(
                "TF_CONFIG is not set: it must name this task (a ps or worker) and the cluster "
                "(or see --cluster_resolver)"
            )
        if FLAGS.idle_timeout and FLAGS.idle_timeout < 5:
            raise UsageError("--idle_timeout=%g: use 0 (never) or at least 5 seconds" % FLAGS.idle_timeout)
        native.mode()
        quiet.import_tensorflow(verbose=FLAGS["verbosity"].present)
        from tf2_mapreduce.cluster.serve import serve

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


def run():
    """The program: its flags parsed (`cli.help`), then `main`."""
    app.run(main, argv=sys.argv, flags_parser=help.parse(PROGRAM, FLAGS))


if __name__ == "__main__":
    run()
