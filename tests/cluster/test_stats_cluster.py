"""The stats job on clusters of processes: the CLI writes the same bytes whatever the
number of workers, and after a killed ps and a rerun; stats.json's figures against the
oracle (helpers/oracle_stats.py). A killed worker: test_killed_worker.py."""

import json

import pytest
from helpers.corpora import write_awkward, write_many_awkward
from helpers.oracle_stats import figures_of as oracle
from helpers.processes import ConfiguredCluster, LiveCoordinator, run_cli, task_env

import tf2_mapreduce as mr


@pytest.fixture(scope="module")
def awkward(tmp_path_factory):
    directory = tmp_path_factory.mktemp("awkward")
    return str(directory), write_awkward(directory)


def test_the_cli_writes_the_same_bytes_whatever_the_workers(awkward, tmp_path):
    directory, paths = awkward
    outputs = []
    for workers in ("1", "3"):
        out = tmp_path / ("out" + workers)
        run = run_cli(
            [
                "--job=stats",
                "--input",
                directory,
                "--output_dir",
                str(out),
                "--num_workers",
                workers,
                "--read_size",
                "4096",
            ],
            task_env(),
        )
        assert run.returncode == 0, run.stderr
        lines = run.stdout.splitlines()
        assert lines[0].startswith("stats: %d examples, 6 features in 6 files" % oracle(paths)["num_examples"])
        assert [line.split()[0] for line in lines[2:8]] == ["constant", "query", "rare", "score", "unset", "user_id"]
        outputs.append({name: (out / name).read_bytes() for name in ("stats.pb", "stats.html")})
    assert outputs[0] == outputs[1]
    bad = run_cli(["--job=stats", "--input", directory, "--output", str(tmp_path / "x.json")], task_env())
    assert (
        bad.returncode == 2
        and "--output: this job writes stats.pb, stats.json, stats.html: use --output_dir" in bad.stderr
    )


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    directory = tmp_path_factory.mktemp("many")
    return str(directory), write_many_awkward(directory)


def test_a_killed_ps_and_a_rerun_give_the_same_bytes(tmp_path, processes, many, inprocess):
    directory, paths = many
    reference = tmp_path / "reference"
    inprocess.run(mr.Stats(), [directory]).write_dir(str(reference))  # fault-free, on the session's cluster
    cluster = ConfiguredCluster(tmp_path, processes, num_ps=2, num_workers=2)
    cluster.start_all()
    out = tmp_path / "out"
    args = [
        "--job=stats",
        "--input",
        directory,
        "--output_dir",
        str(out),
        "--checkpoint_dir",
        str(tmp_path / "ckpt"),
        "--checkpoint_every",
        "0.3",
        "--files_per_step",
        "1",
        "--read_size",
        "2048",
        "--progress_every",
        "0.2",
    ]
    job = LiveCoordinator(args, cluster.chief_env(), processes, tmp_path / "first.log")
    saved = int(job.wait_for(r"checkpoint saved: ([1-9]\d*) of").group(1))
    cluster.servers["ps", 0].kill()
    code, _, stderr = job.finish()
    assert code == 3, stderr
    assert "failed during the job" in stderr and not (out / "stats.pb").exists()
    cluster.start("ps", 0)
    resumed = LiveCoordinator(args, cluster.chief_env(), processes, tmp_path / "second.log")
    pattern = r"resuming from .*: (\d+) of %d files already done" % len(paths)
    assert int(resumed.wait_for(pattern).group(1)) >= saved
    code, _, stderr = resumed.finish()
    assert code == 0, stderr
    for name in ("stats.pb", "stats.html"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    with open(out / "stats.json") as f:
        document = json.load(f)
    expected = oracle(paths)
    assert document["num_examples"] == expected["num_examples"] and document["features"] == expected["features"]
    assert cluster.exit_codes() == {task: 0 for task in cluster.tasks}
