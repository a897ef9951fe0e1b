"""The CLI, run as `python -m tf2_mapreduce.coordinator` (TensorFlow's `chief` task).

On a configured cluster (TF_CONFIG, or see `cluster_sources`) it runs the job there; without
one, it starts a local cluster first, in a private network. Prints progress to stderr
and the result to stdout.
Modules that import TensorFlow are imported inside functions, after the local
servers were started, so that they boot while TensorFlow loads here.
"""

import contextlib
import os
import signal
import sys
import time
import traceback

from absl import flags
from absl import logging as absl_logging

from tf2_mapreduce import client, cluster_sources, inputs, netns, quiet
from tf2_mapreduce import cluster as cluster_lib
from tf2_mapreduce import listing as listing_lib
from tf2_mapreduce.errors import Error, Interrupted, UsageError

__all__ = ["main"]

FLAGS = flags.FLAGS
cluster_sources.define_flags(FLAGS)
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
    "linecount, wc (lines, words, bytes), longestline (bytes in the longest line), grep (lines matching --pattern), "
    "recordcount (records of TFRecord files), vocab (a vocabulary of each of --features of tf.train.Example "
    "records). Or your own: package.module:ATTRIBUTE naming a tf2_mapreduce.jobs.Job.",
)
flags.DEFINE_string("pattern", None, "For --job=grep: an RE2 regular expression that whole lines must match.")
flags.DEFINE_string(
    "features",
    None,
    "For --job=vocab: the tf.train.Example features to count, comma-separated, each name[:string|int64]; "
    "a type left out is read from the first examples that hold the feature.",
)
flags.DEFINE_enum(
    "format",
    "auto",
    ["auto", "text", "tfrecord"],
    "What the inputs are: text, or TFRecord files. auto: what the job reads (tfrecord for vocab and "
    "recordcount, text for the others), refusing a file whose name says otherwise (*.tfrecord*, *.txt).",
)
flags.DEFINE_enum(
    "compression",
    "auto",
    ["auto", "none", "gzip", "zlib"],
    "How the inputs are compressed. auto: by each file's name (.gz, .gzip: gzip; .zz, .zlib: zlib; else none). "
    "A compressed file is read whole by one worker, as a stream.",
)
flags.DEFINE_integer(
    "top_k",
    None,
    "For per-key jobs: keep the k most frequent terms in each vocabulary of --output_dir, and print at most "
    "k keys (default: all kept, 20 printed).",
    lower_bound=0,
)
flags.DEFINE_integer(
    "min_count",
    1,
    "For per-key jobs: leave keys counted fewer times out of --output and --output_dir (tf.Transform's "
    "frequency_threshold).",
    lower_bound=1,
)
flags.DEFINE_string(
    "output_dir",
    None,
    "For per-key jobs (wordfreq, vocab): write a vocabulary per feature here (any tf.io.gfile path), "
    "most frequent first, as TensorFlow's lookups load it: vocab_NAME.txt (one term a line), "
    "counts_NAME.tsv (count, tab, term, line for line), unwritable_NAME.tsv (terms no line can hold: "
    "empty, or with a line break), and summary.json.",
)
flags.DEFINE_enum(
    "vocabulary_format",
    "text",
    ["text", "tfrecord_gzip"],
    "The vocabulary files of --output_dir: text (one term a line), or tfrecord_gzip (one term a record, "
    "as tf.Transform writes them: every term fits).",
)
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
    "Files are cut into pieces of about this many bytes, at word (or line) starts; a worker "
    "reads and maps two pieces at a time, or whole files up to four times this size: this bounds "
    "a worker's memory.",
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


def _print_vocabularies(summary):
    for name, v in summary["vocabularies"].items():
        missing = ", %d examples missing it" % v["missing"] if "missing" in v else ""
        aside = ", %d unwritable terms aside" % v["unwritable"] if v.get("unwritable") else ""
        print(
            "  %s: %d values, %d distinct%s; %d terms kept%s"
            % (name, v["values"], v["distinct"], missing, v["written"], aside)
        )


