"""The coordinator: `python -m tf2_mapreduce.coordinator`, TensorFlow's `chief` task.

On a configured cluster (TF_CONFIG, or see `sources`) it runs the job there; without
one, it starts a local cluster first, in a private network. Prints progress to stderr
and the result to stdout.
Modules that import TensorFlow are imported inside functions, after the local
servers were started, so that they boot while TensorFlow loads here.
"""

import contextlib
import os
import signal
import sys
import threading
import time
import traceback

from absl import app, flags
from absl import logging as absl_logging

from tf2_mapreduce import cluster as cluster_lib
from tf2_mapreduce import netns, quiet, sources
from tf2_mapreduce.errors import ClusterError, Error, Interrupted, UsageError, op_error_cause

__all__ = ["main"]

FLAGS = flags.FLAGS
flags.DEFINE_multi_string(
    "input",
    None,
    "Input to process; repeat for several. A file, a directory (walked recursively; "
    "names starting with '.' or '_' skipped), a glob pattern, or @list.txt (a file of "
    "paths, one a line). Any tf.io.gfile path (gs://...) works. Positional arguments "
    "are inputs too. Default: the sample corpus shipped with the package.",
)
flags.DEFINE_string(
    "job",
    "wordcount",
    "The job to run. Built in: wordcount (total words), wordfreq (count of every distinct word), "
    "linecount, wc (lines, words, bytes), longestline (bytes in the longest line), grep (lines matching --pattern). Or your own: "
    "package.module:ATTRIBUTE naming a tf2_mapreduce.jobs.Job.",
)
flags.DEFINE_string("pattern", None, "For --job=grep: an RE2 regular expression that whole lines must match.")
flags.DEFINE_integer(
    "top_k", 20, "For per-key jobs (wordfreq): how many of the most frequent keys to print.", lower_bound=0
)
flags.DEFINE_integer("min_count", 1, "For per-key jobs: leave keys counted fewer times out of --output.", lower_bound=1)
flags.DEFINE_integer("num_ps", 1, "ps tasks of the local cluster (when no cluster is configured).", lower_bound=1)
flags.DEFINE_integer(
    "num_workers", 2, "Worker tasks of the local cluster (when no cluster is configured).", lower_bound=1
)
flags.DEFINE_enum(
    "local_cluster",
    "inprocess",
    ["inprocess", "processes"],
    "Without a configured cluster: run the local ps and workers as servers inside this process "
    "(one TensorFlow import instead of one per task: seconds faster to start), or as child "
    "processes, each task apart as on a real cluster (a killed worker is then survived).",
)
flags.DEFINE_bool(
    "private_network",
    True,
    "Run the local cluster in a private network namespace of its own (Linux: needs root or "
    "unprivileged user namespaces), since TF's servers accept work from anyone who reaches "
    "their ports. Not possible when inputs or outputs are on a network filesystem (gs://...).",
)
flags.DEFINE_string(
    "output",
    None,
    "Write the result to this path (any tf.io.gfile path): JSON for sums; for per-key jobs the "
    "whole table, sorted, as TSV (word<TAB>count), or JSON if the name ends in .json.",
)
flags.DEFINE_string(
    "logdir",
    None,
    "Write TensorBoard summaries of the job's progress here (any tf.io.gfile path), at every "
    "progress report: bytes/s, words/s (or the job's unit), files done, map steps per worker, "
    "re-run rounds. Watch with: tensorboard --logdir DIR.",
)
flags.DEFINE_float("progress_every", 2.0, "Seconds between progress lines on stderr.", lower_bound=0.1)
flags.DEFINE_float(
    "connect_timeout", 60.0, "Seconds to wait for every ps and worker to answer before giving up.", lower_bound=0.1
)
flags.DEFINE_integer(
    "split_size",
    64 << 20,
    "Bytes per scheduled map step at most: a larger file is cut into several splits (read by all "
    "workers at once), small files are packed together.",
    lower_bound=1,
)
flags.DEFINE_integer(
    "read_size",
    8 << 20,
    "Files are cut into pieces of about this many bytes, at word (or line) starts, and a worker "
    "reads and maps a piece at a time: this bounds a worker's memory.",
    lower_bound=1,
)
flags.DEFINE_integer(
    "files_per_step", 0, "Pieces (files, or parts of large ones) per map step at most; 0: automatic.", lower_bound=0
)
flags.DEFINE_enum(
    "on_error",
    "fail",
    ["fail", "skip"],
    "An input that cannot be read: 'fail' stops the job with an error naming it; 'skip' leaves it "
    "out and lists it, with its reason, in the summary and in --output.",
)
flags.DEFINE_string(
    "checkpoint_dir",
    None,
    "Save the job's state here (any tf.io.gfile path) and resume from it: rerunning the same "
    "command after a failure redoes only the files not yet done.",
)
flags.DEFINE_float(
    "checkpoint_every", 30.0, "Seconds between checkpoints (also saved when stopped and at the end).", lower_bound=0.1
)
flags.DEFINE_float(
    "worker_timeout",
    300.0,
    "Stop with an error (and a checkpoint) when no map step has finished for this many seconds "
    "while a worker is down; TF itself would wait forever for it to come back.",
    lower_bound=1.0,
)
flags.DEFINE_bool(
    "keep_serving", False, "Leave the cluster's servers running when the job ends (configured clusters only)."
)
flags.DEFINE_float(
    "shutdown_timeout",
    30.0,
    "When the job ends: seconds to keep trying to tell a ps or worker that did not answer (restarting, "
    "its link down) that the job is over, so that it exits with status 0 rather than after its "
    "--idle_timeout. Only a server that does not answer delays the coordinator's exit.",
    lower_bound=0.0,
)


