"""The front door's checks: `--help` lists the tool's flags in groups, and every check
that needs no cluster fails before anything starts, in one line with exit status 2: bad
flags, jobs, outputs and settings, a malformed TF_CONFIG, an input that cannot be listed;
a server without a good TF_CONFIG refuses too. No server and no cluster is started here."""

import os
import subprocess
import sys

import pytest
from helpers.processes import REPO, ConfiguredCluster, run_cli, servers_of, task_env, unprivileged

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


def without_tensorflow(tmp_path):
    """The environment of a coordinator for which TensorFlow cannot be imported: a check
    that fails in it fails before the import (seconds), as every check needing no cluster must."""
    fake = tmp_path / "no_tensorflow" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('TensorFlow imported before a check that needs none')\n")
    path = os.pathsep.join(filter(None, [str(fake.parent), os.environ.get("PYTHONPATH")]))
    return task_env(PYTHONPATH=path)


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
        (["--job=wordfreq", "--output=%s" % REPO], "--output %s: is a directory" % REPO),
        (["--job=vocab", "--features=a", "--output_dir=/proc/vocab"], "--output_dir /proc/vocab: cannot be made: "),
        (["--keep_serving"], "--keep_serving needs a configured cluster"),
        (["--job=wc", "--output=wc.tsv"], "--output wc.tsv: this job writes JSON; name the file *.json"),
        (
            ["--job=vocab", "--features=a", "--output=v.json"],
            "this job writes a vocabulary per feature: use --output_dir",
        ),
        (["--job=wordcount", "--output_dir=out"], "--output_dir is for jobs that write files"),
        (["--job=reshard", "--output=r.json"], "--output: this job writes records into files: use --output_dir"),
        (
            ["--job=transform"],
            "--job=transform needs --preprocessing_fn (to analyze and transform) or --transform_output",
        ),
        (
            ["--job=transform", "--preprocessing_fn=json:dumps", "--transform_output=t", "--output_dir=out"],
            "or --transform_output (to apply an earlier transform), one of the two",
        ),
        (
            ["--job=transform", "--transform_output=/nonexistent/t", "--output_dir=out"],
            "--transform_output /nonexistent/t: no transform_fn/saved_model.pb: not the output of a transform",
        ),
        (
            ["--job=transform", "--transform_output=%s" % REPO, "--output_dir=%s/" % REPO],
            "the output replaces its directory whole; write it apart from the transform it applies",
        ),
        (
            ["--job=transform", "--transform_output=/nonexistent/t", "--schema=s.pbtxt", "--output_dir=out"],
            "--transform_output applies an earlier transform as it was written, over the raw schema written with it",
        ),
        (["--job=transform", "--preprocessing_fn=nocolon"], "--preprocessing_fn=nocolon: give MODULE:FUNCTION"),
        (
            ["--job=transform", "--preprocessing_fn=json:dumps", "--output=x.json"],
            "--job=transform writes a directory: give --output_dir, not --output",
        ),
        (
            ["--job=transform", "--preprocessing_fn=no_such_module_x.fns:f", "--output_dir=out"],
            "--preprocessing_fn=no_such_module_x.fns:f: cannot import no_such_module_x: No module named",
        ),
        (
            ["--job=transform", "--preprocessing_fn=json:dumps", "--schema=/nonexistent/s.pbtxt", "--output_dir=out"],
            "--schema /nonexistent/s.pbtxt: cannot be read: No such file or directory",
        ),
        (
            ["--job=transform", "--preprocessing_fn=json:dumps", "--custom_config={", "--output_dir=out"],
            "--custom_config: not JSON: ",
        ),
        (["--input", "/nonexistent/x.txt"], "/nonexistent/x.txt: no such file or directory"),
        (["--input", "/nonexistent/x.txt", "--local_cluster=processes"], "/nonexistent/x.txt: no such file"),
    ],
)
def test_checks_that_need_no_cluster_fail_before_tensorflow_is_imported(tmp_path, args, error):
    run = run_cli(args, env=without_tensorflow(tmp_path), timeout=60)
    assert run.returncode == 2, run.stderr
    lines = run.stderr.splitlines()
    assert lines == ["tf2_mapreduce: error: " + lines[0].split("error: ", 1)[1]] and error in lines[0], run.stderr
    assert not os.path.exists(os.path.join(REPO, "out")), "an output claimed by a job that was refused"


