"""Tasks on hosts of their own: each in a network namespace with its own IP address,
joined by veth pairs to a bridge in one more namespace (the switch), so they reach
each other only over those links, as on separate machines. Needs root and iproute2;
skipped, with the reason, where the machine does not allow it."""

import sys
import time

import pytest
from helpers import switched_hosts
from helpers.corpora import write_corpus
from helpers.oracles import assert_matches_oracle, read_result
from helpers.processes import LiveCoordinator, live_args, run_cli, task_env

from tf2_mapreduce.cluster import spec as cluster_spec

OUTAGE = 8  # seconds
WHY_NOT = switched_hosts.why_not()
pytestmark = pytest.mark.netns


@pytest.fixture
def hosts(processes):
    # A failure, not a skip: where CI runs the suite, namespaces can be made. Elsewhere,
    # deselect these tests by name: pytest -m "not netns".
    assert WHY_NOT is None, "no network namespaces here (%s): run pytest -m 'not netns'" % WHY_NOT
    switched_hosts.remove_stale()
    made = switched_hosts.SwitchedHosts(["chief", "ps0", "worker0", "worker1"])
    try:
        yield made
    finally:
        processes.reap()  # nothing may keep running in a namespace about to go
        made.delete()


def start_cluster(hosts, processes, tmp_path):
    jobs = {
        "chief": [hosts.addresses["chief"]],
        "ps": [hosts.addresses["ps0"]],
        "worker": [hosts.addresses["worker%d" % i] for i in range(2)],
    }
    cluster = cluster_spec.ClusterSpec(jobs, "chief", 0)
    servers = {}
    for role, index, _ in cluster.tasks():
        name = "ps0" if role == "ps" else "worker%d" % index
        servers[name] = processes.start(
            hosts.command(name, [sys.executable, "-m", "tf2_mapreduce.server"]),
            env=task_env(TF_CONFIG=cluster.tf_config(role, index)),
            log_path=str(tmp_path / ("%s.log" % name)),
        )
    return cluster, servers


def test_tasks_on_separate_hosts_count_exactly(tmp_path, processes, hosts):
    paths = write_corpus(str(tmp_path / "corpus"), 40, seed=31)
    cluster, servers = start_cluster(hosts, processes, tmp_path)
    output = str(tmp_path / "result.json")
    run = run_cli(
        ["--input", str(tmp_path / "corpus"), "--output", output],
        timeout=180,
        env=task_env(TF_CONFIG=cluster.tf_config("chief", 0)),
        command=hosts.command("chief", [sys.executable, "-m", "tf2_mapreduce.coordinator"]),
    )
    assert run.returncode == 0, run.stderr
    assert_matches_oracle(read_result(output), paths)
    assert {name: proc.wait(timeout=30) for name, proc in servers.items()} == {"ps0": 0, "worker0": 0, "worker1": 0}


def test_a_worker_whose_link_is_cut_mid_job_is_survived(tmp_path, processes, hosts):
    num_files = 1500
    paths = write_corpus(str(tmp_path / "corpus"), num_files, seed=32, max_words=50)
    cluster, servers = start_cluster(hosts, processes, tmp_path)
    output = str(tmp_path / "result.json")
    job = LiveCoordinator(
        live_args(tmp_path / "corpus", output),
        task_env(TF_CONFIG=cluster.tf_config("chief", 0)),
        processes,
        tmp_path / "coordinator.log",
        command=hosts.command("chief", [sys.executable, "-m", "tf2_mapreduce.coordinator"]),
    )
    job.wait_for_files(1)
    hosts.set_link("worker1", "down")
    assert job.proc.poll() is None  # cut mid-job
    time.sleep(OUTAGE)  # how long the link stays down: the scenario, not a wait for a result
    hosts.set_link("worker1", "up")
    code, _, stderr = job.finish()
    assert code == 0, stderr
    assert_matches_oracle(read_result(output), paths)
    # The cut-off worker was taken back and told the job is over, like the others.
    assert {name: proc.wait(timeout=30) for name, proc in servers.items()} == {"ps0": 0, "worker0": 0, "worker1": 0}
