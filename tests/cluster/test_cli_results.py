"""What the CLI leaves and prints around a result: an --output_dir that holds one job's
complete result whoever wrote there before, refused while another job writes it;
wordfreq's top words printed with --output_dir too; a misspelled feature or a corrupt
input said in one line of our own; no file of TensorFlow's left in the temp directory."""

import os
import subprocess
import sys

import tensorflow as tf
from helpers.processes import REPO, run_cli, task_env, user_env

from tf2_mapreduce.outputs.directory import LOCK, MANIFEST


def example(query, tags):
    feature = {
        "query": tf.train.Feature(bytes_list=tf.train.BytesList(value=[query])),
        "tags": tf.train.Feature(bytes_list=tf.train.BytesList(value=tags)),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def shard(tmp_path):
    path = str(tmp_path / "part-0.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        for n in range(40):
            writer.write(example(b"q%d" % (n % 5), [b"t%d" % (n % 3)]))
    return path


def result_files(directory):
    """The result's files: its manifest aside, and no lock left by the job that wrote them."""
    names = os.listdir(directory)
    assert LOCK not in names
    return sorted(name for name in names if name != MANIFEST)


def test_a_result_directory_holds_the_last_jobs_result_alone(tmp_path):
    data, out = shard(tmp_path), str(tmp_path / "out")
    first = run_cli(["--job=vocab", "--features=query,tags", "--output_dir", out, data], env=task_env())
    assert first.returncode == 0, first.stderr
    assert {"vocab_query.txt", "vocab_tags.txt"} <= set(result_files(out))
    fewer = run_cli(["--job=vocab", "--features=query", "--output_dir", out, data], env=task_env())
    assert fewer.returncode == 0, fewer.stderr
    assert not [name for name in result_files(out) if "tags" in name]
    stats = run_cli(["--job=stats", "--output_dir", out, data], env=task_env())
    assert stats.returncode == 0, stats.stderr
    assert result_files(out) == ["stats.html", "stats.json", "stats.pb"]


HOLD = """
import sys, time
from tf2_mapreduce.outputs.directory import ResultDirectory
with ResultDirectory(sys.argv[1]):
    print("claimed", flush=True)
    time.sleep(120)
"""


def test_a_directory_another_job_writes_is_refused_before_anything_runs(tmp_path, processes):
    data, out = shard(tmp_path), str(tmp_path / "out")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, out], stdout=subprocess.PIPE, env=task_env(), cwd=REPO)
    processes.procs.append(holder)
    assert holder.stdout.readline() == b"claimed\n"
    run = run_cli(["--job=stats", "--output_dir", out, data], env=task_env())
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines() == [
        "tf2_mapreduce: error: --output_dir %s: another job is writing it: %s"
        % (out, run.stderr.split("it: ", 1)[1].strip())
    ]
    assert "pid %d since" % holder.pid in run.stderr and os.listdir(out) == [LOCK]  # the holder's alone


def test_wordfreq_prints_its_top_words_with_an_output_dir_too(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_bytes(b"the cat the dog the end cat\n")
    run = run_cli(["--job=wordfreq", "--top_k=2", "--output_dir", str(tmp_path / "out"), str(corpus)], env=task_env())
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[1] == "  words: 7 values, 4 distinct; 2 terms kept"
    assert lines[2].startswith("top 2 words") and lines[3].split() == ["3", "the"] and lines[4].split() == ["2", "cat"]


def test_a_misspelled_feature_and_a_corrupt_input_are_one_line_of_ours(tmp_path):
    """Also: the --output_dir each job made for its result is gone with the job that failed."""
    data, out = shard(tmp_path), tmp_path / "out"
    misspelled = {
        # Found after the whole run: stats counts every example.
        "--job=stats --features=query,quary": "quary is in none of the 40 examples (features there: query, tags); "
        "mark a feature that may be absent with ? (quary?)",
        # Found before it: vocab reads the first examples for the type of a feature given without one.
        "--job=vocab --features=qeury": "qeury is in none of the first 40 examples (features there: query, tags); "
        "if it is further on, give its type (qeury:string or qeury:int64)",
    }
    for flags, error in misspelled.items():
        run = run_cli(flags.split() + ["--output_dir", str(out), data], env=task_env())
        assert run.returncode == 2, run.stderr
        assert run.stderr.splitlines()[-1] == "tf2_mapreduce: error: --features: " + error
        assert not out.exists(), flags
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for n in range(6):
        (corpus / ("f%d.txt" % n)).write_bytes(b"some words\n" * 50)
    (corpus / "bad.txt.gz").write_bytes(b"not gzip at all")
    run = run_cli(["--files_per_step=1", str(corpus)], env=user_env())  # TensorFlow's log level not set
    assert run.returncode == 1, run.stderr
    assert all(line.startswith("tf2_mapreduce: ") for line in run.stderr.splitlines()), run.stderr
    assert run.stderr.splitlines()[-1].startswith(
        "tf2_mapreduce: error: a map step failed: %s: corrupt GZIP file" % (corpus / "bad.txt.gz")
    )


def test_no_file_of_tensorflows_is_left_in_the_temp_directory(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_bytes(b"one two\nthree\n")
    checkpoints = str(tmp_path / "ckpt")
    for _ in range(2):  # the second resumes from the first's checkpoint
        run = run_cli(["--job=wc", "--checkpoint_dir", checkpoints, str(corpus)], env=task_env(TMPDIR=str(temp)))
        assert run.returncode == 0, run.stderr
    assert os.listdir(temp) == []
