"""`python -m tf2_mapreduce.coordinator`: runs a job, as TensorFlow's `chief` task of a
cluster. Its flags and `main`; the steps of a run are `cli.steps`."""

import sys
import time

from absl import app, flags

from tf2_mapreduce import jobs
from tf2_mapreduce.cli import cluster_flags, help
from tf2_mapreduce.cli.steps import LOCAL_ONLY, Command, leave, prepare_process
from tf2_mapreduce.inputs.formats import COMPRESSIONS, NAMES
from tf2_mapreduce.outputs.vocabulary import FILE_FORMATS
from tf2_mapreduce.run.options import ClusterSettings, Options

__all__ = ["main", "PROGRAM"]

FLAGS = flags.FLAGS


def _job_help():
    found = jobs.built_in()
    listed = ", ".join(
        "%s (%s)" % (name, found[name].SUMMARY) for name in sorted(found, key=lambda n: n != "wordcount")
    )
    return "The job to run. Built in: %s. Or your own: package.module:ATTRIBUTE naming a tf2_mapreduce Job." % listed


def _parameter_help(users):
    """A parameter's help: each job's words for it, said once for the jobs that share them."""
    by_help = {}
    for command, parameter in users:
        by_help.setdefault(parameter.help, []).append(command)
    return " ".join("For --job=%s: %s." % (" or ".join(commands), text) for text, commands in by_help.items())


# The job.
flags.DEFINE_string("job", "wordcount", _job_help())
for _name, _users in jobs.parameters().items():
    flags.DEFINE_string(_name, None, _parameter_help(_users))
flags.DEFINE_integer(
    "top_k",
    None,
    "For per-key jobs: keep the k most frequent terms in each vocabulary of --output_dir; wordfreq prints its "
    "k most frequent words (default: all kept, 20 printed).",
    lower_bound=0,
)
flags.DEFINE_integer(
    "min_count",
    1,
    "For per-key jobs: leave out keys counted fewer times (tf.Transform's frequency_threshold).",
    lower_bound=1,
)
# Inputs and outputs.
flags.DEFINE_multi_string(
    "input",
    None,
    "A file, a directory (walked; names starting with '.' or '_' skipped), a glob, or @list.txt (paths, one a "
    "line); any tf.io.gfile path (gs://...). Repeat for several; arguments after the flags are inputs too. "
    "Default: the sample corpus shipped with the package.",
)
flags.DEFINE_enum(
    "format",
    Options.format,
    ["auto", *NAMES],
    "What the inputs are. auto: what the job reads, refusing a file whose name says otherwise.",
)
flags.DEFINE_enum(
    "compression",
    Options.compression,
    list(COMPRESSIONS),
    "How the inputs are compressed. auto: by each file's name (.gz, .gzip; .zz, .zlib).",
)
flags.DEFINE_string(
    "output",
    None,
    "Write the result to this file (any tf.io.gfile path), atomically: JSON (*.json) for sums; a per-key job's "
    "whole table, sorted, as TSV (word<TAB>count), or JSON if the name ends in .json.",
)
flags.DEFINE_string(
    "output_dir",
    None,
    "For jobs that write files (wordfreq, vocab, stats, reshard, transform): write the result's files into this "
    "directory, which then holds that result alone (made if absent; an earlier result there is replaced whole; "
    "other files are refused): vocabularies as TensorFlow's lookups load them; stats.pb (TFDV's), stats.json and "
    "stats.html; data/ of GZIP'd TFRecord files; transform_fn/, transformed_metadata/ and metadata/ as tf.Transform's and TFX's.",
)
flags.DEFINE_enum(
    "vocabulary_format",
    FILE_FORMATS[0],
    list(FILE_FORMATS),
    "The vocabularies of --output_dir: text (one term a line) or tfrecord_gzip (one term a record, as "
    "tf.Transform writes them: every term fits).",
)
flags.DEFINE_enum(
    "on_error",
    Options.on_error,
    ["fail", "skip"],
    "An input that cannot be read: fail stops the job naming it; skip leaves it out and lists it with its reason.",
)
flags.DEFINE_string(
    "checkpoint_dir",
    None,
    "Save the job's state here (any tf.io.gfile path): the same command, run again after a failure, resumes "
    "from it and redoes only the files not yet done.",
)
flags.DEFINE_string("logdir", None, "Write TensorBoard summaries of the progress here (tensorboard --logdir DIR).")
# Running.
flags.DEFINE_integer("num_ps", 1, "ps tasks of the local cluster (when no cluster is configured).", lower_bound=1)
flags.DEFINE_integer("num_workers", 2, "Worker tasks of the local cluster.", lower_bound=1)
flags.DEFINE_enum(
    "local_cluster",
    "inprocess",
    ["inprocess", "processes"],
    "The local cluster's ps and workers as servers in this process (one TensorFlow import: fastest to start), "
    "or as child processes, each task apart as on a real cluster (a killed worker is survived).",
)
flags.DEFINE_bool(
    "private_network",
    True,
    "Run the local cluster in a private network namespace (Linux), out of the network's reach: TF's servers "
    "run whatever anyone who reaches their ports sends. Not possible with gs:// inputs or outputs.",
)
flags.DEFINE_float("progress_every", Options.progress_every, "Seconds between progress lines.", lower_bound=0.1)
flags.DEFINE_float("checkpoint_every", Options.checkpoint_every, "Seconds between checkpoints.", lower_bound=0.1)
flags.DEFINE_integer(
    "split_size",
    Options.split_size,
    "Bytes per scheduled map step at most: a larger file is cut into splits that all workers read at once.",
    lower_bound=1,
)
flags.DEFINE_integer(
    "read_size",
    Options.read_size,
    "Files are cut into pieces of about this many bytes at record starts; a worker holds about two pieces at "
    "once: this bounds its memory.",
    lower_bound=1,
)
flags.DEFINE_integer("files_per_step", Options.max_pieces, "Pieces per map step at most; 0: automatic.", lower_bound=0)
flags.DEFINE_float(
    "worker_timeout",
    Options.worker_timeout,
    "Stop (with a checkpoint) when no map step finished for this many seconds while a worker is down.",
    lower_bound=1.0,
)
flags.DEFINE_float(
    "storage_timeout",
    Options.storage_timeout,
    "Seconds to wait for storage that cannot be reached (Cloud Storage answering 503 or 429, connections "
    "refused or reset), retrying, before the job stops with exit status 75; the same command then resumes.",
    lower_bound=0.0,
)
# The cluster.
cluster_flags.define(FLAGS)
flags.DEFINE_float(
    "connect_timeout",
    ClusterSettings.connect_timeout,
    "Seconds to wait for every ps and worker to answer.",
    lower_bound=0.1,
)
flags.DEFINE_bool(
    "keep_serving", ClusterSettings.keep_serving, "Leave a configured cluster's servers running after the job."
)
flags.DEFINE_float(
    "shutdown_timeout",
    ClusterSettings.shutdown_timeout,
    "When the job ends: seconds to keep telling a ps or worker that does not answer (restarting, its link "
    "down) that the job is over, so that it exits with status 0.",
    lower_bound=0.0,
)

