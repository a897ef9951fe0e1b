"""Measures how long the CLI takes to exit after Ctrl-C (SIGINT) in the middle of a job
(docs/performance.md, "Stopping"): median, min and max over several stops.

    python scripts/measure_stop.py --runs 10
    python scripts/measure_stop.py --runs 6 --local_cluster processes --other_checkout /tmp/old

The job is a wordfreq with a checkpoint directory over a corpus of 20,000 files read in
4 KB pieces (made with make_corpus.py if absent): long enough that every stop lands
mid-run. SIGINT goes 3 s after the first progress line; the time is until the process
has exited and closed its stderr. It is the time the steps already running (and, where
they are not cancelled, those queued) take to end: it depends on how fast the corpus is
read, so --cold reads it from disk every run. With --other_checkout, the runs alternate between that
checkout and this one, so both see the same machine.
"""

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from absl import app, flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLAGS = flags.FLAGS
flags.DEFINE_integer("runs", 10, "Stops to measure (for each checkout).", lower_bound=1)
flags.DEFINE_string("corpus", os.path.join(tempfile.gettempdir(), "tf2_mapreduce-stop-corpus"), "Corpus directory.")
flags.DEFINE_enum("local_cluster", "inprocess", ["inprocess", "processes"], "The CLI's --local_cluster.")
flags.DEFINE_string("other_checkout", None, "Another checkout of tf2_mapreduce to alternate with.")
flags.DEFINE_float("after", 3.0, "Seconds after the first progress line to send SIGINT.")
flags.DEFINE_bool(
    "cold",
    False,
    "Drop the page cache before each run (needs root): the corpus is read from disk, so map "
    "steps are slow and many are queued when the stop comes. Warm, the figures swing with "
    "what the kernel keeps cached.",
)


def stop_once(checkout, corpus):
    """Seconds from SIGINT to the CLI's exit, and its exit status."""
    checkpoints = tempfile.mkdtemp(prefix="tf2_mapreduce-stop-")
    if FLAGS.cold:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    env = dict(os.environ, PYTHONPATH=checkout)
    args = ["--job=wordfreq", "--read_size=4096", "--progress_every=1", "--local_cluster=" + FLAGS.local_cluster]
    args += ["--checkpoint_dir", checkpoints, corpus]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tf2_mapreduce.coordinator"] + args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        for line in proc.stderr:
            if "files (" in line:  # the first progress line: the job is mapping
                break
        else:
            raise SystemExit("the job ended before it printed its progress: %s" % proc.wait())
        time.sleep(FLAGS.after)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.stderr.read()
        code = proc.wait()
        return time.monotonic() - sent, code
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(checkpoints, ignore_errors=True)


def main(argv):
    del argv
    if not os.path.isdir(FLAGS.corpus):
        make = [sys.executable, os.path.join(REPO, "scripts", "make_corpus.py"), "--num_files", "20000"]
        subprocess.run(make + ["--out_dir", FLAGS.corpus], check=True, stdout=subprocess.DEVNULL)
    checkouts = [("this", REPO)] + ([("other", FLAGS.other_checkout)] if FLAGS.other_checkout else [])
    times = {name: [] for name, _ in checkouts}
    for _ in range(FLAGS.runs):
        for name, checkout in reversed(checkouts):
            seconds, code = stop_once(checkout, FLAGS.corpus)
            if code != 130:
                raise SystemExit("%s checkout: exit status %d after SIGINT, not 130" % (name, code))
            times[name].append(seconds)
            print("%-5s %.2f s" % (name, seconds), flush=True)
    for name, values in times.items():
        print(
            "%s checkout, --local_cluster=%s: median %.2f s (min %.2f, max %.2f) over %d stops"
            % (name, FLAGS.local_cluster, statistics.median(values), min(values), max(values), len(values))
        )


if __name__ == "__main__":
    app.run(main)
