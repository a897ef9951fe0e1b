"""TF_CONFIG parsing and the per-task config files of scripts/make_configs.py."""

import json
import os
import subprocess
import sys

import pytest
from helpers.processes import SCRIPTS

from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import UsageError

GOOD = {
    "cluster": {"chief": ["h0:2222"], "ps": ["h1:2222"], "worker": ["h2:2222", "[::1]:2223"]},
    "task": {"type": "worker", "index": 1},
}


def test_valid_tf_config():
    c = cluster_spec.from_tf_config(json.dumps(GOOD))
    assert (c.task_type, c.task_index, c.address) == ("worker", 1, "[::1]:2223")
    assert (c.num_ps, c.num_workers) == (1, 2)
    assert json.loads(c.tf_config("ps", 0)) == {"cluster": GOOD["cluster"], "task": {"type": "ps", "index": 0}}


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("{not json", "not valid JSON"),
        ("[]", "expected a JSON object"),
        (json.dumps({"task": GOOD["task"]}), "'cluster' must be an object"),
        (json.dumps(dict(GOOD, cluster={"chief": ["h:1"], "ps": ["h:2"]})), "needs at least one 'worker' task"),
        (json.dumps(dict(GOOD, cluster={"worker": ["h:1"], "ps": ["h:2"]})), "needs exactly one 'chief' task"),
        (
            json.dumps(dict(GOOD, cluster=dict(GOOD["cluster"], chief=["a:1", "b:1"]))),
            "exactly one 'chief' task, got 2",
        ),
        (json.dumps(dict(GOOD, cluster=dict(GOOD["cluster"], master=["h:9"]))), "unknown role 'master'"),
        (json.dumps(dict(GOOD, cluster=dict(GOOD["cluster"], ps=["h1"]))), "ps address 'h1' is not host:port"),
        (json.dumps(dict(GOOD, cluster=dict(GOOD["cluster"], ps=["h1:99999"]))), "is not host:port"),
        (json.dumps(dict(GOOD, cluster=dict(GOOD["cluster"], ps=["h0:2222"]))), "share the address h0:2222"),
        (json.dumps(dict(GOOD, task={"type": "worker", "index": 2})), "task index 2 is out of range"),
        (json.dumps(dict(GOOD, task={"type": "chief", "index": 0})), "task type 'chief' cannot run here"),
        (json.dumps({"cluster": GOOD["cluster"]}), "'task' must be an object"),
    ],
)
def test_malformed_tf_config_is_one_clear_line(text, fragment):
    with pytest.raises(UsageError) as e:
        cluster_spec.from_tf_config(text, expect_roles=("ps", "worker"))
    assert str(e.value).startswith("malformed TF_CONFIG: ")
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


def source_tf_config(path):
    """TF_CONFIG as a shell that sources `path` sees it."""
    out = subprocess.run(
        ["bash", "-c", 'source "$1" && printf %s "$TF_CONFIG"', "-", path], capture_output=True, check=True, timeout=30
    )
    return json.loads(out.stdout)


def make_configs(out_dir, *flags):
    subprocess.run(
        [sys.executable, os.path.join(SCRIPTS, "make_configs.py"), "--out_dir", str(out_dir), *flags],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return {name: source_tf_config(os.path.join(out_dir, name)) for name in sorted(os.listdir(out_dir))}


def test_make_configs_consecutive_ports_one_cluster(tmp_path):
    configs = make_configs(tmp_path, "--num_ps", "2", "--num_workers", "3", "--base_port", "5000", "--host", "10.0.0.7")
    assert sorted(configs) == [
        "config_chief_0.sh",
        "config_ps_0.sh",
        "config_ps_1.sh",
        "config_worker_0.sh",
        "config_worker_1.sh",
        "config_worker_2.sh",
    ]
    expected = {
        "chief": ["10.0.0.7:5000"],
        "ps": ["10.0.0.7:5001", "10.0.0.7:5002"],
        "worker": ["10.0.0.7:5003", "10.0.0.7:5004", "10.0.0.7:5005"],
    }
    for name, config in configs.items():
        role, index = name[len("config_") : -len(".sh")].rsplit("_", 1)
        assert config == {"cluster": expected, "task": {"type": role, "index": int(index)}}
        # Every file is accepted by the program that will read it.
        roles = ("chief",) if role == "chief" else ("ps", "worker")
        assert cluster_spec.from_tf_config(json.dumps(config), expect_roles=roles).address == expected[role][int(index)]


def test_make_configs_explicit_hosts(tmp_path):
    configs = make_configs(tmp_path, "--chief_host", "c:1", "--ps_hosts", "p:2", "--worker_hosts", "w1:3,w2:4")
    assert configs["config_worker_1.sh"]["cluster"] == {"chief": ["c:1"], "ps": ["p:2"], "worker": ["w1:3", "w2:4"]}


@pytest.mark.parametrize(
    "flags",
    [
        ["--ps_hosts", "p:2"],
        ["--chief_host", "c:1", "--ps_hosts", "p", "--worker_hosts", "w:3"],
        ["--chief_host", "c:1", "--ps_hosts", "c:1", "--worker_hosts", "w:3"],
    ],
)
def test_make_configs_rejects_bad_addresses(tmp_path, flags):
    out = subprocess.run(
        [sys.executable, os.path.join(SCRIPTS, "make_configs.py"), "--out_dir", str(tmp_path), *flags],
        capture_output=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert os.listdir(tmp_path) == []