def _print_result(job, result, vocabularies):
    """The summary on stdout: the total, the top keys of a per-key job (or each
    vocabulary's summary), what was skipped."""
    from tf2_mapreduce import output

    print(
        "%s: %s in %d files (%d bytes), %.2f s"
        % (job.name, _amount(job, result.total, result.distinct), result.files_done, result.bytes_done, result.seconds)
    )
    if vocabularies:
        _print_vocabularies(vocabularies)
    elif job.reducer.keyed and FLAGS.top_k != 0:
        top = result.top(20 if FLAGS.top_k is None else FLAGS.top_k, FLAGS.min_count)
        print("top %d %s (count, %s; non-printable bytes as \\xHH):" % (len(top), job.reducer.unit, job.reducer.unit))
        for key, count in top:
            print("%12d  %s" % (count, output.escape(key)))
    if result.skipped:
        print("%d input(s) skipped (--on_error=skip):" % len(result.skipped))
        for path, reason in result.skipped:
            print("  %s: %s" % (path, reason))
    sys.stdout.flush()


def _job(found):
    """The job the flags name; for --job=vocab, with each feature's type read from `found`."""
    from tf2_mapreduce import jobs

    if FLAGS.job != "vocab":
        if FLAGS.features:
            raise UsageError("--features is for --job=vocab")
        return jobs.resolve(FLAGS.job, FLAGS.pattern)
    if not FLAGS.features:
        raise UsageError("--job=vocab needs --features (feature names, comma-separated)")
    from tf2_mapreduce.jobs import features

    wanted = features.parse_features(FLAGS.features)
    inputs.check_format(found.files, "tfrecord", FLAGS.format)  # before any file is read as TFRecord
    return jobs.vocab(features.detect_types(wanted, (f.path for f in found.files), FLAGS.compression))


def _check_outputs(job):
    """Fails before the job, not after it, where the result could not be written as asked."""
    from tf2_mapreduce import output

    if FLAGS.output_dir and not job.reducer.keyed:
        raise UsageError("--output_dir is for per-key jobs (wordfreq, vocab); --job=%s writes --output" % job.name)
    if FLAGS.output:
        if job.reducer.vocabularies_only:
            raise UsageError("--output: --job=%s writes a vocabulary per feature: use --output_dir" % job.name)
        output.check_path(FLAGS.output, job)


def _list_inputs(specs, listing, job_name, mr_cluster):
    """The inputs `listing` found for `specs`, with notes on what was left out; says
    what runs where."""
    if not specs:
        _say("no --input given: using the sample corpus in %s" % listing.specs[0])
    found = listing.result()
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
    where = mr_cluster.cluster.describe() + (" (local)" if mr_cluster.local_processes else "")
    _say("%s over %d files (%s) on %s" % (job_name, len(found.files), _human_bytes(found.total_bytes), where))
    if any(f.size > FLAGS.read_size for f in found.files):
        from tf2_mapreduce import native

        if native.unavailable():
            _say("warning: files larger than --read_size are read the slow way: %s" % native.unavailable())
    return found


def _run(specs, listing, mr_cluster, stop_requests, started):
    """Everything after the cluster is chosen and its local servers started: flags in,
    the Python API's calls, the result out. Returns the process exit status."""
    quiet.import_tensorflow(verbose=FLAGS["verbosity"].present)  # after local servers started: they boot meanwhile
    if FLAGS.job != "vocab":  # a bad job name or pattern is told before the inputs are listed
        _check_outputs(_job(None))
    found = _list_inputs(specs, listing, FLAGS.job, mr_cluster)
    job = _job(found)
    _check_outputs(job)
    mr_cluster.connect()
    with contextlib.ExitStack() as stack:
        reporters = [lambda p: _say(_progress_line(job, p))]
        if FLAGS.logdir:
            from tf2_mapreduce import summaries

            writer = summaries.Summaries(FLAGS.logdir, job)
            stack.callback(writer.close)
            reporters.append(writer.write)

        def report(progress):
            for reporter in reporters:
                reporter(progress)

        handle = mr_cluster.submit(
            job,
            found,
            on_error=FLAGS.on_error,
            format=FLAGS.format,
            compression=FLAGS.compression,
            checkpoint_dir=FLAGS.checkpoint_dir,
            on_progress=report,
            split_size=FLAGS.split_size,
            read_size=FLAGS.read_size,
            max_pieces=FLAGS.files_per_step,
            checkpoint_every=FLAGS.checkpoint_every,
            worker_timeout=FLAGS.worker_timeout,
            progress_every=FLAGS.progress_every,
        )
        stop_requests.append(handle.cancel)
        result = handle.wait()
        # Before the servers are told to exit: per-key results are read from the ps tasks.
        vocabularies = None
        if FLAGS.output_dir or job.reducer.vocabularies_only:
            vocabularies = result.write_vocabularies(
                FLAGS.output_dir, FLAGS.top_k, FLAGS.min_count, FLAGS.vocabulary_format, since=started
            )
        _print_result(job, result, vocabularies)
        if FLAGS.output_dir:
            _say("wrote %d vocabularies to %s" % (len(vocabularies["vocabularies"]), FLAGS.output_dir))
        if FLAGS.output:
            # Timed from the process start: imports and cluster start-up count too.
            result.write(FLAGS.output, FLAGS.min_count, since=started)
            _say("wrote %s" % FLAGS.output)
    return 0


