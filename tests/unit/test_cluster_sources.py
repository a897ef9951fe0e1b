"""Cluster sources besides TF_CONFIG: classic --*_hosts flags and Slurm run real
clusters here; Kubernetes and Cloud TPU sources are checked against fakes of their
APIs (no cluster manager on this machine); Vertex AI's TF_CONFIG is accepted."""

import json
import sys
import types

import portpicker
import pytest
import tensorflow as tf
from absl import flags
from absl.testing import flagsaver
from conftest import assert_matches_oracle, read_result, run_cli, task_env, write_corpus

from tf2_mapreduce.cli import cluster_flags
from tf2_mapreduce.cluster import sources as cluster_sources
from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import UsageError

FLAGS = flags.FLAGS
cluster_flags.define(FLAGS)


def test_vertex_ai_tf_config_is_accepted_as_is():
    config = {
        "cluster": {
            "chief": ["cmle-training-workerpool0-ab-0:2222"],
            "worker": ["cmle-training-workerpool1-ab-0:2222"],
            "ps": ["cmle-training-workerpool2-ab-0:2222"],
            "evaluator": ["cmle-training-workerpool3-ab-0:2222"],
        },
        "environment": "cloud",
        "task": {"type": "ps", "index": 0, "trial": "1"},
        "job": {"python_module": "tf2_mapreduce.server", "worker_pool_specs": [{"replica_count": 1}]},
    }
    c = cluster_spec.from_tf_config(json.dumps(config), expect_roles=("ps", "worker"))
    assert (c.task_type, c.task_index, c.address) == ("ps", 0, "cmle-training-workerpool2-ab-0:2222")
    assert sorted(c.jobs) == ["chief", "ps", "worker"]


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
@pytest.mark.cluster
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


def parsed(*argv):
    """Parses `argv` as this test's command line; flagsaver restores the flags after."""
    FLAGS(["test"] + list(argv))


@pytest.fixture
def saved_flags():
    with flagsaver.flagsaver():
        yield


def pod(name, ip, phase="Running"):
    return types.SimpleNamespace(
        metadata=types.SimpleNamespace(name=name),
        status=types.SimpleNamespace(phase=phase, pod_ip=ip, host_ip="192.168.0.1"),
    )


class FakeKubernetes:
    """The one call TF's resolver makes, answered from a list of pods with labels."""

    def __init__(self, pods):
        self.pods = pods  # (labels, pod)
        self.selectors = []

    def list_pod_for_all_namespaces(self, label_selector):
        self.selectors.append(label_selector)
        wanted = dict(item.split("=") for item in label_selector.split(","))
        return types.SimpleNamespace(items=[p for labels, p in self.pods if wanted.items() <= labels.items()])


def labels(job, role):
    return {cluster_sources.K8S_JOB_LABEL: job, cluster_sources.K8S_ROLE_LABEL: role}


def test_kubernetes_source_uses_labelled_pods_own_ips(saved_flags, monkeypatch):
    api = FakeKubernetes(
        [
            (labels("wc", "worker"), pod("wc-worker-1", "10.4.0.12")),
            (labels("wc", "worker"), pod("wc-worker-0", "10.4.0.11")),
            (labels("wc", "ps"), pod("wc-ps-0", "10.4.0.10")),
            (labels("wc", "chief"), pod("wc-chief-0", "10.4.0.9")),
            (labels("other", "worker"), pod("other-worker-0", "10.4.0.99")),
        ]
    )
    monkeypatch.setattr(cluster_sources, "kubernetes_api", lambda: api)
    parsed("--cluster_resolver=kubernetes", "--k8s_job=wc", "--port=2222", "--task_type=worker", "--task_index=1")
    c = cluster_sources.resolve(cluster_flags.source(FLAGS), expect_roles=("ps", "worker"))
    # Pods sorted by name give the indices; each is reached on its own IP, not its node's.
    assert c.jobs == {
        "chief": ["10.4.0.9:2222"],
        "ps": ["10.4.0.10:2222"],
        "worker": ["10.4.0.11:2222", "10.4.0.12:2222"],
    }
    assert (c.task_type, c.task_index) == ("worker", 1)
    assert "tf2-mapreduce/job=wc,tf2-mapreduce/role=ps" in api.selectors


def test_kubernetes_source_refuses_a_pod_not_running_yet(saved_flags, monkeypatch):
    api = FakeKubernetes(
        [
            (labels("wc", role), pod("wc-%s-0" % role, "10.0.0.%d" % i, "Running" if role != "ps" else "Pending"))
            for i, role in enumerate(("chief", "ps", "worker"))
        ]
    )
    monkeypatch.setattr(cluster_sources, "kubernetes_api", lambda: api)
    parsed("--cluster_resolver=kubernetes", "--k8s_job=wc")
    with pytest.raises(
        UsageError, match=r'^--cluster_resolver=kubernetes: cannot list the pods: Pod "wc-ps-0" is not running'
    ):
        cluster_sources.resolve(cluster_flags.source(FLAGS), expect_roles=("chief",))


def test_tpu_source_puts_a_worker_on_every_host(saved_flags, monkeypatch):
    seen = []

    def fake_resolver(tpu, zone, project):
        seen.append((tpu, zone, project))
        return types.SimpleNamespace(
            cluster_spec=lambda: tf.train.ClusterSpec(
                {"worker": ["10.130.0.2:8470", "10.130.0.3:8470", "10.130.0.4:8470"]}
            )
        )

    monkeypatch.setattr(cluster_sources, "tpu_resolver", fake_resolver)
    parsed(
        "--cluster_resolver=tpu",
        "--tpu=my-slice",
        "--tpu_zone=us-central2-b",
        "--ps_tasks=2",
        "--port=5000",
        "--task_type=ps",
        "--task_index=1",
    )
    c = cluster_sources.resolve(cluster_flags.source(FLAGS), expect_roles=("ps", "worker"))
    assert seen == [("my-slice", "us-central2-b", None)]
    assert c.jobs == {
        "chief": ["10.130.0.2:5000"],
        "ps": ["10.130.0.2:5001", "10.130.0.3:5001"],
        "worker": ["10.130.0.2:5002", "10.130.0.3:5002", "10.130.0.4:5002"],
    }
    assert c.address == "10.130.0.3:5001"


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
