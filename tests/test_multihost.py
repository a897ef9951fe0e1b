"""Tasks on hosts of their own: each in a network namespace with its own IP address,
joined by veth pairs to a bridge in one more namespace (the switch), so they reach
each other only over those links, as on separate machines. Needs root and iproute2;
skipped, with the reason, where the machine does not allow it."""

import os
import shutil
import subprocess
import sys
import time

import pytest
from conftest import LiveCoordinator, assert_matches_oracle, read_result, run_cli, task_env, write_corpus

from tf2_mapreduce import cluster as cluster_lib

OUTAGE = 8  # seconds
PORT = 2222  # every host has its own ports: the same one for all, as on real machines
SUBNET = "10.77.%d.%d"


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Hosts:
    """Network namespaces `name` -> address, and the switch's end of each link."""

    def __init__(self, names):
        tag = "%d" % os.getpid()
        self.prefix = "tfmr%s" % tag
        self.switch = self.prefix + "-switch"
        self.names = {}  # host name -> namespace
        self.addresses = {}  # host name -> IP
        self.links = {}  # host name -> the switch end of its veth pair
        self.created = []
        try:
            self._netns(self.switch)
            ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            ip("-n", self.switch, "link", "set", "br0", "up")
            for i, name in enumerate(names):
                namespace = "%s-%s" % (self.prefix, name)
                self._netns(namespace)
                host_end, switch_end = "v%sh%d" % (tag, i), "v%ss%d" % (tag, i)
                ip(
                    "link",
                    "add",
                    host_end,
                    "netns",
                    namespace,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    switch_end,
                    "netns",
                    self.switch,
                )
                ip("-n", self.switch, "link", "set", switch_end, "master", "br0", "up")
                address = SUBNET % (os.getpid() % 250, i + 1)
                ip("-n", namespace, "addr", "add", address + "/24", "dev", host_end)
                ip("-n", namespace, "link", "set", host_end, "up")
                ip("-n", namespace, "link", "set", "lo", "up")
                self.names[name], self.addresses[name], self.links[name] = namespace, address, switch_end
        except BaseException:
            self.delete()
            raise

    def _netns(self, namespace):
        ip("netns", "add", namespace)
        self.created.append(namespace)

    def command(self, name, argv):
        """`argv` run on host `name`."""
        return ["ip", "netns", "exec", self.names[name], *argv]

    def set_link(self, name, state):
        ip("-n", self.switch, "link", "set", self.links[name], state)

    def delete(self):
        for namespace in reversed(self.created):
            subprocess.run(["ip", "netns", "delete", namespace], capture_output=True, timeout=30)


def _why_no_namespaces():
    if not shutil.which("ip"):
        return "iproute2's ip command is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces and veth pairs needs root"
    probe = "tfmr%d-probe" % os.getpid()
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, timeout=30)
    if made.returncode:
        return "ip netns add failed: %s" % made.stderr.decode(errors="replace").strip()
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True, timeout=30)
    return None


WHY_NOT = _why_no_namespaces()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason="no network namespaces here: %s" % WHY_NOT)


def remove_stale_namespaces():
    """Deletes the namespaces of test runs that died without cleaning up (killed by
    the hang guard, say): their names carry the pid of a process that is gone."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, timeout=30).stdout.decode()
    for name in (line.split()[0] for line in listed.splitlines() if line.startswith("tfmr")):
        pid = name[len("tfmr") :].split("-")[0]
        if pid.isdigit() and not os.path.exists("/proc/%s" % pid):
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, timeout=30)


@pytest.fixture
def hosts(processes):
    remove_stale_namespaces()
    made = Hosts(["chief", "ps0", "worker0", "worker1"])
    try:
        yield made
    finally:
        processes.reap()  # nothing may keep running in a namespace about to go
        made.delete()


def start_cluster(hosts, processes, tmp_path):
    jobs = {
        "chief": ["%s:%d" % (hosts.addresses["chief"], PORT)],
        "ps": ["%s:%d" % (hosts.addresses["ps0"], PORT)],
        "worker": ["%s:%d" % (hosts.addresses["worker%d" % i], PORT) for i in range(2)],
    }
    cluster = cluster_lib.Cluster(jobs, "chief", 0)
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
        ["--input", str(tmp_path / "corpus"), "--files_per_step", "1", "--progress_every", "0.2", "--output", output],
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
