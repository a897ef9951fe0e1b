"""A `Cluster` made from what describes it, before it connects: TF_CONFIG or any of
TensorFlow's cluster resolvers, this process its chief, validated as the CLI's are."""

import pytest
import tensorflow as tf

import tf2_mapreduce as mr
from tf2_mapreduce.errors import ClusterError, UsageError

JOBS = {"chief": ["a:1"], "ps": ["b:1"], "worker": ["c:1", "d:1"]}


def test_a_cluster_from_a_resolver_is_its_spec_with_this_process_as_chief():
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(JOBS), task_type="worker", task_id=1
    )
    cluster = mr.Cluster.from_resolver(resolver, connect_timeout=5)
    assert cluster.spec.jobs == JOBS and (cluster.spec.task_type, cluster.spec.task_index) == ("chief", 0)
    assert cluster.connect_timeout == 5 and not cluster.local_processes


def test_a_resolver_or_tf_config_that_cannot_run_a_job_is_refused():
    no_ps = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({"chief": ["a:1"], "worker": ["c:1"]})
    )
    with pytest.raises(UsageError, match=r"SimpleClusterResolver: the cluster needs at least one 'ps' task"):
        mr.Cluster.from_resolver(no_ps)
    with pytest.raises(ClusterError, match="TF_CONFIG is not set"):
        mr.Cluster.from_tf_config("")
    whole = tf.distribute.cluster_resolver.SimpleClusterResolver(tf.train.ClusterSpec(JOBS))
    with pytest.raises(TypeError, match="retries"):
        mr.Cluster.from_resolver(whole, retries=3)


def test_a_job_cannot_run_on_a_cluster_that_is_not_open():
    cluster = mr.Cluster.from_tf_config(
        '{"cluster": %s, "task": {"type": "chief", "index": 0}}' % str(JOBS).replace("'", '"')
    )
    with pytest.raises(ClusterError, match="the cluster is not open"):
        cluster.submit(mr.WordCount(), ["x"])
