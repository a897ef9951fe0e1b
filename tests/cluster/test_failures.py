"""Failures injected into real clusters at points the job reports reaching: killed
workers, ps and coordinators, signals, idle servers. Every test checks the exact
total against the oracle (after a resume where there is one) and that no process is left.
"""

import re
import signal
import time

import pytest
from helpers.corpora import write_corpus
from helpers.oracles import assert_matches_oracle, read_result
from helpers.processes import (
    GONE_WORKER_SHUTDOWN,
    SERVER_EXIT_TIMEOUT,
    ConfiguredCluster,
    LiveCoordinator,
    gave_up_on,
    live_args,
    servers_of,
    task_env,
    wait_serving,
)

# Many small files, one per map step: ~10 s of steps on 2 cores, so that a test can
# restart a worker, or outlive a server's idle timeout, while the job still has work
# left to do. A test that acts within the first hundred files takes SHORT: the rest of
# the job, and of its rerun, is steps that take time and check nothing more.
NUM_FILES = 2500
SHORT = 1000
STEPS = r"steps by worker: (\d+) (\d+)$"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("corpus"))
    return directory, write_corpus(directory, NUM_FILES, seed=21, max_words=60)


@pytest.fixture(scope="module")
def short(tmp_path_factory):
    directory = str(tmp_path_factory.mktemp("short"))
    return directory, write_corpus(directory, SHORT, seed=22, max_words=60)


def job_args(corpus, tmp_path, *extra):
    return live_args(corpus[0], tmp_path / "result.json", *extra)


def assert_exact(tmp_path, corpus):
    assert_matches_oracle(read_result(str(tmp_path / "result.json")), corpus[1])


def resume_exactly(args, env, processes, tmp_path, corpus, saved):
    """Reruns the same command; checks it resumed with at least `saved` files done
    and finished with the oracle's counts. Returns the rerun coordinator."""
    resumed = LiveCoordinator(args, env, processes, tmp_path / "resumed.log")
    pattern = r"resuming from .*: (\d+) of %d files already done" % len(corpus[1])
    assert int(resumed.wait_for(pattern).group(1)) >= saved
    code, _, stderr = resumed.finish()
    assert code == 0, stderr
    # TensorFlow's saver traces its function again at each save (of a state on several
    # tasks) and says so from the fifth on, in lines of its own: hidden.
    assert "retracing" not in stderr, stderr
    assert_exact(tmp_path, corpus)
    return resumed


def test_killed_worker_is_survived_and_a_restarted_one_rejoins(tmp_path, processes, corpus):
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start_all()
    # A stall (the restarted worker not re-admitted) fails the test within a minute.
    job = LiveCoordinator(
        job_args(corpus, tmp_path, "--worker_timeout", "60", *GONE_WORKER_SHUTDOWN),
        cluster.chief_env(),
        processes,
        tmp_path / "coordinator.log",
    )
    job.wait_for_files(100)
    cluster.servers["worker", 0].kill()
    # Restarted with a short idle timeout: it outlives it only if the coordinator's
    # heartbeats reach the new process.
    cluster.start("worker", 0, "--idle_timeout=5")
    wait_serving(cluster, "worker", 0)
    before = int(job.wait_for(STEPS).group(1))
    # TF re-admits a restarted worker a few seconds after it is up; its step count grows again then.
    while int(job.wait_for(STEPS).group(1)) < before + 20:
        pass
    assert job.wait_for_files(0) < NUM_FILES, "the job ended before the test could kill the other worker"
    cluster.servers["worker", 1].kill()  # from now on only the restarted worker can finish the job
    code, stdout, stderr = job.finish()
    assert code == 0, stderr
    assert gave_up_on(stderr, "worker", 1) and not gave_up_on(stderr, "worker", 0)
    # TensorFlow's record of each lost worker (with a step on it) is its first line, without
    # gRPC's detail under it.
    assert re.search(r"Worker /job:worker/replica:0/task:[01] failed with ", stderr), stderr
    assert re.search(r"Worker /job:worker/\S+ failed with [^\n]*\n(Additional GRPC|:UNKNOWN)", stderr) is None, stderr
    assert_exact(tmp_path, corpus)
    assert cluster.servers["ps", 0].wait(SERVER_EXIT_TIMEOUT) == 0
    assert cluster.servers["worker", 0].wait(SERVER_EXIT_TIMEOUT) == 0