def _shutdown_retry(role, index, address, why):
    _say(
        "could not tell %s %d at %s that the job is over yet (%s); trying for up to %gs (--shutdown_timeout)"
        % (role, index, address, why, FLAGS.shutdown_timeout)
    )


def _shutdown_failure(role, index, why):
    _say(
        "warning: could not tell %s %d that the job is over: %s; it exits after its --idle_timeout" % (role, index, why)
    )


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
    # Listing many files takes seconds: started first, it runs while TF is imported.
    listing = listing_lib.BackgroundListing(specs or [inputs.sample_corpus()], FLAGS.on_error)
    mr_cluster = None
    stop_requests = []
    _handle_stop_signals(stop_requests)
    error = None
    try:
        for name, value in cluster_lib.TASK_ENV.items():
            os.environ.setdefault(name, value)
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        cluster = cluster_sources.resolve(FLAGS, expect_roles=("chief",))
        options = dict(
            keep_serving=FLAGS.keep_serving,
            connect_timeout=FLAGS.connect_timeout,
            shutdown_timeout=FLAGS.shutdown_timeout,
            log=_say,
            on_shutdown_retry=_shutdown_retry,
            on_shutdown_failure=_shutdown_failure,
            verbose=FLAGS["verbosity"].present,
        )
        if cluster:
            for name in ("num_ps", "num_workers", "local_cluster"):
                if FLAGS[name].present:
                    raise UsageError(
                        "--%s is for the local cluster; %s already defines the cluster"
                        % (name, cluster_sources.describe(FLAGS))
                    )
            mr_cluster = client.Cluster(cluster, **options)
        else:
            if FLAGS.keep_serving:
                raise UsageError(
                    "--keep_serving needs a configured cluster (TF_CONFIG...); a local cluster ends with its job"
                )
            exposed = _isolate(specs)
            processes = FLAGS.local_cluster == "processes"
            mr_cluster = client.Cluster.local(FLAGS.num_ps, FLAGS.num_workers, processes=processes, **options)
            mr_cluster.start()
            tasks = ", ".join("%s %s" % (r, a) for r, _, a in mr_cluster.cluster.tasks())
            _say("started a local cluster%s: %s" % ("" if processes else " in this process", tasks))
            if exposed:
                ports = ",".join(a.rsplit(":", 1)[1] for _, _, a in mr_cluster.cluster.tasks(cluster_lib.ROLES))
                _say(
                    "warning: while the job runs, anyone who reaches this machine can run code on the local "
                    "cluster's ports %s (%s)" % (ports, exposed)
                )
        code = _run(specs, listing, mr_cluster, stop_requests, start)
    except Interrupted as e:
        error = e
        _say(e.cli_message())
        code = e.exit_code
    except Error as e:
        error = e
        _say("error: %s" % e.cli_message())
        code = e.exit_code
    except Exception as e:  # a bug: say so, then leave through the same exit as every run
        error = e
        traceback.print_exc()
        _say("error: internal error, a bug in tf2_mapreduce: please report it with the traceback above")
        code = 1
    finally:
        listing.close()
        if mr_cluster:
            mr_cluster.close(error)
    if code == 0:
        _say("done in %.1f s" % (time.monotonic() - start))
    sys.stdout.flush()
    sys.stderr.flush()
    # The servers were told to exit (or live in this process, held by `mr_cluster`):
    # a normal interpreter teardown would only try to release TF's remote state on
    # them and log a screen of connection errors.
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
