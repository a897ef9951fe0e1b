"""The front door: `--help` lists the tool's flags, every check that needs no cluster
fails before anything starts, the first run says it builds the native ops, the fallback
without them is said once and still exact, and the Python API is narrow and checked."""

import os
import re
import subprocess
import sys

import pytest
from conftest import REPO, oracle_words, run_cli, task_env

import tf2_mapreduce as mr
from tf2_mapreduce.run.options import Options

SAMPLE = os.path.join(REPO, "tf2_mapreduce", "data", "sample")

CLI_FLAGS = [
    "input", "job", "pattern", "features", "format", "compression", "top_k", "min_count", "output",
    "output_dir", "vocabulary_format", "num_ps", "num_workers", "local_cluster", "private_network",
    "logdir", "progress_every", "connect_timeout", "split_size", "read_size", "files_per_step",
    "on_error", "checkpoint_dir", "checkpoint_every", "worker_timeout", "keep_serving",
    "shutdown_timeout", "cluster_resolver", "chief_host", "ps_hosts", "worker_hosts",
]  # fmt: skip
SERVER_FLAGS = ["keep_serving", "idle_timeout", "cluster_resolver", "ps_hosts", "worker_hosts"]


def help_of(module, flag):
    run = subprocess.run(
        [sys.executable, "-m", module, flag], env=task_env(), capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0 and not run.stderr, run.stderr
    return run.stdout


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize(
    "module, names", [("tf2_mapreduce.coordinator", CLI_FLAGS), ("tf2_mapreduce.server", SERVER_FLAGS)]
)
def test_help_begins_with_usage_and_examples_and_lists_the_flags_in_groups(module, names, flag):
    text = help_of(module, flag)
    lines = text.splitlines()
    assert lines[0] == "usage: python -m %s %s" % (module, lines[0].split(module + " ", 1)[1])
    assert "\nexamples:\n  # " in text and "\n  python -m %s" % module in text
    listed = [line.split("=")[0].split()[0] for line in lines if line.startswith("  --")]
    for name in names:
        assert "--" + name in listed or "--[no]" + name in listed, name
    assert "--verbosity" in listed
    if module.endswith("coordinator"):
        headings = [line for line in lines if line and not line.startswith(" ") and line.endswith(":")]
        assert headings == ["examples:", "job:", "inputs and outputs:", "running:", "cluster:"]
        assert "The job to run. Built in: wordcount (total words)" in text
        assert "(default: 64 MB)" in text and ".;" not in text and "<auto|" not in text


@pytest.mark.parametrize(
    "args, error",
    [
        (["--jbo=wordcount"], "unknown flag --jbo (did you mean --job?)"),
        (["--read_size=big"], "flag --read_size=big: invalid literal for int()"),
        (["-x"], "unknown flag --x"),
    ],
)
def test_bad_usage_exits_2_with_one_line(args, error):
    run = run_cli(args, env=task_env())
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines() == [run.stderr.splitlines()[0]] and error in run.stderr, run.stderr


@pytest.mark.parametrize(
    "args, error",
    [
        (["--job=wordcnt"], "--job=wordcnt: unknown job (built in: grep, "),
        (["--features=query"], "--features is only for --job=stats or vocab"),
        (["--job=grep"], "--job=grep needs --pattern"),
        (["--job=vocab", "--features=a:float"], "--features: a has type 'float'"),
        (["--output=/proc/x.json"], "--output /proc/x.json: cannot be written there: "),
        (
            ["--output=/nonexistent-dir/x.json"],
            "--output /nonexistent-dir/x.json: directory /nonexistent-dir does not exist",
        ),
        (["--output=%s" % REPO], "--output %s: is a directory" % REPO),
        (["--output_dir=/proc/vocab"], "--output_dir /proc/vocab: cannot be made: "),
        (["--keep_serving"], "--keep_serving needs a configured cluster"),
    ],
)
def test_checks_that_need_no_cluster_fail_before_anything_starts(args, error):
    run = run_cli(args, env=task_env())
    assert run.returncode == 2, run.stderr
    lines = run.stderr.splitlines()
    assert lines == ["tf2_mapreduce: error: " + lines[0].split("error: ", 1)[1]] and error in lines[0], run.stderr


def test_an_output_the_job_cannot_write_is_refused_before_the_cluster_starts(tmp_path):
    run = run_cli(["--job=wc", "--output", str(tmp_path / "wc.tsv")], env=task_env())
    assert run.returncode == 2, run.stderr
    assert "error: --output %s: this job writes JSON; name the file *.json" % (tmp_path / "wc.tsv") in run.stderr
    assert "started a local cluster" not in run.stderr and not os.listdir(tmp_path)


def test_a_bad_setting_of_the_native_ops_is_refused():
    run = run_cli([], env=task_env(TF2_MAPREDUCE_NATIVE="sometimes"))
    assert run.returncode == 2
    assert run.stderr.strip() == "tf2_mapreduce: error: TF2_MAPREDUCE_NATIVE=sometimes: use one of auto, require, off"


@pytest.mark.cluster
def test_the_first_run_says_it_builds_the_native_ops_and_a_failed_build_is_said_once(tmp_path):
    """A machine without a compiler (CXX=false) and nothing built yet: the build is said
    first, then one warning naming what is weaker, and the result is still exact."""
    env = task_env(CXX="false", TF2_MAPREDUCE_CACHE=str(tmp_path / "cache"))
    run = run_cli([], env=env)
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    assert re.fullmatch(
        r"tf2_mapreduce: building the native ops for TensorFlow 2\.\d+: once per machine, about \d+ s on \d+ cores\.\.\.",
        lines[0],
    ), lines[0]
    assert lines[1].startswith(
        "tf2_mapreduce: warning: going without tf2_mapreduce's native ops (false failed: exit 1)"
    )
    assert "gzip/zlib-compressed and TFRecord inputs are refused" in lines[1]
    assert sum("native ops" in line for line in lines) == 2
    paths = sorted(os.path.join(SAMPLE, name) for name in os.listdir(SAMPLE))
    assert run.stdout.startswith("wordcount: %d words in %d files" % (oracle_words(paths), len(paths)))
    required = run_cli([], env=dict(env, TF2_MAPREDUCE_NATIVE="require"))
    assert required.returncode == 2
    assert required.stderr.splitlines()[-1] == (
        "tf2_mapreduce: error: TF2_MAPREDUCE_NATIVE=require, but tf2_mapreduce's native ops cannot be used here: "
        "false failed: exit 1"
    )
    assert "started a local cluster" not in required.stderr


def test_the_public_api_is_narrow_and_loaded_on_first_use():
    assert set(mr.__all__) == {
        "__version__", "Cluster", "JobHandle", "Result", "FileValue", "Progress", "Job", "per_text",
        "WordCount", "WordFreq", "LineCount", "Wc", "LongestLine", "Grep", "RecordCount", "Vocab", "Stats",
        "Reducer", "Fold", "Sum", "VectorSum", "Min", "Max", "KeySum", "Distinct", "Vocabularies", "Statistics",
        "DatasetStats", "FeatureStats", "NumericStats", "StringStats", "unescape",
        "Error", "UsageError", "InputError", "OutputError", "ClusterError", "JobFailed", "MapOutputError",
        "Interrupted", "Cancelled",
    }  # fmt: skip
    for name in mr.__all__:
        assert getattr(mr, name) is not None
    probe = "import sys, tf2_mapreduce, tf2_mapreduce.coordinator; print('tensorflow' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", probe], env=task_env(), capture_output=True, text=True, timeout=60)
    assert run.stdout.strip() == "False", run.stderr


TF_CONFIG = '{"cluster": {"chief": ["a:1"], "ps": ["b:1"], "worker": ["c:1"]}, "task": {"type": "chief", "index": 0}}'


def test_unknown_options_and_settings_are_type_errors():
    with pytest.raises(TypeError, match=r"unknown option\(s\) chekpoint_dir, retries; the options are split_size,"):
        Options.of(chekpoint_dir="x", retries=3, read_size=10)
    assert Options.of(read_size=10) == Options(read_size=10)
    with pytest.raises(TypeError, match="keep_servng"):
        mr.Cluster.from_tf_config(TF_CONFIG, keep_servng=True)


def test_a_run_with_an_unknown_option_or_no_job_is_refused_before_it_starts(inprocess):
    with pytest.raises(TypeError, match=r"unknown option\(s\) on_eror"):
        inprocess.run(mr.WordCount(), [SAMPLE], on_eror="skip")
    with pytest.raises(TypeError, match="job must be a tf2_mapreduce Job"):
        inprocess.run("wordcount", [SAMPLE])
    assert inprocess.run(mr.WordCount(), SAMPLE).files_done == len(os.listdir(SAMPLE))