def test_no_worker_left_stops_after_worker_timeout_then_resumes(tmp_path, processes, short):
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start_all()
    args = job_args(short, tmp_path, "--checkpoint_dir", str(tmp_path / "ckpt"), "--worker_timeout", "3")
    job = LiveCoordinator(args, cluster.chief_env(), processes, tmp_path / "coordinator.log")
    job.wait_for_files(100)
    for index in range(2):
        cluster.servers["worker", index].kill()
    killed = time.monotonic()
    code, _, stderr = job.finish()
    assert code == 3
    assert time.monotonic() - killed < 30
    assert (
        "error: no map step finished for 3s (--worker_timeout) and every worker is down: worker 0 at %s"
        % cluster.addresses["worker", 0]
    ) in stderr
    for index in range(2):  # said as they went down, before the stall named them
        assert "warning: worker %d at %s stopped answering (" % (index, cluster.addresses["worker", index]) in stderr
    saved = int(job_saved(stderr))
    assert saved >= 100
    # The ps was not told to exit: the rerun needs it, with new workers.
    assert cluster.servers["ps", 0].poll() is None
    for index in range(2):
        cluster.start("worker", index)
    resume_exactly(args, cluster.chief_env(), processes, tmp_path, short, saved)
    assert cluster.exit_codes() == {task: 0 for task in cluster.tasks}


def job_saved(stderr):
    """Files done in the checkpoint a stopped coordinator says it saved."""
    return re.search(r"checkpoint saved \((\d+) of \d+ files done\)", stderr).group(1)


def test_killed_ps_stops_the_job_at_once_and_a_rerun_resumes(tmp_path, processes, short):
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start_all()
    args = job_args(short, tmp_path, "--checkpoint_dir", str(tmp_path / "ckpt"), "--checkpoint_every", "0.5")
    job = LiveCoordinator(args, cluster.chief_env(), processes, tmp_path / "coordinator.log")
    saved = int(job.wait_for(r"checkpoint saved: ([1-9]\d*) of").group(1))
    cluster.servers["ps", 0].kill()
    killed = time.monotonic()
    code, _, stderr = job.finish()
    assert code == 3
    assert time.monotonic() - killed < 20
    assert ("error: ps 0 at %s (connection refused) failed during the job" % cluster.addresses["ps", 0]) in stderr
    assert "Restart it, then run the same command: the job resumes from %s" % (tmp_path / "ckpt") in stderr
    # The workers were not told to exit: the rerun uses them.
    assert all(cluster.servers["worker", i].poll() is None for i in range(2))
    cluster.start("ps", 0)
    resume_exactly(args, cluster.chief_env(), processes, tmp_path, short, saved)
    assert cluster.exit_codes() == {task: 0 for task in cluster.tasks}


def test_killed_coordinator_rerun_resumes_on_the_same_servers(tmp_path, processes, short):
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start_all("--idle_timeout=120")
    args = job_args(short, tmp_path, "--checkpoint_dir", str(tmp_path / "ckpt"), "--checkpoint_every", "0.5")
    job = LiveCoordinator(args, cluster.chief_env(), processes, tmp_path / "coordinator.log")
    saved = int(job.wait_for(r"checkpoint saved: ([1-9]\d*) of").group(1))
    job.proc.kill()
    job.proc.wait(30)
    resume_exactly(args, cluster.chief_env(), processes, tmp_path, short, saved)
    assert cluster.exit_codes() == {task: 0 for task in cluster.tasks}


def test_servers_outlive_idle_timeout_while_a_job_runs_then_exit_after_it(tmp_path, processes, corpus):
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start_all("--idle_timeout=5")
    job = LiveCoordinator(job_args(corpus, tmp_path), cluster.chief_env(), processes, tmp_path / "coordinator.log")
    # Progress at 6 s of job time: the servers heard heartbeats for longer than 5 s.
    job.wait_for(r"\[\s*([6-9]|\d\d+)\.\ds\] \d+/%d files" % NUM_FILES)
    assert all(proc.poll() is None for proc in cluster.servers.values())
    job.proc.kill()
    killed = time.monotonic()
    assert cluster.exit_codes() == {task: 4 for task in cluster.tasks}
    assert time.monotonic() - killed < SERVER_EXIT_TIMEOUT
    assert "no coordinator for 5s (--idle_timeout), exiting" in cluster.log("ps", 0)


def wait_until_gone(pid, timeout=30):
    deadline = time.monotonic() + timeout
    while servers_of(pid):
        assert time.monotonic() < deadline, "servers of coordinator %d still alive" % pid
        time.sleep(0.1)  # the kernel delivers the parent-death signal asynchronously


