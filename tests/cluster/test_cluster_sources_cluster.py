"""Cluster sources besides TF_CONFIG that run real clusters here: classic --*_hosts flags
and Slurm, each task a server process of its own; a source missing what it needs is one
clear error of the CLI. (The other sources, checked against fakes of their APIs:
unit/test_cluster_sources.py.)"""

import sys

import portpicker
import pytest
from helpers.corpora import write_corpus
from helpers.oracles import assert_matches_oracle, read_result
from helpers.processes import run_cli, task_env


def consecutive_free_ports(count):
    """A base port such that base .. base+count-1 are all free now."""
    for _ in range(100):
        base = portpicker.pick_unused_port()
        if base + count < 65536 and all(portpicker.is_port_free(base + i) for i in range(1, count)):
            return base
    pytest.fail("no %d consecutive free ports" % count)


def flag_source(ports):
    hosts = ["localhost:%d" % p for p in ports]
    common = ["--chief_host", hosts[0], "--ps_hosts", hosts[1], "--worker_hosts", ",".join(hosts[2:])]
    tasks = [
        (["--task_type", role, "--task_index", str(index)], {})
        for role, index in (("ps", 0), ("worker", 0), ("worker", 1))
    ]
    return common, {}, tasks


def slurm_source(_):
    base = consecutive_free_ports(4)
    step = {"SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NODELIST": "localhost", "SLURM_STEP_TASKS_PER_NODE": "4"}
    common = ["--cluster_resolver", "slurm", "--port", str(base)]
    # Ranks in TF's order: chief, then ps, then workers.
    return common, dict(step, SLURM_PROCID="0"), [([], dict(step, SLURM_PROCID=str(rank))) for rank in (1, 2, 3)]


@pytest.mark.parametrize("source", [flag_source, slurm_source], ids=["flags", "slurm"])
def test_cluster_from_flags_or_slurm_counts_exactly(tmp_path, processes, source):
    paths = write_corpus(str(tmp_path / "corpus"), 30, seed=21)
    common, chief_env, tasks = source([portpicker.pick_unused_port() for _ in range(4)])
    servers = [
        processes.start(
            [sys.executable, "-m", "tf2_mapreduce.server", *common, *args],
            env=task_env(**env),
            log_path=str(tmp_path / ("server-%d.log" % i)),
        )
        for i, (args, env) in enumerate(tasks)
    ]
    output = str(tmp_path / "result.json")
    run = run_cli(["--input", str(tmp_path / "corpus"), "--output", output, *common], env=task_env(**chief_env))
    assert run.returncode == 0, run.stderr
    assert "on 1 chief, 1 ps, 2 workers" in run.stderr and "(local)" not in run.stderr
    assert_matches_oracle(read_result(output), paths)
    assert [server.wait(timeout=30) for server in servers] == [0, 0, 0]


@pytest.mark.parametrize(
    "argv, env, message",
    [
        (
            ["--ps_hosts=localhost:2", "--worker_hosts=localhost:3"],
            {},
            "--cluster_resolver=flags: --chief_host is missing",
        ),
        (
            ["--cluster_resolver=slurm", "--ps_hosts=localhost:2"],
            {},
            "--ps_hosts describes the cluster; it cannot be combined with --cluster_resolver=slurm",
        ),
        (
            ["--cluster_resolver=slurm"],
            {},
            "--cluster_resolver=slurm: SLURM_STEP_NUM_TASKS is not set (run it inside a Slurm job step",
        ),
        (
            ["--cluster_resolver=slurm", "--ps_tasks=2"],
            {"SLURM_STEP_NUM_TASKS": "3", "SLURM_PROCID": "0"},
            "--cluster_resolver=slurm: the step has 3 task(s); it needs a chief, --ps_tasks=2 ps and at least 1 worker",
        ),
        (["--cluster_resolver=kubernetes"], {}, "--cluster_resolver=kubernetes: give --k8s_job"),
        (["--cluster_resolver=tpu"], {}, "--cluster_resolver=tpu: give --tpu"),
    ],
)
def test_a_source_missing_what_it_needs_is_one_clear_error(tmp_path, argv, env, message):
    run = run_cli(argv, env=task_env(**env), timeout=120)
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("tf2_mapreduce: error:")]
    assert len(errors) == 1 and message in errors[0], run.stderr


def test_server_of_a_flags_cluster_must_be_told_its_task(tmp_path):
    run = run_cli(
        ["--chief_host=localhost:1", "--ps_hosts=localhost:2", "--worker_hosts=localhost:3"],
        env=task_env(),
        timeout=120,
        command=[sys.executable, "-m", "tf2_mapreduce.server"],
    )
    assert run.returncode == 2
    assert "--cluster_resolver=flags: give this task's --task_type (ps or worker) and --task_index" in run.stderr
