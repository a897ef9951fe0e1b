"""Cluster sources besides TF_CONFIG: Kubernetes and Cloud TPU sources are checked against
fakes of their APIs (no cluster manager on this machine); Vertex AI's TF_CONFIG is
accepted. (Classic --*_hosts flags and Slurm run real clusters, and a source missing what
it needs is one clear error of the CLI, in cluster/test_cluster_sources_cluster.py.)"""

import json
import types

import pytest
import tensorflow as tf
from absl import flags
from absl.testing import flagsaver

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
