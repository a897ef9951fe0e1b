"""The CLI, run as `python -m tf2_mapreduce.coordinator` (TensorFlow's `chief` task).

On a configured cluster (TF_CONFIG, or see `cluster_sources`) it runs the job there; without
one, it starts a local cluster first, in a private network. Every check that needs no
cluster comes first; TensorFlow is imported after child servers were started, so that
they boot while it loads. Progress and the library's log go to stderr, the result to stdout.
"""

import contextlib
import os
import signal
import sys
import time
import traceback

from absl import flags
from absl import logging as absl_logging

from tf2_mapreduce import jobs, native, quiet
from tf2_mapreduce.cli import console
from tf2_mapreduce.cli.console import say
from tf2_mapreduce.cluster import netns
from tf2_mapreduce.cluster import sources as cluster_sources
from tf2_mapreduce.cluster.spec import ROLES, TASK_ENV
from tf2_mapreduce.errors import Error, Interrupted, UsageError
from tf2_mapreduce.inputs import background as listing_lib
from tf2_mapreduce.inputs.files import local_path, sample_corpus
from tf2_mapreduce.outputs import files as output

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
    "records), stats (exact statistics of every feature of tf.train.Example records, or of --features). Or your own: package.module:ATTRIBUTE naming a tf2_mapreduce.jobs.Job.",
)
flags.DEFINE_string("pattern", None, "For --job=grep: an RE2 regular expression that whole lines must match.")
flags.DEFINE_string(
    "features",
    None,
    "For --job=vocab: the tf.train.Example features to count, comma-separated, each name[:string|int64]; "
    "a type left out is read from the first examples that hold the feature. For --job=stats: the features "
    "to describe, names only (default: every feature).",
)
flags.DEFINE_enum(
    "format",
    "auto",
    ["auto", "text", "tfrecord"],
    "What the inputs are: text, or TFRecord files. auto: what the job reads (tfrecord for vocab, stats "
    "and recordcount, text for the others), refusing a file whose name says otherwise (*.tfrecord*, *.txt).",
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
    "empty, or with a line break), and summary.json. For --job=stats: stats.pb (TFDV's "
    "DatasetFeatureStatisticsList), stats.json and stats.html.",
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


_LOCAL_ONLY = ("num_ps", "num_workers", "local_cluster")


def _check_flags(configured):
    """Every check of the flags that needs neither TensorFlow nor a cluster; raises `UsageError`."""
    jobs.check(FLAGS.job, FLAGS.pattern, FLAGS.features)
    native.mode()
    if configured:
        for name in _LOCAL_ONLY:
            if FLAGS[name].present:
                raise UsageError("--%s is for the local cluster; %s already defines the cluster" % (name, configured))
    elif FLAGS.keep_serving:
        raise UsageError("--keep_serving needs a configured cluster (TF_CONFIG...); a local cluster ends with its job")
    _probe_outputs(local=True)


def _probe_outputs(local):
    """Checks that `--output` and `--output_dir` can be written: local paths before
    TensorFlow is imported, the others (gs://...) once it can reach them."""
    for path, check in ((FLAGS.output, output.check_path), (FLAGS.output_dir, output.check_directory)):
        if path and (local_path(path) is not None) == local:
            check(path)


def _cluster(spec):
    """The `Cluster` to run on: the configured one (`spec`), or a local one (its children started)."""
    from tf2_mapreduce.client import Cluster

    timeouts = dict(connect_timeout=FLAGS.connect_timeout, verbose=FLAGS["verbosity"].present)
    if spec:
        return Cluster(spec, keep_serving=FLAGS.keep_serving, shutdown_timeout=FLAGS.shutdown_timeout, **timeouts)
    processes = FLAGS.local_cluster == "processes"
    cluster = Cluster.local(FLAGS.num_ps, FLAGS.num_workers, processes=processes, **timeouts)
    if processes:
        cluster.start()  # child servers boot while TensorFlow is imported here
    return cluster


def _fit(job, found):
    """`job` fit to the inputs `found`; fails before the cluster starts where it cannot be
    run or its result cannot be written as asked."""
    from tf2_mapreduce.inputs import formats

    formats.check(
        found.files, formats.format_read_by(job.records), FLAGS.format, FLAGS.compression, native.unavailable()
    )
    job = job.prepared(found.files, FLAGS.compression)
    if FLAGS.output:
        job.reducer.check_output(FLAGS.output)
    if FLAGS.output_dir:
        job.reducer.check_output_dir()
    _probe_outputs(local=False)
    return job


def _inputs(specs, listing, cluster):
    """The inputs `listing` found for `specs`, with notes on what was left out; says what runs where."""
    if not specs:
        say("no --input given: using the sample corpus in %s" % listing.specs[0])
    found = listing.result()
    for line in console.input_notes(found):
        say(line)
    where = cluster.spec.describe() + (" (local)" if cluster.local_processes else "")
    say("%s over %d files (%s) on %s" % (FLAGS.job, len(found.files), console.human_bytes(found.total_bytes), where))
    return found


def _start_local(cluster, exposed):
    cluster.start()
    tasks = ", ".join("%s %s" % (role, address) for role, _, address in cluster.spec.tasks())
    say("started a local cluster%s: %s" % ("" if cluster.local_processes else " in this process", tasks))
    if exposed:
        ports = ",".join(address.rsplit(":", 1)[1] for _, _, address in cluster.spec.tasks(ROLES))
        say(
            "warning: while the job runs, anyone who reaches this machine can run code on the local "
            "cluster's ports %s (%s)" % (ports, exposed)
        )


def _run(job, found, cluster, stop_requests, started):
    """Runs `job` on the connected `cluster`, then prints and writes its result."""
    with contextlib.ExitStack() as stack:
        reporters = [lambda p: say(console.progress_line(job.reducer, p))]
        if FLAGS.logdir:
            from tf2_mapreduce.outputs import summaries

            writer = summaries.Summaries(FLAGS.logdir, job.reducer)
            stack.callback(writer.close)
            reporters.append(writer.write)
        handle = cluster.submit(
            job,
            found,
            on_progress=lambda progress: [report(progress) for report in reporters],
            on_error=FLAGS.on_error,
            format=FLAGS.format,
            compression=FLAGS.compression,
            checkpoint_dir=FLAGS.checkpoint_dir,
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
        written = None
        if FLAGS.output_dir:
            written = result.write_dir(
                FLAGS.output_dir, FLAGS.top_k, FLAGS.min_count, FLAGS.vocabulary_format, since=started
            )
        console.print_result(result, FLAGS.top_k, FLAGS.min_count, written)
        if FLAGS.output_dir:
            say(result.wrote(written, FLAGS.output_dir))
        if FLAGS.output:
            result.write(FLAGS.output, FLAGS.min_count, since=started)  # timed from the process start
            say("wrote %s" % FLAGS.output)


def _handle_stop_signals(stop_requests):
    """SIGINT and SIGTERM ask a running job to checkpoint and stop (it then exits
    130 or 143); before the job runs, or on a second signal, they stop at once."""

    def on_signal(signum, frame):
        if stop_requests:
            stop_requests.pop()(signum)
        else:
            raise Interrupted(signum, "stopped by signal %d" % signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, on_signal)


def _steps(specs, started, stop_requests, holder):
    """The CLI's steps, in order; the cluster made is put in `holder` for `main` to close."""
    spec = cluster_sources.resolve(FLAGS, expect_roles=("chief",))
    configured = cluster_sources.describe(FLAGS) if spec else None
    _check_flags(configured)
    # Listing many files takes seconds: started first, it runs while TF is imported.
    listing = holder["listing"] = listing_lib.BackgroundListing(specs or [sample_corpus()], FLAGS.on_error)
    outputs = [FLAGS.output, FLAGS.output_dir, FLAGS.checkpoint_dir, FLAGS.logdir]
    exposed = None if configured else netns.isolate(FLAGS.private_network, specs + outputs)
    cluster = holder["cluster"] = _cluster(spec)
    quiet.import_tensorflow(verbose=FLAGS["verbosity"].present)
    native.load()  # the first run on a machine builds the native ops, and says so
    job = jobs.resolve(FLAGS.job, FLAGS.pattern, FLAGS.features)  # a bad pattern is told before the listing
    found = _inputs(specs, listing, cluster)
    job = _fit(job, found)
    if not configured:
        _start_local(cluster, exposed)
    cluster.connect()
    _run(job, found, cluster, stop_requests, started)


def main(argv):
    started = time.monotonic()
    if not FLAGS["verbosity"].present:
        absl_logging.set_verbosity(absl_logging.WARNING)  # TF logs its whole config at INFO
        quiet.hide_closure_errors()
    console.show_log()
    for name, value in TASK_ENV.items():
        os.environ.setdefault(name, value)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    specs = (FLAGS.input or []) + argv[1:]
    stop_requests = []
    _handle_stop_signals(stop_requests)
    holder = {}
    error = None
    code = 0
    try:
        _steps(specs, started, stop_requests, holder)
    except Interrupted as e:
        error, code = e, e.exit_code
        say(e.cli_message())
    except Error as e:
        error, code = e, e.exit_code
        say("error: %s" % e.cli_message())
    except Exception as e:  # a bug: say so, then leave through the same exit as every run
        error, code = e, 1
        traceback.print_exc()
        say("error: internal error, a bug in tf2_mapreduce: please report it with the traceback above")
    finally:
        if "listing" in holder:
            holder["listing"].close()
        if "cluster" in holder:
            holder["cluster"].close(error)
    if code == 0:
        say("done in %.1f s" % (time.monotonic() - started))
    sys.stdout.flush()
    sys.stderr.flush()
    # The servers were told to exit (or live in this process): a normal interpreter
    # teardown would only try to release TF's remote state on them and log a screen
    # of connection errors.
    os._exit(code)