def test_a_bad_pattern_is_refused_before_the_cluster_starts(tmp_path):
    # Compiling it takes TensorFlow's RE2: after the import, before any server.
    run = run_cli(["--job=grep", "--pattern=(", "--local_cluster=processes"], env=task_env())
    assert run.returncode == 2, run.stderr
    assert "tf2_mapreduce: error: --pattern '(': not a valid RE2 regular expression: missing ): (" in run.stderr
    assert "started a local cluster" not in run.stderr and servers_of(run.pid) == []


def test_a_bad_setting_of_the_native_ops_is_refused():
    run = run_cli([], env=task_env(TF2_MAPREDUCE_NATIVE="sometimes"))
    assert run.returncode == 2
    assert run.stderr.strip() == "tf2_mapreduce: error: TF2_MAPREDUCE_NATIVE=sometimes: use one of auto, require, off"


@pytest.mark.parametrize(
    "args, tf_config, code, message",
    [
        (["--input", "/nonexistent/x.txt"], True, 2, "error: /nonexistent/x.txt: no such file or directory"),
        (["--input", "/nonexistent/*.txt"], True, 2, "error: /nonexistent/*.txt: no path matched"),
        (
            ["--num_workers", "3"],
            True,
            2,
            "error: --num_workers is for the local cluster; TF_CONFIG already defines the cluster",
        ),
        (["--job", "nope"], True, 2, "error: --job=nope: unknown job"),
        (["--keep_serving"], False, 2, "error: --keep_serving needs a configured cluster"),
    ],
)
def test_bad_usage_fails_before_any_work(tmp_path, processes, args, tf_config, code, message):
    # No server is started: these must be refused before the coordinator connects.
    env = ConfiguredCluster(tmp_path, processes, 1, 1).chief_env() if tf_config else task_env()
    run = run_cli(args + ["--connect_timeout", "300"], env=env, timeout=120)
    assert run.returncode == code, run.stderr
    assert message in run.stderr
    assert len([line for line in run.stderr.splitlines() if line.startswith("tf2_mapreduce: error:")]) == 1


@pytest.mark.parametrize(
    "tf_config, message",
    [
        ('{"cluster": {', "malformed TF_CONFIG: not valid JSON"),
        (
            '{"cluster": {"chief": ["localhost:1"], "ps": ["localhost:2"], "worker": ["localhost:3"]}, '
            '"task": {"type": "ps", "index": 0}}',
            "malformed TF_CONFIG: task type 'ps' cannot run here (expected chief)",
        ),
    ],
)
def test_malformed_tf_config_for_the_coordinator(tf_config, message):
    run = run_cli([], env=task_env(TF_CONFIG=tf_config), timeout=120)
    assert run.returncode == 2 and "error: " + message in run.stderr


def test_server_without_or_with_bad_tf_config(tmp_path):
    for tf_config, message in [
        (None, "TF_CONFIG is not set"),
        (
            '{"cluster": {"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3"]}, "task": {"type": "chief"}}',
            "task type 'chief' cannot run here (expected ps or worker)",
        ),
    ]:
        env = task_env() if tf_config is None else task_env(TF_CONFIG=tf_config)
        out = subprocess.run([sys.executable, "-m", "tf2_mapreduce.server"], env=env, capture_output=True, timeout=120)
        assert out.returncode == 2 and message in out.stderr.decode()


@pytest.mark.parametrize("local_cluster", ["inprocess", "processes"])
def test_local_run_with_bad_input_fails_before_its_cluster_starts(tmp_path, local_cluster):
    run = run_cli(["--input", str(tmp_path / "missing.txt"), "--local_cluster=" + local_cluster], env=task_env())
    assert run.returncode == 2
    assert "error: %s: no such file or directory" % (tmp_path / "missing.txt") in run.stderr
    assert "started a local cluster" not in run.stderr
    assert servers_of(run.pid) == []


def test_fail_at_listing_names_the_first_bad_input(tmp_path):
    root = tmp_path / "in"
    root.mkdir()
    (root / "a.txt").write_bytes(b"fine")
    (root / "b.txt").write_bytes(b"locked")
    os.chmod(root / "b.txt", 0)
    command = unprivileged([sys.executable, "-m", "tf2_mapreduce.coordinator"])
    run = run_cli(["--input", str(root)], env=task_env(), command=command)
    assert run.returncode == 2
    assert "tf2_mapreduce: error: %s: permission denied" % (root / "b.txt") in run.stderr.splitlines()
    os.chmod(root / "b.txt", 0o644)
