"""The Kubernetes manifest of scripts/make_k8s.py: parsed, and checked to describe one
cluster that every pod agrees on, each task reachable under its Service's name."""

import json
import os
import subprocess
import sys

import pytest
from helpers.processes import SCRIPTS

from tf2_mapreduce.cluster import sources as cluster_sources
from tf2_mapreduce.cluster import spec as cluster_spec


def make_k8s(*args):
    return subprocess.run(
        [sys.executable, os.path.join(SCRIPTS, "make_k8s.py"), *args], capture_output=True, timeout=60
    )


def documents(text):
    """The manifest's YAML documents; each is a JSON object (JSON is YAML)."""
    body = "\n".join(line for line in text.splitlines() if not line.startswith("#"))
    return [json.loads(part) for part in body.split("---\n") if part.strip()]


def test_manifest_has_a_service_and_a_job_per_task_agreeing_on_one_cluster():
    out = make_k8s(
        "--name",
        "wc",
        "--image",
        "registry.example/tf2-mapreduce:0.1",
        "--namespace",
        "data",
        "--num_ps",
        "2",
        "--num_workers",
        "3",
        "--port",
        "2222",
        "--",
        "--input",
        "gs://bucket/corpus",
        "--checkpoint_dir",
        "gs://bucket/ckpt/wc",
    )
    assert out.returncode == 0, out.stderr
    objects = documents(out.stdout.decode())
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}
    jobs = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Job"}
    tasks = ["wc-chief-0", "wc-ps-0", "wc-ps-1", "wc-worker-0", "wc-worker-1", "wc-worker-2"]
    assert sorted(services) == sorted(jobs) == sorted(tasks) and len(objects) == 12
    clusters = []
    for name in tasks:
        service, job = services[name], jobs[name]
        assert service["metadata"]["namespace"] == job["metadata"]["namespace"] == "data"
        assert service["spec"]["clusterIP"] == "None"
        pod = job["spec"]["template"]
        # The Service selects this task's pod and no other.
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
        assert (
            sum(
                service["spec"]["selector"].items() <= j["spec"]["template"]["metadata"]["labels"].items()
                for j in jobs.values()
            )
            == 1
        )
        (container,) = pod["spec"]["containers"]
        env = {e["name"]: e["value"] for e in container["env"]}
        role = pod["metadata"]["labels"][cluster_sources.K8S_ROLE_LABEL]
        parsed = cluster_spec.from_tf_config(env["TF_CONFIG"], expect_roles=(role,))
        # This task's address is its own Service's name and port.
        assert parsed.address == "%s:%d" % (name, service["spec"]["ports"][0]["port"])
        assert container["ports"][0]["containerPort"] == 2222
        assert pod["metadata"]["labels"][cluster_sources.K8S_JOB_LABEL] == "wc"
        assert pod["spec"]["restartPolicy"] == "OnFailure"
        clusters.append(parsed.jobs)
        if role == "chief":
            assert container["command"] == [
                "python",
                "-m",
                "tf2_mapreduce.coordinator",
                "--input",
                "gs://bucket/corpus",
                "--checkpoint_dir",
                "gs://bucket/ckpt/wc",
            ]
        else:
            assert container["command"] == ["python", "-m", "tf2_mapreduce.server"]
    assert all(c == clusters[0] for c in clusters)
    assert {role: len(addresses) for role, addresses in clusters[0].items()} == {"chief": 1, "ps": 2, "worker": 3}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--name", "WC_1", "--image", "i"], "--name='WC_1': use lower-case letters"),
        (["--name", "wc"], "--image"),
    ],
)
def test_bad_manifest_flags_are_refused(args, message):
    out = make_k8s(*args)
    assert out.returncode != 0 and not out.stdout
    assert message in out.stderr.decode()
