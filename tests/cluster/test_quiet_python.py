"""Python and the scripts as quiet as the CLI, in processes of their own started as a
user starts them (no TF_CPP_MIN_LOG_LEVEL set): an import of TensorFlow through this
package shows nothing of TensorFlow's start-up unless asked, and scripts/make_examples.py
prints nothing on stderr. (README's Python example, also silent: test_api.py.)"""

import json
import os
import subprocess
import sys

from helpers.processes import REPO, user_env

from tf2_mapreduce.quiet import is_startup_noise

SCRIPT_TIMEOUT = 300


def test_an_import_shows_only_what_is_not_start_up_noise():
    script = (
        "import os, sys\n"
        "from tf2_mapreduce.quiet import import_tensorflow\n"
        "os.write(2, b'before\\n')\n"
        "tf = import_tensorflow(verbose=%s)\n"
        "os.write(2, b'after\\n')\n"
        "print(tf.constant(3).numpy())\n"
    )
    quiet = subprocess.run([sys.executable, "-c", script % False], capture_output=True, env=user_env(), timeout=120)
    assert quiet.returncode == 0 and quiet.stdout == b"3\n"
    assert quiet.stderr.decode().splitlines() == ["before", "after"]
    shown = subprocess.run([sys.executable, "-c", script % True], capture_output=True, env=user_env(), timeout=120)
    lines = shown.stderr.decode().splitlines()
    assert shown.returncode == 0 and lines[0] == "before" and "after" in lines
    assert any(is_startup_noise(line) for line in lines), "verbose=True must show TensorFlow's own lines"


def test_make_examples_prints_nothing_on_stderr(tmp_path):
    run = subprocess.run(
        [
            sys.executable,
            os.path.join(REPO, "scripts", "make_examples.py"),
            "--output_dir",
            str(tmp_path),
            "--examples",
            "40",
        ],
        env=user_env(),
        capture_output=True,
        timeout=SCRIPT_TIMEOUT,
    )
    assert run.returncode == 0 and run.stderr == b"", run.stderr.decode(errors="replace")
    assert sorted(os.listdir(tmp_path)) == ["examples-%05d-of-00004.tfrecord.gz" % i for i in range(4)]


MANY_JOBS = """
import json, sys
import tf2_mapreduce as mr

corpus, shard = sys.argv[1:3]
results = []
with mr.Cluster.local() as cluster:
    for _ in range(6):  # TensorFlow warns at a function's 5th trace in 10 calls
        for job in (mr.WordCount(), mr.WordFreq(), mr.LineCount(), mr.Stats("query"), mr.Vocab("query")):
            result = cluster.run(job, [shard if job.name in ("stats", "vocab") else corpus])
            results.append([job.name, result.total if job.name != "stats" else result.features["query"].num_present])
print(json.dumps(results))
"""


def test_many_jobs_in_one_process_print_nothing_on_stderr(tmp_path):
    """Each run traces functions of its own: TensorFlow's warning of a function traced
    again and again must not reach a script that runs jobs in a loop."""
    import tensorflow as tf

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for n in range(3):
        (corpus / ("f%d.txt" % n)).write_bytes(b"the cat sat\n" * (n + 1))
    shard = str(tmp_path / "examples.tfrecord")
    with tf.io.TFRecordWriter(shard) as writer:
        for n in range(10):
            query = tf.train.Feature(bytes_list=tf.train.BytesList(value=[b"q%d" % (n % 3)]))
            writer.write(tf.train.Example(features=tf.train.Features(feature={"query": query})).SerializeToString())
    run = subprocess.run(
        [sys.executable, "-c", MANY_JOBS, str(corpus), shard],
        env=user_env(),
        capture_output=True,
        timeout=SCRIPT_TIMEOUT,
    )
    assert run.returncode == 0 and run.stderr == b"", run.stderr.decode(errors="replace")
    totals = {"wordcount": 18, "wordfreq": 18, "linecount": 6, "stats": 10, "vocab": 10}
    assert json.loads(run.stdout) == [[name, total] for _ in range(6) for name, total in totals.items()]