def _say(line):
    print("tf2_mapreduce: " + line, file=sys.stderr, flush=True)


def _human_bytes(n):
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1000 or unit == "TB":
            return ("%d %s" if unit == "B" else "%.1f %s") % (n, unit)
        n /= 1000.0


def _steps_summary(steps):
    if len(steps) <= 8:
        return " ".join(str(n) for n in steps)
    ordered = sorted(steps)
    return "min %d, median %d, max %d" % (ordered[0], ordered[len(ordered) // 2], ordered[-1])


def _amount(job, value, distinct=None):
    """A value in words: "901 words", "12 lines, 901 words, 4997 bytes", "901 words (450 distinct)"."""
    return job.reducer.describe(value, distinct)


def _progress_line(job, p):
    rate = p.bytes_done / p.seconds if p.seconds > 0 else 0.0
    eta = "%.0fs" % ((p.bytes_total - p.bytes_done) / rate) if rate > 0 else "--"
    percent = 100.0 * p.files_done / p.files_total
    skipped = ", %d skipped" % p.files_skipped if p.files_skipped else ""
    return "[%6.1fs] %d/%d files (%.0f%%)%s, %s of %s, %s so far, %s/s, ETA %s, steps by worker: %s" % (
        p.seconds,
        p.files_done,
        p.files_total,
        percent,
        skipped,
        _human_bytes(p.bytes_done),
        _human_bytes(p.bytes_total),
        _amount(job, p.value, p.distinct),
        _human_bytes(rate),
        eta,
        _steps_summary(p.steps_per_worker),
    )


def _print_result(result, found):
    """The summary on stdout: the total, the top keys of a per-key job, what was skipped."""
    from tf2_mapreduce import output

    job = result.job
    print(
        "%s: %s in %d files (%d bytes), %.2f s"
        % (
            job.name,
            _amount(job, result.total, result.stats.distinct),
            result.files_done,
            result.total_bytes,
            result.seconds,
        )
    )
    if job.reducer.keyed and FLAGS.top_k:
        top = result.reducer.top(FLAGS.top_k, FLAGS.min_count)
        print("top %d %s (count, %s; non-printable bytes as \\xHH):" % (len(top), job.reducer.unit, job.reducer.unit))
        for key, count in top:
            print("%12d  %s" % (count, output.escape(key)))
    skipped = list(found.skipped) + result.skipped
    if skipped:
        print("%d input(s) skipped (--on_error=skip):" % len(skipped))
        for path, reason in skipped:
            print("  %s: %s" % (path, reason))
    sys.stdout.flush()


def _connect_within(seconds, resolver, task_devices, on_timeout):
    """Connects as chief; a stalled connect ends the process with a `ClusterError`.

    TF can stall for minutes creating the strategy when a task dies mid-connect
    (docs/runtime.md) and offers no way to cancel, so a timer ends the process instead.
    """
    from tf2_mapreduce import runner

    def expire():
        on_timeout()
        _say("error: connecting to the cluster took over %gs; check that every task of the cluster is up" % seconds)
        os._exit(ClusterError.exit_code)

    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()
    try:
        return runner.connect(resolver, task_devices)
    finally:
        timer.cancel()


def _run(specs, cluster, local, stop_requests, started, in_process):
    """Everything after the cluster is chosen; returns the process exit status."""
    # Imported here, after the local servers were started: they boot meanwhile.
    tf = quiet.import_tensorflow(verbose=FLAGS["verbosity"].present)

    from tf2_mapreduce import control, inputs, jobs, output, runner

    job = jobs.resolve(FLAGS.job, FLAGS.pattern)
    if FLAGS.output:
        output.check_path(FLAGS.output, job)
    if not specs:
        specs = [inputs.sample_corpus()]
        _say("no --input given: using the sample corpus in %s" % specs[0])
    found = inputs.expand(specs, on_error=FLAGS.on_error)
    if found.hidden:
        _say(
            "note: skipped %d hidden name(s) such as %s (names starting with '.' or '_'; "
            "name them explicitly to include them)" % (len(found.hidden), found.hidden[0])
        )
    if found.duplicates:
        _say(
            "note: %d path(s) were given more than once and are counted once, such as %s"
            % (len(found.duplicates), found.duplicates[0])
        )
    for path, reason in found.skipped:
        _say("skipping %s: %s" % (path, reason))
    _say(
        "%s over %d files (%s) on %s%s"
        % (job.name, len(found.files), _human_bytes(found.total_bytes), cluster.describe(), " (local)" if local else "")
    )
    if not in_process:
        cluster_lib.wait_for_tasks(cluster, FLAGS.connect_timeout, check=local.check_alive if local else None)
    devices = ["/job:%s/replica:0/task:%d/device:CPU:0" % (role, index) for role, index, _ in cluster.tasks()]
    coordinator = _connect_within(
        FLAGS.connect_timeout, _resolver(cluster), devices, on_timeout=local.close if local else lambda: None
    )
    options = runner.Options(
        split_size=FLAGS.split_size,
        read_size=FLAGS.read_size,
        max_pieces=FLAGS.files_per_step,
        on_error=FLAGS.on_error,
        checkpoint_dir=FLAGS.checkpoint_dir,
        checkpoint_every=FLAGS.checkpoint_every,
        worker_timeout=FLAGS.worker_timeout,
        progress_every=FLAGS.progress_every,
    )
    job_over = not in_process  # servers in this process end with it, and need no message
    coordinator_id = control.new_coordinator_id()
    try:
        with contextlib.ExitStack() as stack:
            heartbeats = None if in_process else stack.enter_context(control.Heartbeats(cluster, coordinator_id))
            reporters = [lambda p: _say(_progress_line(job, p))]
            if FLAGS.logdir:
                from tf2_mapreduce import summaries

                writer = summaries.Summaries(FLAGS.logdir, job)
                stack.callback(writer.close)
                reporters.append(writer.write)

            def report(progress):
                for reporter in reporters:
                    reporter(progress)

            run = runner.JobRun(
                job, found.files, coordinator, cluster, options, heartbeats=heartbeats, on_progress=report, log=_say
            )
            stop_requests.append(run.request_stop)
            result = run.run()
            # Before the servers are told to exit: per-key results are read from the ps tasks.
            with run.reading_result():
                _print_result(result, found)
                if FLAGS.output:
                    timings = {"total": time.monotonic() - started}
                    if result.first_schedule:
                        # Imports and cluster start-up; then map steps until the result was read.
                        timings.update(
                            startup=result.first_schedule - started, map=result.finished - result.first_schedule
                        )
                    output.write(FLAGS.output, result, found, FLAGS.min_count, timings)
            if FLAGS.output:
                _say("wrote %s" % FLAGS.output)
        if FLAGS.keep_serving:
            try:
                run.release()
            except tf.errors.OpError as e:  # the result is written: that is all the job owes
                _say("warning: could not free this job's state on the kept servers: %s" % op_error_cause(e))
    except ClusterError:
        job_over = False  # the servers that are left serve the rerun that resumes the job
        raise
    finally:
        if local or (job_over and not FLAGS.keep_serving):

            def retrying(role, index, address, why):
                _say(
                    "could not tell %s %d at %s that the job is over yet (%s); trying for up to %gs "
                    "(--shutdown_timeout)" % (role, index, address, why, FLAGS.shutdown_timeout)
                )

            # Local children cannot come back once gone: one attempt each.
            failed = control.request_exit(
                cluster, coordinator_id, within=0 if local else FLAGS.shutdown_timeout, on_retry=retrying
            )
            for (role, index), why in sorted(failed.items()):
                _say(
                    "warning: could not tell %s %d that the job is over: %s; it exits after its --idle_timeout"
                    % (role, index, why)
                )
        if local:
            _await_local_exit(local)
    return 0


def _handle_stop_signals(stop_requests):
    """SIGINT and SIGTERM ask a running job to checkpoint and stop (it then exits
    130 or 143); before the job runs, or on a second signal, they stop at once."""

    def on_signal(signum, frame):
        if stop_requests:
            request = stop_requests.pop()
            request(signum)
        else:
            raise Interrupted(signum, "stopped by signal %d" % signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)


def main(argv):
    start = time.monotonic()
    if not FLAGS["verbosity"].present:
        absl_logging.set_verbosity(absl_logging.WARNING)  # TF logs its whole config at INFO
    specs = (FLAGS.input or []) + argv[1:]
    local = None
    in_process_servers = []
    stop_requests = []
    _handle_stop_signals(stop_requests)
    try:
        for name, value in cluster_lib.TASK_ENV.items():
            os.environ.setdefault(name, value)
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        cluster = sources.resolve(expect_roles=("chief",))
        if cluster:
            for name in ("num_ps", "num_workers", "local_cluster"):
                if FLAGS[name].present:
                    raise UsageError(
                        "--%s is for the local cluster; %s already defines the cluster" % (name, sources.describe())
                    )
        else:
            if FLAGS.keep_serving:
                raise UsageError(
                    "--keep_serving needs a configured cluster (TF_CONFIG...); a local cluster ends with its job"
                )
            exposed = _isolate(specs)
            if FLAGS.local_cluster == "processes":
                local = cluster_lib.LocalCluster(FLAGS.num_ps, FLAGS.num_workers).start()
                cluster = local.cluster
            else:
                cluster = cluster_lib.local_cluster(FLAGS.num_ps, FLAGS.num_workers)
                quiet.import_tensorflow(verbose=FLAGS["verbosity"].present)
                # Held until the process ends: the servers serve as long as they exist.
                in_process_servers = cluster_lib.start_in_process(cluster)
            _say(
                "started a local cluster%s: %s"
                % (" in this process" if not local else "", ", ".join("%s %s" % (r, a) for r, _, a in cluster.tasks()))
            )
            if exposed:
                _say(
                    "warning: while the job runs, anyone who reaches this machine can run code on the local "
                    "cluster's ports %s (%s)"
                    % (",".join(a.rsplit(":", 1)[1] for _, _, a in cluster.tasks(cluster_lib.ROLES)), exposed)
                )
        code = _run(specs, cluster, local, stop_requests, start, in_process=bool(in_process_servers))
    except Interrupted as e:
        _say(str(e))
        code = e.exit_code
    except Error as e:
        _say("error: %s" % e)
        code = e.exit_code
    except Exception:  # a bug: say so, then leave through the same exit as every run
        traceback.print_exc()
        _say("error: internal error, a bug in tf2_mapreduce: please report it with the traceback above")
        code = 1
    finally:
        if local:
            local.close()
    if code == 0:
        _say("done in %.1f s" % (time.monotonic() - start))
    sys.stdout.flush()
    sys.stderr.flush()
    # The servers were told to exit (or live in this process, `in_process_servers`):
    # a normal interpreter teardown would only try to release TF's remote state on
    # them and log a screen of connection errors.
    del in_process_servers
    os._exit(code)


def _isolate(specs):
    """Moves this process, before it starts the local cluster, into a private network
    (`--private_network`); returns None, or why the cluster's ports stay exposed."""
    if not FLAGS.private_network:
        return "--noprivate_network"
    remote = netns.network_path(specs + [FLAGS.output, FLAGS.checkpoint_dir, FLAGS.logdir])
    if remote:
        return "%s needs the network, so no private network" % remote
    refused = netns.enter_private_network()
    return refused and "no private network: %s" % refused


def _resolver(cluster):
    """The cluster as ParameterServerStrategy takes it, whatever source described it."""
    import tensorflow as tf

    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(cluster.jobs), task_type="chief", task_id=0, rpc_layer="grpc"
    )


def _await_local_exit(local):
    """Gives servers that were told the job is over a moment to exit by themselves."""
    for (role, index), code in sorted(local.wait(timeout=10.0).items()):
        if code != 0:
            _say(
                "warning: local %s %d %s: %s"
                % (
                    role,
                    index,
                    "did not exit" if code is None else "exited with status %d" % code,
                    local.log_tail(role, index),
                )
            )


if __name__ == "__main__":
    app.run(main)