FLAGS["verbosity"].help = "Show TensorFlow's own log lines too, as absl's verbosity: 0 for INFO, 1 for debug."

PROGRAM = help.Program(
    prefix="tf2_mapreduce: ",
    usage="python -m tf2_mapreduce.coordinator [--job=JOB] [--input=SPEC]... [SPEC]... [flags]",
    summary="Runs a MapReduce job over files on a cluster (a local one unless TF_CONFIG or a flag says otherwise), "
    "exactly: each input counted once, whatever fails.",
    examples=(
        ("python -m tf2_mapreduce.coordinator", "count the words of the sample corpus"),
        ("python -m tf2_mapreduce.coordinator --job=wordfreq corpus/ --output=freq.tsv", "every word's count"),
        ("python -m tf2_mapreduce.coordinator --job=stats 'shards/*.tfrecord.gz' --output_dir=stats/", "TFDV's stats"),
        (
            "python -m tf2_mapreduce.coordinator --job=transform --preprocessing_fn=mod:fn train/ --output_dir=tx/",
            "tf.Transform's analyze-and-transform of train/'s tf.Examples by the preprocessing_fn fn of mod.py",
        ),
    ),
    groups=(
        ("job", ("job", *jobs.parameters(), "top_k", "min_count")),
        (
            "inputs and outputs",
            ("input", "format", "compression", "on_error", "output", "output_dir", "vocabulary_format"),
        ),
        (
            "running",
            (*LOCAL_ONLY, "private_network", "checkpoint_dir", "checkpoint_every", "progress_every", "logdir")
            + ("read_size", "split_size", "files_per_step", "worker_timeout", "storage_timeout", "verbosity"),
        ),
        ("cluster", (*cluster_flags.NAMES, "connect_timeout", "keep_serving", "shutdown_timeout")),
    ),
    exits="0 done, 1 the job failed while running, 2 bad usage or input, 3 the cluster failed (the same command "
    "resumes), 75 storage could not be reached for --storage_timeout (the same command resumes), 130/143 stopped "
    "by SIGINT/SIGTERM",
)


def main(argv):
    started = time.monotonic()
    prepare_process(verbose=FLAGS["verbosity"].present)
    command = Command(FLAGS, (FLAGS.input or []) + argv[1:], started)
    command.handle_stop_signals()
    leave(command.run())


def run():
    """The program: its flags parsed (`cli.help`), then `main`."""
    app.run(main, argv=sys.argv, flags_parser=help.parse(PROGRAM, FLAGS))


if __name__ == "__main__":
    run()
