"""The local cluster launcher: children come up, are reaped, and a dead one is named."""

import os
import shutil

import pytest

from tf2_mapreduce.cluster import local as local_cluster
from tf2_mapreduce.cluster import spec as cluster_spec
from tf2_mapreduce.errors import ClusterError


def child_servers(num_ps, num_workers):
    servers = local_cluster.ChildServers(local_cluster.local_spec(num_ps, num_workers))
    servers.start()
    return servers


def test_children_come_up_and_are_reaped():
    local = child_servers(num_ps=1, num_workers=2)
    try:
        cluster_spec.wait_for_tasks(local.spec, timeout=120, check=local.check_alive)
        assert sorted(local.processes) == [("ps", 0), ("worker", 0), ("worker", 1)]
        assert all(proc.poll() is None for proc in local.processes.values())
    finally:
        local.close()
    assert all(proc.returncode is not None for proc in local.processes.values())
    assert not os.path.exists(local.log_dir)


def test_a_child_that_dies_is_named_and_its_log_kept():
    local = child_servers(num_ps=1, num_workers=1)
    try:
        local.processes["worker", 0].kill()
        with pytest.raises(ClusterError) as e:
            cluster_spec.wait_for_tasks(local.spec, timeout=120, check=local.check_alive)
        assert str(e.value).startswith("local worker 0 exited with status -9")
        assert local.log_path("worker", 0) in str(e.value)
    finally:
        local.close()
    try:
        assert os.path.exists(local.log_path("worker", 0))
    finally:
        shutil.rmtree(local.log_dir)