def test_local_cluster_dies_with_its_coordinator_and_a_rerun_resumes(tmp_path, processes, short):
    args = job_args(
        short,
        tmp_path,
        "--checkpoint_dir",
        str(tmp_path / "ckpt"),
        "--checkpoint_every",
        "0.5",
        "--local_cluster=processes",
    )
    job = LiveCoordinator(args, task_env(), processes, tmp_path / "coordinator.log")
    saved = int(job.wait_for(r"checkpoint saved: ([1-9]\d*) of").group(1))
    assert len(servers_of(job.proc.pid)) == 3
    job.proc.kill()
    wait_until_gone(job.proc.pid)
    resumed = resume_exactly(args, task_env(), processes, tmp_path, short, saved)
    assert servers_of(resumed.proc.pid) == []


def test_sigterm_checkpoints_tells_the_servers_and_exits_143(tmp_path, processes, short):
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start_all()
    args = job_args(short, tmp_path, "--checkpoint_dir", str(tmp_path / "ckpt"))
    job = LiveCoordinator(args, cluster.chief_env(), processes, tmp_path / "coordinator.log")
    job.wait_for_files(100)
    job.proc.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    code, _, stderr = job.finish()
    assert code == 143
    assert time.monotonic() - stopped < 15
    saved = int(job_saved(stderr))
    assert saved >= 100 and "stopped by signal 15" in stderr
    assert cluster.exit_codes() == {task: 0 for task in cluster.tasks}
    # A checkpoint is the job's, not its servers': resumed on the local cluster (as many ps).
    resume_exactly(args, task_env(), processes, tmp_path, short, saved)


def test_sigint_on_a_local_cluster_exits_130_and_leaves_nothing(tmp_path, processes, short):
    args = job_args(short, tmp_path, "--checkpoint_dir", str(tmp_path / "ckpt"), "--local_cluster=processes")
    job = LiveCoordinator(args, task_env(), processes, tmp_path / "coordinator.log")
    job.wait_for_files(100)
    job.proc.send_signal(signal.SIGINT)
    code, _, stderr = job.finish(timeout=60)
    assert code == 130
    assert int(job_saved(stderr)) >= 100
    assert servers_of(job.proc.pid) == []
    # Resumed on the in-process local cluster: the same job on servers of another kind.
    rerun = [arg for arg in args if arg != "--local_cluster=processes"]
    resume_exactly(rerun, task_env(), processes, tmp_path, short, int(job_saved(stderr)))


def test_sigterm_before_the_job_starts_exits_143(tmp_path, processes):
    # Servers never start, so the coordinator is still waiting for them.
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=1)
    write_corpus(str(tmp_path / "corpus"), 2)
    job = LiveCoordinator(["--input", str(tmp_path / "corpus")], cluster.chief_env(), processes, tmp_path / "c.log")
    job.wait_for(r"wordcount over 2 files")
    job.proc.send_signal(signal.SIGTERM)
    code, _, stderr = job.finish(timeout=30)
    assert code == 143 and "stopped by signal 15" in stderr


def test_killed_worker_while_a_large_file_is_counted_in_pieces(tmp_path, processes, corpus):
    big = tmp_path / "big.txt"
    with open(big, "wb") as out:
        for path in corpus[1][:1200]:
            with open(path, "rb") as f:
                out.write(f.read())
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=1, num_workers=2)
    cluster.start_all()
    # 1 KB pieces, one a step: about 180 steps over a single file of 180 KB. (With 8 KB
    # pieces, 23 steps, the job could end between two progress reports, and there was
    # no report of the file half done to act on.)
    args = live_args(big, tmp_path / "result.json", "--read_size", "1024", *GONE_WORKER_SHUTDOWN)
    job = LiveCoordinator(args, cluster.chief_env(), processes, tmp_path / "coordinator.log")
    done = job.wait_for(r"\] 0/1 files \(0%\), ([1-9][\d.]*) (KB|MB) of")
    cluster.servers["worker", 1].kill()
    code, _, stderr = job.finish()
    assert code == 0, stderr
    assert gave_up_on(stderr, "worker", 1)
    assert float(done.group(1)) * {"KB": 1e3, "MB": 1e6}[done.group(2)] < big.stat().st_size  # killed mid-file
    assert_matches_oracle(read_result(str(tmp_path / "result.json")), [str(big)])
    assert cluster.servers["ps", 0].wait(SERVER_EXIT_TIMEOUT) == 0
